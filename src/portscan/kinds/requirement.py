"""The ``requirement`` kind: package requirements in every manifest."""

from __future__ import annotations

import itertools

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, ClassVar

from packaging.version import InvalidVersion, Version

from portscan.kinds.python_surface import PythonSurface
from portscan.kinds.spawn import DEFAULT_SPAWN_CALLEES, spawn_words
from portscan.bounded import Regex
from portscan.kinds.sites import RequirementSite
from portscan.kinds.common import MANIFESTS, glob_prefix, normalize_name, code_list
from portscan.kinds.rocm_wheels import rocm_wheels
from portscan.kinds.ceiling import only_below
from portscan.ruleset.prefilter import Fragment, InCode, Token, regex_fragments
from portscan.ruleset.table import PatternError, TableReader

REQUIREMENT_SECTIONS = ("install", "optional", "build")
#: setup() keywords that hold requirements, with the manifest section each counts as
SETUP_REQUIREMENT_SECTIONS = {"install_requires": "install", "setup_requires": "build",
                              "tests_require": "optional", "extras_require": "optional"}
#: a project's own helpers that pip-install the requirements they are given when missing
#: (ultralytics' ``check_requirements``): what they get is installed at run time
INSTALLER_CALLS = frozenset({"check_requirements", "install_requirements", "install_package", "install_packages",
                             "pip_install", "ensure_package", "ensure_packages"})


@dataclass(frozen=True, slots=True)
class RequirementPattern:
    """A package requirement in any manifest: requirements files, ``pyproject.toml``,
    ``setup.py``/``setup.cfg``, conda ``environment.yml``, and ``pip install`` lines in
    Dockerfiles and shell scripts. Names are globs over PEP 503-normalised names."""

    kind: ClassVar[str] = "requirement"
    surfaces: ClassVar[frozenset[str]] = MANIFESTS
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"calls", "item-stores"})  # extras filled item by item
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "package", "requirement"})
    names: tuple[str, ...]
    extras: tuple[str, ...] = ()  #: globs; one extra must match (``tensorflow[and-cuda]``)
    local_versions: tuple[str, ...] = ()  #: globs over a pin's local label (``+cu118``)
    url: Regex | None = None  #: searched in a direct reference (``@ git+https://...``)
    #: where the requirement sits: ``install`` (run-time dependencies), ``optional``
    #: (extras, dependency groups), ``build`` (``build-system.requires``, ``setup_requires``)
    sections: tuple[str, ...] = REQUIREMENT_SECTIONS
    #: ``"none"``: only a version specifier that no release with ROCm wheels meets
    #: (``rocm-wheels.toml``), so pip replaces an installed ROCm build with PyPI's CUDA one
    rocm_wheels: str = ""
    #: only inside a container definition built on one of these images (globs over
    #: ``registry/namespace/name``): a Dockerfile ``FROM``, an Apptainer ``From:``
    images: tuple[str, ...] = ()
    #: never inside a container definition built on one of these images (``rocm/*``:
    #: there the install is the ROCm build)
    not_images: tuple[str, ...] = ()
    #: only a ``pip install`` line or requirements file that names no index
    #: (``--index-url``, ``--extra-index-url``, ``-f``), with no local version and no URL:
    #: PyPI's default wheel
    unindexed: bool = False
    #: only a version specifier that admits no release at or above this one (``0.49.0``:
    #: the first release with ROCm support), so every version it allows lacks it
    below: str = ""
    #: not on a ``pip install --no-build-isolation`` line of a shell script, Dockerfile or
    #: CI step: a build from source against the environment's torch is the ROCm recipe
    #: (the base image, if CUDA, is reported by its own rule)
    unless_source_build: bool = False

    @classmethod
    def read(cls, r: TableReader) -> RequirementPattern:
        names = tuple(normalize_name(n) for n in r.texts("names", what="package glob"))
        sections = r.texts("sections", required=False, what="section") or REQUIREMENT_SECTIONS
        for section in sections:
            if section not in REQUIREMENT_SECTIONS:
                raise PatternError(r.key("sections"),
                                   f"{section!r} is not one of {', '.join(REQUIREMENT_SECTIONS)}")
        unindexed = r.raw("unindexed", False)
        if unindexed is not None and not isinstance(unindexed, bool):
            raise PatternError(r.key("unindexed"), "expected true or false")
        wheels = r.raw("rocm_wheels", False)
        if wheels is not None and (wheels != "none" or rocm_wheels_table_missing(names)):
            raise PatternError(r.key("rocm_wheels"), 'expected "none", for packages listed in '
                               "rocm-wheels.toml")
        below = r.text("below", required=False)
        try:
            Version(below) if below else None
        except InvalidVersion:
            raise PatternError(r.key("below"), f"{below!r} is not a version") from None
        return cls(names=names, extras=r.texts("extras", required=False, what="extra glob"),
                   local_versions=r.texts("local_versions", required=False, what="version glob"),
                   url=r.regex("url"), sections=sections, rocm_wheels=wheels or "",
                   images=r.texts("images", required=False, what="image glob"),
                   not_images=r.texts("not_images", required=False, what="image glob"),
                   unindexed=bool(unindexed), below=below,
                   unless_source_build=r.flag("unless_source_build"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        # a Python file must call setup() and name the package at the start of a
        # requirement string (or give a matching URL)
        prefixes = {glob_prefix(n).split("-")[0] for n in self.names}
        sets: list[frozenset[Token]] = [
            frozenset({"setup", keyword, Fragment(prefix, True, quoted=True)} if prefix else {"setup", keyword})
            for prefix in prefixes for keyword in SETUP_REQUIREMENT_SECTIONS]
        # ... or run ``pip install`` through a process-spawning call, which is code (the
        # package may sit anywhere in a shell string)
        sets += [frozenset({"pip", "install", InCode(word), Fragment(prefix, True)} if prefix
                           else {"pip", "install", InCode(word)})
                 for prefix in prefixes for word in sorted(spawn_words(DEFAULT_SPAWN_CALLEES))]
        # ... or give it to an installer helper (``check_requirements("onnxruntime-gpu")``)
        sets += [frozenset({InCode(call), Fragment(prefix, True, quoted=True)} if prefix else {InCode(call)})
                 for prefix in prefixes for call in sorted(INSTALLER_CALLS)]
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
        if self.rocm_wheels:
            text += (" whose version specifier no release with ROCm wheels on download.pytorch.org "
                     "meets")
        if self.below:
            text += f" whose version specifier allows only releases before {self.below}"
        if self.unless_source_build:
            text += " (not on a `pip install --no-build-isolation` line: a source build in the environment)"
        if self.images or self.unindexed:
            where = f" in container definitions built on {code_list(self.images)}" if self.images else ""
            plain = " installed from PyPI's default index (no index URL, local version or URL)" \
                if self.unindexed else ""
            return f"{text}{plain}{where}: `pip install` lines of Dockerfiles and Apptainer definitions."
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
        if self.images and not any(fnmatchcase(i, g) for i in site.images for g in self.images):
            return False
        if self.not_images and any(fnmatchcase(i, g) for i in site.images for g in self.not_images):
            return False
        if self.unindexed and (site.indexed or site.local_labels or site.url):
            return False
        if self.rocm_wheels:
            table = rocm_wheels(site.name)
            if table is None or not table.none_meets(site.specifier):
                return False
        if self.below and not only_below(site.specifier, self.below):
            return False
        if self.unless_source_build and site.source_build:
            return False
        return site.section in self.sections

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, RequirementPattern]], surface: PythonSurface) -> None:
        """``setup(install_requires=[...], extras_require={...}, setup_requires=[...])``,
        ``pip install`` commands run through ``subprocess``/``os.system`` (an installer
        that fetches ``onnxruntime-gpu`` at run time), and what a project's installer helper
        is given (``check_requirements("onnxruntime-gpu" if cuda else "onnxruntime")``)."""
        candidates = [rule for rule, _ in rules]
        for node, text, section in itertools.chain(surface.setup_requirements(), surface.installer_requirements()):
            package, met = surface.requirement_rules(text, candidates, section)
            for rule in met:
                surface.hit(rule, id(node), node, package=package, requirement=text.strip())
        for call, scope in surface.calls:
            for callee in surface.callee_names(call, scope):
                if callee not in DEFAULT_SPAWN_CALLEES:
                    continue
                command = surface.argument(call, 1 if callee.startswith("os.spawn") else 0, "args")
                for text, indexed, node in surface.pip_installs(command, scope) if command is not None else ():
                    package, met = surface.requirement_rules(text, candidates, "install", indexed)
                    for rule in met:
                        surface.hit(rule, id(node), node, package=package, requirement=text)


def rocm_wheels_table_missing(names: tuple[str, ...]) -> bool:
    """``rocm_wheels`` needs literal package names that the data lists."""
    return any(rocm_wheels(name) is None for name in names)
