"""The ``string`` kind: string literals with given values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from portscan.kinds.common import PYTHON, WORDISH, code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import TableReader


@dataclass(frozen=True, slots=True)
class StringPattern:
    """A string literal with one of the given values, anywhere but a docstring
    (``"CUDAExecutionProvider"`` in a providers list built elsewhere), unless the
    list or tuple literal holding it also holds one of ``unless``."""

    kind: ClassVar[str] = "string"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "value"})
    values: tuple[str, ...]
    unless: tuple[str, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> StringPattern:
        return cls(values=r.texts("values", check=WORDISH, what="word-like string"),
                   unless=r.texts("unless", required=False))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return tuple(frozenset({v}) for v in self.values)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        return f"String literals {code_list(map(repr, self.values))} outside docstrings."

    def accepts_siblings(self, siblings: frozenset[str]) -> bool:
        """``siblings``: the strings of the list, tuple or set literal holding this one."""
        return not siblings.intersection(self.unless)
