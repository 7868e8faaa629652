"""Reading, decoding and parsing source files, and locating CST nodes in them.

Failures are values: :class:`SourceError` carries the kind and a message a user can
act on, and the caller turns it into a per-file error without stopping the scan.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import gc
import importlib.util
import io
import re
import sys
import threading
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar


from portscan.model import Span

if TYPE_CHECKING:
    import libcst as cst

_NEWLINE = re.compile(r"\r\n|\r|\n")
_PY2_HINTS = re.compile(
    r"^[ \t]*(print[ \t]+[\"'\w]|print[ \t]*>>|exec[ \t]+[\"']|except[ \t]+[\w.]+[ \t]*,[ \t]*\w+[ \t]*:)",
    re.MULTILINE,
)


class SourceError(Exception):
    """A file that cannot be scanned. ``kind`` is read, binary, decode or parse."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SourceError("read", f"cannot read file: {exc.strerror or exc}") from None


def python_encoding(data: bytes) -> str:
    """The codec Python reads this source with (``utf-8-sig`` keeps a BOM); raises
    SyntaxError for a bad coding cookie."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding


def decode_python(data: bytes) -> str:
    """Decode as Python does: BOM, then a PEP 263 coding cookie, else UTF-8."""
    if b"\x00" in data:
        raise SourceError("binary", "binary content (NUL bytes) in a source file")
    try:
        encoding = python_encoding(data)
    except SyntaxError as exc:
        raise SourceError("decode", f"bad encoding declaration: {exc.msg}") from None
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError("decode", f"cannot decode as {encoding}: {exc}") from None


#: Past these, a file is first checked with CPython's own parser (see check_nesting).
MAX_BRACKET_DEPTH = 100
MAX_CONTINUED_LINES = 3000
MAX_LINE_LENGTH = 10_000
_NESTING_CHARS = re.compile(r"[^()\[\]{}\n\\]+")


def nesting(text: str) -> tuple[int, int]:
    """Approximate (bracket depth, longest multi-line statement in lines); brackets
    inside strings count too, so this is an upper bound, cheap enough for every file."""
    depth = max_depth = run = max_run = 0
    previous = ""
    for char in _NESTING_CHARS.sub("", text):
        if char == "\n":
            if depth or previous == "\\":
                run += 1
                max_run = max(max_run, run)
            else:
                run = 0
        elif char in "([{":
            depth += 1
            max_depth = max(max_depth, depth)
        elif char != "\\" and depth:
            depth -= 1
        previous = char
    return max_depth, max_run


def check_nesting(text: str) -> None:
    """Refuse input that would overflow the native parser's stack.

    libcst's parser recurses natively and crashes the process (it cannot raise) on
    code nested a couple of thousand levels deep. CPython's parser fails cleanly
    there, and everything it accepts is shallow enough for libcst, so suspicious
    files are parsed by CPython first.
    """
    depth, run = nesting(text)
    longest = max(map(len, _NEWLINE.split(text)), default=0)
    if depth <= MAX_BRACKET_DEPTH and run <= MAX_CONTINUED_LINES and longest <= MAX_LINE_LENGTH:
        return
    try:
        compile(text, "<portscan>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        raise SourceError("parse", f"code nested too deeply to parse safely ({reason})") from None


def decode_text(data: bytes) -> str:
    """Decode a non-Python text file: UTF-8 (BOM dropped); undecodable bytes become
    U+FFFD so a stray Latin-1 comment does not stop the scan."""
    if b"\x00" in data:
        raise SourceError("binary", "binary content (NUL bytes) in a text file")
    return data.decode("utf-8-sig", errors="replace")


def lazy_libcst() -> ModuleType:
    """libcst, loaded on first use of one of its names (``importlib``'s ``LazyLoader``):
    the match kinds name its node classes at module level, yet a scan with nothing to
    parse (every file cached or prefiltered out) never imports it."""
    loaded = sys.modules.get("libcst")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("libcst")
    assert spec is not None and spec.loader is not None
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["libcst"] = module
    loader.exec_module(module)
    return module


#: how a scan parses Python: ``ast`` builds a view of CPython's tree with LibCST's node
#: classes (:mod:`portscan.leancst`, several times faster), ``libcst`` parses with LibCST
#: itself (the parser of record, and of every rewrite); the findings are the same
PARSERS = ("ast", "libcst")


def parse_for_matching(text: str, parser: str = "ast") -> cst.Module:
    """The module the matcher walks: a view of CPython's tree, or LibCST's own tree where
    ``parser`` asks for it or the view cannot be had (CPython rejects the code, or it
    uses syntax the view does not build); a syntax error becomes a :class:`SourceError`
    worded as LibCST words it."""
    if parser == "ast":
        from portscan import leancst

        try:
            return leancst.parse_module(text)
        except (SyntaxError, ValueError, MemoryError, leancst.Unsupported):
            pass  # LibCST decides, and words the error
    return parse_python(text)


def parse_python(text: str) -> cst.Module:
    """Parse with libcst; a syntax error becomes a :class:`SourceError`."""
    import libcst as cst  # here, not at the top: a fully cached scan never imports libcst

    check_nesting(text)
    try:
        with _unvalidated(cst.CSTNode):
            return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        hint = " (this looks like Python 2 code)" if _PY2_HINTS.search(text) else ""
        raise SourceError(
            "parse",
            f"syntax error at line {exc.raw_line}, column {exc.raw_column + 1}: "
            f"{exc.message}{hint}",
        ) from None
    except RecursionError:
        raise SourceError("parse", "expression nesting too deep to parse") from None


@contextlib.contextmanager
def _unvalidated(node_class: type) -> Iterator[None]:
    """Build LibCST nodes without their per-node validation while its own parser builds
    a tree: what the parser makes is valid by construction, and validation is about a
    fifth of a parse (LibCST's ``CSTNode.__post_init__`` says as much in its own PERF
    note). Nodes the fixes build later are validated as usual: the hook is back on leaving."""
    hook = node_class.__dict__.get("__post_init__")
    if hook is None:  # another LibCST layout: leave it alone
        yield
        return
    node_class.__post_init__ = lambda self: None  # type: ignore[attr-defined]
    try:
        yield
    finally:
        node_class.__post_init__ = hook  # type: ignore[attr-defined]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while one file is parsed and matched.

    LibCST builds hundreds of thousands of objects for a large file; each time the
    collector's thresholds trip it walks them all again, which costs about a third of a
    scan. The trees hold no reference cycles, so reference counting frees them anyway.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


T = TypeVar("T")
#: Room for the retry of a file that overflowed Python's default recursion limit.
DEEP_RECURSION_LIMIT = 30_000
DEEP_STACK_BYTES = 512 * 1024 * 1024


def with_deep_stack(function: Callable[[], T]) -> T:
    """Call ``function``; if it overflows the recursion limit, call it again in a thread
    with a large stack and a higher limit.

    LibCST's trees and visitors recurse once per level of a chain such as thousands of
    implicitly concatenated string literals (a data file of base64 lines) that CPython
    itself treats as flat. ``check_nesting`` has already refused what could overflow the
    native parser, so what reaches here is only deep for Python code.
    """
    try:
        return function()
    except RecursionError:
        pass
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(function())
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller below
            failure.append(exc)

    limit = sys.getrecursionlimit()
    try:
        old_stack = threading.stack_size(DEEP_STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform without settable thread stacks
        raise RecursionError("nesting too deep") from None
    try:
        sys.setrecursionlimit(max(limit, DEEP_RECURSION_LIMIT))
        worker = threading.Thread(target=run, name="portscan-deep")
        try:
            worker.start()
        except (RuntimeError, MemoryError):  # no room for such a stack here
            raise RecursionError("nesting too deep") from None
        worker.join()
    finally:
        threading.stack_size(old_stack)
        sys.setrecursionlimit(limit)
    if failure:
        raise failure[0]
    return outcome[0]


def split_lines(text: str) -> list[str]:
    """Lines as Python's tokenizer sees them (only \\r\\n, \\r and \\n end a line)."""
    return _NEWLINE.split(text)


def lines_with_ends(text: str) -> list[str]:
    """The same lines with their line endings, as diffs compare them (a change of line
    ending is a change); no empty line after a final newline."""
    lines: list[str] = []
    start = 0
    for match in _NEWLINE.finditer(text):
        lines.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


class LineIndex:
    """Converts character offsets in a text into 1-based (line, column) pairs."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1

    def span(self, start: int, end: int) -> Span:
        line, column = self.position(start)
        end_line, end_column = self.position(end)
        return Span(line, column, end_line, end_column)
