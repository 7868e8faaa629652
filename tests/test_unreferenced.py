"""Vendored Python that nothing calls (``portscan.unreferenced``): InvokeAI's copied
imaginaire GPU helpers and unsloth-zoo's copied fla kernels never run in those projects."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from portscan.scan import scan_paths
from portscan.unreferenced import outline, unreferenced

HELPERS = """\
import torch


def gpu_architecture():
    import pynvml
    pynvml.nvmlInit()
    return pynvml.nvmlDeviceGetArchitecture(pynvml.nvmlDeviceGetHandleByIndex(0))


def _kernel_launcher(x):
    import pynvml
    return pynvml.nvmlDeviceGetCount()


def launch(x):
    return _kernel_launcher(x)


def gpu_count():
    import pynvml
    return pynvml.nvmlDeviceGetCount()
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def _severities(root: Path, rules) -> dict[tuple[str, int], tuple[str, str | None]]:
    return {(f.path, f.span.line): (f.severity.value, f.guard)
            for f in scan_paths([root], rules).findings if f.rule == "PS602"}


@pytest.mark.parametrize(("main", "expected"), [
    # one finding per import: the later imports are its uses, each in a definition nothing
    # runs (gpu_architecture is re-exported by the copy's own package only, and
    # _kernel_launcher is called only by launch(), which nothing calls either)
    ("from app._ext.imaginaire.device import torch\n", ("info", "unreferenced")),
    # the project calls gpu_count(), where one of the finding's uses sits
    ("from app._ext.imaginaire.device import gpu_count\nprint(gpu_count())\n", ("error", None)),
    # through a re-export in the vendored folder's own package, which names no copy
    ("from app._ext import gpu_count\nprint(gpu_count())\n", ("error", None)),
    # a name that only happens to be spelled alike, in a file that reaches no copy
    ("def gpu_count():\n    return 0\nprint(gpu_count())\n", ("info", "unreferenced")),
])
def test_definitions_of_a_vendored_copy_nothing_names_are_unreferenced(tmp_path: Path, rules, main: str,
                                                                        expected: tuple[str, str | None]) -> None:
    root = _write(tmp_path, {
        "app/__init__.py": "",
        "app/_ext/__init__.py": "from .imaginaire.device import gpu_count  # noqa: F401\n",
        "app/_ext/imaginaire/__init__.py": "from .device import gpu_architecture, launch\n",
        "app/_ext/imaginaire/device.py": HELPERS,
        "app/main.py": main,
    })
    assert _severities(root, rules) == {("app/_ext/imaginaire/device.py", 5): expected}


def test_the_projects_own_modules_keep_their_findings(tmp_path: Path, rules) -> None:
    """A function of the project's own package is its users' API even when nothing in
    the tree calls it; only a copy of another project is read this way."""
    root = _write(tmp_path, {"app/__init__.py": "", "app/device.py": HELPERS})
    assert set(_severities(root, rules).values()) == {("error", None)}


def test_a_name_mentioned_in_a_string_counts_as_used() -> None:
    """A dotted path in a registry string reaches it (a file naming the copy): alive."""
    texts = {"lib/third_party/gpu/device.py": HELPERS,
             "lib/registry.py": 'HOOKS = {"count": "lib.third_party.gpu.device.gpu_count"}\n'}
    dead = unreferenced([("lib/third_party/gpu/device.py", 20), ("lib/third_party/gpu/device.py", 5)],
                        list(texts), texts.get)
    assert dead == {("lib/third_party/gpu/device.py", 5)}


def test_a_file_that_cannot_be_read_may_name_anything() -> None:
    texts: dict[str, str | None] = {"lib/third_party/gpu/device.py": HELPERS, "lib/broken.py": None}
    assert unreferenced([("lib/third_party/gpu/device.py", 5)], list(texts), texts.get) == frozenset()


def test_definitions_span_their_decorators() -> None:
    text = "@triton.autotune(configs=[triton.Config({}, num_warps=32)], key=['D'])\n@triton.jit\ndef k(x):\n    pass\n"
    assert outline(text) == ([(1, 4, "k")], frozenset())
    assert outline("import os\nfrom a import (\n    b,\n)\n") == ([], frozenset({1, 2, 3, 4}))
    assert outline("def broken(:\n") == ([], frozenset())


def test_an_import_inside_the_copy_is_no_use() -> None:
    """InvokeAI's imaginaire ``distributed.py`` imports ``Device`` at module level and uses
    it only in ``init()``, which nothing calls: neither line keeps ``Device`` alive."""
    texts: dict[str, str | None] = {
        "app/_ext/imaginaire/device.py": "class Device:\n    def __init__(self):\n        import pynvml\n",
        "app/_ext/imaginaire/distributed.py": ("from app._ext.imaginaire.device import (\n    Device,\n)\n\n\n"
                                               "def launch():\n    return Device()\n"),
        "app/main.py": "import torch\n",
    }
    assert unreferenced([("app/_ext/imaginaire/device.py", 3)], list(texts), texts.get) == {
        ("app/_ext/imaginaire/device.py", 3)}
    texts["app/main.py"] = "from app._ext.imaginaire.distributed import launch\nlaunch()\n"
    assert unreferenced([("app/_ext/imaginaire/device.py", 3)], list(texts), texts.get) == frozenset()


def test_a_word_in_a_docstring_or_comment_names_nothing() -> None:
    """InvokeAI's imaginaire ``init()`` is "named" by a docstring's ``zero-init`` elsewhere;
    prose names nothing, while a string that is a name or a dotted path still does."""
    copy = "app/_ext/imaginaire/distributed.py"
    texts: dict[str, str | None] = {
        copy: "def init():\n    import pynvml\n    pynvml.nvmlInit()\n",
        "app/net.py": '"""Uses app._ext.imaginaire: zero-init all projections."""\n# init is called by hand\n',
    }
    assert unreferenced([(copy, 2)], list(texts), texts.get) == {(copy, 2)}
    texts["app/net.py"] = 'from app._ext import imaginaire\nhook = getattr(imaginaire.distributed, "init")\n'
    assert unreferenced([(copy, 2)], list(texts), texts.get) == frozenset()
    texts["app/net.py"] = 'HOOKS = ["app._ext.imaginaire.distributed.init"]\n'
    assert unreferenced([(copy, 2)], list(texts), texts.get) == frozenset()


def test_prose_offsets_follow_the_tokenizers_lines() -> None:
    """A form feed ends no line for the tokenizer (``str.splitlines`` would count one)."""
    from portscan.unreferenced import _prose

    text = 'x = 1\x0c\ny = "init"\n"""doc init"""\n# init here\n'
    assert [text[start:end] for start, end in _prose(text)] == ['"""doc init"""', "# init here"]
