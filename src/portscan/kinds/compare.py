"""The ``compare`` kind: comparisons whose operand is a qualified call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from portscan.kinds.python_surface import PythonSurface
from portscan.kinds.common import PYTHON, code_list, name_matches
from portscan.ruleset.prefilter import Token, qualified_sets
from portscan.ruleset.table import MISSING, Literal, PatternError, TableReader, literal_in

#: Written with the call on the left: ``f() in (...)`` is "in"; ``"x" in f()`` is "contains".
#: an operator with its sides swapped (``3 < x`` is ``x > 3``)
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
COMPARE_OPERATORS = ("<", "<=", ">", ">=", "==", "!=", "in", "not in", "contains", "not contains")


@dataclass(frozen=True, slots=True)
class ComparePattern:
    """A comparison whose operand is a qualified call (or its ``[i]`` / ``.attr``)."""

    kind: ClassVar[str] = "compare"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"compares"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name", "value"})
    callees: tuple[str, ...]
    attributes: tuple[str, ...] = ()  #: operand must be ``call().attr`` with one of these
    operators: tuple[str, ...] = ()  #: empty: any operator
    values: tuple[Literal, ...] = ()  #: empty: any other operand
    #: for indexed operands (``f()[i]``, or ``a, b = f()``): the indices that count;
    #: empty: any. The whole value (``f() >= (9, 0)``) always counts.
    indices: tuple[int, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> ComparePattern:
        operators = r.texts("operators", required=False, what="operator")
        for op in operators:
            if op not in COMPARE_OPERATORS:
                raise PatternError(r.key("operators"),
                                   f"{op!r} is not one of {', '.join(COMPARE_OPERATORS)}")
        attributes = r.texts("attributes", required=False, what="identifier")
        for attr in attributes:
            if not attr.isidentifier():
                raise PatternError(r.key("attributes"), f"{attr!r} is not an identifier")
        indices = r.literals("indices")
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in indices):
            raise PatternError(r.key("indices"), "expected a list of integers >= 0")
        return cls(
            callees=r.dotted("callees", wildcard=True),
            attributes=attributes,
            operators=operators,
            values=r.literals("values"),
            indices=tuple(int(i) for i in indices),  # type: ignore[arg-type]
        )

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return qualified_sets(self.callees)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        operand = "a call of " + code_list(self.callees)
        if self.attributes:
            operand += f" (its {code_list(self.attributes)})"
        text = f"Comparisons involving {operand}, also through a local variable assigned from it"
        if self.operators:
            text += f", with {code_list(self.operators)}"
        if self.values:
            text += f", against {code_list(map(repr, self.values))}"
        return text + "."

    def matched_callee(self, names: list[str], accessor: tuple[str, object] | None, op: str,
                       value: object) -> str | None:
        """The callee a comparison matches, or None. ``names``: the qualified names of the
        call in the operand; ``accessor``: ``("index", i)`` or ``("attr", a)`` when the operand
        is ``f()[i]`` or ``f().a``; ``op`` written with the call on the left; ``value``: the
        other operand's literal value, or ``MISSING``."""
        name = next((n for n in names for c in self.callees if name_matches(n, c)), None)
        if name is None:
            return None
        if self.attributes:
            if accessor is None or accessor[0] != "attr" or accessor[1] not in self.attributes:
                return None
        elif accessor is not None and accessor[0] == "attr":
            return None
        if self.indices and accessor is not None and accessor[0] == "index" and accessor[1] not in self.indices:
            return None
        if self.operators and op not in self.operators:
            return None
        if self.values:
            if value is MISSING:
                return None
            if op in ("in", "not in") and isinstance(value, tuple):
                if not any(literal_in(item, self.values) for item in value):
                    return None
            elif not literal_in(value, self.values):
                return None
        return name

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, ComparePattern]], surface: PythonSurface) -> None:
        """Each comparison step with a listed call (or its ``[i]``/``.attr``) on either side."""
        for comparison, scope in surface.compares:
            left = comparison.left
            for target in comparison.comparisons:
                op = surface.operator(target)
                right = target.comparator
                for operand, other, flipped in ((left, right, False), (right, left, True)):
                    source = surface.operand_source(operand, scope)
                    if source is None:
                        continue
                    names, accessor = source
                    step = _FLIP.get(op, op) if flipped else op
                    if flipped and step in ("in", "not in"):
                        step = "contains" if step == "in" else "not contains"
                    value = surface.literal(other)
                    for rule, p in rules:
                        name = p.matched_callee(names, accessor, step, value)
                        if name is not None:
                            surface.hit(rule, id(comparison), comparison, name=name, value=surface.snippet(other))
                left = right
