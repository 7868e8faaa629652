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

A flag appended by a statement of its own (``cc_flag.append("-gencode")``, with the
statement after it that appends the value) goes under ``if not torch.version.hip:``,
consecutive ones under one ``if``. Where the flags are built another way (in a
comprehension, a ``-gencode`` whose value is added elsewhere), the scan already marked
the site declined (:func:`portscan.match.fixsites.nvcc_flag_list`).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from portscan.fix.rewrite import Declined, FixContext
from portscan.fix.transforms.base import TransformResult
from portscan.match import Match
from portscan.match.fixsites import NVCC_PAIRED, AppendedFlag, flag_test, flag_text, flag_values, nvcc_flag_list
from portscan.ruleset.fixspec import NEEDS_UNSAFE, Tier

_IS_HIP = "torch.utils.cpp_extension.IS_HIP_EXTENSION"


def hip_nvcc_flags(ctx: FixContext, matches: Sequence[Match], unsafe: bool) -> TransformResult:
    sites: dict[cst.List | cst.SimpleStatementLine, list[Match]] = {}
    values: dict[cst.SimpleStatementLine, cst.SimpleStatementLine] = {}  # a paired flag's statement -> its value's
    declined: list[Declined] = []
    for match in matches:
        site = nvcc_flag_list(match.node, ctx.parent, ctx.module, flag_test(match))
        if isinstance(site, str):
            declined.append(Declined(match, site))
        elif isinstance(site, AppendedFlag):
            sites.setdefault(site.statement, []).append(match)
            if site.value is not None:
                values[site.statement] = site.value
        else:
            sites.setdefault(site, []).append(match)
    twins: dict[cst.List, cst.IfExp] = {}
    guarded: dict[cst.SimpleStatementLine, cst.BaseExpression] = {}  # statement -> the test `not <hip>`
    fixed: list[tuple[Match, Tier]] = []
    extents: list[tuple[list[Match], cst.CSTNode, cst.CSTNode]] = []  # (matches, first node, last node) owned
    for place, found in sites.items():
        tiers = [m.rule.fix.tier if m.rule.fix is not None else Tier.UNSAFE for m in found]
        if Tier.UNSAFE in tiers and not unsafe:
            declined += [Declined(m, NEEDS_UNSAFE) for m in found]
            continue
        test = _hip_test(ctx, place)
        if test is None:
            declined += [Declined(m, "`torch` names something else here: branch on torch.version.hip by hand")
                         for m in found]
            continue
        last: cst.CSTNode = place
        if isinstance(place, cst.List):
            joined = isinstance(ctx.parent(place), cst.BinaryOperation)  # ([...] if hip else [...]) + more
            twins[place] = cst.IfExp(test=test, body=_without(place, _flagged(place, found)), orelse=place,
                                    lpar=[cst.LeftParen()] if joined else [], rpar=[cst.RightParen()] if joined else [])
        else:
            last = values.get(place, place)
            for statement in {place, last}:
                guarded[statement] = cst.UnaryOperation(cst.Not(), test)
        fixed += list(zip(found, tiers, strict=True))
        extents.append((found, place, last))
    if not fixed:
        return TransformResult(None, declined=tuple(declined))
    where = ctx.positions([node for _, first, last in extents for node in (first, last)])  # one pass for all
    owned = {id(m): (where[id(first)].start.line, where[id(last)].end.line)
             for found, first, last in extents for m in found}

    class Rewrite(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
            if isinstance(original, cst.List) and original in twins:
                return twins[original]
            if isinstance(original, (cst.Module, cst.IndentedBlock)) and any(s in guarded for s in original.body):
                return updated.with_changes(body=_guard_runs(original.body, updated.body, guarded))  # type: ignore[attr-defined]
            return updated

    return TransformResult(ctx.module.visit(Rewrite()), tuple(fixed), tuple(declined), owned)


def _guard_runs(original: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement],
                guarded: dict[cst.SimpleStatementLine, cst.BaseExpression]) -> list[cst.BaseStatement]:
    """The block's statements, each run of consecutive guarded ones under one
    ``if not torch.version.hip:`` that takes the first one's leading comments and blank lines."""
    body: list[cst.BaseStatement] = []
    run: list[cst.BaseStatement] = []
    test: cst.BaseExpression | None = None
    for before, after in (*zip(original, updated, strict=True), (None, None)):
        if before is not None and before in guarded:
            test = test or guarded[before]  # type: ignore[index]
            run.append(after)  # type: ignore[arg-type]
            continue
        if run:
            first = run[0]
            lead = getattr(first, "leading_lines", ())
            inner = [first.with_changes(leading_lines=())] + run[1:]  # type: ignore[attr-defined]
            body.append(cst.If(test=test, body=cst.IndentedBlock(body=inner), leading_lines=lead))  # type: ignore[arg-type]
            run, test = [], None
        if after is not None:
            body.append(after)
    return body


def _flagged(listed: cst.List, found: Sequence[Match]) -> set[int]:
    """The ids of the list's flag values the matches stand for: their own nodes, or, for a
    match reported at a helper's call, the strings of the helper's list its rule flags."""
    ids = {id(m.node) for m in found if not isinstance(m.node, cst.Call)}
    for match in found:
        if isinstance(match.node, cst.Call):
            ids |= {id(value) for value in flag_values(listed, flag_test(match))}
    return ids


def _without(listed: cst.List, flagged: set[int]) -> cst.List:
    """The list for hipcc: the flagged elements gone, each with the value a paired option takes."""
    kept: list[cst.BaseElement] = []
    skip = False
    for element in listed.elements:
        if skip:
            skip = False
            continue
        if id(element.value) in flagged:
            skip = flag_text(element.value) in NVCC_PAIRED
            continue
        kept.append(element)
    # laid out as the original: each element keeps its comma and line; the last takes the
    # original last one's (none, or the trailing comma before a closing bracket on its own line)
    copies = [element.deep_clone() for element in kept]
    if copies:
        copies[-1] = copies[-1].with_changes(comma=listed.elements[-1].comma)
    return listed.with_changes(elements=copies, lpar=(), rpar=()).deep_clone()


def _hip_test(ctx: FixContext, at: cst.CSTNode) -> cst.BaseExpression | None:
    """``IS_HIP_EXTENSION`` where the module imports it, else ``torch.version.hip``."""
    if _IS_HIP in ctx.names.module_imports.values():
        return ctx.reference(_IS_HIP, at)
    return ctx.reference("torch.version.hip", at)
