"""What a project ports itself, or ports beside: CUDA files that are one arm of a choice.

Project-level facts, like :mod:`portscan.gated`, whose files' findings take the
``vendor-branch`` guard:

- **ROCm siblings** (:func:`rocm_siblings`): a file named for CUDA beside the same name
  for ROCm (``full-cuda.Dockerfile`` and ``full-rocm.Dockerfile``,
  ``requirements-cuda.txt`` and ``requirements-rocm.txt``) is the NVIDIA arm of a choice
  the project already offers; so is one whose folder holds the same name for ROCm once
  the vendor words and the releases written after them are set aside
  (``requirements/cuda12_core.txt`` and ``requirements/rocm_core.txt``), and a container
  definition that names no vendor beside one that adds ROCm to its name (``Dockerfile``
  and ``Dockerfile.rocm``);
- **CUDA-version arms** (:func:`cuda_version_arms`): a file named for one CUDA release
  (``cu118-Linux.sh``, ``Dockerfile.cu121``, ``requirements-cuda12.1.txt``) is one arm of
  a matrix of CUDA builds: a port adds ROCm arms beside it, it does not edit it;
- **NVIDIA jobs of a CI that has AMD ones** (:func:`nvidia_ci_jobs`): where a CI folder
  holds files named for AMD GPUs (``.buildkite/scripts/amd-vllm-bench.sh``), its other
  files are the NVIDIA jobs beside them;
- **sources built for HIP** (:func:`hip_built`), below.

A project whose own CMake compiles its CUDA sources as HIP (llama.cpp's ``ggml-hip``:
``enable_language(HIP)``, ``file(GLOB ... "../ggml-cuda/*.cu")``,
``set_source_files_properties(... PROPERTIES LANGUAGE HIP)``; or, before CMake learnt HIP,
``find_package(hip)`` with ``set_source_files_properties(ggml-cuda.cu PROPERTIES LANGUAGE
CXX)`` and ``hip::device``, the shape llama.cpp had in 2023 and every project vendoring it
kept) already ports them: what
looks CUDA-only in them is under a HIP-excluding ``#if``, mapped by the project's own
vendor header, or deliberate. Those sources, the project headers they include, and the
CMake files that build the same sources for another vendor (the CUDA backend's own
``CMakeLists.txt``) are vendor-branch code, a project-level fact like
:mod:`portscan.gated`. Only CMake builds are read; a ``CUDAExtension`` that torch
hipifies at build time is not a port, and its findings stay.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from portscan.discover import SourcePath
from portscan.headers import cuda_headers

#: a CMake file that compiles for HIP
_HIP_BUILD = re.compile(r"(?i)\benable_language\s*\(\s*HIP\b|\bLANGUAGES?\b[^)\n]*\bHIP\b"
                        r"|\bhip_add_(?:library|executable)\b")
#: a CMake file that finds HIP's own package (``find_package(hip)``, ``hip::device``)
_HIP_PACKAGE = re.compile(r"(?i)\bfind_package\s*\(\s*hip\b|\bhip::(?:device|host)\b")
#: ``set_source_files_properties(<sources> PROPERTIES LANGUAGE CXX|HIP)``: the sources it names
_AS_HIP = re.compile(r"(?i)\bset_source_files_properties\s*\(([^)]*?)\bPROPERTIES\b[^)]*?\bLANGUAGE\s+(?:CXX|HIP)\b")
#: a source path or glob pattern naming CUDA sources in a CMake file
_CUDA_PATH = re.compile(r"""["']?([\w./${}*\-]+\.cuh?)["']?(?=[\s)])""")
#: ``file(GLOB_RECURSE ...)``: its patterns match in subdirectories too
_RECURSE = re.compile(r"(?i)\bfile\s*\(\s*GLOB_RECURSE\b[^)]*")


def ported_files(files: Sequence[SourcePath], built: frozenset[str]) -> frozenset[str]:
    """Every file (a path relative to the scan root) of the facts: ``built``, what
    :func:`hip_built` gives (the only one that reads files, so a caller may keep it in a
    cache), ROCm siblings, CUDA-version arms and the NVIDIA jobs of a CI that has AMD ones."""
    return (built | rocm_siblings(files) | cuda_version_arms(files) | _same_but_vendor(files)
            | nvidia_ci_jobs(files))


#: the top folders that hold a project's CI definitions and the scripts its jobs run
_CI_ROOTS = frozenset({".buildkite", ".github", ".gitlab", ".circleci", ".ci", "ci", ".jenkins", "jenkins"})


def nvidia_ci_jobs(files: Sequence[SourcePath]) -> frozenset[str]:
    """The CI files (not Python modules) that name no AMD GPU, under a CI folder
    (``.buildkite/``, ``.github/``, ``ci/``, ...) that holds files naming one
    (``.buildkite/scripts/amd-vllm-bench.sh``, ``.github/workflows/build_rocm_artifacts.yml``):
    the project's CI already runs on AMD GPUs, beside NVIDIA jobs that stay NVIDIA's. Read
    from paths only: a script the AMD jobs share is not told apart."""
    by_root: dict[str, list[SourcePath]] = {}
    for f in files:
        top, _, rest = f.rel.partition("/")
        if rest and top.lower() in _CI_ROOTS and f.kind != "python":
            by_root.setdefault(top, []).append(f)
    found: set[str] = set()
    for group in by_root.values():
        amd = {f.rel for f in group if _AMD_IN_PATH.search(f.rel.partition("/")[2])}
        if amd:
            found.update(f.rel for f in group if f.rel not in amd)
    return frozenset(found)


def hip_built(files: Sequence[SourcePath], read: Callable[[Path], str | None], root: Path) -> frozenset[str]:
    """The files (paths relative to the scan root, as findings give them) a HIP build of
    the project's CMake compiles, the headers they include, and the other CMake files
    that build the same sources; ``read`` gives a file's text (None: unreadable)."""
    cmake = [(f, content) for f in files if f.kind == "cmake" and (content := read(f.path))]
    hip = {f.path for f, content in cmake if _HIP_BUILD.search(content)}
    rest = [(f, content) for f, content in cmake if f.path not in hip]
    top = root.resolve()
    sources = {p for f, content in cmake if f.path in hip
               for p in _cuda_sources(f.path, content) if p.is_relative_to(top)}
    sources |= {p for f, content in rest for p in _compiled_as_hip(f.path, content) if p.is_relative_to(top)}
    if not sources:
        return frozenset()
    built = sources | cuda_headers(sorted(sources), read)
    arms = {f.path.resolve() for f, content in rest
            if (mine := set(_cuda_sources(f.path, content))) and mine <= built}
    return frozenset(p.relative_to(top).as_posix() for p in built | arms if p.is_relative_to(top))


#: a distribution name as manifests write it (``cupy-rocm-7-0``, ``onnxruntime_rocm``)
_DISTRIBUTION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: the manifests whose names say what the project installs
_MANIFEST_KINDS = frozenset({"requirements", "pyproject", "setupcfg"})


def manifests(files: Sequence[SourcePath]) -> list[SourcePath]:
    """The files that say what the project installs: requirements files, ``pyproject.toml``,
    ``setup.cfg`` and ``setup.py``."""
    return [f for f in files
            if f.kind in _MANIFEST_KINDS or f.kind == "python" and f.rel.rsplit("/", 1)[-1] == "setup.py"]


def rocm_builds_listed(texts: Iterable[str], globs: Iterable[str]) -> frozenset[str]:
    """Which of ``globs`` (lower-case distribution names or globs: ``cupy-rocm-*``) a word
    of the manifests' ``texts`` matches, ``_`` read as ``-``: the project installs a ROCm
    build of that library itself (LMCache's ``requirements/rocm_core.txt`` lists
    ``cupy-rocm-7-0``)."""
    wanted = tuple(globs)
    names = {word.lower().replace("_", "-") for text in texts for word in _DISTRIBUTION.findall(text)}
    return frozenset(g for g in wanted if any(fnmatch.fnmatchcase(name, g) for name in names))


def _compiled_as_hip(cmake_file: Path, content: str) -> Iterator[Path]:
    """The ``.cu`` files a CMake file that finds HIP's package hands to the HIP compiler by
    making them C++ sources (``set_source_files_properties(ggml-cuda.cu PROPERTIES LANGUAGE
    CXX)`` beside ``find_package(hip)``: hip-clang compiles them); only those, as such a file
    usually builds the CUDA arm too, with sources of its own."""
    if _HIP_PACKAGE.search(content):
        code = _strip_comments(content)
        for match in _AS_HIP.finditer(code):
            named = _VARIABLE.sub(lambda m: _values(m.group(1), code), match.group(1))
            yield from _cuda_sources(cmake_file, named + " ")


#: a variable read (``${GGML_SOURCES_ROCM}``)
_VARIABLE = re.compile(r"\$\{(\w+)\}")


def _values(name: str, code: str) -> str:
    """What a CMake file puts in a list variable (``file(GLOB NAME ...)``, ``set(NAME ...)``,
    ``list(APPEND NAME ...)``), as the argument text, for the source paths in it."""
    where = re.compile(rf"(?i)\b(?:file\s*\(\s*GLOB(?:_RECURSE)?|set\s*\(|list\s*\(\s*APPEND)\s+{name}\b([^)]*)")
    return " ".join(m.group(1) for m in where.finditer(code)) + " "


def _cuda_sources(cmake_file: Path, content: str) -> Iterator[Path]:
    """The ``.cu``/``.cuh`` files a CMake file names or globs, resolved from its folder
    (``${CMAKE_CURRENT_SOURCE_DIR}`` and the like read as that folder)."""
    folder = cmake_file.parent
    recursive = " ".join(m.group() for m in _RECURSE.finditer(content))
    for match in _CUDA_PATH.finditer(_strip_comments(content)):
        pattern = re.sub(r"\$\{CMAKE_CURRENT_(?:SOURCE|LIST)_DIR\}/?", "", match.group(1))
        if "${" in pattern:
            continue  # another variable: where it points is not known here
        full = os.path.normpath(os.path.join(folder, pattern))
        if any(c in pattern for c in "*?["):
            found = glob.glob(full)
            if match.group(1) in recursive:
                head, tail = os.path.split(full)
                found += glob.glob(os.path.join(head, "**", tail), recursive=True)
            yield from (Path(p).resolve() for p in found if os.path.isfile(p))
        elif os.path.isfile(full):
            yield Path(full).resolve()


def _strip_comments(content: str) -> str:
    return re.sub(r"(?m)#.*$", "", content)


#: how a file name says CUDA, and what its ROCm counterpart says instead
_CUDA_WORD = re.compile(r"cuda|nvidia", re.IGNORECASE)
_ROCM_WORDS = ("rocm", "hip", "amd")


#: a vendor word in a file name, with the release written after it (``cuda12``, ``rocm-6.2``)
_VENDOR_TOKEN = re.compile(r"(?i)(?<![a-z])(cuda|nvidia|rocm|hip|amd)(?:[-_.]?\d+(?:\.\d+)*)?(?![a-z])")
_CUDA_VENDORS = frozenset({"cuda", "nvidia"})
#: an AMD GPU named in a path, as a vendor word or an Instinct model (``amd-vllm-bench.sh``,
#: ``k3_tests/amd/``, ``build_rocm_artifacts.yml``, ``mi300x/``)
_AMD_IN_PATH = re.compile(rf"(?i)(?<![a-z])(?:{'|'.join(_ROCM_WORDS)}|mi\d{{3}}x?)(?:[-_.]?\d+(?:\.\d+)*)?(?![a-z])")
#: file kinds whose plain file beside a ROCm-named one is the other arm: an image is built
#: from one definition, never from two (a requirements file, by contrast, is often the
#: shared base the ROCm one includes)
_WHOLE_DEFINITIONS = frozenset({"dockerfile", "apptainer"})


def _without_vendor(key: str) -> set[str]:
    """A name with its vendor word (``\\0``) taken out with the separator before or after it
    (``dockerfile.\\0`` -> ``dockerfile``; ``dockerfile.\\0-lightweight`` -> ``dockerfile.lightweight``)."""
    return {re.sub(r"[-_.]\0", "", key, count=1), re.sub(r"\0[-_.]", "", key, count=1)} - {key}


def _same_but_vendor(files: Sequence[SourcePath]) -> set[str]:
    """Files named for CUDA whose folder holds the same name for ROCm once the vendor
    words and the releases after them are set aside (``requirements/cuda12_core.txt`` and
    ``requirements/rocm_core.txt``), and container definitions without a vendor in their
    name beside one that adds ROCm to it (``docker/Dockerfile`` and
    ``docker/Dockerfile.rocm``, ``Dockerfile.lightweight`` and ``Dockerfile.rocm-lightweight``;
    not where a CUDA-named one is there too: llama.cpp's ``full.Dockerfile`` beside
    ``full-cuda.Dockerfile`` and ``full-rocm.Dockerfile`` is the CPU image)."""
    by_folder: dict[str, list[SourcePath]] = {}
    for f in files:
        if f.kind != "python":
            by_folder.setdefault(f.rel.rpartition("/")[0], []).append(f)
    found: set[str] = set()
    for group in by_folder.values():
        # each name once: (file, the name with its vendor words as \0, those vendor words)
        named = {name: (f, _VENDOR_TOKEN.sub("\0", name), {m.group(1).lower() for m in _VENDOR_TOKEN.finditer(name)})
                 for f in group for name in [f.rel.rpartition("/")[2].lower()]}
        rocm_keys = {key for _, key, vendors in named.values() if vendors - _CUDA_VENDORS}
        # a CUDA-named definition as well: the plain one is the CPU image
        cpu = {plain for _, key, vendors in named.values() if vendors & _CUDA_VENDORS for plain in _without_vendor(key)}
        plain_arms = {(plain, f.kind) for f, key, _ in named.values() if key in rocm_keys
                      and f.kind in _WHOLE_DEFINITIONS for plain in _without_vendor(key) if plain not in cpu}
        for name, (f, key, vendors) in named.items():
            cuda_named = bool(vendors) and vendors <= _CUDA_VENDORS
            if cuda_named and key in rocm_keys or not vendors and (name, f.kind) in plain_arms:
                found.add(f.rel)
    return found


def rocm_siblings(files: Sequence[SourcePath]) -> frozenset[str]:
    """The files (paths relative to the scan root, as findings give them; not Python
    modules) whose path says CUDA where the project has the same path with ROCm, HIP or
    AMD in its place, in the file's name, its folder's or both (``Dockerfile.cuda`` / ``Dockerfile.rocm``;
    Horovod's ``ops/cuda/CMakeLists.txt`` / ``ops/rocm/CMakeLists.txt`` and
    ``ops/cuda/cuda_kernels.cu`` / ``ops/rocm/hip_kernels.cu``)."""
    # Python modules are left to portscan.gated: who imports them decides, not their name
    named = [f.rel for f in files if f.kind != "python" and _CUDA_WORD.search(f.rel)]
    if not named:
        return frozenset()
    present = {f.rel.lower() for f in files}
    found = set()
    for rel in named:
        parts = rel.lower().split("/")
        folder, name = "/".join(parts[:-2]), parts[-2:]
        if any(posixpath.join(folder, *candidate) in present for candidate in _counterparts(name)):
            found.add(rel)
    return frozenset(found)


#: a CUDA release in a file name: ``cu118``, ``cu121``, ``cuda11.8``, ``cuda-12.1``
_CUDA_RELEASE = re.compile(r"(?i)(?:^|[^a-z0-9])(?:cu\d{2,3}|cuda[-_.]?\d{1,2}\.\d)(?![a-z0-9])")


def cuda_version_arms(files: Sequence[SourcePath]) -> frozenset[str]:
    """The files (not Python modules: who imports those decides) whose name says which
    CUDA release they serve (``.github/workflows/cuda/cu117-Linux.sh``, the PyG projects'
    per-release CI scripts; ``Dockerfile.cu121``): one arm of a matrix of CUDA builds."""
    return frozenset(f.rel for f in files if f.kind != "python" and _CUDA_RELEASE.search(f.rel.rsplit("/", 1)[-1]))


def _counterparts(parts: list[str]) -> Iterator[list[str]]:
    """The file name and its folder's with each CUDA word replaced by a ROCm one (each
    part on its own; at least one replaced)."""
    options = [[part] + ([_CUDA_WORD.sub(w, part) for w in _ROCM_WORDS] if _CUDA_WORD.search(part) else [])
               for part in parts]
    for choice in itertools.product(*options):
        if list(choice) != parts:
            yield list(choice)
