"""The ``submodule`` kind: git submodules a ``.gitmodules`` file pulls in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import ClassVar

from portscan.kinds.common import code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import TableReader


@dataclass(frozen=True, slots=True)
class SubmodulePattern:
    """A submodule whose repository matches one of the globs, unless the same
    ``.gitmodules`` also holds one matching ``unless`` (the ROCm counterpart is there)."""

    kind: ClassVar[str] = "submodule"
    surfaces: ClassVar[frozenset[str]] = frozenset({"gitmodules"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "url", "submodule", "repository"})
    repositories: tuple[str, ...]  #: globs over ``host/owner/name``, lower case
    unless: tuple[str, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> SubmodulePattern:
        return cls(repositories=tuple(g.lower() for g in r.texts("repositories", what="repository glob")),
                   unless=tuple(g.lower() for g in r.texts("unless", required=False,
                                                           what="repository glob")))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        unless = (f", unless the file also has a submodule matching {code_list(self.unless)}"
                  if self.unless else "")
        return f"`.gitmodules` entries whose `url` is {code_list(self.repositories)}{unless}."

    def matches_submodule(self, repository: str, others: Sequence[str]) -> bool:
        """``repository``: the normalised URL (``github.com/nvidia/cutlass``); ``others``:
        those of every submodule in the file."""
        if not any(fnmatchcase(repository, g) for g in self.repositories):
            return False
        return not any(fnmatchcase(other, g) for other in others for g in self.unless)
