"""CUDA/C++ kernel sources: regex rules over code with comments and string literals
blanked out, and CUDA API identifiers that PyTorch's hipify table does not map.
Findings inside ``#if``/``#ifdef`` groups that test the HIP/ROCm platform carry the
``vendor-branch`` guard, as in Python.

The hipify table is data generated from PyTorch's own mappings (``portscan.match.hipify``),
so the check runs the same with or without torch installed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

from portscan.match import Match
from portscan.match.levels import VENDOR_BRANCH
from portscan.kinds.sites import KernelKind, KernelSource
from portscan.ruleset.schema import Rule

_DIRECTIVE = re.compile(r"(?m)^[ \t]*#[ \t]*(?P<word>if|ifdef|ifndef|elif|else|endif)\b(?P<condition>.*)$")
_VENDOR_MACRO = re.compile(r"(?i)rocm|hip|amdgcn|__gfx\w*__")


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


def vendor_regions(code: str) -> list[tuple[int, int]]:
    """Offsets of ``#if``/``#ifdef`` groups whose condition names the HIP/ROCm platform
    (``USE_ROCM``, ``__HIP_PLATFORM_AMD__``, ``__HIPCC__``, ``__gfx942__``...): every
    branch of such a group is code that already handles ROCm."""
    regions: list[tuple[int, int]] = []
    stack: list[tuple[int, bool]] = []  # (start of the group, condition names the vendor)
    for directive in _DIRECTIVE.finditer(code):
        word, condition = directive.group("word"), directive.group("condition")
        if word in ("if", "ifdef", "ifndef"):
            stack.append((directive.start(), bool(_VENDOR_MACRO.search(condition))))
        elif word == "elif" and stack:
            start, vendor = stack[-1]
            stack[-1] = (start, vendor or bool(_VENDOR_MACRO.search(condition)))
        elif word == "endif" and stack:
            start, vendor = stack.pop()
            if vendor:
                regions.append((start, directive.end()))
    return regions


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
    regions = vendor_regions(code)
    return [Match(m.rule, m.start, m.end, m.variables,
                  VENDOR_BRANCH if any(a <= m.start and m.end <= b for a, b in regions) else None)
            for m in matches]


def _kernel_matches(code: str, rules: Sequence[Rule], hipify: frozenset[str] | None,
                    device: bool = True) -> list[Match]:
    """Every kind on this surface is a :class:`KernelKind` (a test checks); each finds its own.
    A rule that ``supersedes`` another replaces it where both match at the same offset."""
    source = KernelSource(code, hipify, device)
    matches = [Match(rule, start, end) for rule in rules
               for start, end in cast(KernelKind, rule.pattern).match_kernel(source)]
    superseded = {(code, m.start) for m in matches for code in m.rule.supersedes}
    return [m for m in matches if (m.rule.code, m.start) not in superseded] if superseded else matches
