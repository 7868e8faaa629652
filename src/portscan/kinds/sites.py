"""What a surface hands to the kinds that apply to it, and what those kinds answer.

A surface (the matcher of a file kind) reads a file once into sites; each kind that
applies to the surface finds its matches among them. The kind does the matching, the
surface only reads and locates, so a new kind needs no edit to the surface.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.MULTILINE)

Span = tuple[int, int]  #: character offsets ``start, end`` in the file's text


@dataclass(frozen=True, slots=True)
class KernelSource:
    """A CUDA/C++ source as the ``cuda`` surface hands it to kinds."""

    code: str  #: the text with comments and string literals blanked out, offsets kept
    hipify: frozenset[str] | None = None  #: CUDA names hipify maps; None: no table

    def defined_macros(self) -> set[str]:
        """Names the file ``#define``s itself (not CUDA API even when they look it)."""
        return set(_DEFINE.findall(self.code))


@runtime_checkable
class KernelKind(Protocol):
    """A match kind for the ``cuda`` surface."""

    def match_kernel(self, source: KernelSource) -> Iterator[Span]: ...
