"""The ``compare`` kind: comparisons whose operand is a qualified call."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TYPE_CHECKING

from portscan.kinds.python_surface import PythonSurface, same_text
from portscan.kinds.common import PYTHON, code_list, name_matches
from portscan.ruleset.prefilter import Token, qualified_sets
from portscan.ruleset.table import MISSING, Literal, PatternError, TableReader, literal_in
from portscan.parse import lazy_libcst

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_libcst()

#: Written with the call on the left: ``f() in (...)`` is "in"; ``"x" in f()`` is "contains".
#: an operator with its sides swapped (``3 < x`` is ``x > 3``)
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
COMPARE_OPERATORS = ("<", "<=", ">", ">=", "==", "!=", "in", "not in", "contains", "not contains")

#: what ``torch.cuda.get_device_capability()`` reports on the AMD GPUs ROCm supports:
#: MI200 (gfx90a) (9, 0), MI300 (gfx942) (9, 4), MI350 (gfx950) (9, 5), RDNA2 (gfx1030)
#: (10, 3), RDNA3 (gfx110x) (11, 0), RDNA4 (gfx120x) (12, 0) (shared/reference/rocm-facts.md
#: section 5; pytorch/ao#4034; HIP's major/minor are the gfx version's, as in
#: ``HSA_OVERRIDE_GFX_VERSION=10.3.0``)
AMD_CAPABILITIES = ((9, 0), (9, 4), (9, 5), (10, 3), (11, 0), (12, 0))
#: NVIDIA's compute capabilities, Kepler to Blackwell (https://developer.nvidia.com/cuda-gpus)
NVIDIA_CAPABILITIES = ((3, 5), (3, 7), (5, 0), (5, 2), (5, 3), (6, 0), (6, 1), (6, 2), (7, 0), (7, 2),
                       (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0),
                       (12, 0), (12, 1))


@dataclass(frozen=True, slots=True)
class ComparePattern:
    """A comparison whose operand is a qualified call (or its ``[i]`` / ``.attr``)."""

    kind: ClassVar[str] = "compare"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"compares", "calls"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name", "value"})
    callees: tuple[str, ...]
    attributes: tuple[str, ...] = ()  #: operand must be ``call().attr`` with one of these
    operators: tuple[str, ...] = ()  #: empty: any operator
    values: tuple[Literal, ...] = ()  #: empty: any other operand
    #: other operands that are no match (texts in any case): ``"nvidia" in name`` asks for
    #: the vendor, not for a model
    not_values: tuple[Literal, ...] = ()
    #: for indexed operands (``f()[i]``, or ``a, b = f()``): the indices that count;
    #: empty: any. The whole value (``f() >= (9, 0)``) always counts.
    indices: tuple[int, ...] = ()
    #: report not the comparison but the gates of the flag it is stored in: each place
    #: a local assigned the comparison (``IS_SM90 = cap >= (9, 0)``) is tested (``if IS_SM90:``)
    gates: bool = False
    #: also report a helper's comparison against its parameters at the helper's calls
    #: (``atleast_sm(8, 0)``); false where the operator matters, since how a helper
    #: compares (``cap < (major, minor)`` to refuse) says nothing of how callers use it
    helpers: bool = True
    #: a test that only picks numbers (``BLOCK = 128 if cap >= (8, 0) else 64``, an
    #: ``if``/``else`` of tile sizes) is a tuning choice: ``info`` (guard ``tuning``); one
    #: whose branches only print or log decides a message: ``info`` (guard ``message-only``)
    tuning: bool = False
    #: the operators under which a matched test is False on every AMD GPU (``major == 8``:
    #: no AMD GPU reports an NVIDIA generation below Hopper). The other tests in its ``and``
    #: chain (``major == 8 and minor == 0``) then decide nothing on ROCm and are not reported.
    false_on_rocm: tuple[str, ...] = ()
    #: a capability test (the whole tuple, its major, or an SM number) that answers every
    #: AMD GPU as it answers every NVIDIA GPU older than the generations it names is no
    #: match: ``cap != (10, 0)`` skips a Blackwell test on AMD GPUs as on an A100, so ROCm
    #: takes the path the code already has for older GPUs
    older_alike: bool = False

    @classmethod
    def read(cls, r: TableReader) -> ComparePattern:
        operators = _operators(r, "operators")
        false_on_rocm = _operators(r, "false_on_rocm")
        attributes = r.texts("attributes", required=False, what="identifier")
        for attr in attributes:
            if not attr.isidentifier():
                raise PatternError(r.key("attributes"), f"{attr!r} is not an identifier")
        indices = r.literals("indices")
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in indices):
            raise PatternError(r.key("indices"), "expected a list of integers >= 0")
        flags = {key: r.flag(key, default) for key, default in (("gates", False), ("helpers", True), ("tuning", False),
                                                                ("older_alike", False))}
        return cls(
            gates=flags["gates"],
            helpers=flags["helpers"],
            tuning=flags["tuning"],
            older_alike=flags["older_alike"],
            false_on_rocm=false_on_rocm,
            callees=r.dotted("callees", wildcard=True),
            attributes=attributes,
            operators=operators,
            values=r.literals("values"),
            not_values=r.literals("not_values"),
            indices=tuple(int(i) for i in indices),  # type: ignore[arg-type]
        )

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return qualified_sets(self.callees)

    @property
    def extra_sites(self) -> frozenset[str]:
        """The sites only some patterns of the kind read (see ``python_sites``)."""
        return frozenset({"conjunctions"}) if self.false_on_rocm else frozenset()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        operand = "a call of " + code_list(self.callees)
        if self.attributes:
            operand += f" (its {code_list(self.attributes)})"
        contains = "contains" in self.operators  # any-operator rules compare numbers
        text = (f"Comparisons involving {operand}, also through a local variable assigned from it, "
                + ("a prefix or suffix test of it (`.startswith(x)` / `.endswith(x)`, read as "
                   "`x in ...`), " if contains else "")
                + "as an SM number (`major * 10 + minor`)" + (
                    " or against a helper's parameters (then reported at each call of the helper "
                    "in the module with literal arguments)" if self.helpers else ""))
        if self.gates:
            text = ("Tests (`if flag:`, `flag and ...`) of a local flag assigned a comparison involving "
                    f"{operand}")
        if self.operators:
            text += f", with {code_list(self.operators)}"
        if self.values:
            text += f", against {code_list(map(repr, self.values))}"
        if self.not_values:
            text += f", not against {code_list(map(repr, self.not_values))} (in any case)"
        if self.false_on_rocm:
            text += (f"; with {code_list(self.false_on_rocm)} the test is False on every AMD GPU, so the "
                     "other tests in its `and` chain decide nothing there and are not reported")
        if self.older_alike:
            text += ("; a test that answers every AMD GPU as it answers every NVIDIA GPU older than the "
                     "generations it names (`cap != (10, 0)`, `major == 8`) sends ROCm down the path the "
                     "code has for older GPUs and is not reported")
        if self.tuning:
            text += ("; a test that only picks numbers (tile sizes, warp or stage counts) is a tuning "
                     "choice, reported as `info` (guard `tuning`), and one whose branches only print or "
                     "log decides a message, `info` too (guard `message-only`)")
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
        if accessor is not None and accessor[0] == "sm":  # major * 10 + minor >= 90
            accessor, value = _sm_view(accessor[1], value)  # type: ignore[arg-type]
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
        if self.not_values and value is not MISSING:
            items = value if op in ("in", "not in") and isinstance(value, tuple) else (value,)
            excluded = [_folded(v) for v in self.not_values]
            if all(_folded(item) in excluded for item in items):
                return None
        if self.older_alike and answers_like_older(accessor, op, value):
            return None
        return name

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, ComparePattern]], surface: PythonSurface) -> None:
        """Each comparison step with a listed call (or its ``[i]``/``.attr``) on either side;
        against a helper's parameters, at the helper's calls; with ``gates``, at the tests
        of the flag it is stored in. A comparison only shown (a print/log argument, an
        f-string placeholder, a flag of a function used only there) decides nothing."""
        found: list[tuple[Any, ComparePattern, str, cst.Comparison, Any, Any, Any, list[tuple[str, Any]]]] = []
        false_tests: set[int] = set()  # `major == 8`: False on every AMD GPU
        for comparison, scope in surface.compares:
            flags = _deciding(surface, comparison)
            if flags is None:
                continue
            left = comparison.left
            for target in comparison.comparisons:
                op = surface.operator(target)
                right = target.comparator
                if op in ("is", "is not"):  # `cap is None`: an identity test compares no versions
                    left = right
                    continue
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
                            found.append((rule, p, name, comparison, operand, other, scope, flags))
                            if step in p.false_on_rocm:
                                false_tests.add(id(comparison))
                    if value is MISSING:  # cap < (major, minor) in a helper: its callers decide
                        for call, passed in _passed_values(surface, other, scope):
                            for rule, p in rules:
                                name = p.matched_callee(names, accessor, step, passed)
                                if name is not None and not p.gates and p.helpers:
                                    surface.hit(rule, id(call), call, origin=comparison, name=name,
                                                value=repr(passed))
                left = right
        decided = _decided_by(surface, false_tests)
        for rule, p, name, comparison, operand, other, scope, flags in found:
            if id(comparison) not in decided:
                _report(surface, rule, p, name, comparison, operand, other, scope, flags)
        for call, scope in surface.calls:  # f().startswith("x"): "x" in f(), at its start or end
            test = _affix_test(call)
            flags = _deciding(surface, call) if test is not None else None
            if test is None or flags is None:
                continue
            receiver, needle = test
            source = surface.operand_source(receiver, scope)
            if source is None:
                continue
            names, accessor = source
            value = surface.literal(needle)
            for rule, p in rules:
                # a tuple of prefixes is any of them; each must pass the rule's values and not_values
                name = next((n for item in (value if isinstance(value, tuple) else (value,))
                             if (n := p.matched_callee(names, accessor, "contains", item)) is not None), None)
                if name is not None:
                    _report(surface, rule, p, name, call, receiver, needle, scope, flags)


def _operators(r: TableReader, key: str) -> tuple[str, ...]:
    operators = r.texts(key, required=False, what="operator")
    for op in operators:
        if op not in COMPARE_OPERATORS:
            raise PatternError(r.key(key), f"{op!r} is not one of {', '.join(COMPARE_OPERATORS)}")
    return operators


def answers_like_older(accessor: tuple[str, object] | None, op: str, value: object) -> bool:
    """Does the test ``capability <op> value`` (of the whole tuple, or of its major through
    ``accessor``; an SM number is read as one of those first, see :func:`_sm_view`) give
    every AMD GPU the answer it gives every NVIDIA GPU older than the lowest generation it
    names? Anything else (a minor, a value that is no literal, a prefix test) is not known
    to, and is False."""
    if accessor is None:
        project: Any = tuple
    elif accessor in (("index", 0), ("attr", "major")):
        project = operator.itemgetter(0)
    else:
        return False
    named = value if op in ("in", "not in") and isinstance(value, tuple) else (value,)
    if not named or not all(_is_capability(v, whole=accessor is None) for v in named):
        return False
    test = _TESTS.get(op)
    lowest = min(named)  # type: ignore[type-var]
    older = [c for c in NVIDIA_CAPABILITIES if project(c) < lowest]
    if test is None or not older:
        return False
    return len({test(project(c), value) for c in (*older, *AMD_CAPABILITIES)}) == 1


def _is_capability(value: object, whole: bool) -> bool:
    """A literal ``(major, minor)`` (``whole``) or a major."""
    if whole:
        return isinstance(value, tuple) and len(value) == 2 and all(type(i) is int for i in value)
    return type(value) is int


_TESTS: dict[str, Any] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
    "!=": operator.ne, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}


def _decided_by(surface: PythonSurface, false_tests: set[int]) -> set[int]:
    """The other tests of each ``and`` chain holding a test that is False on every AMD
    GPU (``major == 8 and minor == 0``): on ROCm the chain is False whatever they say."""
    if not false_tests:
        return set()
    return {id(operand) for operands in surface.conjunctions if any(id(o) in false_tests for o in operands)
            for operand in operands if id(operand) not in false_tests}


def _report(surface: PythonSurface, rule: Any, p: ComparePattern, name: str, test: cst.BaseExpression,
            operand: cst.BaseExpression, other: cst.BaseExpression, scope: Any,
            flags: list[tuple[str, Any]]) -> None:
    """A matched test (a comparison, or a ``startswith``/``endswith`` call): reported
    itself, or with ``gates`` at the tests of the flags it is stored in."""
    if p.gates:
        _report_gates(surface, rule, flags, name, surface.snippet(other))
    else:
        surface.hit(rule, id(test), test, subject=_subject(operand, scope), name=name, value=surface.snippet(other))


def _affix_test(call: cst.Call) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(receiver, prefix) of ``receiver.startswith(prefix)`` / ``.endswith(prefix)``, a
    substring test of the receiver: ``name.startswith("NVIDIA H100")`` asks what
    ``"NVIDIA H100" in name`` asks."""
    func = call.func
    if (not isinstance(func, cst.Attribute) or func.attr.value not in ("startswith", "endswith")
            or not call.args or call.args[0].keyword is not None or call.args[0].star):
        return None
    return func.value, call.args[0].value


def _subject(operand: cst.BaseExpression, scope: Any) -> object:
    """The local a comparison tests (``chip`` in ``"a100" in chip``), as (its scope, its
    name): an ``if``/``elif`` table over one value is one finding with its uses."""
    operand = same_text(operand)  # chip.lower()
    if not isinstance(operand, cst.Name):
        return None
    owner = scope.lookup(operand.value)
    return (id(owner), operand.value) if owner is not None else None


def _sm_view(major: tuple[str, object] | None, value: object) -> tuple[tuple[str, object] | None, object]:
    """``major * 10 + minor`` compared with ``90`` is ``(major, minor)`` compared with
    ``(9, 0)``, or ``props.major`` with ``9``: (accessor, value) to match instead."""
    if not isinstance(value, int) or isinstance(value, bool):
        return (major if major is not None and major[0] == "attr" else None), value
    if major is not None and major[0] == "attr":
        return major, value // 10
    return None, divmod(value, 10)


def _deciding(surface: PythonSurface, test: cst.BaseExpression) -> list[tuple[str, Any]] | None:
    """The flags a test is stored in (``IS_SM90 = cap >= (9, 0)``); None when the test
    decides nothing: it is only shown (a print/log argument, an f-string placeholder) or
    every flag it is stored in is."""
    if surface.in_message(test):
        return None
    flags = surface.assignments(test)
    if flags and all(_only_shown(surface, name, at) for name, at in flags):
        return None
    return flags


def _only_shown(surface: PythonSurface, name: str, scope: Any) -> bool:
    """Is a function's local flag used only in messages (never at module level, where
    other modules may import it)?"""
    if surface.is_module(scope):
        return False
    uses = surface.uses(name, scope)
    return bool(uses) and all(surface.in_message(chain.nodes[0]) for chain in uses)


def _report_gates(surface: PythonSurface, rule: Any, flags: list[tuple[str, Any]], name: str, value: str) -> None:
    """Each test of a flag the comparison was stored in (``if IS_SM90:``)."""
    for flag, scope in flags:
        for chain in surface.uses(flag, scope):
            node = chain.nodes[0]
            if len(chain.parts) == 1 and surface.usage.get(id(node)) == "truth" and not surface.in_message(node):
                surface.hit(rule, id(node), node, name=name, value=value)


def _passed_values(surface: PythonSurface, other: Any, scope: Any) -> list[tuple[Any, object]]:
    """``cap < (major, minor)`` inside ``def check(major, minor)`` (or a closure in it):
    (call, the literal compared there) for each call of the helper with literal arguments."""
    items = ([other] if isinstance(other, cst.Name)
             else [e.value if isinstance(e, cst.Element) else e for e in other.elements]
             if isinstance(other, cst.Tuple) else [])
    names = [n for n in items if isinstance(n, cst.Name)]
    if not names or len(names) != len(items):
        return []
    params = [surface.parameter(n.value, scope) for n in names]
    if any(p is None for p in params) or len({id(p[0]) for p in params if p is not None}) != 1:
        return []
    function = params[0][0]  # type: ignore[index]
    found = []
    for call, _ in surface.calls_of(function):
        values = []
        for n, (_, position) in zip(names, params, strict=True):  # type: ignore[misc]
            argument = surface.argument(call, position, n.value)
            values.append(MISSING if argument is None else surface.literal(argument))
        if all(v is not MISSING for v in values):
            found.append((call, values[0] if isinstance(other, cst.Name) else tuple(values)))
    return found


def _folded(value: object) -> object:
    """A text in one case, to compare it in any; other literals as they are."""
    return value.casefold() if isinstance(value, str) else value
