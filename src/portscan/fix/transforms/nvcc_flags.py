"""nvcc-only flags in a CUDA extension's build (``extra_compile_args={"nvcc": [...]}``,
``nvcc_flags = [...]``, ``nvcc_flags += [...]``, ``extra_cuda_cflags=[...]``).

On ROCm, PyTorch hands the ``nvcc`` list to hipcc/amdclang++ unchanged and clang stops
at the first option it does not know. The list literal becomes
``[<the list without them>] if torch.version.hip else [<the list as written>]``: the
CUDA branch is the original text byte for byte, so NVIDIA builds get the same flags in
the same order, and hipcc gets the rest. An option that takes the next element as its
value (``"-gencode", "arch=compute_80,code=sm_80"``) leaves with it. ``IS_HIP_EXTENSION``
is the test where the module imports it from ``torch.utils.cpp_extension``; otherwise
``torch.version.hip`` (``import torch`` added where missing).

Where the flags are not a list literal standing alone (appended one by one, built in a
comprehension, a ``-gencode`` whose value is added elsewhere), the scan already marked
the site declined (:func:`portscan.match.fixsites.nvcc_flag_list`).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portscan.fix.rewrite import Declined, FixContext
from portscan.fix.transforms.base import TransformResult
from portscan.match import Match
from portscan.match.fixsites import NVCC_PAIRED, nvcc_flag_list
from portscan.ruleset.fixspec import NEEDS_UNSAFE, Tier

_IS_HIP = "torch.utils.cpp_extension.IS_HIP_EXTENSION"


def hip_nvcc_flags(ctx: FixContext, matches: Sequence[Match], unsafe: bool) -> TransformResult:
    lists: dict[cst.List, list[Match]] = {}
    declined: list[Declined] = []
    for match in matches:
        site = nvcc_flag_list(match.node, ctx.parent)
        if isinstance(site, str):
            declined.append(Declined(match, site))
        else:
            lists.setdefault(site, []).append(match)
    twins: dict[cst.List, cst.IfExp] = {}
    fixed: list[tuple[Match, Tier]] = []
    owned: dict[int, tuple[int, int]] = {}
    for listed, found in lists.items():
        tiers = [m.rule.fix.tier if m.rule.fix is not None else Tier.UNSAFE for m in found]
        if Tier.UNSAFE in tiers and not unsafe:
            declined += [Declined(m, NEEDS_UNSAFE) for m in found]
            continue
        test = _hip_test(ctx, listed)
        if test is None:
            declined += [Declined(m, "`torch` names something else here: branch on torch.version.hip by hand")
                         for m in found]
            continue
        joined = isinstance(ctx.parent(listed), cst.BinaryOperation)  # ([...] if hip else [...]) + more
        twins[listed] = cst.IfExp(test=test, body=_without(listed, {id(m.node) for m in found}), orelse=listed,
                                  lpar=[cst.LeftParen()] if joined else [], rpar=[cst.RightParen()] if joined else [])
        fixed += list(zip(found, tiers, strict=True))
        extent = ctx.positions([listed])[id(listed)]
        owned.update((id(m), (extent.start.line, extent.end.line)) for m in found)
    if not twins:
        return TransformResult(None, declined=tuple(declined))

    class Rewrite(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
            if isinstance(original, cst.List) and original in twins:
                return twins[original]
            return updated

    return TransformResult(ctx.module.visit(Rewrite()), tuple(fixed), tuple(declined), owned)


def _without(listed: cst.List, flagged: set[int]) -> cst.List:
    """The list for hipcc: the flagged elements gone, each with the value a paired option takes."""
    kept: list[cst.BaseElement] = []
    skip = False
    for element in listed.elements:
        if skip:
            skip = False
            continue
        if id(element.value) in flagged:
            value = element.value
            skip = isinstance(value, cst.SimpleString) and value.evaluated_value in NVCC_PAIRED
            continue
        kept.append(element)
    return cst.List([element.with_changes(value=element.value.deep_clone(), comma=cst.MaybeSentinel.DEFAULT)
                     for element in kept])


def _hip_test(ctx: FixContext, at: cst.CSTNode) -> cst.BaseExpression | None:
    """``IS_HIP_EXTENSION`` where the module imports it, else ``torch.version.hip``."""
    if _IS_HIP in ctx.names.module_imports.values():
        return ctx.reference(_IS_HIP, at)
    return ctx.reference("torch.version.hip", at)
