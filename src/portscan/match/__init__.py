"""Matchers: one per file kind, each returning :class:`Match` values for a rule set."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping

from portscan.ruleset.fixspec import Tier
from portscan.ruleset.schema import Rule


@dataclass(frozen=True, slots=True)
class Match:
    """A rule matched the text between character offsets ``start`` and ``end``."""

    rule: Rule
    start: int
    end: int
    variables: Mapping[str, str] = field(default_factory=dict)
    guard: str | None = None  #: see :mod:`portscan.match.guards`
    #: the libcst node reported (Python only), for fixes to work on
    node: Any = field(default=None, compare=False, repr=False)
    #: False where the rule's fix does not apply (a use reported because of its import)
    fixable: bool = True
    #: why the rule's fix does not apply at this site, decided at scan time
    #: (see :mod:`portscan.match.fixsites`); a fix reports it instead of trying
    declined: str | None = None
    #: start offset of the import statement the matched name comes from (Python only):
    #: an import rule's own statement, or the import that binds a use's first name
    binding: int | None = None
    #: a use that belongs to the finding of its import (see :func:`portscan.scan.collapse`):
    #: an attribute use a ``uses = true`` rule asks for, or a name that a ``try``'s
    #: handler binds to a fallback as well
    folded: bool = False
    #: what the finding is about beyond its place, where one rule reports it again and
    #: again (the local a device-name table compares: ``chip``); one finding per rule and
    #: subject, the rest listed in ``uses`` (see :func:`portscan.scan.collapse`)
    subject: object = field(default=None, compare=False)
    #: the fix's tier at this site where it is not the rule's (see
    #: :func:`portscan.match.fixsites.site_tiers`)
    tier: Tier | None = None
    #: start offsets of other places the finding stands for, listed in its ``uses`` (the
    #: keys a ``yaml`` rule's ``also`` names beside the matched one)
    also: tuple[int, ...] = ()


_WHITESPACE = re.compile(r"\s+")
MATCHED_MAX = 60


def snippet(text: str) -> str:
    """Source text for a message: one line, at most MATCHED_MAX characters."""
    text = _WHITESPACE.sub(" ", text).strip()
    return text if len(text) <= MATCHED_MAX else text[: MATCHED_MAX - 1] + "…"
