"""What a named transform is: a function over one module's matches, and its result."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst

from portscan.fix.rewrite import Declined, FixContext
from portscan.ruleset.fixspec import Tier
from portscan.match import Match


@dataclass(frozen=True, slots=True)
class TransformResult:
    module: cst.Module | None  #: ``None``: nothing changed
    fixed: tuple[tuple[Match, Tier], ...] = ()
    declined: tuple[Declined, ...] = ()
    #: id(match) -> the (first, last) 1-based lines of the input its rewrite owns, where that
    #: is more than the match's own lines (a list rewritten whole for the flags in it)
    owned: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    #: id(match) -> what to check in review of its rewrite (shown under "Check in review")
    notes: Mapping[int, str] = field(default_factory=dict)


Transform = Callable[[FixContext, Sequence[Match], bool], TransformResult]


def decline_all(matches: Sequence[Match], reason: str) -> TransformResult:
    return TransformResult(None, declined=tuple(Declined(m, reason) for m in matches))
