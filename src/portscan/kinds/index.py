"""The ``index`` kind: package indexes and conda channels."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import ClassVar

from portscan.kinds.common import PYTHON, MANIFESTS, code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import PatternError, TableReader


@dataclass(frozen=True, slots=True)
class IndexPattern:
    """A package index or channel: ``--index-url``/``--extra-index-url``/``--find-links``
    in requirements files and ``pip install`` lines, index URLs in ``pyproject.toml``,
    and conda channels."""

    kind: ClassVar[str] = "index"
    surfaces: ClassVar[frozenset[str]] = MANIFESTS - PYTHON
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "url"})
    urls: tuple[str, ...] = ()  #: globs over URLs
    channels: tuple[str, ...] = ()  #: conda channel names

    @classmethod
    def read(cls, r: TableReader) -> IndexPattern:
        pattern = cls(urls=r.texts("urls", required=False, what="URL glob"),
                      channels=r.texts("channels", required=False, what="channel name"))
        if not pattern.urls and not pattern.channels:
            raise PatternError(r.where, "give `urls`, `channels` or both")
        return pattern

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        parts = []
        if self.urls:
            parts.append(f"package indexes matching {code_list(self.urls)} (`--index-url`, "
                         "`--extra-index-url`, `--find-links`, pyproject index tables)")
        if self.channels:
            parts.append(f"conda channels {code_list(self.channels)}")
        return "Use of " + " and ".join(parts) + "."

    def matches_index(self, url: str, channel: bool) -> bool:
        globs = self.channels if channel else self.urls
        return any(fnmatchcase(url.rstrip("/"), g.rstrip("/")) for g in globs)
