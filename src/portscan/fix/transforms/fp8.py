"""OCP FP8 dtypes where the target GPU computes FP8 in the fnuz formats (MI300, gfx942).

``torch.float8_e4m3fn`` becomes ``(torch.float8_e4m3fnuz if torch.version.hip else
torch.float8_e4m3fn)`` (``e5m2`` likewise): NVIDIA builds keep the OCP dtype, ROCm builds
get the one gfx942's FP8 GEMMs take. The rule's ``[fix] arch`` keeps this to targets that
need it (the engine declines it for any other ``target.arch``, and without one).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portscan.fix.rewrite import Declined, FixContext
from portscan.fix.transforms.base import TransformResult, decline_all
from portscan.fix.transforms.cuda_version import TORCH_SHADOWED
from portscan.match import Match
from portscan.ruleset.fixspec import NEEDS_UNSAFE, Tier

#: OCP dtype -> the fnuz dtype of the same width and exponent bias family
FNUZ = {"torch.float8_e4m3fn": "torch.float8_e4m3fnuz", "torch.float8_e5m2": "torch.float8_e5m2fnuz"}


def fp8_fnuz(ctx: FixContext, matches: Sequence[Match], unsafe: bool) -> TransformResult:
    if not unsafe:
        return decline_all(matches, NEEDS_UNSAFE)
    twins: dict[cst.CSTNode, cst.IfExp] = {}
    declined: list[Declined] = []
    fixed: list[tuple[Match, Tier]] = []
    for match in matches:
        fnuz = FNUZ.get(match.variables.get("name", ""))
        if fnuz is None:
            declined.append(Declined(match, "not one of the OCP FP8 dtypes this fix knows"))
            continue
        hip = ctx.reference("torch.version.hip", match.node)
        written = ctx.reference(fnuz, match.node)
        if hip is None or written is None or not isinstance(match.node, cst.BaseExpression):
            declined.append(Declined(match, TORCH_SHADOWED))
            continue
        twins[match.node] = cst.IfExp(test=hip, body=written, orelse=match.node,
                                      lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        fixed.append((match, Tier.UNSAFE))
    if not twins:
        return TransformResult(None, declined=tuple(declined))

    class Rewrite(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
            return twins.get(original, updated)

    return TransformResult(ctx.module.visit(Rewrite()), tuple(fixed), tuple(declined))
