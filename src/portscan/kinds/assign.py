"""The ``assign`` kind: assignments to a qualified attribute or a plain name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from portscan.kinds.common import PYTHON, code_list
from portscan.ruleset.prefilter import Token, qualified_sets
from portscan.ruleset.table import IDENTIFIER, Literal, PatternError, TableReader, literal_in


@dataclass(frozen=True, slots=True)
class AssignPattern:
    """Assignment to a qualified attribute (``targets``, resolved through imports), or to
    a plain variable or attribute by its own name (``names``, e.g. ``WARP_SIZE``),
    optionally of given literal values."""

    kind: ClassVar[str] = "assign"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name", "value"})
    targets: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    values: tuple[Literal, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> AssignPattern:
        pattern = cls(targets=r.dotted("targets", required=False),
                      names=r.texts("names", required=False, check=IDENTIFIER, what="identifier"),
                      values=r.literals("values"))
        if bool(pattern.targets) == bool(pattern.names):
            raise PatternError(r.where, "give exactly one of `targets` and `names`")
        return pattern

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return qualified_sets(self.targets) + tuple(frozenset({n}) for n in self.names)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        values = f" with a value of {code_list(map(repr, self.values))}" if self.values else ""
        if self.targets:
            return f"Assignments to {code_list(self.targets)}{values}."
        return f"Assignments to variables or attributes named {code_list(self.names)}{values}."

    def accepts_value(self, value: object) -> bool:
        """``value``: the assigned literal, or ``MISSING`` when it is not one."""
        return not self.values or literal_in(value, self.values)
