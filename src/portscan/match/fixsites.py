"""Where a rule's declared fix applies, decided per site from the scan's own parse.

The scan marks a finding ``[fix]`` only where ``portscan fix`` will rewrite it, so the
decision a fix makes about the shape of the code around a match lives here, below
both: the matcher records it on the :class:`~portscan.match.Match` and the fix reads
it back unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from portscan.match import Match
from portscan.match.syntax import children

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]

#: why ``cuda-version-none`` leaves a value use (``int(torch.version.cuda[0])``) alone
NOT_A_COMPARISON = "not a comparison: the version itself is used, so branch on torch.version.hip by hand"

#: Nodes a comparison is not looked for beyond: from outside them, the value is not
#: always evaluated when the comparison is (a branch, a lambda, a statement boundary).
_BOUNDARIES = (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda, cst.BooleanOperation, cst.IfExp)


def _inside(outer: cst.CSTNode, inner: cst.CSTNode, parent: Parent) -> bool:
    """Is ``inner`` ``outer`` or below it? (Climbs from ``inner``: no subtree walk.)"""
    node: cst.CSTNode | None = inner
    while node is not None:
        if node is outer:
            return True
        node = parent(node)
    return False


def enclosing_comparison(node: cst.CSTNode, parent: Parent) -> cst.Comparison | None:
    """The comparison that is evaluated whenever ``node`` is, if any."""
    ancestor = parent(node)
    while ancestor is not None:
        if isinstance(ancestor, cst.Comparison):
            return ancestor
        if isinstance(ancestor, _BOUNDARIES):
            return None
        if isinstance(ancestor, cst.BaseComp) and not _inside(ancestor.for_in.iter, node, parent):
            return None  # only a comprehension's first iterable is evaluated up front
        ancestor = parent(ancestor)
    return None


def parents(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each code-carrying node's parent (iterative: deep nesting does not recurse)."""
    found: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in children(node):
            found[child] = node
            stack.append(child)
    return found


def _transform(match: Match) -> str | None:
    spec = match.rule.fix
    return spec.transform if spec is not None and spec.kind == "transform" else None


def decline_reasons(module: cst.Module, matches: Sequence[Match]) -> list[str | None]:
    """Per match, why its fix does not apply at its site (None: it applies, or no fix
    decides by site). The parent map is built only when some match needs it."""
    wanted = [_transform(m) == "cuda-version-none" and m.guard is None for m in matches]
    if not any(wanted):
        return [None] * len(matches)
    parent = parents(module).get
    return [NOT_A_COMPARISON if want and enclosing_comparison(m.node, parent) is None else None
            for m, want in zip(matches, wanted, strict=True)]
