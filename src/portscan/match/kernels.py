"""CUDA/C++ kernel sources: regex rules over code with comments and string literals
blanked out, and CUDA API identifiers that PyTorch's hipify table does not map.
Findings inside ``#if``/``#ifdef`` groups that test the HIP/ROCm platform carry the
``vendor-branch`` guard, as in Python, and so do uses of a macro such a group defines (the
file's own HIP shim); those in a branch compiled only with NVTX carry
``fallback-equivalent``.

The hipify table is data generated from PyTorch's own mappings (``portscan.match.hipify``),
so the check runs the same with or without torch installed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from portscan.match import Match
from portscan.match.levels import FALLBACK_EQUIVALENT, GUARD_ORDER, VENDOR_BRANCH
from portscan.kinds.sites import DEFINE, KernelKind, KernelSource
from portscan.ruleset.schema import Rule

#: a preprocessor directive and its condition, with the lines a backslash continues it on
_DIRECTIVE = re.compile(r"(?m)^[ \t]*#[ \t]*(?P<word>if|ifdef|ifndef|elif|else|endif)\b"
                        r"(?P<condition>(?:[^\n]*\\\r?\n)*[^\n]*)$")
_VENDOR_MACRO = re.compile(r"(?i)rocm|hip|amdgcn|__gfx\w*__")
#: a macro that says the build has NVTX (``USE_NVTX``, ``HAVE_NVTX``, ``NVTX_ENABLED``)
_NVTX_MACRO = re.compile(r"\b\w*NVTX\w*\b")
_NOT_NVTX = re.compile(r"!\s*(?:defined\s*\(?\s*)?\w*NVTX")
#: a macro name that turns something off (``DISABLE_NVTX``, ``NO_NVTX``, ``NVTX_DISABLED``)
_OFF_WORD = re.compile(r"(?i)(?:^|_)(?:NO|DISABLED?|WITHOUT|SKIP)(?:_|$)")


#: a comment, a raw string (``R"(...)"``: jiterator and NVRTC sources kept as text) or a
#: string/char literal (unterminated ones end at the line's end)
_LEXEME = re.compile(r"""//[^\n]*|/\*.*?(?:\*/|\Z)|\b(?:u8|u|U|L)?R"([^()\\\s"]{0,16})\(.*?\)\1"|"""
                     r""""(?:\\.|[^"\\\n])*(?:"|$)|'(?:\\.|[^'\\\n])*(?:'|$)""",
                     re.DOTALL | re.MULTILINE)
_NOT_NEWLINE = re.compile(r"[^\n]")


def _spaces(text: str) -> str:
    return _NOT_NEWLINE.sub(" ", text) if "\n" in text else " " * len(text)


def strip_code(text: str) -> str:
    """Comments and string/char literals replaced by spaces (newlines kept), so offsets
    and lines stay valid; ``#include "..."`` paths are kept because rules look at them.
    One regular expression does the lexing: the kernel surface now reads every C++
    header with a CUDA token, so this must not be a character loop."""

    def blank(match: re.Match[str]) -> str:
        lexeme = match.group(0)
        quote = lexeme[0]
        if quote not in "\"'" or match.group(1) is not None:
            return _spaces(lexeme)
        if quote == '"':
            line_start = text.rfind("\n", 0, match.start()) + 1
            if text[line_start:match.start()].lstrip().startswith("#include"):
                return lexeme
        closed = len(lexeme) > 1 and lexeme[-1] == quote
        return quote + _spaces(lexeme[1:-1] if closed else lexeme[1:]) + (quote if closed else "")

    return _LEXEME.sub(blank, text)


_WORD = re.compile(r"\b\w+\b")


@dataclass(slots=True)
class _Group:
    """An open ``#if`` group while the directives are read."""

    start: int  #: offset of its ``#if``
    vendor: bool  #: a condition of it names the HIP/ROCm platform
    branch: int  #: where the branch being read starts
    nvtx: bool  #: that branch is compiled only with NVTX
    toolkit: bool = False  #: that branch is compiled only by NVIDIA's toolkit
    #: a branch before it always holds on ROCm (``#if CUDA_VERSION < 11000``): the later
    #: ones are compiled only by NVIDIA's toolkit
    settled: bool = False


#: macros only NVIDIA's compiler and runtime headers define; hipcc and hipify leave them
#: undefined (``CUDA_VERSION`` is not here: hipify turns it into ``TORCH_HIP_VERSION``)
_TOOLKIT_MACRO = re.compile(r"\b(?:__CUDACC_VER_(?:MAJOR|MINOR|BUILD)__|CUDART_VERSION)\b")
#: ``CUDA_VERSION >= 11000``: hipify makes it ``TORCH_HIP_VERSION``, which PyTorch sets to
#: major * 100 + minor (602 for ROCm 6.2; LoadHIP.cmake), and undefined it reads 0, so a
#: test against a CUDA release (four digits and more) is false on ROCm either way
_CUDA_RELEASE_TEST = re.compile(r"\bCUDA_VERSION\s*(?:>=?|==)\s*\(?\s*(\d+)")
_AT_LEAST = re.compile(r">=?|==")
_MAY_HOLD_WITHOUT = re.compile(r"\|\||<|!")
_DEFINED = re.compile(r"^\s*\(?\s*(?:defined\s*\(?\s*)?(\w+)")
#: ``!(...)``: a negated group, whose ``&&`` terms are no terms of the whole condition
_NEGATED_GROUP = re.compile(r"!\s*\(")


def _needs_toolkit(word: str, condition: str, toolkit_macros: frozenset[str]) -> bool:
    """Is the branch this directive opens compiled only by NVIDIA's toolkit: a version test
    that is false where the macro is undefined (``#if __CUDACC_VER_MAJOR__ >= 11``,
    ``#ifdef CUDART_VERSION``) or hipified (``#if CUDA_VERSION >= 11000``), or a test of a
    macro only such branches define (``#ifdef FLASHINFER_CP_ASYNC_ENABLED``)? Not with
    ``||``, ``!`` or ``<``, which may hold there; but an ``&&`` chain without ``||`` is
    false when one of its terms is (``defined(CUDA_VERSION) && CUDA_VERSION >= 11000 &&
    !defined(_MSC_VER)``)."""
    if word == "ifdef":
        name = condition.strip()
        return bool(_TOOLKIT_MACRO.fullmatch(name)) or name in toolkit_macros
    if word in ("if", "elif") and "&&" in condition and "||" not in condition and not _NEGATED_GROUP.search(condition):
        return any(_needs_toolkit(word, term, toolkit_macros) for term in condition.split("&&"))
    if word not in ("if", "elif") or _MAY_HOLD_WITHOUT.search(condition):
        return False
    if _TOOLKIT_MACRO.search(condition) and _AT_LEAST.search(condition):
        return True
    releases = [int(n) for n in _CUDA_RELEASE_TEST.findall(condition)]
    if releases and min(releases) >= 1000:
        return True
    tested = _DEFINED.match(condition)
    return tested is not None and tested.group(1) in toolkit_macros and "defined" in condition


#: ``CUDA_VERSION < 11000`` alone, true on ROCm (see ``_CUDA_RELEASE_TEST``)
_CUDA_RELEASE_BELOW = re.compile(r"\s*\(?\s*CUDA_VERSION\s*<=?\s*\(?\s*(\d+)\s*\)?\s*\)?\s*(?://.*|/\*.*)?")


def _holds_without_toolkit(word: str, condition: str) -> bool:
    """Does the branch this directive opens always hold on ROCm (``#if CUDA_VERSION <
    11000``, ``#ifndef CUDART_VERSION``), so that its ``#else`` is NVIDIA's only?"""
    if word == "ifndef":
        return bool(_TOOLKIT_MACRO.fullmatch(condition.strip()))
    below = _CUDA_RELEASE_BELOW.fullmatch(condition) if word in ("if", "elif") else None
    return below is not None and int(below.group(1)) >= 1000


def _names_nvtx(word: str, condition: str) -> bool:
    """Does this directive open a branch that is compiled only with NVTX (``#ifdef
    USE_NVTX``, ``#if HAVE_NVTX``), not one that is compiled only without it (``#if
    !defined(USE_NVTX)``, ``#ifdef DISABLE_NVTX``)?"""
    return (word in ("if", "ifdef", "elif") and _NOT_NVTX.search(condition) is None
            and any(_OFF_WORD.search(name) is None for name in _NVTX_MACRO.findall(condition)))


def guard_regions(code: str) -> list[tuple[int, int, str]]:
    """See :func:`_guard_regions`; macros defined only where NVIDIA's toolkit compiles are
    found first (a first read), since a branch that tests one is compiled only there too."""
    regions = _guard_regions(code, frozenset())
    toolkit = [(a, b) for a, b, guard in regions if guard == _TOOLKIT]
    if toolkit:
        inside: set[str] = set()
        outside: set[str] = set()
        for match in DEFINE.finditer(code):
            (inside if any(a <= match.start() < b for a, b in toolkit) else outside).add(match.group(1))
        regions = _guard_regions(code, frozenset(inside - outside))
    return [(a, b, VENDOR_BRANCH if guard == _TOOLKIT else guard) for a, b, guard in regions]


#: a branch only NVIDIA's toolkit compiles, while the regions are read (reported as vendor-branch)
_TOOLKIT = "toolkit"


def _guard_regions(code: str, toolkit_macros: frozenset[str]) -> list[tuple[int, int, str]]:
    """Offsets of the preprocessor regions that carry a guard, with that guard:

    - ``vendor-branch``: an ``#if``/``#ifdef`` group whose condition names the HIP/ROCm
      platform (``USE_ROCM``, ``__HIP_PLATFORM_AMD__``, ``__HIPCC__``, ``__gfx942__``...):
      every branch of it is code that already handles ROCm;
    - ``fallback-equivalent``: a branch compiled only when the build found NVTX (``#ifdef
      USE_NVTX``, ``#if HAVE_NVTX``): NVTX ranges are profiling annotations, so the build
      without them computes the same (the C++ form of a handler that substitutes an
      equivalent).
    - a branch compiled only by NVIDIA's toolkit (``#if __CUDACC_VER_MAJOR__ >= 11``,
      ``#ifdef CUDART_VERSION``, ``#if CUDA_VERSION >= 11000`` or the ``#else`` of ``#if
      CUDA_VERSION < 11000``, which hipify reads as ``TORCH_HIP_VERSION``, or a test of a
      macro only such branches define, as CUTLASS-style ``#define CP_ASYNC_ENABLED`` gates
      do), also ``vendor-branch``: hipcc never compiles it; the gate itself is what
      PS922/PS932 report.

    A condition continued with backslashes is read whole (Eigen's ``#if (defined(EIGEN_CUDACC)
    ...) \\`` then ``|| defined(EIGEN_HIPCC)``)."""
    regions: list[tuple[int, int, str]] = []
    stack: list[_Group] = []
    for directive in _DIRECTIVE.finditer(code):
        word, condition = directive.group("word"), directive.group("condition")
        if word in ("if", "ifdef", "ifndef"):
            stack.append(_Group(directive.start(), bool(_VENDOR_MACRO.search(condition)), directive.end(),
                                _names_nvtx(word, condition), _needs_toolkit(word, condition, toolkit_macros),
                                _holds_without_toolkit(word, condition)))
            continue
        if not stack:
            continue
        group = stack[-1]
        if group.nvtx:
            regions.append((group.branch, directive.start(), FALLBACK_EQUIVALENT))
        if group.toolkit:
            regions.append((group.branch, directive.start(), _TOOLKIT))
        group.branch = directive.end()
        if word == "elif":
            group.vendor = group.vendor or bool(_VENDOR_MACRO.search(condition))
            group.nvtx = _names_nvtx(word, condition)
            group.toolkit = group.settled or _needs_toolkit(word, condition, toolkit_macros)
            group.settled = group.settled or _holds_without_toolkit(word, condition)
        elif word == "else":
            group.nvtx = False
            group.toolkit = group.settled
        else:  # endif
            stack.pop()
            if group.vendor:
                regions.append((group.start, directive.end(), VENDOR_BRANCH))
    return regions


def _strongest(guards: Sequence[str]) -> str | None:
    return min(guards, key=GUARD_ORDER.index) if guards else None


#: Literal tokens one of which a C++ file (``.cpp``, ``.h``, ...) must contain to be read as a
#: kernel source: device code, warp intrinsics, CUDA headers, CUDA version macros. Plain
#: substring tests, because the torch tree alone has 9,000 headers (see ``mentions_cuda``).
CUDA_TOKENS = ("__global__", "__device__", "__shared__", "__shfl", "__ballot", "__activemask",
               "__syncwarp", "threadIdx", "blockDim", "warpSize", "nvcuda", "cooperative_groups",
               "cudaDevAttr", "cudaFuncAttr", "cublasLt", "CUDA_VERSION", "CUDART_VERSION",
               "__CUDA_ARCH", "__CUDACC", "include <cu", 'include "cu', "include <mma.h",
               "include <nvtx3/", 'include "nvtx3/')
#: a CUDA runtime API call (``cudaFuncSetAttribute(``); driver API users include ``<cuda.h>``
_CUDA_CALL = re.compile(r"\bcuda[A-Z]\w*[ \t]*\(")


def mentions_cuda(text: str) -> bool:
    """Does a C++ file hold a CUDA token? The prefilter of the ``cpp`` file kind: a
    header without one is never lexed (substring tests, then one regex only where the
    text says ``cuda`` at all)."""
    return any(token in text for token in CUDA_TOKENS) or (
        "cuda" in text and _CUDA_CALL.search(text) is not None)


def match_cpp(text: str, rules: Sequence[Rule], hipify: frozenset[str] | None) -> list[Match]:
    """A C++ source or header: read like a ``.cu`` file when it holds a CUDA token, but as
    host code (rules for device code only, such as inline PTX, skip it)."""
    return match_cuda(text, rules, hipify, device=False) if mentions_cuda(text) else []


def match_cuda(text: str, rules: Sequence[Rule], hipify: frozenset[str] | None, device: bool = True) -> list[Match]:
    code = strip_code(text)
    matches = _kernel_matches(code, rules, hipify, device)
    if not matches:
        return []  # no directive to read: most headers that mention CUDA match nothing
    regions = guard_regions(code)
    shim = shimmed(code, regions)
    guarded = [replace(m, guard=_strongest([guard for a, b, guard in regions if a <= m.start and m.end <= b]
                                           + ([VENDOR_BRANCH] if shim and not shim.isdisjoint(
                                               _WORD.findall(code, m.start, m.end)) else [])))
               for m in matches]
    return _library_uses(guarded, code)


def _library_uses(matches: list[Match], code: str) -> list[Match]:
    """Other rules' matches of a library's identifiers (``cudnnSetTensor4dDescriptor`` for
    PS924) in a file whose include of that library a rule with ``api_prefixes`` reports
    (PS917, cuDNN): the file's first such include, under the same guard, lists them as its
    uses, as an import lists the uses of a CUDA-only module."""
    owners: dict[tuple[str, str | None], tuple[Match, tuple[str, ...]]] = {}
    for m in sorted(matches, key=lambda m: m.start):
        prefixes: tuple[str, ...] = getattr(m.rule.pattern, "api_prefixes", ())
        if prefixes:
            owners.setdefault((m.rule.code, m.guard), (m, prefixes))
    if not owners:
        return matches
    also: dict[int, list[int]] = {}
    kept: list[Match] = []
    for m in matches:
        owner = next((o for (rule, guard), (o, prefixes) in owners.items()
                      if guard == m.guard and rule != m.rule.code and code.startswith(prefixes, m.start)), None)
        if owner is None:
            kept.append(m)
        else:
            also.setdefault(id(owner), []).append(m.start)
    return [replace(m, also=(*m.also, *also[id(m)])) if id(m) in also else m for m in kept]


def shimmed(code: str, regions: Sequence[tuple[int, int, str]]) -> frozenset[str]:
    """The names a HIP/ROCm ``#if`` group of the file defines as macros: the file's own HIP
    shim (ggml's ``#define __shfl_xor_sync(mask, var, laneMask, width) __shfl_xor(var,
    laneMask, width)`` and ``#define __CUDA_ARCH__ 1300`` under ``#if defined(GGML_USE_HIPBLAS)``),
    so a use of one anywhere in the file is what the shim turns it into on ROCm."""
    vendor = [(a, b) for a, b, guard in regions if guard == VENDOR_BRANCH]
    return frozenset(m.group(1) for a, b in vendor for m in DEFINE.finditer(code, a, b))


def _kernel_matches(code: str, rules: Sequence[Rule], hipify: frozenset[str] | None,
                    device: bool = True) -> list[Match]:
    """Every kind on this surface is a :class:`KernelKind` (a test checks); each finds its own.
    A rule that ``supersedes`` another replaces it where both match at the same offset."""
    source = KernelSource(code, hipify, device)
    matches = [Match(rule, start, end, subject="file" if getattr(rule.pattern, "once_per_file", False) else None)
               for rule in rules for start, end in cast(KernelKind, rule.pattern).match_kernel(source)]
    superseded = {(code, m.start) for m in matches for code in m.rule.supersedes}
    return [m for m in matches if (m.rule.code, m.start) not in superseded] if superseded else matches
