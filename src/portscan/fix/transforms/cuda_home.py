"""``CUDA_HOME`` tested as "is the GPU toolkit there?" (``if CUDA_HOME is None: raise``,
``CUDA_HOME is not None and ...``, ``if not CUDA_HOME``).

On a ROCm build of PyTorch ``CUDA_HOME`` is None and the toolkit is ``ROCM_HOME``, so
the test aborts or skips the extension build. The tested name becomes
``(ROCM_HOME if IS_HIP_EXTENSION else CUDA_HOME)``, both imported from
``torch.utils.cpp_extension`` beside it: on CUDA builds the test reads ``CUDA_HOME`` as
before, on ROCm builds the toolkit ROCm has. Paths under ``CUDA_HOME`` (``bin/nvcc``)
name CUDA tools and are left to the user (the scan marks them declined).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
from libcst.codemod.visitors import AddImportsVisitor

from portscan.fix.rewrite import Declined, FixContext
from portscan.fix.transforms.base import TransformResult, decline_all
from portscan.match import Match
from portscan.match.fixsites import cuda_home_test
from portscan.ruleset.fixspec import Tier

_MODULE = "torch.utils.cpp_extension"


def cuda_home_toolkit(ctx: FixContext, matches: Sequence[Match], unsafe: bool) -> TransformResult:
    tested: dict[cst.CSTNode, Match] = {}
    declined: list[Declined] = []
    for match in matches:
        reason = cuda_home_test(match.node, ctx.parent)
        if reason is None:
            tested[match.node] = match
        else:
            declined.append(Declined(match, reason))
    if not tested:
        return TransformResult(None, declined=tuple(declined))
    names = {}
    for name in ("ROCM_HOME", "IS_HIP_EXTENSION"):
        local = _bound(ctx, name)
        if local is None:
            return decline_all(list(tested.values()) + [d.match for d in declined],
                               f"`{name}` names something else in this module: branch on the toolkit by hand")
        names[name] = local

    class Rewrite(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
            if original in tested:
                assert isinstance(updated, cst.BaseExpression)
                return cst.IfExp(test=cst.Name(names["IS_HIP_EXTENSION"]), body=cst.Name(names["ROCM_HOME"]),
                                 orelse=updated, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            return updated

    module = ctx.module.visit(Rewrite())
    return TransformResult(module, tuple((m, Tier.SAFE) for m in tested.values()), tuple(declined))


def _bound(ctx: FixContext, name: str) -> str | None:
    """The module-level name for ``torch.utils.cpp_extension.<name>``: the module's own
    import of it, else ``name`` with the import scheduled; None when ``name`` is taken."""
    qualified = f"{_MODULE}.{name}"
    for local, bound in ctx.names.module_imports.items():
        if bound == qualified:
            return local
    if name in ctx.names.module.bindings or name in ctx.names.free:
        return None
    AddImportsVisitor.add_needed_import(ctx.context, _MODULE, name)
    return name
