"""Small pure functions over libcst expression nodes: dotted names, literal values,
string text and the programs a shell command line runs. Nothing here is evaluated."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator

import libcst as cst

from portscan.leancst import children, exactly
from portscan.match import snippet
from portscan.match.commands import SHELLS, commands
from portscan.ruleset.table import MISSING


class Walker:
    """A read-only visitor, several times faster than :class:`libcst.CSTVisitor`.

    ``walk(node)`` calls ``visit_<NodeClass>(node)`` where defined and, unless that
    returns False, walks the node's children in source order, skipping whitespace,
    comments and punctuation. LibCST's own ``visit`` rebuilds (and re-validates) every
    node even for visitors that change nothing; the matcher only reads. There are no
    ``leave_`` or attribute hooks.
    """

    def __init__(self) -> None:
        #: node class -> the visit method's function (not bound: a walker holds no cycle
        #: through it, so a file's walk and tree are freed as soon as the scan drops them)
        self._dispatch: dict[type, Callable[[Walker, cst.CSTNode], bool | None] | None] = {}

    def walk(self, node: cst.CSTNode) -> None:
        cls = type(node)
        try:
            visit = self._dispatch[cls]
        except KeyError:
            visit = self._dispatch[cls] = getattr(type(self), "visit_" + cls.__name__, None)
        if visit is not None and visit(self, node) is False:
            return
        for child in children(node):
            self.walk(child)


ATTRIBUTE, NAME = exactly(cst.Attribute), exactly(cst.Name)


def dotted(node: cst.BaseExpression) -> tuple[list[cst.BaseExpression], list[str]] | None:
    """For a pure chain ``a.b.c``: its nodes ``[a, a.b, a.b.c]`` and parts ``[a, b, c]``."""
    nodes: list[cst.BaseExpression] = []
    parts: list[str] = []
    while type(node) in ATTRIBUTE:
        nodes.append(node)
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) not in NAME:
        return None
    nodes.append(node)
    parts.append(node.value)  # type: ignore[attr-defined]
    nodes.reverse()
    parts.reverse()
    return nodes, parts


def tuple_items(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The items of a tuple literal, or the expression itself: what ``isinstance(x, T)``
    and ``except T:`` name, one type or several."""
    return [e.value for e in expr.elements] if isinstance(expr, cst.Tuple) else [expr]


def small_statements(suite: cst.BaseSuite) -> list[cst.CSTNode]:
    """The statements of a block as they run: a simple line's small statements each, a
    compound statement whole (``x = 1; y = 2`` is two, an ``if`` one)."""
    if isinstance(suite, cst.SimpleStatementSuite):
        return list(suite.body)
    return [small for line in suite.body
            for small in (line.body if isinstance(line, cst.SimpleStatementLine) else [line])]


def literal(node: cst.BaseExpression) -> object:
    """The value of a literal expression, or ``MISSING``. Nothing is evaluated."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else MISSING
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.Float):
        return float(node.evaluated_value)
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = literal(node.expression)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else MISSING
    if isinstance(node, (cst.Tuple, cst.List)):
        items = []
        for element in node.elements:
            if not isinstance(element, cst.Element):
                return MISSING
            item = literal(element.value)
            if item is MISSING:
                return MISSING
            items.append(item)
        return tuple(items)
    return MISSING




def picks_numbers(node: cst.If | cst.IfExp) -> bool:
    """Does a condition only choose numbers? ``BLOCK = 128 if c else 64``, or an ``if``
    whose branches (nested ``if``/``elif``/``else`` included) do nothing but assign
    numeric literals (``BLOCK_M, BLOCK_N = 128, 64``; ``num_warps = 8``) -- a tuning
    choice such as a tile size or a warp count, not a code path; likewise a compute dtype
    every ROCm GPU runs (``torch.bfloat16 if major >= 8 else torch.float16``), or a list of
    them (``dtypes += [torch.float16, torch.bfloat16]``, the dtypes a test runs). Only 0s and
    1s (``USE_TMA = 1 if c else 0``) are a switch, not a tuning choice."""
    values = _chosen_numbers(node)
    return values is not None and not set(values) <= {0, 1}


def _chosen_numbers(node: cst.If | cst.IfExp) -> list[object] | None:
    """The numbers a condition's branches assign, or None when they do anything else."""
    if isinstance(node, cst.IfExp):
        return _numbers_in(node)
    body = _assigned_numbers(node.body)
    if body is None or node.orelse is None:
        return body
    rest = _assigned_numbers(node.orelse if isinstance(node.orelse, cst.If) else node.orelse.body)
    return None if rest is None else body + rest


#: compute dtypes every GPU ROCm supports runs (a choice among them picks speed, not a
#: code path); FP8 formats are not among them (OCP e4m3fn is no MI300 format)
_COMPUTE_DTYPES = frozenset({"bfloat16", "float16", "half", "float32", "float"})


def _numbers_in(node: cst.BaseExpression) -> list[object] | None:
    if isinstance(node, cst.IfExp):  # (64, 64) if Lq <= 128 else (32, 32)
        body, orelse = _numbers_in(node.body), _numbers_in(node.orelse)
        return None if body is None or orelse is None else body + orelse
    chain = dotted(node) if isinstance(node, cst.Attribute) else None
    if chain is not None and chain[1][0] == "torch" and len(chain[1]) == 2 and chain[1][1] in _COMPUTE_DTYPES:
        return [chain[1][1]]  # torch.bfloat16 if cap >= (8, 0) else torch.float16
    if isinstance(node, (cst.List, cst.Tuple)) and node.elements and all(
            isinstance(e, cst.Element) and isinstance(e.value, cst.Attribute) for e in node.elements):
        dtypes = [_numbers_in(e.value) for e in node.elements]  # `[torch.float16, torch.bfloat16]`: test dtypes
        return None if any(d is None for d in dtypes) else [v for d in dtypes for v in d or ()]
    value = literal(node)
    items = list(value) if isinstance(value, tuple) else [value]
    numeric = bool(items) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)
    return items if numeric else None


def _assigned_numbers(body: cst.BaseSuite | cst.If) -> list[object] | None:
    statements = [body] if isinstance(body, cst.If) else small_statements(body)
    found: list[object] = []
    for statement in statements:
        if isinstance(statement, cst.If):
            values = _chosen_numbers(statement)
        elif isinstance(statement, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and statement.value is not None:
            values = _numbers_in(statement.value)  # `dtypes += [torch.float16, torch.bfloat16]` too
        elif isinstance(statement, cst.Pass):
            values = []
        else:
            values = None
        if values is None:
            return None
        found += values
    return found or None


def string_text(node: cst.BaseExpression) -> str | None:
    """Static text of a string literal; f-string placeholders become ``\\0``."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = string_text(node.left), string_text(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, cst.FormattedString):
        return "".join(p.value if isinstance(p, cst.FormattedStringText) else "\0"
                       for p in node.parts)
    return None


def shell_programs(command: str) -> Iterator[str]:
    """Program words of a shell command line (each command after ``;``, ``&&``, ``|``,
    behind ``sudo``/``env``/``VAR=x``, inside ``bash -c``)."""
    for parsed in commands(command):
        if parsed.words and not (parsed.program in SHELLS and len(parsed.words) == 2):
            yield parsed.words[0].value


def program_name(word: str) -> str | None:
    base = posixpath.basename(word)
    return base if base and "\0" not in base else None


def source_snippet(module: cst.Module, node: cst.CSTNode) -> str:
    return snippet(module.code_for_node(node))
