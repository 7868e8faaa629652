"""The ``action`` kind: actions a CI workflow runs in its ``uses:`` steps."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import ClassVar

from portscan.kinds.common import code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import TableReader


@dataclass(frozen=True, slots=True)
class ActionPattern:
    """A GitHub Actions step (or job) ``uses: owner/repo[/path]@ref`` naming one of the
    actions; the ``@ref`` is ignored and names compare case-insensitively, as GitHub does."""

    kind: ClassVar[str] = "action"
    surfaces: ClassVar[frozenset[str]] = frozenset({"ci"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "action"})
    actions: tuple[str, ...]  #: globs over ``owner/repo`` or ``owner/repo/path``

    @classmethod
    def read(cls, r: TableReader) -> ActionPattern:
        return cls(actions=tuple(a.lower() for a in r.texts("actions", what="action glob")))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        return (f"GitHub Actions `uses:` of {code_list(self.actions)} (any `@ref`), in "
                "workflows and composite actions.")

    def matches_action(self, action: str) -> bool:
        """``action`` as written after ``uses:``, with or without its ``@ref``."""
        name = action.split("@", 1)[0].strip().rstrip("/").lower()
        return any(fnmatchcase(name, g) for g in self.actions)
