"""Vendored copies of libraries: CUTLASS under ``third_party/cutlass``, Eigen, gloo.

A project that vendors a C++ library with GPU code (a git submodule checked out, or
files shipped in its sdist) holds thousands of that library's own CUDA sites: NATTEN's
sdist carries CUTLASS, whose headers include one another 6,600 times. None of them is a
porting site of the project. A CUDA-only library is replaced as a whole on ROCm (CUTLASS
by Composable Kernel or hipBLASLt, CUB by hipCUB, Thrust by rocThrust), a decision the
project's own uses of it carry -- its ``#include <cutlass/...>`` lines, its
``.gitmodules`` entry, its CMake -- which stay reported; a library that builds for ROCm
itself (Eigen's HIP paths, gloo's ``USE_ROCM``) compiles its CUDA-only branches out under
hipcc. So findings inside such a copy take the ``vendored`` guard (info, never
rewritten), a project-level fact like :mod:`portscan.gated` and :mod:`portscan.ported`.

A copy is found by a file only that library has (``vendored-libraries.toml``), among
the files the walk found, in a folder named for the library; the scan root itself is
never a copy (scanning CUTLASS's own repository reports CUTLASS).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from portscan.config import tomllib  # tomli before Python 3.11
from portscan.discover import SourcePath

LIBRARIES_TABLE = Path(__file__).resolve().parent / "vendored-libraries.toml"


@dataclass(frozen=True, slots=True)
class Library:
    """A library with GPU code a project may vendor."""

    name: str
    marker: str  #: a file only the library has, as a path from its own root ("" for none)
    rocm: str  #: what replaces it on ROCm, or its own ROCm build
    reference: str
    #: single files that are copies of the library wherever they sit (CMake's own
    #: ``FindCUDA.cmake``), as a file name or the end of a path
    files: tuple[str, ...] = ()


@functools.cache
def libraries() -> tuple[Library, ...]:
    """The table of ``vendored-libraries.toml``."""
    table = tomllib.loads(LIBRARIES_TABLE.read_text(encoding="utf-8"))
    return tuple(Library(name, row.get("marker", ""), row["rocm"], row["reference"], tuple(row.get("files", ())))
                 for name, row in table.items())


def vendored_roots(files: Sequence[SourcePath]) -> dict[str, Library]:
    """The folders (paths relative to the scan root) that hold a copy of a library of the
    table, with that library: each discovered file whose path ends in a library's
    marker names one, if the folder is named for the library too (``third_party/cutlass``,
    ``csrc/cutlass``, ``3rdparty/NVTX``; a project's own ``csrc/cub/cub.cuh`` does not make
    ``csrc`` a copy of CUB); a file named as one of a library's single-file copies is one
    itself (``cmake/Modules/FindCUDA.cmake``). Cheap: a suffix test per file."""
    found: dict[str, Library] = {}
    for library in libraries():
        tail = "/" + library.marker
        copies = tuple("/" + name for name in library.files)
        for source in files:
            if library.marker and source.rel.endswith(tail):
                root = source.rel[:-len(tail)]
                if library.name in root.rsplit("/", 1)[-1].lower():
                    found.setdefault(root, library)
            if copies and ("/" + source.rel).endswith(copies):
                found.setdefault(source.rel, library)
    return found


def vendored_library(path: str, roots: dict[str, Library]) -> Library | None:
    """The vendored library a file (a path relative to the scan root) belongs to, if any:
    a copy of it, or a file in a folder that holds one."""
    parts = path.split("/")
    for depth in range(len(parts), 0, -1):
        library = roots.get("/".join(parts[:depth]))
        if library is not None:
            return library
    return None
