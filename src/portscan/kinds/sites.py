"""What a surface hands to the kinds that apply to it, and what those kinds answer.

A surface (the matcher of a file kind) reads a file once into sites; each kind that
applies to the surface finds its matches among them. The kind does the matching, the
surface only reads and locates, so a new kind needs no edit to the surface.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

#: ``#define NAME``: the macro a directive defines
DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.MULTILINE)

Span = tuple[int, int]  #: character offsets ``start, end`` in the file's text


@dataclass(frozen=True, slots=True)
class KernelSource:
    """A CUDA/C++ source as the ``cuda`` surface hands it to kinds."""

    code: str  #: the text with comments and string literals blanked out, offsets kept
    hipify: frozenset[str] | None = None  #: CUDA names hipify maps; None: no table
    #: compiled as CUDA (a ``.cu``/``.cuh`` file, or a header one includes), not a plain
    #: C++ file that only mentions CUDA (host code: its inline ``asm`` is the CPU's)
    device: bool = True
    lowered: str = field(init=False, repr=False, compare=False)  #: ``code`` lowercased, once

    def __post_init__(self) -> None:
        object.__setattr__(self, "lowered", self.code.lower())

    def defined_macros(self) -> set[str]:
        """Names the file ``#define``s itself (not CUDA API even when they look it)."""
        return set(DEFINE.findall(self.code))


@runtime_checkable
class KernelKind(Protocol):
    """A match kind for the ``cuda`` surface."""

    def match_kernel(self, source: KernelSource) -> Iterator[Span]: ...


@dataclass(frozen=True, slots=True)
class RequirementSite:
    """A package requirement as a manifest states it, normalised for matching."""

    name: str  #: PEP 503-normalised
    extras: tuple[str, ...]  #: normalised
    local_labels: tuple[str, ...]  #: the local labels of ``==`` pins (``cu118``)
    url: str | None  #: a direct reference (``@ git+https://...``)
    section: str  #: ``install``, ``optional`` or ``build``
    specifier: str = ""  #: the version specifier as written (``>=2.1,<3``)
    #: True when the ``pip install`` line or requirements file names an index
    #: (``--index-url``, ``--extra-index-url``, ``-f``)
    indexed: bool = False
    #: in a container definition: the base images (``registry/namespace/name``) it builds on
    images: tuple[str, ...] = ()
    #: named on a ``pip install --no-build-isolation`` line: built from source against the
    #: environment's own torch
    source_build: bool = False


@runtime_checkable
class RequirementKind(Protocol):
    """A kind that matches package requirements, on every manifest surface."""

    def matches_requirement(self, site: RequirementSite) -> bool: ...


@runtime_checkable
class IndexKind(Protocol):
    """A kind that matches package indexes (or, with ``channel``, conda channels)."""

    def matches_index(self, url: str, channel: bool) -> bool: ...


@runtime_checkable
class EnvKind(Protocol):
    """A kind that matches environment variables set in text (every value a string)."""

    def matches_env(self, name: str, value: str) -> bool: ...


@runtime_checkable
class ImageKind(Protocol):
    """A kind that matches container images: ``name`` as written, ``bare`` without
    ``docker.io/`` and ``library/``, and the tag."""

    def matches_image(self, name: str, bare: str, tag: str) -> bool: ...


@runtime_checkable
class ProgramKind(Protocol):
    """A kind that matches the program a shell command runs."""

    def matches_program(self, program: str) -> bool: ...


@runtime_checkable
class ArgumentKind(Protocol):
    """A kind that matches a shell command by its arguments: the index of the argument
    to report, or None."""

    def matching_argument(self, program: str, args: Sequence[str]) -> int | None: ...


@dataclass(frozen=True, slots=True)
class ArgumentSite:
    """One argument of a Python call, found by keyword or position, as a condition on it
    reads it (see ``ArgCondition.accepts``)."""

    value: object  #: its literal value, or ``MISSING`` (:mod:`portscan.ruleset.table`)
    text: str | None  #: its text, when it is a string literal
    #: the literal values of a list, tuple or set literal's items (an ORT-style
    #: ``("Provider", {...})`` item counts by its first element); () for anything else
    items: tuple[object, ...] = ()


@dataclass(frozen=True, slots=True)
class CMakeArgument:
    """One argument of a CMake command: its text as written (inside the quotes or the
    brackets for quoted and bracket arguments), and where that text starts."""

    text: str
    start: int
    quoted: bool = False  #: a quoted or bracket argument (never a list of several words)


@dataclass(frozen=True, slots=True)
class CMakeCommand:
    """A command invocation: ``name(args)``, the name lower-cased (CMake's are not case
    sensitive), ``start``/``end`` the offsets of the name as written."""

    name: str
    start: int
    end: int
    args: tuple[CMakeArgument, ...]


@dataclass(frozen=True, slots=True)
class CMakeSource:
    """A ``CMakeLists.txt`` / ``*.cmake`` file as the ``cmake`` surface hands it to kinds."""

    code: str  #: the text with comments blanked out, offsets kept
    commands: tuple[CMakeCommand, ...]


@runtime_checkable
class CMakeKind(Protocol):
    """A match kind for the ``cmake`` surface."""

    def match_cmake(self, source: CMakeSource) -> Iterator[Span]: ...
