"""The ``string`` kind: string literals with given values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from portscan.kinds.python_surface import PythonSurface, rules_by
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
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"strings", "string-siblings"})
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

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, StringPattern]], surface: PythonSurface) -> None:
        """String literals equal to a listed value, unless used as a lookup key or listed
        beside an ``unless`` value."""
        by_value = rules_by(rules, lambda p: p.values)
        for node in surface.strings:
            if id(node) in surface.lookup_keys:
                continue  # a key looked up in a mapping names, it does not request
            text = surface.text(node)
            siblings = surface.string_siblings.get(id(node), frozenset())
            for rule, p in by_value.get(text or "", ()):
                if p.accepts_siblings(siblings):
                    surface.hit(rule, id(node), node, value=text or "")
