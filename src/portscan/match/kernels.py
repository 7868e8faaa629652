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


def strip_code(text: str) -> str:
    """Comments and string/char literals replaced by spaces (newlines kept), so offsets
    and lines stay valid; ``#include "..."`` paths are kept because rules look at them."""
    out = list(text)
    i, n = 0, len(text)
    line_start = 0
    while i < n:
        char = text[i]
        if char == "\n":
            line_start = i + 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = ["\n" if c == "\n" else " " for c in text[i:end]]
            i = end
        elif char in "\"'":
            if char == '"' and text[line_start:i].lstrip().startswith("#include"):
                end = text.find('"', i + 1)
                i = n if end < 0 else end + 1
                continue
            j = i + 1
            while j < n and text[j] != char and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            end = min(j + 1, n)
            out[i + 1:end - 1] = " " * max(0, end - i - 2)
            i = end
        else:
            i += 1
    return "".join(out)


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


def match_cuda(text: str, rules: Sequence[Rule], hipify: frozenset[str] | None) -> list[Match]:
    code = strip_code(text)
    matches = _kernel_matches(code, rules, hipify)
    regions = vendor_regions(code)
    return [Match(m.rule, m.start, m.end, m.variables,
                  VENDOR_BRANCH if any(a <= m.start and m.end <= b for a, b in regions) else None)
            for m in matches]


def _kernel_matches(code: str, rules: Sequence[Rule], hipify: frozenset[str] | None) -> list[Match]:
    """Every kind on this surface is a :class:`KernelKind` (a test checks); each finds its own."""
    source = KernelSource(code, hipify)
    return [Match(rule, start, end) for rule in rules
            for start, end in cast(KernelKind, rule.pattern).match_kernel(source)]
