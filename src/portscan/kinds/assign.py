"""The ``assign`` kind: assignments to a qualified attribute or a plain name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from portscan.kinds.python_surface import PythonSurface, rules_by
from portscan.kinds.common import PYTHON, code_list, consumers_sentence
from portscan.ruleset.prefilter import Token, qualified_sets
from portscan.ruleset.table import IDENTIFIER, Literal, PatternError, TableReader, literal_in


@dataclass(frozen=True, slots=True)
class AssignPattern:
    """Assignment to a qualified attribute (``targets``, resolved through imports), or to
    a plain variable or attribute by its own name (``names``, e.g. ``WARP_SIZE``),
    optionally of given literal values."""

    kind: ClassVar[str] = "assign"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"stores", "named-stores"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name", "value"})
    targets: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    values: tuple[Literal, ...] = ()
    #: the names that compute with the assigned value (``triton.*``, ``torch._scaled_mm``): in
    #: a module that uses none of them it is only stored or converted, and the assignment is
    #: ``info`` (guard ``no-consumer``)
    consumers: tuple[str, ...] = ()

    @property
    def extra_sites(self) -> frozenset[str]:
        """The sites only some patterns of the kind read: the name chains of the module, to
        tell whether it uses a consumer (see ``python_sites``)."""
        return frozenset({"chains"}) if self.consumers else frozenset()

    @classmethod
    def read(cls, r: TableReader) -> AssignPattern:
        pattern = cls(targets=r.dotted("targets", required=False),
                      names=r.texts("names", required=False, check=IDENTIFIER, what="identifier"),
                      values=r.literals("values"),
                      consumers=r.dotted("consumers", required=False, wildcard=True))
        if bool(pattern.targets) == bool(pattern.names):
            raise PatternError(r.where, "give exactly one of `targets` and `names`")
        return pattern

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return qualified_sets(self.targets) + tuple(frozenset({n}) for n in self.names)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        values = f" with a value of {code_list(map(repr, self.values))}" if self.values else ""
        consumed = consumers_sentence(self.consumers, "the assignment")
        if self.targets:
            return f"Assignments to {code_list(self.targets)}{values}.{consumed}"
        return f"Assignments to variables or attributes named {code_list(self.names)}{values}.{consumed}"

    def accepts_value(self, value: object) -> bool:
        """``value``: the assigned literal, or ``MISSING`` when it is not one."""
        return not self.values or literal_in(value, self.values)

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    def store_names(self) -> tuple[str, ...]:
        """The bare names whose stores the walk records for this pattern."""
        return self.names

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, AssignPattern]], surface: PythonSurface) -> None:
        """Stores into a listed qualified target, or into a listed bare name, of an
        accepted value."""
        targets, names = rules_by(rules, lambda p: p.targets), rules_by(rules, lambda p: p.names)
        for chain, value in surface.stores if targets else ():
            for qualified in chain.scope.qualified(chain.parts):
                for rule, p in targets.get(qualified, ()):
                    if p.accepts_value(surface.literal(value)):
                        node = chain.nodes[-1]
                        surface.hit(rule, id(node), node, name=qualified, value=surface.snippet(value))
        for target_node, name, value in surface.named_stores:
            for rule, p in names.get(name, ()):
                if p.accepts_value(surface.literal(value)):
                    surface.hit(rule, id(target_node), target_node, name=name, value=surface.snippet(value))
