"""Modules a project loads on one vendor only.

A project that dispatches by vendor to its own subpackages (``if torch.version.cuda:
from .cuda import *`` / ``elif torch.version.hip: from .hip import *``) runs the CUDA one
on NVIDIA GPUs only: what that package holds, and the extensions it declares, is
vendor-branch code, as if it were written under the check. Its findings take the
``vendor-branch`` guard (info, nothing to fix here), a project-level fact like
:func:`portscan.scan.escalated`.

Kept cheap and literal (a fraction of a second on the 2,285 files of the torch tree):
only ``if``/``elif`` statements that name a vendor and import something within their
first lines are parsed, each from its own lines; a target is the project's own module or
package such an import names (relative, or absolute from a top-level package at the root
or under ``src/``), and it stays gated only while no other import anywhere in the project
(outside a vendor branch, and outside the target itself) names it or a module inside it.
Imports in a function count as unguarded; nothing else about reachability is inferred.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from portscan.discover import SourcePath
from portscan.match.levels import VENDOR_CALL, VENDOR_TEXT, VENDOR_WORD

#: words a vendor check in a Python condition is written with (case as written)
_VENDOR_WORDS = ("version.hip", "version.cuda", "rocm", "ROCM", "ROCm", "is_hip", "IS_HIP", "_hip",
                 "is_nvidia", "IS_NVIDIA", "is_cuda()")
#: the first line of each import statement (where a module is named)
_IMPORT_LINE = re.compile(r"(?m)^[ \t]*(?:from|import)[ \t][^\n]*")
#: a vendor word on a line ending in ``:``, with an import among the next four lines: the
#: ``if``/``elif`` statements worth parsing for gated imports (the parse decides)
_GATING = re.compile(rf"(?:{'|'.join(map(re.escape, _VENDOR_WORDS))})[^\n]*:[ \t]*\n[ \t]+"
                     r"(?:[^\n]*\n[ \t]+){0,3}?(?:from[ \t]+[\w.]+[ \t]+import|import)[ \t]")


def gated_paths(files: Sequence[SourcePath], text: Callable[[SourcePath], str | None], root: Path
                ) -> frozenset[Path]:
    """The project's modules (``.py`` files) and packages (directories) imported only
    inside vendor branches, as absolute paths."""
    python = [f for f in files if f.kind == "python"]
    gated: set[Path] = set()
    for source in python:
        content = text(source)
        if content and any(word in content for word in _VENDOR_WORDS):  # most files name no vendor
            gated.update(target for statement, in_branch in _gating_imports(content) if in_branch
                         for target in _targets(statement, source.path, root))
    stems = {p.stem for p in gated}
    naming = re.compile(rf"\b(?:{'|'.join(re.escape(s) for s in sorted(stems))})\b")
    for source in python if gated else ():
        content = text(source)
        if not content or not any(stem in content for stem in stems):
            continue
        lines = [m for m in _IMPORT_LINE.finditer(content) if naming.search(m.group())]
        if not lines:
            continue
        # a module-level import line is read alone; an indented one needs its context
        statements = (_imports(content) if any(m.group()[:1] in " \t" for m in lines)
                      else (item for m in lines for item in _imports(_logical_line(content, m.start()))))
        for statement, in_branch in statements:
            if in_branch:
                continue
            for target in _targets(statement, source.path, root):
                gated -= {g for g in gated if (target == g or g in target.parents)
                          and not (source.path == g or g in source.path.parents)}
        if not gated:
            break
    return frozenset(gated)


def _gating_imports(text: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """The imports of each ``if`` statement :data:`_GATING` finds, read from that
    statement's own lines (a whole file is parsed only where they do not parse alone)."""
    matches = list(_GATING.finditer(text))
    if not matches:
        return
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    done: set[int] = set()
    for match in matches:
        first = bisect.bisect_right(starts, match.start()) - 1
        head = lines[first].lstrip(" \t")
        if not head.startswith(("if ", "if(", "elif ", "elif(")):
            continue
        indent = lines[first][:len(lines[first]) - len(head)]
        while first > 0 and not lines[first][len(indent):].startswith("if") and \
                lines[first].startswith(indent):  # an `elif`: back to its `if`
            first -= 1
        if first in done:
            continue
        done.add(first)
        last = first + 1
        while last < len(lines) and (not lines[last].strip() or _deeper(lines[last], indent)
                                     or lines[last][len(indent):].startswith(("elif", "else"))):
            last += 1
        snippet = "".join(line[len(indent):] if line.startswith(indent) else line.lstrip()
                          for line in lines[first:last])
        found = list(_imports(snippet))
        if not found:
            yield from _imports(text)
            return
        yield from found


def _deeper(line: str, indent: str) -> bool:
    return line.startswith(indent) and len(line) > len(indent) and line[len(indent)] in " \t"


def _logical_line(text: str, start: int) -> str:
    """The import statement that starts at ``start``, parentheses followed."""
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    line = text[start:end]
    if "(" in line and ")" not in line:
        close = text.find(")", end)
        line = text[start:close + 1] if close >= 0 else line
    return line.strip() + "\n"


def inside(path: Path, gated: frozenset[Path]) -> bool:
    """Is ``path`` one of the gated modules or below a gated package?"""
    return any(path == g or g in path.parents for g in gated)


def _imports(text: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, and whether it sits in a branch of a vendor check. Read
    with CPython's ``ast`` (a warm scan parses nothing else and never loads LibCST)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_branch = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_branch
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_branch = False  # called from anywhere: no longer under the check
        elif isinstance(node, ast.If) and _vendor_test(node.test):
            in_branch = True
        stack.extend((child, in_branch) for child in ast.iter_child_nodes(node))


def _vendor_test(test: ast.expr) -> bool:
    """:func:`portscan.match.guards.is_vendor_check` on CPython's tree: ``torch.version.hip``
    or ``.cuda``, a name like ``is_rocm``/``IS_HIP``/``is_nvidia``, a call of ``is_cuda()``, or a
    string naming a vendor."""
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute) and (
                VENDOR_WORD.search(node.attr) or (node.attr in ("hip", "cuda") and isinstance(node.value, ast.Attribute)
                                                  and node.value.attr == "version")):
            return True
        if isinstance(node, ast.Name) and VENDOR_WORD.search(node.id):
            return True
        if isinstance(node, ast.Call) and VENDOR_CALL.search(
                node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and VENDOR_TEXT.search(node.value):
            return True
    return False


def _targets(statement: ast.Import | ast.ImportFrom, importer: Path, root: Path) -> list[Path]:
    """The project's own modules or packages an import names (existing paths only)."""
    if isinstance(statement, ast.Import):
        return [p for alias in statement.names if (p := _absolute(alias.name, root)) is not None]
    module = statement.module or ""
    if statement.level:
        base = importer.parent
        for _ in range(statement.level - 1):
            base = base.parent
        found = _existing(base.joinpath(*module.split("."))) if module else base
    else:
        found = _absolute(module, root)
    if found is None:
        return []
    names = [a.name for a in statement.names if a.name != "*"]
    below = [p for name in names if found.is_dir() and (p := _existing(found / name)) is not None]
    return below or [found]


def _absolute(dotted: str, root: Path) -> Path | None:
    parts = [p for p in dotted.split(".") if p]
    if not parts:
        return None
    for base in (root, root / "src"):
        found = _existing(base.joinpath(*parts))
        if found is not None:
            return found
    return None


def _existing(path: Path) -> Path | None:
    """The package directory or the ``.py`` module at ``path``, if there is one."""
    if path.is_dir() and (path / "__init__.py").is_file():
        return path
    module = path.with_name(path.name + ".py")
    return module if module.is_file() else None
