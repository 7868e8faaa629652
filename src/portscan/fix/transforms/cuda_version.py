"""``torch.version.cuda`` used as a value that cannot be None.

* Inside a comparison (``torch.version.cuda >= "11.8"``,
  ``version.parse(torch.version.cuda) < version.parse("11")``,
  ``int(torch.version.cuda.split(".")[0]) >= 11``): the comparison becomes
  ``(torch.version.cuda is not None and <comparison>)``. Safe: wherever the original
  did not raise, the result is the same; on ROCm it is False instead of a TypeError.
* Anywhere else (``torch.version.cuda.split(".")``, ``float(torch.version.cuda)``):
  ``(torch.version.cuda or "0.0")``. Unsafe: on ROCm the code now sees CUDA "0.0",
  so version-dependent code takes its oldest-CUDA branch; review that it suits ROCm.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portscan.fix.rewrite import Declined, FixContext
from portscan.fix.spec import NEEDS_UNSAFE, Tier
from portscan.fix.transforms import TransformResult
from portscan.match import Match

#: Nodes a comparison is not looked for beyond: the value would not be evaluated there.
_BOUNDARIES = (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda, cst.BaseComp,
               cst.BooleanOperation, cst.IfExp)


def _comparison(ctx: FixContext, node: cst.CSTNode) -> cst.Comparison | None:
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.Comparison):
            return ancestor
        if isinstance(ancestor, _BOUNDARIES):
            return None
    return None


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
    stand_ins: dict[cst.CSTNode, Match] = {}
    declined: list[Declined] = []
    for match in matches:
        node = match.node
        assert isinstance(node, cst.BaseExpression)
        comparison = _comparison(ctx, node)
        if comparison is not None:
            comparisons.setdefault(comparison, match)
        elif unsafe:
            stand_ins[node] = match
        else:
            declined.append(Declined(match, NEEDS_UNSAFE))
    if not comparisons and not stand_ins:
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
            if original in stand_ins:
                assert isinstance(updated, cst.BaseExpression)
                return cst.BooleanOperation(updated.with_changes(lpar=(), rpar=()), cst.Or(),
                                            cst.SimpleString('"0.0"'),
                                            lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            return updated

    module = ctx.module.visit(Rewrite())
    fixed = [(m, Tier.SAFE) for m in comparisons.values()] + [(m, Tier.UNSAFE) for m in stand_ins.values()]
    # every match inside a rewritten comparison is fixed with it
    covered = {id(m) for m, _ in fixed}
    for match in matches:
        if id(match) not in covered and _comparison(ctx, match.node) in comparisons:  # type: ignore[arg-type]
            fixed.append((match, Tier.SAFE))
    return TransformResult(module, tuple(fixed), tuple(declined))
