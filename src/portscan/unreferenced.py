"""Vendored Python nothing calls: findings inside a definition no other line names.

A project that copies another Python package into its own tree (InvokeAI's
``backend/pid/_ext/imaginaire``, unsloth-zoo's ``_vendored/fla``) ships the whole copy
and uses part of it: imaginaire's ``pynvml`` GPU helpers and fla's autotuned Triton
kernels come along, yet nothing in the project calls them, so they never run on any GPU.
Unlike the project's own modules, whose public functions are its users' API, a copy's
functions are there for the project alone. So a finding inside a top-level function or
class of a file under a folder named for vendored code, whose name no other place of
the project's Python mentions, takes the ``unreferenced`` guard (info). A mention is the
name as a word in code (a call, an import, an ``__all__`` entry) or in a string that is
a name or a dotted path (``getattr(m, "init")``, a registry's ``"pkg.utils.init"``); a
comment or a docstring that says ``zero-init`` names nothing. A project-level fact, read
only when such a finding exists, like :mod:`portscan.gated`.
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import sys
import tokenize
from collections.abc import Callable, Iterable, Sequence

#: a folder holding another project's code copied in (``third_party/``, ``_vendored/``, ``_ext/``)
VENDORED_FOLDER = re.compile(
    r"(?:^|/)(?:_vendored|vendored|_vendor|vendor|third_party|thirdparty|3rdparty|_ext|extern|external)/")


def outline(text: str) -> tuple[list[tuple[int, int, str]], frozenset[int]]:
    """A module's top-level ``def``s and ``class``es, each as (first line, its decorators
    included; last line; name), and the lines of its top-level imports, which name what
    they import without running it (nothing for a module CPython cannot parse)."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError):
        return [], frozenset()
    spans = [(min([node.lineno, *(d.lineno for d in node.decorator_list)]), node.end_lineno or node.lineno, node.name)
             for node in module.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    imports = frozenset(line for node in module.body if isinstance(node, (ast.Import, ast.ImportFrom))
                        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return spans, imports


def unreferenced(places: Iterable[tuple[str, int]], python: Sequence[str],
                 text_of: Callable[[str], str | None]) -> frozenset[tuple[str, int]]:
    """The ``(path, line)`` places, of files under a vendored folder, that lie in a
    top-level definition nothing else names: no place of the project's ``python`` files
    mentions it but its own definition, the copy's package ``__init__.py`` re-exporting
    it, the copy's modules importing it and other such definitions of the copy (fla's
    ``logsumexp_fwd_kernel`` is launched only by ``logsumexp_fwd``, which nothing calls;
    followed three definitions deep). ``text_of`` reads a file by its path (None: unreadable)."""
    project = _Project(python, text_of)
    found = set()
    for path, line in places:
        if VENDORED_FOLDER.search(path) and path.endswith(".py"):
            name = project.definition_at(path, line)
            if name is not None and not project.named(name, path, _DEPTH):
                found.add((path, line))
    return frozenset(found)


#: how many definitions deep a name is followed through callers that are dead themselves
_DEPTH = 3
#: characters of a file beyond which its comments and docstrings are not told apart
_PROSE_LIMIT = 200_000


class _Project:
    """The project's Python texts, read once, and the top-level definitions of each."""

    def __init__(self, python: Sequence[str], text_of: Callable[[str], str | None]) -> None:
        self.python = python
        self.text_of = text_of
        self._texts: dict[str, str | None] = {}
        self._outlines: dict[str, tuple[list[tuple[int, int, str]], frozenset[int]]] = {}
        self._named: dict[tuple[str, str, int], bool] = {}
        self._reaching: dict[str, list[str]] = {}
        self._prose: dict[str, list[tuple[int, int]]] = {}

    def text(self, path: str) -> str | None:
        if path not in self._texts:
            self._texts[path] = self.text_of(path)
        return self._texts[path]

    def outline(self, path: str) -> tuple[list[tuple[int, int, str]], frozenset[int]]:
        if path not in self._outlines:
            text = self.text(path)
            self._outlines[path] = outline(text) if text is not None else ([], frozenset())
        return self._outlines[path]

    def definition_at(self, path: str, line: int) -> str | None:
        """The name of the top-level definition of ``path`` around ``line`` (None: module level)."""
        return next((name for first, last, name in self.outline(path)[0] if first <= line <= last), None)

    def named(self, name: str, home: str, depth: int) -> bool:
        """Is ``name``, defined in ``home``, mentioned anywhere but at its own definition and
        inside definitions of a vendored copy that are not named themselves (``depth``
        callers deep)?"""
        key = (name, home, depth)
        if key not in self._named:
            self._named[key] = True  # a cycle of callers names itself: alive until shown dead
            self._named[key] = any(self._alive_at(name, path, line, depth) for path, line in self._mentions(name, home))
        return self._named[key]

    def _alive_at(self, name: str, path: str, line: int, depth: int) -> bool:
        if not VENDORED_FOLDER.search(path):
            return True
        caller = self.definition_at(path, line)
        if caller == name or caller is None and (path.rsplit("/", 1)[-1] == "__init__.py"
                                                 or line in self.outline(path)[1]):
            return False  # its own definition (or a recursive call), or a module of the copy importing it
        return caller is None or depth == 0 or self.named(caller, path, depth - 1)

    def _mentions(self, name: str, home: str) -> list[tuple[str, int]]:
        """Where ``name`` occurs as a word in the files that can reach ``home``'s copy; a
        file that cannot be read may name it anywhere (``("", 0)``, outside any copy)."""
        word = re.compile(rf"\b{re.escape(name)}\b")
        found = []
        root = _copy_root(home)[0]
        for path in self._reaching_copy(home):
            text = self.text(path)
            if text is None:
                return [("", 0)]
            if name in text:
                # prose is read in the project's files only: the copy's own are followed
                # definition by definition, and tokenizing them all is costly (torch's quack)
                prose = self.prose(path) if not path.startswith(root) else []
                line, at = 1, 0
                for match in word.finditer(text):  # lines counted once through the text
                    line, at = line + text.count("\n", at, match.start()), match.start()
                    if not _inside(prose, match.start()):
                        found.append((path, line))
        return found

    def prose(self, path: str) -> list[tuple[int, int]]:
        """Offsets of a file's comments and of its strings that are no name or dotted path
        (docstrings, messages): a word there (``zero-init``, ``Device to create tensors on``)
        names nothing. ``"init"`` and ``"pkg.utils.init"`` stay names (``getattr``, registries);
        a file the tokenizer cannot read has none, and so has one above ``_PROSE_LIMIT``
        (tokenizing runs at about 1.5 MB a second: every word there stays a mention)."""
        if path not in self._prose:
            text = self.text(path) or ""
            self._prose[path] = _prose(text) if len(text) <= _PROSE_LIMIT else []
        return self._prose[path]

    def _reaching_copy(self, home: str) -> list[str]:
        """The files that can name what the copy holding ``home`` defines: the copy's own,
        and those that mention its package (``quack`` for ``torch/_vendor/quack/``) or the
        vendored folder (``_vendor``, for a re-export above the copy), as an import of it or
        a dotted path in a string must. Worked out once per copy: torch's 2,285 files are
        searched once for it, not once per name."""
        root, words = _copy_root(home)
        if root not in self._reaching:
            as_words = [re.compile(rf"\b{re.escape(w)}\b") for w in words]
            self._reaching[root] = [
                path for path in self.python if path.startswith(root) or (text := self.text(path)) is None
                or any(w in text and pattern.search(text) for w, pattern in zip(words, as_words, strict=True))]
        return self._reaching[root]


def _copy_root(home: str) -> tuple[str, tuple[str, str]]:
    """The copy holding ``home`` (``torch/_vendor/quack``) and the words a file that can
    reach it names: the copy's package, and the vendored folder a re-export above it
    goes through (``quack``, ``_vendor``)."""
    found = VENDORED_FOLDER.search(home)
    below = home[found.end():] if found else home
    root = home[:len(home) - len(below)] + below.split("/", 1)[0]
    return root, (root.rsplit("/", 1)[-1].removesuffix(".py"), found.group(0).strip("/") if found else root)


#: a string literal's text that refers to something by name: ``init``, ``pkg.utils.init``
_DOTTED = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*")


def _inside(spans: Sequence[tuple[int, int]], at: int) -> bool:
    """Is offset ``at`` inside one of ``spans`` (in order, not overlapping)?"""
    i = bisect.bisect_right(spans, (at, sys.maxsize)) - 1
    return i >= 0 and at < spans[i][1]


def _prose(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets, in order, of the comments and the prose strings of a module."""
    # rows as the tokenizer counts them: StringIO.readline ends a line at "\n" only
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    spans = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT or token.type == tokenize.STRING and not _names_something(token.string):
                (row, col), (end_row, end_col) = token.start, token.end
                spans.append((starts[row - 1] + col, starts[end_row - 1] + end_col))
    except (tokenize.TokenError, IndentationError, SyntaxError, IndexError):
        return []
    return spans


def _names_something(literal: str) -> bool:
    """Is a string literal a name or a dotted path (``"init"``, ``'pkg.utils.init'``)?"""
    body = literal.lstrip("rRbBuUfF")
    quote = body[:3] if body[:3] in ("\"\"\"", "\'\'\'") else body[:1]
    return _DOTTED.fullmatch(body[len(quote):len(body) - len(quote)]) is not None
