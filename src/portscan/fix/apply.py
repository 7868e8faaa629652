"""Fixing files on disk: read with the encoding Python would use, fix, write atomically.

Writes go to a temporary file in the same directory, take the original's permission
bits, and replace the original with ``os.replace`` -- a reader sees the old file or
the new one, never half of one. A file whose bytes changed since portscan read it is
left alone and reported. The text keeps its encoding, BOM and line endings: it is
decoded and re-encoded with the same codec and LibCST reproduces every untouched
byte.
"""

from __future__ import annotations

import codecs
import functools
import os
import stat
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from portscan.cache import Cache
from portscan.config import Config, Target, ignored_codes
from portscan.discover import Excludes, FirstParty, SourcePath, discover, project_imports
from portscan.fix.engine import FileFix, fix_source
from portscan.fix.text import fix_text, has_text_fixes
from portscan.match.floor import Floor, project_floor
from portscan.gated import gated_paths, inside
from portscan.ported import hip_built, ported_files
from portscan.vendored import vendored_library, vendored_roots
from portscan.model import FileError, Finding, ScanResult
from portscan.parse import SourceError, decode_python, decode_text, python_encoding, read_bytes
from portscan.pool import map_in_processes
from portscan.ruleset.loader import RuleSet
from portscan.scan import open_cache, scan_paths, scan_source


@dataclass(frozen=True, slots=True)
class Added:
    """Findings of one rule that a fixed file has and its original did not. A fix can
    raise the count without making anything worse: once a ``guard-import`` fix wraps an
    import, the module imports without the package and each use (``pynvml.nvmlInit()``)
    is reported where it would fail, where before the import failed first and was the
    one finding; a guard a fix writes (``torch.version.cuda is not None``) is itself
    reported as info."""

    path: str
    rule: str
    count: int
    uses: bool  #: uses of an import this run guarded


def added_findings(fixed: FileFix, rules: RuleSet, first_party: frozenset[str],
                   target: Target | None) -> tuple[Added, ...]:
    """Per rule, the findings ``fixed.fixed`` has beyond ``fixed.source``."""
    def counts(text: str) -> Counter[str]:
        return Counter(f.rule for f in scan_source(text, fixed.path, rules, first_party, target=target))

    guarded = {a.rule for a in fixed.applied
               if (rule := rules.by_code.get(a.rule)) and rule.fix and rule.fix.kind == "guard-import"}
    delta = Counter(f.rule for f in fixed.findings) if fixed.findings is not None else counts(fixed.fixed)
    delta.subtract(Counter(f.rule for f in fixed.before) if fixed.before is not None else counts(fixed.source))
    return tuple(Added(fixed.path, code, n, code in guarded) for code, n in sorted(delta.items()) if n > 0)


@dataclass(frozen=True, slots=True)
class FixRun:
    """What ``portscan fix`` did: per-file outcomes and a scan of the result."""

    files: tuple[FileFix, ...]  #: Python files that had a fixable finding
    errors: tuple[FileError, ...]  #: files that could not be read, fixed or written
    after: ScanResult  #: the tree as it is (or, with ``write=False``, would be) after fixing
    added: tuple[Added, ...] = ()  #: findings the fixed files have beyond their originals

    @property
    def changed(self) -> tuple[FileFix, ...]:
        return tuple(f for f in self.files if f.changed)


def write_atomic(path: Path, data: bytes, expected: bytes) -> None:
    """Replace ``path`` with ``data`` unless its content is no longer ``expected``.
    Raises ``OSError`` (a stale file raises ``FileChangedError``)."""
    if path.is_symlink():
        raise OSError(f"{path.name} is a symbolic link; fix its target instead")
    if path.read_bytes() != expected:
        raise FileChangedError("the file changed on disk while portscan was fixing it; left as it is")
    mode = stat.S_IMODE(path.stat().st_mode)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".portscan")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class FileChangedError(OSError):
    pass


def _fix_one(settings: tuple[RuleSet, bool, Floor | None], job: tuple[str, str, frozenset[str]]) -> FileFix:
    rules, unsafe, floor = settings
    text, path, first_party = job
    return fix_source(text, path, rules, unsafe, first_party, floor=floor)


def fix_files(root: Path, texts: Mapping[str, str], rules: RuleSet, unsafe: bool = False,
              workers: int | None = None) -> dict[str, FileFix]:
    """Each file of ``texts`` (path relative to ``root`` -> its text) fixed in memory,
    one engine run per file, in a process pool when there are several. The torch
    ``root``'s manifests allow bounds the fixes (see :mod:`portscan.match.floor`)."""
    first_party = FirstParty(root)
    settings = (rules, unsafe, project_floor(root))
    jobs = [(text, path, first_party((root / path).parent)) for path, text in texts.items()]
    count = workers if workers is not None else min(os.cpu_count() or 1, 8)
    if count > 1 and len(jobs) > 1:
        fixed = map_in_processes(_fix_one, settings, jobs, min(count, len(jobs)),
                                 size=lambda job: len(job[0]))
    else:
        fixed = [_fix_one(settings, job) for job in jobs]
    return {f.path: f for f in fixed}


def _cached_findings(cache: Cache | None, source: SourcePath, text: str,
                     first_party: frozenset[str]) -> tuple[Finding, ...] | None:
    """The findings (before suppressions) an earlier scan cached for this very text, if any."""
    if cache is None:
        return None
    found = cache.get(cache.key(source.kind, source.rel, first_party, text))
    return found.raw if found is not None and isinstance(found.raw, tuple) else None


@dataclass(frozen=True, slots=True)
class _TextOutcome:
    fix: FileFix | None  #: None: the file was not read (the scan after fixing reports why)
    errors: tuple[FileError, ...] = ()


def _fix_text_file(source: SourcePath, rules: RuleSet, unsafe: bool, write: bool, config: Config | None,
                   target: Target | None, imported: Callable[[], Mapping[str, str]] = dict) -> _TextOutcome:
    """One manifest, container definition or script fixed (see :mod:`portscan.fix.text`).
    Only UTF-8 text is rewritten, and written back with its BOM, if it had one."""
    try:
        data = read_bytes(source.path)
        text = decode_text(data)
        encoding = "utf-8-sig" if data.startswith(codecs.BOM_UTF8) else "utf-8"
        if text.encode(encoding) != data:
            return _TextOutcome(None)  # undecodable bytes: never rewritten (the scan still reads it)
    except SourceError:
        return _TextOutcome(None)
    ignore = ignored_codes(config, source.path) if config else ()
    file_rules = RuleSet(r for r in rules.rules if not r.code.startswith(ignore)) if ignore else rules
    result = fix_text(text, source.rel, source.kind, file_rules, unsafe, target, imported)
    errors = [FileError(source.rel, "fix", result.error)] if result.error is not None else []
    if result.changed and write:
        try:
            write_atomic(source.path, result.fixed.encode(encoding), data)
        except OSError as exc:
            errors.append(FileError(source.rel, "write", f"not written: {exc}"))
            result = FileFix(result.path, result.source, result.source, error=str(exc))
    return _TextOutcome(result, tuple(errors))


def _readable_text(source: SourcePath) -> str | None:
    try:
        return decode_python(read_bytes(source.path)) if source.kind == "python" else None
    except SourceError:
        return None


def _file_text(path: Path) -> str | None:
    """Any file's text (CMake files, kernel sources) for the project facts; None: unreadable."""
    try:
        return decode_text(read_bytes(path))
    except SourceError:
        return None


def fix_paths(paths: Sequence[Path], rules: RuleSet, unsafe: bool = False, write: bool = True,
              config: Config | None = None, force_exclude: bool = False, cache: Path | None = None,
              workers: int | None = None) -> FixRun:
    """Fix every file below ``paths``: Python files, and the other kinds where a rule
    has a text fix (manifests, container definitions, scripts); with ``write=False``
    nothing is written.
    The configuration's excludes and per-file-ignores apply as in a scan; the torch the
    root's manifests allow bounds the fixes (see :mod:`portscan.match.floor`)."""
    excludes = Excludes.of(config)
    discovery = discover(paths, excludes, force_exclude)
    first_party = FirstParty(discovery.root)
    floor = project_floor(discovery.root)
    files: list[FileFix] = []
    errors: list[FileError] = []
    overrides: dict[Path, str] = {}
    known: dict[Path, tuple[Finding, ...]] = {}  #: findings of the result, from the engine's last pass
    added: list[Added] = []
    target = config.target if config else None
    waiting = {m for r in rules.rules if r.fix is not None for m in r.fix.code_first}
    imported = functools.cache(lambda: project_imports(discovery.root, waiting, excludes))
    scanned = open_cache(cache, rules, config)
    fixable = {rule.code for rule in rules.rules if rule.fix is not None}
    gated = gated_paths(discovery.files, _readable_text, discovery.root)
    ported = ported_files(discovery.files, hip_built(discovery.files, _file_text, discovery.root))
    vendored = vendored_roots(discovery.files)
    for source in discovery.files:
        if gated and inside(source.path, gated):
            continue  # loaded on one vendor only: vendor-branch code, never rewritten (see portscan.gated)
        if source.rel in ported:
            continue  # the NVIDIA side of a choice the project already offers (see portscan.ported)
        if vendored and vendored_library(source.rel, vendored) is not None:
            continue  # a vendored copy of a library: not the project's to port (see portscan.vendored)
        if source.kind != "python":
            if has_text_fixes(rules, source.kind):
                outcome = _fix_text_file(source, rules, unsafe, write, config, target, imported)
                errors += outcome.errors
                if outcome.fix is not None:
                    if outcome.fix.changed:
                        overrides[source.path.absolute()] = outcome.fix.fixed
                    if outcome.fix.applied or outcome.fix.not_fixed or outcome.fix.error:
                        files.append(outcome.fix)
            continue
        try:
            data = read_bytes(source.path)
            text = decode_python(data)
        except SourceError:
            continue  # the scan below reports it
        ignore = ignored_codes(config, source.path) if config else ()
        file_rules = RuleSet(r for r in rules.rules if not r.code.startswith(ignore)) if ignore else rules
        own = first_party(source.path.parent)
        cached = _cached_findings(scanned, source, text, own)
        if cached is not None and not any(f.rule in fixable for f in cached):
            continue  # its last scan found nothing a fix is declared for: no parse needed
        result = fix_source(text, source.rel, file_rules, unsafe, own, target, floor)
        if result.error is not None:
            errors.append(FileError(source.rel, "fix", result.error))
        if result.changed:
            try:
                encoded = result.fixed.encode(python_encoding(data))
                if write:
                    write_atomic(source.path, encoded, data)
            except (OSError, UnicodeEncodeError, SyntaxError) as exc:
                errors.append(FileError(source.rel, "write", f"not written: {exc}"))
                result = FileFix(result.path, result.source, result.source, error=str(exc))
            else:
                overrides[source.path.absolute()] = result.fixed
                added += added_findings(result, file_rules, own, target)
        if result.findings is not None and file_rules is rules:
            known[source.path.absolute()] = result.findings
        if result.applied or result.not_fixed or result.error:
            files.append(result)
    if scanned is not None:
        scanned.close()
    after = scan_paths(paths, rules, overrides, config=config, force_exclude=force_exclude, cache=cache,
                       workers=workers, known=known)
    return FixRun(tuple(files), tuple(errors), after, tuple(added))
