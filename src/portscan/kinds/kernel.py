"""The ``kernel`` kind: a regular expression over CUDA/C++ kernel sources."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from portscan.bounded import Regex
from portscan.kinds.common import code_list
from portscan.kinds.needles import Needle, needles, present
from portscan.kinds.sites import KernelSource, Span
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import IDENTIFIER, PatternError, TableReader


@dataclass(frozen=True, slots=True)
class KernelPattern:
    """A regular expression over CUDA/C++ kernel sources (``.cu``, ``.cuh`` and the C++
    files an extension builds), with comments and string literals blanked out first."""

    kind: ClassVar[str] = "kernel"
    surfaces: ClassVar[frozenset[str]] = frozenset({"cuda", "cpp"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched"})
    regex: Regex
    #: only in code compiled as CUDA (``.cu``/``.cuh`` and the headers they include), not in
    #: a plain C++ file that mentions CUDA: its inline ``asm`` is host (x86/Arm) assembly
    device_only: bool = False
    #: bytes: a match followed by an argument (``, size``) that is a constant no larger than
    #: this is no match (``cudaFuncSetAttribute(k, ...MaxDynamicSharedMemorySize, shared)``
    #: after ``int shared = 16 * (256 * 8 + 32 * 9);`` asks for what every AMD GPU has)
    fits_in: int = 0
    #: a match that ends at a name (``cudaFuncSetAttribute(kernel, ...``) declared or last
    #: assigned as a ``void*`` earlier in the file (``auto kernel = (void*)k<T>;``, a ``const
    #: void* func`` parameter) is no match
    unless_void_pointer: bool = False
    #: a match that defines a name (``#define WARP_SIZE 32``, ``constexpr int kWarp = 32;``)
    #: every warp shuffle of the file passes as its width (``__shfl_xor_sync(mask, v, o,
    #: WARP_SIZE)``, one shuffle at least) is no match: the name sizes a logical warp, and
    #: shuffles with that width stay inside it on 64-lane wavefronts
    unless_shuffle_width: bool = False
    #: a match whose size is no known constant, in a function that reads the device's
    #: shared-memory limit before it (``cudaDevAttrMaxSharedMemoryPerBlockOptin``,
    #: ``...PerMultiprocessor``, ``cudaDeviceProp``'s ``sharedMemPerBlockOptin``), is no match:
    #: the request is sized or checked against the GPU it runs on, 64 KB of LDS on MI200/MI300
    #: included (a constant above ``fits_in`` is sized by nothing and stays a match)
    unless_limit_queried: bool = False
    #: every match in one file is one finding, at the first, the others listed in ``uses``:
    #: a library's headers, included again and again, are one dependency of the file
    once_per_file: bool = False
    #: identifier prefixes of the library a match pulls in (``cudnn``, ``CUDNN_``): in a file
    #: it matches, other rules' matches of such identifiers (PS924's unmapped cuDNN calls)
    #: under the same guard are listed as uses of its finding, not findings of their own
    api_prefixes: tuple[str, ...] = ()
    #: literal text one piece of which every match contains: a file without any is skipped
    needles: tuple[Needle, ...] = field(default=(), compare=False)

    @classmethod
    def read(cls, r: TableReader) -> KernelPattern:
        regex = r.regex("regex")
        if regex is None:
            raise PatternError(r.key("regex"), "missing required key")
        fits_in = r.raw("fits_in", False) or 0
        if isinstance(fits_in, bool) or not isinstance(fits_in, int) or fits_in < 0:
            raise PatternError(r.key("fits_in"), "expected a number of bytes (an integer >= 0)")
        return cls(regex=regex, device_only=r.flag("device_only"), fits_in=fits_in,
                   unless_void_pointer=r.flag("unless_void_pointer"),
                   unless_shuffle_width=r.flag("unless_shuffle_width"),
                   unless_limit_queried=r.flag("unless_limit_queried"), once_per_file=r.flag("once_per_file"),
                   api_prefixes=r.texts("api_prefixes", required=False, check=IDENTIFIER, what="identifier prefix"),
                   needles=needles(regex.pattern, regex.flags))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        where = ("`.cu`/`.cuh` files and the headers they include" if self.device_only
                 else "`.cu`/`.cuh` files and the C++ sources CUDA extensions build")
        fits = (f" A match followed by an argument that is a constant of at most {self.fits_in:,} bytes (a literal "
                "expression, or a name assigned one earlier in the file) is not reported." if self.fits_in else "")
        void = (" A match that ends at a name declared or last assigned as a `void*` earlier in the file "
                "(`auto kernel = (void*)k<T>;`, a `const void* func` parameter) is not reported."
                if self.unless_void_pointer else "")
        width = (" A match that defines a name every warp shuffle of the file passes as its width "
                 "(`__shfl_xor_sync(mask, v, o, WARP_SIZE)`; one shuffle at least) is not reported: a logical "
                 "warp." if self.unless_shuffle_width else "")
        limit = (" A match whose size is no known constant, in a function that reads the device's shared-memory "
                 "limit before it (`cudaDevAttrMaxSharedMemoryPerBlockOptin`, `sharedMemPerBlockOptin`, ...), is not "
                 "reported: the request is sized or checked against the GPU it runs on." if self.unless_limit_queried
                 else "")
        once = (" All matches in one file are one finding, at the first, the others listed with it."
                if self.once_per_file else "") + (
                " In a file it matches, other rules' matches of identifiers starting with "
                f"{code_list(self.api_prefixes)} are listed with its finding." if self.api_prefixes else "")
        return (f"Kernel source text matching `{self.regex.pattern}` in {where}, with comments and strings "
                f"ignored.{fits}{void}{width}{limit}{once}")

    def match_kernel(self, source: KernelSource) -> Iterator[Span]:
        if (self.device_only and not source.device) or not present(self.needles, source.code, source.lowered):
            return
        for match in self.regex.finditer(source.code):
            size = constant_argument(source.code, match.end()) if self.fits_in else None
            if size is not None and size <= self.fits_in:
                continue
            if self.unless_void_pointer and void_pointer_at(source.code, match.end() - 1, match.start()):
                continue
            if self.unless_shuffle_width and shuffles_pass_width(source.code, match.group(0)):
                continue
            if self.unless_limit_queried and size is None and limit_queried(source.code, match.start()):
                continue
            yield match.start(), match.end()


#: a warp shuffle call and where its arguments start
_SHUFFLE = re.compile(r"\b__shfl(?:_xor|_up|_down)?(?:_sync)?[ \t]*\(")
#: the name a match defines: ``#define NAME``, or ``NAME =`` / ``NAME{``
_DEFINED_NAME = re.compile(r"#[ \t]*define[ \t]+(\w+)|(\w+)[ \t]*[={]")


def shuffles_pass_width(code: str, matched: str) -> bool:
    """Does every warp shuffle in ``code`` (one at least) pass the name ``matched`` defines
    as its last argument, the width (four arguments for ``__shfl*_sync``, three otherwise)?"""
    found = _DEFINED_NAME.search(matched)
    name = (found.group(1) or found.group(2)) if found else None
    calls = list(_SHUFFLE.finditer(code))
    if name is None or not calls:
        return False
    for call in calls:
        arguments = _arguments(code, call.end())
        wanted = 4 if call.group(0).rstrip("( \t").endswith("_sync") else 3
        if arguments is None or len(arguments) != wanted or arguments[-1].strip("() \t\n") != name:
            return False
    return True


def _arguments(code: str, start: int) -> list[str] | None:
    """The top-level arguments of the call whose ``(`` ends at ``start`` (None: unbalanced
    within 400 characters)."""
    stop, begin, found = min(len(code), start + 400), start, []
    while True:
        end = _argument_end(code, begin, stop, ",")
        if end == stop:
            return None
        found.append(code[begin:end])
        if code[end] != ",":  # the call's closing bracket
            return found
        begin = end + 1


def _argument_end(code: str, start: int, stop: int, ends: str) -> int:
    """Where the argument starting at ``start`` ends: the first of ``ends`` outside
    brackets, a closing bracket of the call, or ``stop``."""
    depth = 0
    for i in range(start, stop):
        ch = code[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return i
            depth -= 1
        elif ch in ends and depth == 0:
            return i
    return stop


#: the device's opt-in or per-multiprocessor shared-memory limit, read at run time
_SMEM_LIMIT = re.compile(r"\b(?:cudaDevAttrMaxSharedMemoryPer(?:BlockOptin|Multiprocessor)"
                         r"|hipDeviceAttributeMaxSharedMemoryPer(?:BlockOptin|Multiprocessor)"
                         r"|CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_(?:BLOCK_OPTIN|MULTIPROCESSOR)"
                         r"|sharedMemPer(?:BlockOptin|Multiprocessor))\b")


def limit_queried(code: str, at: int) -> bool:
    """Does the function around ``at`` read the device's shared-memory limit before it?
    The function is taken to start after the last top-level block closed before ``at``
    (a ``}`` at the start of a line), or at the file's start."""
    closed = code.rfind("\n}", 0, at)
    return _SMEM_LIMIT.search(code, closed + 1 if closed >= 0 else 0, at) is not None


#: a plain name, not a call, a template, a qualified name or a member
_NAME = re.compile(r"[A-Za-z_]\w*\b(?!\s*(?:\(|<|::|\.|->|\[))")
#: a cast to ``void*`` (``(void*)k<T>``, ``(const void *)k``, ``reinterpret_cast<void*>(k)``)
_VOID_CAST = re.compile(r"\s*(?:\(\s*(?:const\s+)?void\s*(?:const\s*)?\*\s*\)"
                        r"|reinterpret_cast\s*<\s*(?:const\s+)?void\s*\*)")


def void_pointer_at(code: str, at: int, before: int) -> bool:
    """Is the plain name at ``at`` (not a call, template or member) declared or last
    assigned as a ``void*`` in ``code[:before]``?"""
    name = _NAME.match(code, at)
    if name is None:
        return False
    earlier = code[:before]
    assigned = _last_assignment(name.group(), earlier)
    if assigned is not None:
        return _VOID_CAST.match(assigned[1]) is not None
    return re.search(rf"\bvoid\s*\*\s*(?:const\s+)?{re.escape(name.group())}\b", earlier) is not None


#: C integer suffixes (``1024u``, ``48UL``)
_SUFFIX = re.compile(r"\b(\d+)(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?)\b")
#: what a size may be built with; anything else (a call, ``sizeof``, a cast) is unknown
_OPERATORS = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__,
              ast.FloorDiv: int.__floordiv__, ast.Mod: int.__mod__, ast.LShift: int.__lshift__,
              ast.RShift: int.__rshift__}
#: sizes beyond this are not byte counts a GPU could grant (and a shift stays cheap)
_LIMIT = 1 << 40


def constant_argument(code: str, end: int) -> int | None:
    """The value of the call argument right after ``end`` (``, 16 * 1024)``), when it is
    constant integer arithmetic or a name assigned such an expression earlier; else None."""
    rest = re.match(r"\s*,\s*", code[end:end + 400])
    if rest is None:
        return None
    start = end + rest.end()
    return _evaluate(code[start:_argument_end(code, start, min(len(code), start + 400), ",;")], code[:end], 3)


def _evaluate(text: str, before: str, depth: int) -> int | None:
    """Integer arithmetic in C (``/`` is integer division), names read from their last
    assignment in ``before`` (``depth`` levels deep). Read, never executed."""
    try:
        tree = ast.parse(_SUFFIX.sub(r"\1", text.strip()).replace("/", "//"), mode="eval")
    except (SyntaxError, ValueError):
        return None
    return _value(tree.body, before, depth)


def _value(node: ast.expr, before: str, depth: int) -> int | None:
    if isinstance(node, ast.Constant):
        value = node.value if type(node.value) is int else None
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _value(node.operand, before, depth)
        value = None if operand is None else -operand if isinstance(node.op, ast.USub) else operand
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _value(node.left, before, depth), _value(node.right, before, depth)
        if left is None or right is None or (right == 0 and isinstance(node.op, (ast.FloorDiv, ast.Mod))) \
                or (isinstance(node.op, (ast.LShift, ast.RShift)) and not 0 <= right < 64):
            return None
        value = _OPERATORS[type(node.op)](left, right)
    elif isinstance(node, ast.Name) and depth > 0:
        assigned = _last_assignment(node.id, before)
        value = None if assigned is None else _evaluate(assigned[1], before[:assigned[0]], depth - 1)
    else:
        value = None
    return value if value is not None and abs(value) < _LIMIT else None


def _last_assignment(name: str, before: str) -> tuple[int, str] | None:
    """(offset, expression) of the last ``name = expression;`` in ``before``."""
    found = list(re.finditer(rf"\b{re.escape(name)}\s*=(?!=)\s*([^;{{}}]+);", before))
    return (found[-1].start(), found[-1].group(1)) if found else None
