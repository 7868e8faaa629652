"""Which files a scan looks at: the walk, default excludes and ``.gitignore``."""

from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Collection, Iterator, Mapping, Sequence

import pathspec

from portscan.config import Config
from portscan.filekinds import file_kind
from portscan.model import FileError, OwnModules
from portscan.parse import SourceError, decode_python, read_bytes

#: Directory names never worth scanning: VCS data, caches, build output, environments.
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", "node_modules", ".tox", ".nox", ".eggs",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".portscan_cache", "build", "dist",
    "site-packages", ".venv", "venv",
})
#: Files whose presence marks a directory as a virtual or conda environment.
_ENV_MARKERS = ("pyvenv.cfg", "conda-meta")
#: File kinds read even where a ``.gitignore`` pattern covers them: git ignores only
#: untracked files, and projects commit requirements files under broad patterns such as
#: ``*.txt`` (lmdeploy), which without git's index cannot be told from junk otherwise.
_TRACKED_DESPITE_IGNORE = frozenset({"requirements"})

@dataclass(frozen=True, slots=True)
class SourcePath:
    path: Path  #: where to read it
    rel: str  #: relative to the scan root, ``/`` separators
    kind: str


@dataclass(frozen=True, slots=True)
class Discovery:
    root: Path
    files: tuple[SourcePath, ...]
    errors: tuple[FileError, ...]


class UsageError(ValueError):
    """A path argument that does not exist."""


def scan_root(paths: Sequence[Path]) -> Path:
    """Finding paths are relative to the single directory argument, else to the cwd."""
    if len(paths) == 1 and paths[0].is_dir():
        return paths[0].resolve()
    return Path.cwd().resolve()


def relative(path: Path, root: Path) -> str:
    return Path(os.path.relpath(path.absolute(), root)).as_posix()


def _is_environment(directory: Path) -> bool:
    return any((directory / marker).exists() for marker in _ENV_MARKERS)


def _gitignore(directory: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored(specs: list[tuple[Path, pathspec.GitIgnoreSpec]], path: Path, is_dir: bool) -> bool:
    """Git semantics: the deepest ``.gitignore`` with a matching pattern decides."""
    for base, spec in reversed(specs):
        rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        include = spec.check_file(rel).include
        if include is not None:
            return include
    return False


@dataclass(frozen=True)
class Excludes:
    """What a walk leaves out besides ``.gitignore``: the built-in directory names (or the
    configured ``exclude`` patterns in their place) and ``extend-exclude`` patterns, all
    gitignore-style and relative to ``base`` (the configuration file's directory)."""

    base: Path = field(default_factory=Path.cwd)
    patterns: tuple[str, ...] | None = None  #: None: the built-in SKIP_DIRS
    extra: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: Config | None) -> Excludes | None:
        """The configuration's excludes (None without a configuration: the built-in ones)."""
        return cls(config.base, config.exclude, config.extend_exclude) if config else None

    @functools.cached_property
    def _spec(self) -> pathspec.GitIgnoreSpec | None:
        lines = [*(self.patterns or ()), *self.extra]
        return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None

    def __call__(self, path: Path, is_dir: bool) -> bool:
        if is_dir and self.patterns is None and (path.name in SKIP_DIRS or path.name.endswith(".egg-info")):
            return True
        if self._spec is None:
            return False
        try:
            rel = path.absolute().relative_to(self.base.absolute()).as_posix()
        except ValueError:
            return False
        return bool(rel) and self._spec.match_file(rel + ("/" if is_dir else ""))

    def covers(self, path: Path) -> bool:
        """Is this file, named on the command line, excluded (by itself or a parent)?"""
        if self(path, False):
            return True
        return any(self(parent, True) for parent in path.absolute().parents
                   if parent != parent.parent and parent.is_relative_to(self.base.absolute()))


def _walk(directory: Path, root: Path, specs: list[tuple[Path, pathspec.GitIgnoreSpec]],
          errors: list[FileError], excludes: Excludes) -> Iterator[SourcePath]:
    spec = _gitignore(directory)
    if spec is not None:
        specs = [*specs, (directory, spec)]
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        errors.append(FileError(relative(directory, root), "read",
                                f"cannot list directory: {exc.strerror or exc}"))
        return
    for entry in entries:
        path = Path(entry.path)
        try:
            if entry.is_dir(follow_symlinks=False):
                if excludes(path, True) or _is_environment(path) or _ignored(specs, path, True):
                    continue
                yield from _walk(path, root, specs, errors, excludes)
            elif (kind := file_kind(path)) is not None and not excludes(path, False) and (
                    kind in _TRACKED_DESPITE_IGNORE or not _ignored(specs, path, False)):
                if entry.is_symlink():
                    target = path.resolve()
                    if not target.is_file() or not target.is_relative_to(root):
                        continue  # dangling, or leaves the scanned tree
                yield SourcePath(path, relative(path, root), kind)
        except OSError as exc:
            errors.append(FileError(relative(path, root), "read", f"cannot stat: {exc.strerror or exc}"))


def discover(paths: Sequence[Path], excludes: Excludes | None = None, force_exclude: bool = False
             ) -> Discovery:
    """Files to scan below ``paths``, in a stable order, without duplicates.

    Directories are walked (skipping :data:`SKIP_DIRS` or the configured excludes,
    environments and ``.gitignore``d paths, not following directory symlinks); files
    named explicitly are scanned if portscan reads their kind, unless ``force_exclude``
    and the excludes cover them (pre-commit passes every file by name). Raises
    :class:`UsageError` for a path that does not exist.
    """
    excludes = excludes or Excludes()
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise UsageError(f"{path}: no such file or directory")
    root = scan_root(paths)
    errors: list[FileError] = []
    seen: set[Path] = set()
    files: list[SourcePath] = []
    for path in paths:
        if force_exclude and excludes.covers(path):
            continue
        found = (_walk(path.absolute(), root, [], errors, excludes) if path.is_dir()
                 else [SourcePath(path, relative(path, root), file_kind(path) or "")]
                 if file_kind(path) is not None else [])
        for source in found:
            key = source.path.absolute()
            if key not in seen:
                seen.add(key)
                files.append(source)
    return Discovery(root, tuple(files), tuple(errors))


def modules_in(directory: Path) -> frozenset[str]:
    """Names importable from ``directory``: its ``*.py`` modules and its packages."""
    names: set[str] = set()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return frozenset()
    for entry in entries:
        if entry.name.endswith(".py") and entry.is_file():
            names.add(entry.name[:-3])
        elif entry.is_dir() and _holds_init(Path(entry.path)):
            names.add(entry.name)
    return frozenset(n for n in names if n.isidentifier())


def script_siblings(directory: Path) -> frozenset[str]:
    """What a script in ``directory`` imports by plain name from beside itself: Python
    puts a script's directory on ``sys.path``, so in a directory without
    ``__init__.py`` ``import pynvml`` finds a ``pynvml.py`` next to it. Inside a
    package an absolute import is never the sibling (``import tensorrt`` in
    ``mypkg/engine.py`` is the library even beside ``mypkg/tensorrt.py``; the
    sibling is ``from . import tensorrt``, which is first-party anyway)."""
    return frozenset() if _holds_init(directory) else modules_in(directory)


#: A ``setup.py`` larger than this is not read for extension names.
SETUP_MAX_BYTES = 1_000_000


def _extension_name(call: ast.Call) -> str | None:
    """The literal module name an ``*Extension(...)`` call builds, if it is given as one."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if not name.endswith("Extension"):
        return None
    given = next((k.value for k in call.keywords if k.arg == "name"), call.args[0] if call.args else None)
    return given.value if isinstance(given, ast.Constant) and isinstance(given.value, str) else None


def built_extensions(root: Path) -> frozenset[str]:
    """Top-level names of the compiled modules the project's own ``setup.py`` builds
    (``CUDAExtension("causal_conv1d_cuda", ...)``, ``CppExtension(name="pkg._C")``).

    ``import causal_conv1d_cuda`` in that project is its own kernel, built (and hipified)
    by its own build, not a third-party package of that name. The file is parsed with
    CPython's ``ast``, never run; a file that does not parse gives nothing."""
    path = root / "setup.py"
    try:
        if not path.is_file() or path.stat().st_size > SETUP_MAX_BYTES:
            return frozenset()
        tree = ast.parse(decode_python(read_bytes(path)))
    except (OSError, SourceError, SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    names = (_extension_name(node) for node in ast.walk(tree) if isinstance(node, ast.Call))
    return frozenset(top for name in names if name and (top := name.split(".")[0]).isidentifier())


def first_party_modules(root: Path) -> frozenset[str]:
    """Top-level modules the project itself provides (at the root unless the root is a
    package itself, under ``src/``, and the extensions its ``setup.py`` builds).

    Imports of these are the project's own code, never a third-party package of the
    same name. A script also imports its own directory's modules by plain name:
    :func:`script_siblings` gives those, per file.
    """
    return script_siblings(root) | modules_in(root / "src") | built_extensions(root)


def package_name(directory: Path) -> str:
    """The dotted package ``directory`` is (``xformers.ops.fmha``): its name and those of
    the directories above it, as long as each holds an ``__init__.py``; "" when it holds
    none (a script directory, where relative imports do not work)."""
    names: list[str] = []
    directory = directory.absolute()
    while _holds_init(directory) and directory.name.isidentifier():
        names.append(directory.name)
        directory = directory.parent
    return ".".join(reversed(names))


def _holds_init(directory: Path) -> bool:
    try:
        return (directory / "__init__.py").is_file()
    except OSError:  # a directory above the project that may not be searched
        return False


class FirstParty:
    """First-party module names for the files of one project, per directory: the
    project's own (:func:`first_party_modules`) plus the directory's siblings
    (:func:`script_siblings`), each listed once per run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._project: frozenset[str] | None = None
        self._by_directory: dict[Path, OwnModules] = {}

    def __call__(self, directory: Path) -> OwnModules:
        if directory not in self._by_directory:
            if self._project is None:
                self._project = first_party_modules(self.root)
            self._by_directory[directory] = OwnModules(self._project | script_siblings(directory),
                                                       package_name(directory))
        return self._by_directory[directory]


# -- modules the project's code imports ----------------------------------------------------
# For rewrites that must wait for the code: a requirement swapped for its ROCm
# counterpart (``nvidia-ml-py`` -> ``amdsmi``) is right only once no code imports the
# package it removes (the ``[fix] code-first`` key). Read from the text of every Python
# file below the project root, and only when a finding of such a rule is there to decide:
# an ``import m`` or ``from m... import`` line anywhere, inside ``try`` or a function too
# (a guarded import still means the code wants the package).


def _import_statement(modules: Collection[str]) -> re.Pattern[str]:
    names = "|".join(re.escape(m) for m in sorted(modules))
    return re.compile(rf"^[ \t]*(?:import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*(?P<a>{names})\b"
                      rf"|from[ \t]+(?P<b>{names})\b[\w.]*[ \t]+import\b)", re.MULTILINE)


def project_imports(root: Path, modules: Collection[str], excludes: Excludes | None = None) -> Mapping[str, str]:
    """Each of ``modules`` the Python files below ``root`` import, with the first place
    (``path:line``, relative to ``root``) that does."""
    if not modules:
        return {}
    pattern = _import_statement(modules)
    needles = [m.encode() for m in modules]
    found: dict[str, str] = {}
    for source in discover([root], excludes).files:
        if source.kind != "python":
            continue
        try:
            data = read_bytes(source.path)
            if not any(n in data for n in needles):  # most files: no decode, no regex
                continue
            text = decode_python(data)
        except SourceError:
            continue
        for hit in pattern.finditer(text):
            module = hit["a"] or hit["b"]
            found.setdefault(module, f"{source.rel}:{text.count(chr(10), 0, hit.start()) + 1}")
        if len(found) == len(modules):
            break
    return found
