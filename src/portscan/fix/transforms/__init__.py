"""Named transforms: fixes that need Python, referenced from rule files by name.

A transform receives every match of the rules that name it in one module and returns
the rewritten module (or ``None``) with, for each match, whether it was fixed or why
not. It must be all-or-nothing per module when a partial rewrite would not run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from portscan.fix.rewrite import Declined, FixContext
from portscan.fix.spec import Tier
from portscan.match import Match


@dataclass(frozen=True, slots=True)
class TransformResult:
    module: cst.Module | None  #: ``None``: nothing changed
    fixed: tuple[tuple[Match, Tier], ...] = ()
    declined: tuple[Declined, ...] = ()


Transform = Callable[[FixContext, Sequence[Match], bool], TransformResult]


def decline_all(matches: Sequence[Match], reason: str) -> TransformResult:
    return TransformResult(None, declined=tuple(Declined(m, reason) for m in matches))


def _registry() -> dict[str, Transform]:
    from portscan.fix.transforms.apex_amp import apex_amp
    from portscan.fix.transforms.cuda_version import cuda_version_none

    return {"apex-amp": apex_amp, "cuda-version-none": cuda_version_none}


TRANSFORMS: dict[str, Transform] = _registry()
