"""The ``requirement`` kind: package requirements in every manifest."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import ClassVar

from portscan.bounded import Regex
from portscan.kinds.sites import RequirementSite
from portscan.kinds.common import MANIFESTS, glob_prefix, normalize_name, code_list
from portscan.ruleset.prefilter import Fragment, Token, regex_fragments
from portscan.ruleset.table import PatternError, TableReader

REQUIREMENT_SECTIONS = ("install", "optional", "build")
#: setup() keywords that hold requirements, with the manifest section each counts as
SETUP_REQUIREMENT_SECTIONS = {"install_requires": "install", "setup_requires": "build",
                              "tests_require": "optional", "extras_require": "optional"}


@dataclass(frozen=True, slots=True)
class RequirementPattern:
    """A package requirement in any manifest: requirements files, ``pyproject.toml``,
    ``setup.py``/``setup.cfg``, conda ``environment.yml``, and ``pip install`` lines in
    Dockerfiles and shell scripts. Names are globs over PEP 503-normalised names."""

    kind: ClassVar[str] = "requirement"
    surfaces: ClassVar[frozenset[str]] = MANIFESTS
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "package", "requirement"})
    names: tuple[str, ...]
    extras: tuple[str, ...] = ()  #: globs; one extra must match (``tensorflow[and-cuda]``)
    local_versions: tuple[str, ...] = ()  #: globs over a pin's local label (``+cu118``)
    url: Regex | None = None  #: searched in a direct reference (``@ git+https://...``)
    #: where the requirement sits: ``install`` (run-time dependencies), ``optional``
    #: (extras, dependency groups), ``build`` (``build-system.requires``, ``setup_requires``)
    sections: tuple[str, ...] = REQUIREMENT_SECTIONS

    @classmethod
    def read(cls, r: TableReader) -> RequirementPattern:
        names = tuple(normalize_name(n) for n in r.texts("names", what="package glob"))
        sections = r.texts("sections", required=False, what="section") or REQUIREMENT_SECTIONS
        for section in sections:
            if section not in REQUIREMENT_SECTIONS:
                raise PatternError(r.key("sections"),
                                   f"{section!r} is not one of {', '.join(REQUIREMENT_SECTIONS)}")
        return cls(names=names, extras=r.texts("extras", required=False, what="extra glob"),
                   local_versions=r.texts("local_versions", required=False, what="version glob"),
                   url=r.regex("url"), sections=sections)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        # only setup.py reaches the Python prefilter: it must call setup() and name the
        # package at the start of a requirement string (or give a matching URL)
        sets: list[frozenset[Token]] = [
            frozenset({"setup", keyword, Fragment(prefix, True, quoted=True)} if prefix else {"setup", keyword})
            for prefix in {glob_prefix(n).split("-")[0] for n in self.names}
            for keyword in SETUP_REQUIREMENT_SECTIONS]
        if self.url is not None:
            fragments = regex_fragments(self.url)
            if fragments:  # the direct reference must match too
                sets = [s | {f} for s in sets for f in fragments]
        return tuple(sets)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        text = f"Requirements on packages matching {code_list(self.names)}"
        if self.extras:
            text += f" with an extra matching {code_list(self.extras)}"
        if self.local_versions:
            text += f" pinned to a local version matching {code_list(self.local_versions)}"
        if self.url is not None:
            text += f" installed from a URL matching `{self.url.pattern}`"
        return (text + ", in requirements files, `pyproject.toml`, `setup.py`/`setup.cfg`, conda "
                "environments and `pip install` lines of Dockerfiles and shell scripts.")

    def matches_requirement(self, site: RequirementSite) -> bool:
        if not any(fnmatchcase(site.name, glob) for glob in self.names):
            return False
        if self.extras and not any(fnmatchcase(e, g) for e in site.extras for g in self.extras):
            return False
        if self.local_versions and not any(fnmatchcase(label, g) for label in site.local_labels
                                           for g in self.local_versions):
            return False
        if self.url is not None and not (site.url and self.url.search(site.url)):
            return False
        return site.section in self.sections
