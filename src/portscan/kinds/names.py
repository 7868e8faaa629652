"""The ``name`` kind: uses of a qualified name, optionally by how the value is used."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from portscan.kinds.python_surface import PythonSurface, rules_by
from portscan.kinds.common import PYTHON, code_list, name_matches
from portscan.ruleset.prefilter import Token, qualified_sets
from portscan.ruleset.table import TableReader

USAGES = ("any", "truth", "operand", "other")

USAGE_TEXT = {
    "truth": "only where its truth value is used (`if x`, `x is None`, `x == \"...\"`, `bool(x)`)",
    "operand": "only where it is operated on in a way that fails on `None` (`x.split()`, `x[0]`, "
               "`x >= \"11.8\"`, `int(x)`, `version.parse(x)`, `x + y`, iteration)",
    "other": "only where it is passed, formatted, printed, assigned or returned",
    "any": "",
}


@dataclass(frozen=True, slots=True)
class NamePattern:
    """A use of a qualified name, resolved through import aliases."""

    kind: ClassVar[str] = "name"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"chains"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name"})
    names: tuple[str, ...]
    #: ``truth``: only its truth value is used (``if x``, ``x is None``, ``x == "12.1"``);
    #: ``operand``: operated on, which raises on None (``x.split()``, ``x[0]``, ``x >= "11"``,
    #: ``int(x)``, ``x + y``, iteration); ``other``: passed, formatted, assigned, returned.
    usage: str = "any"

    @classmethod
    def read(cls, r: TableReader) -> NamePattern:
        return cls(names=r.dotted("names", wildcard=True), usage=r.choice("usage", USAGES, "any"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return qualified_sets(self.names)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        usage = USAGE_TEXT[self.usage]
        return (f"Uses of {code_list(self.names)}, resolved through import aliases"
                + (f", {usage}." if usage else "."))

    def accepts_usage(self, usage: str) -> bool:
        """``usage`` is how a use treats the value: ``truth``, ``operand`` or ``other``."""
        return self.usage in ("any", usage)

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, NamePattern]], surface: PythonSurface) -> None:
        """Each dotted name (and each of its prefixes) that resolves to a listed name."""
        exact = rules_by(rules, lambda p: (name for name in p.names if not name.endswith(".*")))
        wildcards = [(name, rule, p) for rule, p in rules for name in p.names if name.endswith(".*")]

        def named(qualified: str) -> Iterator[tuple[Any, NamePattern]]:
            yield from exact.get(qualified, ())
            for pattern, rule, p in wildcards:
                if name_matches(qualified, pattern):
                    yield rule, p

        for chain in surface.chains:
            for base in chain.scope.qualified(chain.parts[:1]):
                done: set[str] = set()
                for j in range(len(chain.parts), 0, -1):
                    qualified = ".".join([base, *chain.parts[1:j]])
                    node = chain.nodes[j - 1]
                    usage = ("operand" if j < len(chain.parts)  # x.attr: attribute of the value
                             else surface.usage.get(id(node), "other"))
                    for rule, p in named(qualified):
                        if rule.code in done or not p.accepts_usage(usage):
                            continue
                        done.add(rule.code)
                        surface.hit(rule, id(node), node, name=qualified)
