"""Comparisons that mean something on NVIDIA only, given ``<guard> and`` in front.

``cuda-version-none``: ``torch.version.cuda`` used in a check that raises on None.
Inside a comparison (``torch.version.cuda >= "11.8"``,
``version.parse(torch.version.cuda) < version.parse("11")``,
``int(torch.version.cuda.split(".")[0]) >= 11``) the comparison becomes
``torch.version.cuda is not None and <comparison>``. Wherever the original did not
raise the result is the same; on ROCm the check is False instead of a TypeError.
Anywhere else the value itself is needed (``cuda_major = int(torch.version.cuda[0])``)
and no stand-in is right for every caller (a "0.0" would turn a crash into a wrong
version check), so those places are left to the user with the rule's rewrite.

``nvidia-gate``: a comparison of NVIDIA SM numbers that asks "has the feature"
(``get_device_capability() >= (8, 0)``, ``props.major == 9``) becomes
``torch.version.cuda is not None and <comparison>``, one that asks "lacks it"
(``props.major < 9``, ``!=``) ``torch.version.cuda is None or <comparison>``: NVIDIA GPUs
take the same path as before, AMD GPUs (whose gfx numbers pass such tests) the path for
GPUs without the feature, which is the one the code has for older NVIDIA GPUs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import libcst as cst

from portscan.fix.rewrite import Declined, FixContext
from portscan.ruleset.fixspec import NEEDS_UNSAFE, Tier
from portscan.fix.transforms.base import TransformResult, decline_all
from portscan.match import Match
from portscan.match.fixsites import IN_A_HELPER, NOT_A_COMPARISON, enclosing_comparison

#: the guard written in front of a comparison and whether it is joined with ``or`` (a
#: "lacks the feature" test) rather than ``and``; None when it cannot be written there
Guard = Callable[[Match], "tuple[cst.BaseExpression, bool] | None"]


def _comparison(ctx: FixContext, node: cst.CSTNode) -> cst.Comparison | None:
    return node if isinstance(node, cst.Comparison) else enclosing_comparison(node, ctx.parent)


def _stands_alone(ctx: FixContext, node: cst.CSTNode) -> bool:
    """Can ``a and b`` replace ``node`` here without parentheses?"""
    parent = ctx.parent(node)
    if isinstance(parent, (cst.If, cst.While, cst.Assert)):
        return parent.test is node
    return isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Return, cst.Arg)) \
        and getattr(parent, "value", None) is node


def cuda_version_none(ctx: FixContext, matches: Sequence[Match], unsafe: bool) -> TransformResult:
    return _guard_comparisons(ctx, matches, lambda m: (cst.Comparison(
        m.node.deep_clone(), [cst.ComparisonTarget(cst.IsNot(), cst.Name("None"))]), False), Tier.SAFE)  # type: ignore[arg-type]


#: why ``nvidia-gate`` cannot write its guard
TORCH_SHADOWED = "`torch` names something else here: check torch.version.cuda by hand"


#: comparison operators that ask whether a GPU lacks a feature (``major < 9``)
_LACKS = (cst.LessThan, cst.LessThanEqual, cst.NotEqual)


def nvidia_gate(ctx: FixContext, matches: Sequence[Match], unsafe: bool) -> TransformResult:
    def guard(match: Match) -> tuple[cst.BaseExpression, bool] | None:
        cuda = ctx.reference("torch.version.cuda", match.node)
        if cuda is None:
            return None
        lacks = isinstance(match.node, cst.Comparison) and all(
            isinstance(target.operator, _LACKS) for target in match.node.comparisons)
        return cst.Comparison(cuda, [cst.ComparisonTarget(cst.Is() if lacks else cst.IsNot(), cst.Name("None"))]), lacks

    if not unsafe:
        return decline_all(matches, NEEDS_UNSAFE)
    helpers = [m for m in matches if not isinstance(m.node, cst.Comparison)]  # the scan declined these
    outcome = _guard_comparisons(ctx, [m for m in matches if isinstance(m.node, cst.Comparison)], guard, Tier.UNSAFE)
    return dataclasses.replace(outcome, declined=outcome.declined + tuple(Declined(m, IN_A_HELPER) for m in helpers))


def _guard_comparisons(ctx: FixContext, matches: Sequence[Match], guard: Guard, tier: Tier) -> TransformResult:
    """``<guard> and <comparison>`` (or ``<guard> or ...``) for the comparison each match is in (or is)."""
    comparisons: dict[cst.Comparison, tuple[cst.BaseExpression, bool]] = {}
    owner: dict[cst.Comparison, Match] = {}
    declined: list[Declined] = []
    for match in matches:
        comparison = _comparison(ctx, match.node)
        if comparison is None:
            declined.append(Declined(match, NOT_A_COMPARISON))
            continue
        if comparison in owner:
            continue
        written = guard(match)
        if written is None:
            declined.append(Declined(match, TORCH_SHADOWED))
            continue
        comparisons[comparison], owner[comparison] = written, match
    if not comparisons:
        return TransformResult(None, declined=tuple(declined))

    class Rewrite(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
            if isinstance(original, cst.Comparison) and original in comparisons:
                assert isinstance(updated, cst.Comparison)
                wrap = bool(updated.lpar) or not _stands_alone(ctx, original)
                written, lacks = comparisons[original]
                return cst.BooleanOperation(written, cst.Or() if lacks else cst.And(),
                                            updated.with_changes(lpar=(), rpar=()),
                                            lpar=[cst.LeftParen()] if wrap else [],
                                            rpar=[cst.RightParen()] if wrap else [])
            return updated

    module = ctx.module.visit(Rewrite())
    fixed = [(m, tier) for m in owner.values()]
    # every match inside a rewritten comparison is fixed with it
    covered = {id(m) for m, _ in fixed}
    for match in matches:
        if id(match) not in covered and _comparison(ctx, match.node) in comparisons:
            fixed.append((match, tier))
    return TransformResult(module, tuple(fixed), tuple(declined))
