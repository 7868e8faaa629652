"""Rule regular expressions with a time budget.

Rule files may come from the scanned tree (``rules-dirs``), and a regular expression
can backtrack for hours on a short line. Rules keep Python's ``re`` syntax (it is
validated with ``re``, and the prefilter reads literals with ``re``'s parser), but they
run on the ``regex`` engine, which takes a timeout: each search over a file gets
:data:`BUDGET_S` seconds plus :data:`BUDGET_S_PER_MB` per megabyte of text, then raises
:class:`PatternTimeout`, which fails that one file (error kind ``timeout``), not the run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import regex as _regex

BUDGET_S = 2.0
BUDGET_S_PER_MB = 2.0


class PatternTimeout(Exception):
    """A rule's regular expression ran past its time budget on one text."""

    def __init__(self, pattern: str, seconds: float) -> None:
        shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        super().__init__(f"a rule's regular expression ran past its {seconds:.1f} s budget: `{shown}`")


@dataclass(frozen=True, slots=True)
class Regex:
    """A rule's regular expression; ``search``/``finditer`` as in ``re``, under a budget.
    The rule reader checks its syntax (``TableReader.regex``); a copy loaded from the
    rule-pack cache was checked when stored, and is compiled only where it is used."""

    pattern: str
    _compiled: Any = field(default=None, init=False, repr=False, compare=False, hash=False)

    @property
    def _engine(self) -> Any:
        """The ``regex`` engine's pattern, compiled on first use: most runs (a pre-commit
        hook on a few Python files) never search with most rules' patterns."""
        if self._compiled is None:
            object.__setattr__(self, "_compiled", _regex.compile(self.pattern))
        return self._compiled

    @property
    def flags(self) -> int:
        """``re``'s flags for the pattern (what the prefilter's parser needs)."""
        return re.compile(self.pattern).flags

    def search(self, text: str) -> Any:
        seconds = budget(text)
        try:
            return self._engine.search(text, timeout=seconds)
        except TimeoutError:
            raise PatternTimeout(self.pattern, seconds) from None

    def finditer(self, text: str) -> Iterator[Any]:
        seconds = budget(text)
        try:
            yield from self._engine.finditer(text, timeout=seconds)
        except TimeoutError:
            raise PatternTimeout(self.pattern, seconds) from None


def budget(text: str) -> float:
    """Seconds one pattern may spend on ``text``: generous for real files, bounded for all."""
    return BUDGET_S + BUDGET_S_PER_MB * len(text) / 1_000_000
