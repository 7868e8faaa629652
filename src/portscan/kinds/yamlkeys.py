"""The ``yaml`` kind: keys in compose, conda and CI YAML files, by dotted path."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from portscan.kinds.common import code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import Literal, TableReader

_YAML_PATH = re.compile(r"^(\*|[\w-]+)(\.(\*|[\w-]+))*$")
_YAML_KEY = re.compile(r"^[\w-]+$")


@dataclass(frozen=True, slots=True)
class YamlPattern:
    """A key in a YAML file (compose or conda), by dotted path; ``*`` stands for any
    mapping key or list item (``services.*.deploy.resources.reservations.devices.*.driver``)."""

    kind: ClassVar[str] = "yaml"
    surfaces: ClassVar[frozenset[str]] = frozenset({"compose", "conda", "ci"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "path", "value"})
    paths: tuple[str, ...]
    values: tuple[Literal, ...] = ()  #: scalar values; a list value matches if it holds one
    #: keys beside the matched one that the same change rewrites (a CI job's ``runner`` and
    #: ``docker-image`` next to its ``gpu-arch-type``): listed in the finding's ``uses``
    also: tuple[str, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> YamlPattern:
        return cls(paths=r.texts("paths", check=_YAML_PATH, what="dotted key path"),
                   values=r.literals("values"),
                   also=r.texts("also", required=False, check=_YAML_KEY, what="YAML key"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        values = f" set to {code_list(map(repr, self.values))}" if self.values else ""
        also = (f" The keys {code_list(self.also)} beside it, where present, are listed with the finding "
                "(the same change rewrites them).") if self.also else ""
        return f"YAML keys {code_list(self.paths)}{values} (docker-compose, conda, CI).{also}"
