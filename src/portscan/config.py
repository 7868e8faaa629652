"""Project configuration: ``[tool.portscan]`` in ``pyproject.toml``, or ``portscan.toml``.

The nearest file wins: from the directory being scanned upwards, the first directory
holding ``portscan.toml`` or a ``pyproject.toml`` with a ``[tool.portscan]`` table
(``portscan.toml`` first); there is no merging. Command-line flags override it. Every
key is checked; an unknown key or a wrong type is a :class:`ConfigError` naming the
file and the key.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from portscan.model import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_FILES = ("portscan.toml", "pyproject.toml")
_PORTSCAN_TABLE = re.compile(rb"^\s*\[?\s*tool\s*\.\s*portscan\b", re.MULTILINE)
_CODE_PREFIX = re.compile(r"^[A-Z]{2,8}[0-9]{0,3}$")
_ARCH = re.compile(r"^gfx[0-9a-f]{3,4}$")
KEYS = ("select", "ignore", "extend-select", "extend-ignore", "per-file-ignores", "exclude",
        "extend-exclude", "fail-on", "rules-dirs", "target", "baseline", "verify")


class ConfigError(ValueError):
    """The configuration cannot be used; ``str()`` reads ``file: key: problem``."""


@dataclass(frozen=True, slots=True)
class Target:
    """The ROCm release and GPU architecture the port aims at; rules whose truth depends
    on them (FP8 formats, wavefront width, TF32) report accordingly."""

    rocm: Version | None = None
    arch: str | None = None  #: e.g. ``gfx942`` (MI300), ``gfx90a`` (MI200), ``gfx1100`` (RX 7900)

    def matches(self, arch_globs: Sequence[str], rocm: SpecifierSet | None) -> bool:
        """Does this target satisfy a rule's condition? Unset parts never match."""
        if arch_globs and (self.arch is None or not any(fnmatch.fnmatchcase(self.arch, g) for g in arch_globs)):
            return False
        return rocm is None or (self.rocm is not None and rocm.contains(self.rocm, prereleases=True))

    @property
    def is_set(self) -> bool:
        return self.rocm is not None or self.arch is not None


@dataclass(frozen=True, slots=True)
class Config:
    path: Path | None = None  #: the file it came from
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    extend_ignore: tuple[str, ...] = ()
    #: (gitignore-style pattern relative to the config file, code prefixes)
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] | None = None  #: replaces the built-in excludes when set
    extend_exclude: tuple[str, ...] = ()
    fail_on: Severity = Severity.INFO
    rules_dirs: tuple[Path, ...] = ()
    target: Target = field(default_factory=Target)
    baseline: Path | None = None

    @property
    def base(self) -> Path:
        """The directory that relative paths and patterns in the file start from."""
        return self.path.parent if self.path is not None else Path.cwd()


def find_config(start: Path) -> Path | None:
    """The nearest configuration file at or above ``start``."""
    directory = start.resolve()
    if not directory.is_dir():
        directory = directory.parent
    for candidate in (directory, *directory.parents):
        for name in CONFIG_FILES:
            path = candidate / name
            if path.is_file() and (name == "portscan.toml" or _has_portscan_table(path)):
                return path
    return None


def _has_portscan_table(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError:
        return False
    except tomllib.TOMLDecodeError:
        # A broken pyproject.toml that mentions our table is ours to report (load_config
        # then fails with the position); one that does not is not our business.
        return _PORTSCAN_TABLE.search(path.read_bytes()) is not None
    return isinstance(data.get("tool"), dict) and "portscan" in data["tool"]


def nearest_config(start: Path) -> Config:
    """The configuration of the nearest file at or above ``start``, else the defaults."""
    path = find_config(start)
    return load_config(path) if path is not None else Config()


def load_config(path: Path) -> Config:
    """Read and validate one configuration file."""
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    table = data if path.name == "portscan.toml" else data.get("tool", {}).get("portscan", {})
    where = "" if path.name == "portscan.toml" else "tool.portscan."
    return parse_config(table, path, where)


def parse_config(table: Mapping[str, Any], path: Path, where: str = "") -> Config:
    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{path}: {where}{key}: {problem}")

    if not isinstance(table, Mapping):
        raise fail("", "expected a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise fail(unknown[0], f"unknown key (known: {', '.join(KEYS)})")

    def codes(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and _CODE_PREFIX.match(v) for v in value):
            raise fail(key, "expected a list of rule codes or prefixes such as \"PS2\" or \"PS401\"")
        return tuple(value)

    def patterns(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise fail(key, "expected a list of path patterns")
        return tuple(value)

    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, Mapping):
        raise fail("per-file-ignores", "expected a table of \"pattern\" = [codes]")
    per_file_ignores = []
    for pattern, value in per_file.items():
        if not isinstance(value, list) or not all(isinstance(v, str) and _CODE_PREFIX.match(v) for v in value):
            raise fail(f"per-file-ignores.{pattern}", "expected a list of rule codes or prefixes")
        per_file_ignores.append((pattern, tuple(value)))
    fail_on = table.get("fail-on", "info")
    if fail_on not in tuple(s.value for s in Severity):
        raise fail("fail-on", "expected \"error\", \"warning\" or \"info\"")
    dirs = table.get("rules-dirs", [])
    if not isinstance(dirs, list) or not all(isinstance(d, str) and d for d in dirs):
        raise fail("rules-dirs", "expected a list of directories")
    baseline = table.get("baseline")
    if baseline is not None and not (isinstance(baseline, str) and baseline):
        raise fail("baseline", "expected a file path")
    if not isinstance(table.get("verify", {}), Mapping):  # read by `portscan verify` itself
        raise fail("verify", "expected a table")

    def within(key: str, value: str) -> Path:
        """A path the file names, which must stay in the file's own project: a scanned
        tree's configuration may not reach rule files or baselines elsewhere."""
        resolved = (path.parent / value).resolve()
        home = path.parent.resolve()
        if not resolved.is_relative_to(home):
            raise fail(key, f"{value!r} lies outside the project ({home}); give such a path on "
                            "the command line instead (--rules-dir, --baseline)")
        return path.parent / value
    return Config(
        path=path, select=codes("select"), ignore=codes("ignore"),
        extend_select=codes("extend-select"), extend_ignore=codes("extend-ignore"),
        per_file_ignores=tuple(per_file_ignores),
        exclude=patterns("exclude") if "exclude" in table else None,
        extend_exclude=patterns("extend-exclude"), fail_on=Severity(fail_on),
        rules_dirs=tuple(within("rules-dirs", d) for d in dirs),
        target=parse_target(table.get("target", {}), lambda key, problem: fail(f"target.{key}", problem)),
        baseline=within("baseline", baseline) if baseline else None,
    )


def parse_target(table: Any, fail: Any) -> Target:
    """``{rocm = "6.4", arch = "gfx942"}``; ``fail(key, problem)`` builds the error."""
    if not isinstance(table, Mapping):
        raise fail("", "expected a table with rocm and/or arch")
    unknown = sorted(set(table) - {"rocm", "arch"})
    if unknown:
        raise fail(unknown[0], "unknown key (known: rocm, arch)")
    rocm, arch = table.get("rocm"), table.get("arch")
    try:
        version = Version(rocm) if isinstance(rocm, str) else None
    except InvalidVersion:
        version = None
    if rocm is not None and version is None:
        raise fail("rocm", f"expected a ROCm version such as \"6.4\", got {rocm!r}")
    if arch is not None and not (isinstance(arch, str) and _ARCH.match(arch.split(":")[0])):
        raise fail("arch", f"expected an LLVM GPU target such as \"gfx942\", \"gfx90a\" or \"gfx1100\", got {arch!r}")
    return Target(rocm=version, arch=arch.split(":")[0] if isinstance(arch, str) else None)


def specifier(text: str) -> SpecifierSet:
    """A ROCm version condition from a rule file (``">=7.0"``); raises ``ValueError``."""
    try:
        return SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise ValueError(str(exc)) from None


def ignored_codes(config: Config, path: Path) -> tuple[str, ...]:
    """Code prefixes ``per-file-ignores`` turns off for the file at ``path``."""
    if not config.per_file_ignores:
        return ()
    try:
        rel = PurePosixPath(path.resolve().relative_to(config.base.resolve()).as_posix())
    except ValueError:
        return ()
    found: list[str] = []
    for pattern, codes in config.per_file_ignores:
        if _glob_match(rel, pattern):
            found += codes
    return tuple(found)


def _glob_match(rel: PurePosixPath, pattern: str) -> bool:
    return _glob_spec(pattern).match_file(str(rel))


@functools.lru_cache(maxsize=256)
def _glob_spec(pattern: str) -> Any:
    """One compiled pattern, built once per run rather than once per file."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines([pattern])


def selection(config: Config, select: Iterable[str] = (), ignore: Iterable[str] = (),
              extend_select: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """Effective (select, ignore): the command line's ``--select`` replaces the file's,
    ``--ignore`` and the ``extend-*`` keys add to them (Ruff's rules)."""
    chosen = list(select) or list(config.select)
    if chosen:
        chosen += list(config.extend_select) + list(extend_select)
    return chosen, list(config.ignore) + list(config.extend_ignore) + list(ignore)
