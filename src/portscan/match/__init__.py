"""Matchers: one per file kind, each returning :class:`Match` values for a rule set."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping

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


_WHITESPACE = re.compile(r"\s+")
MATCHED_MAX = 60


def snippet(text: str) -> str:
    """Source text for a message: one line, at most MATCHED_MAX characters."""
    text = _WHITESPACE.sub(" ", text).strip()
    return text if len(text) <= MATCHED_MAX else text[: MATCHED_MAX - 1] + "…"
