"""What the match kinds share: the file kinds they apply to, name tests, and the
helpers their descriptions use."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

WORDISH = re.compile(r"^\w[\w.-]*\w$|^\w$")
#: a non-empty text on one line, not blank at either end
ONE_LINE = re.compile(r"^\S(?:[^\n]*\S)?$")

PROGRAM = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")

#: File kinds (names in :data:`portscan.filekinds.FILE_KINDS`) each match kind applies to.
PYTHON = frozenset({"python"})
#: CI definitions: their scripts are shell, and their images and variables are read too
CI = frozenset({"ci", "jenkinsfile"})
MANIFESTS = frozenset({"requirements", "pyproject", "setupcfg", "conda", "python", "dockerfile",
                       "shell", "makefile", "apptainer"}) | CI


def name_matches(qualified: str, pattern: str) -> bool:
    """``torch.version.cuda`` matches itself; ``apex.amp.*`` matches names below ``apex.amp``."""
    if pattern.endswith(".*"):
        return qualified.startswith(pattern[:-1])
    return qualified == pattern


def is_at_or_below(name: str, module: str) -> bool:
    """``apex.amp.handle`` is below ``apex``; ``apex_utils`` is not."""
    return name == module or name.startswith(module + ".")


def glob_prefix(glob: str) -> str:
    """The literal text before a glob's first wildcard."""
    return re.split(r"[*?\[]", glob, maxsplit=1)[0]


def normalize_name(name: str) -> str:
    """PEP 503 normalisation: ``Torch_TensorRT`` and ``torch-tensorrt`` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def code_list(items: Iterable[object]) -> str:
    """``a``, ``b`` as Markdown code spans, for the rule pages."""
    return ", ".join(f"`{item}`" for item in items)


def consumers_sentence(consumers: Sequence[str], what: str = "a use") -> str:
    """The rule page's words for a pattern's ``consumers`` (guard ``no-consumer``)."""
    return (f" In a module that uses none of {code_list(consumers)} (the code that computes with it), {what} is "
            "`info`: the value is only stored or converted there.") if consumers else ""
