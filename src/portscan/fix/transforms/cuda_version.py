"""Comparisons that mean something on NVIDIA only, given ``<guard> and`` in front.

``cuda-version-none``: ``torch.version.cuda`` used in a check that raises on None.
Inside a comparison (``torch.version.cuda >= "11.8"``,
``version.parse(torch.version.cuda) < version.parse("11")``,
``int(torch.version.cuda.split(".")[0]) >= 11``) the comparison becomes
``torch.version.cuda is not None and <comparison>``. Wherever the original did not
raise the result is the same; on ROCm the check is False instead of a TypeError.
Anywhere else the value itself is needed (``major = int(torch.version.cuda.split(".")[0])``,
``parse(torch.version.cuda)``): with ``--unsafe-fixes`` the reference becomes
``(".".join(torch.version.hip.split(".")[:2]) if torch.version.hip else torch.version.cuda)``,
the HIP version in the ``"X.Y"`` shape of a CUDA version (``"6.2"``, where
``torch.version.hip`` is ``"6.2.41133-dd7f95766"``), so it splits, parses and formats as
before; NVIDIA and CPU builds read ``torch.version.cuda`` exactly as they did. Unsafe:
whatever the value is then compared with or named in is about CUDA. Left to the user: a
version that reaches the use through a name (a HIP version where it is written would
change the name's truth tests too), and every value use of a module that formats a
``cu`` tag (``f"+cu{v}"``: a HIP version under it names a CUDA wheel).

``nvidia-gate``: a comparison of NVIDIA SM numbers that asks "has the feature"
(``get_device_capability() >= (8, 0)``, ``props.major == 9``) becomes
``torch.version.cuda is not None and <comparison>``, one that asks "lacks it"
(``props.major < 9``, ``!=``) ``torch.version.cuda is None or <comparison>``: NVIDIA GPUs
take the same path as before, AMD GPUs (whose gfx numbers pass such tests) the path for
GPUs without the feature, which is the one the code has for older NVIDIA GPUs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import libcst as cst

from portscan.fix.rewrite import Declined, FixContext
from portscan.ruleset.fixspec import NEEDS_UNSAFE, Tier
from portscan.fix.transforms.base import TransformResult, decline_all
from portscan.match import Match
from portscan.match.fixsites import IN_A_HELPER, enclosing_comparison

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
    def guard(match: Match) -> tuple[cst.BaseExpression, bool]:
        return cst.Comparison(match.node.deep_clone(), [cst.ComparisonTarget(cst.IsNot(), cst.Name("None"))]), False

    compared: list[Match] = []
    written: dict[cst.CSTNode, cst.BaseExpression] = {}
    declined: list[Declined] = []
    for match in matches:
        if _comparison(ctx, match.node) is not None:
            compared.append(match)
        elif not unsafe:
            declined.append(Declined(match, NEEDS_UNSAFE))
        elif (form := _hip_aware(ctx, match.node)) is None:
            declined.append(Declined(match, TORCH_SHADOWED))
        else:
            written[match.node] = form
    outcome = _guard_comparisons(ctx, compared, guard, Tier.SAFE, written)
    rewritten = [m for m in matches if m.node in written]
    return dataclasses.replace(outcome, declined=outcome.declined + tuple(declined),
                               fixed=outcome.fixed + tuple((m, Tier.UNSAFE) for m in rewritten),
                               notes={id(m): HIP_VALUE for m in rewritten})


#: why a match that is in no comparison gets no guard in front of one
NOT_A_COMPARISON = "not in a comparison: no guard can be put in front of it"
#: what to check where ``cuda-version-none`` wrote the HIP version in place of the CUDA one
HIP_VALUE = ("on ROCm this now reads the HIP version (X.Y) where the CUDA version was: check what it is "
             "compared with or named in")


def _hip_aware(ctx: FixContext, node: cst.CSTNode) -> cst.BaseExpression | None:
    """``(".".join(torch.version.hip.split(".")[:2]) if torch.version.hip else <node>)``,
    spelled as the module imports torch; None where ``torch`` means something else."""
    hip = ctx.reference("torch.version.hip", node)
    if hip is None:
        return None
    spelled = cst.Module([]).code_for_node(hip)
    form = cst.IfExp(test=hip, body=cst.parse_expression(f'".".join({spelled}.split(".")[:2])'),
                     orelse=node.deep_clone())  # type: ignore[arg-type]
    parent = ctx.parent(node)
    bare = isinstance(parent, cst.Arg) and parent.value is node and not parent.star or \
        isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Return)) and getattr(parent, "value", None) is node
    return form if bare else form.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


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


def _guard_comparisons(ctx: FixContext, matches: Sequence[Match], guard: Guard, tier: Tier,
                       values: Mapping[cst.CSTNode, cst.BaseExpression] | None = None) -> TransformResult:
    """``<guard> and <comparison>`` (or ``<guard> or ...``) for the comparison each match is in
    (or is), and ``values``' nodes replaced by their expressions, in one pass."""
    replaced: Mapping[cst.CSTNode, cst.BaseExpression] = values or {}
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
    if not comparisons and not replaced:
        return TransformResult(None, declined=tuple(declined))

    class Rewrite(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
            if original in replaced:
                return replaced[original]
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
