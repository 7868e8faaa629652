"""``torch.version.cuda`` used in a check that raises on None.

Inside a comparison (``torch.version.cuda >= "11.8"``,
``version.parse(torch.version.cuda) < version.parse("11")``,
``int(torch.version.cuda.split(".")[0]) >= 11``) the comparison becomes
``torch.version.cuda is not None and <comparison>``. Wherever the original did not
raise the result is the same; on ROCm the check is False instead of a TypeError.

Anywhere else the value itself is needed (``cuda_major = int(torch.version.cuda[0])``)
and no stand-in is right for every caller (a "0.0" would turn a crash into a wrong
version check), so those places are left to the user with the rule's rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portscan.fix.rewrite import Declined, FixContext
from portscan.ruleset.fixspec import Tier
from portscan.fix.transforms.base import TransformResult
from portscan.match import Match
from portscan.match.fixsites import NOT_A_COMPARISON, enclosing_comparison

def _comparison(ctx: FixContext, node: cst.CSTNode) -> cst.Comparison | None:
    return enclosing_comparison(node, ctx.parent)


def _stands_alone(ctx: FixContext, node: cst.CSTNode) -> bool:
    """Can ``a and b`` replace ``node`` here without parentheses?"""
    parent = ctx.parent(node)
    if isinstance(parent, (cst.If, cst.While, cst.Assert)):
        return parent.test is node
    return isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Return, cst.Arg)) \
        and getattr(parent, "value", None) is node


def _is_not_none(reference: cst.BaseExpression) -> cst.Comparison:
    return cst.Comparison(reference.deep_clone(), [cst.ComparisonTarget(
        cst.IsNot(), cst.Name("None"))])


def cuda_version_none(ctx: FixContext, matches: Sequence[Match], unsafe: bool) -> TransformResult:
    comparisons: dict[cst.Comparison, Match] = {}
    declined: list[Declined] = []
    for match in matches:
        node = match.node
        assert isinstance(node, cst.BaseExpression)
        comparison = _comparison(ctx, node)
        if comparison is not None:
            comparisons.setdefault(comparison, match)
        else:
            declined.append(Declined(match, NOT_A_COMPARISON))
    if not comparisons:
        return TransformResult(None, declined=tuple(declined))

    class Rewrite(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
            if isinstance(original, cst.Comparison) and original in comparisons:
                assert isinstance(updated, cst.Comparison)
                guard = _is_not_none(comparisons[original].node)
                wrap = bool(updated.lpar) or not _stands_alone(ctx, original)
                return cst.BooleanOperation(guard, cst.And(), updated.with_changes(lpar=(), rpar=()),
                                            lpar=[cst.LeftParen()] if wrap else [],
                                            rpar=[cst.RightParen()] if wrap else [])
            return updated

    module = ctx.module.visit(Rewrite())
    fixed = [(m, Tier.SAFE) for m in comparisons.values()]
    # every match inside a rewritten comparison is fixed with it
    covered = {id(m) for m, _ in fixed}
    for match in matches:
        if id(match) not in covered and _comparison(ctx, match.node) in comparisons:  # type: ignore[arg-type]
            fixed.append((match, Tier.SAFE))
    return TransformResult(module, tuple(fixed), tuple(declined))
