"""The ``image`` kind: container base images."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import ClassVar

from portscan.kinds.common import CI, code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import TableReader


@dataclass(frozen=True, slots=True)
class ImagePattern:
    """A container base image: Dockerfile ``FROM``, Apptainer ``From:`` and compose ``image:``."""

    kind: ClassVar[str] = "image"
    surfaces: ClassVar[frozenset[str]] = frozenset({"dockerfile", "compose", "apptainer"}) | CI
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "image"})
    images: tuple[str, ...]  #: globs over ``registry/namespace/name`` (no tag)
    tags: tuple[str, ...] = ()  #: globs over the tag

    @classmethod
    def read(cls, r: TableReader) -> ImagePattern:
        return cls(images=r.texts("images", what="image glob"),
                   tags=r.texts("tags", required=False, what="tag glob"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        tags = f" with a tag matching {code_list(self.tags)}" if self.tags else ""
        return (f"Container images matching {code_list(self.images)}{tags}: Dockerfile "
                "`FROM` lines (with `ARG` defaults resolved), Apptainer `From:` headers, "
                "docker-compose `image:` keys and CI images (`container:`, `image:`, `services:`).")

    def matches_image(self, name: str, bare: str, tag: str) -> bool:
        if not any(fnmatchcase(name, g) or fnmatchcase(bare, g) for g in self.images):
            return False
        return not self.tags or any(fnmatchcase(tag, g) for g in self.tags)
