"""Orchestration: discover -> read -> prefilter -> parse -> match -> findings.

:func:`scan_source` is pure (text in, findings out); :func:`file_scan` never raises;
:func:`scan_paths` runs a whole scan and is what the CLI calls. Python files go
through the prefilter and the libcst matcher; every other kind has a matcher of its
own (:data:`portscan.filekinds.FILE_KINDS`). CUDA extensions declared in Python link their C++/CUDA sources
into the kernel scan; they come from the same parse and walk as the file's findings
(:func:`file_scan`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from pathlib import Path, PurePosixPath

from portscan.config import Config, ignored_codes
from portscan.filekinds import BY_NAME, MatchContext, file_kind
from portscan.headers import included_headers
from portscan.discover import (
    Excludes,
    Discovery,
    SourcePath,
    discover,
    FirstParty,
    relative,
)
from portscan.match import Match, snippet
from portscan.match.hipify import load_hipify_names, table_digest
from portscan.match.levels import guarded_severity
from portscan.match.manifests import requirements_includes
from portscan.bounded import PatternTimeout
from portscan.cache import Cache, Extensions, FileScan, Raw
from portscan.config import Target
from portscan.suppress import apply as apply_suppressions
from portscan.suppress import suppressions
from portscan.model import Extension, FileError, FileResult, Finding, ScanResult, Severity
from portscan.parse import (
    paused_gc,
    with_deep_stack,
    LineIndex,
    SourceError,
    decode_python,
    decode_text,
    parse_python,
    read_bytes,
)
from portscan.ruleset.loader import RuleSet

if TYPE_CHECKING:
    from portscan.match.python import ModuleWalk

def fingerprint(rule: str, path: str, text: str) -> str:
    """A finding's identity that survives moves: rule, path and its source lines with all
    whitespace collapsed (semgrep's "syntactic context"), hashed."""
    normalised = " ".join(text.split())
    return hashlib.sha256(f"{rule}\0{path}\0{normalised}".encode()).hexdigest()[:20]


def to_finding(match: Match, path: str, lines: LineIndex, text: str, base: Severity | None = None
               ) -> Finding:
    rule = match.rule
    severity = guarded_severity(base or rule.severity, match.guard, rule.pattern.kind == "import")
    span = lines.span(match.start, match.end)
    first, last = lines.starts[span.line - 1], lines.starts[span.end_line] if span.end_line < len(
        lines.starts) else len(text)
    return Finding(
        rule=rule.code, name=rule.name, severity=severity, category=rule.category,
        confidence=rule.confidence, path=path, span=span,
        message=rule.render_message(match.variables), rewrite=rule.rewrite,
        references=rule.references, guard=match.guard,
        fix=rule.fix.tier.value if rule.fix is not None and match.guard is None and match.fixable
        and match.declined is None else None,
        fingerprint=fingerprint(rule.code, path, text[first:last]),
    )


def match_text(text: str, kind: str, rules: RuleSet, first_party: frozenset[str] = frozenset(),
               hipify: frozenset[str] | None = None) -> list[Match]:
    """Every match in one file's text. Raises :class:`SourceError` for unparsable Python.

    Python files that contain none of the literal tokens the rules need are not parsed.
    """
    file = BY_NAME[kind]
    applicable = rules.candidates(text) if file.prefiltered else rules.for_surface(kind)
    if not applicable:
        return []
    return file.matcher(text, applicable, MatchContext(first_party, hipify))


def scan_source(text: str, path: str, rules: RuleSet, first_party: frozenset[str] = frozenset(),
                kind: str | None = None, hipify: frozenset[str] | None = None,
                target: Target | None = None) -> tuple[Finding, ...]:
    """Findings in one source text; the kind comes from the file name unless given. With
    a ``target``, rules report at the severity they declare for it (or not at all)."""
    kind = kind or file_kind(PurePosixPath(path)) or "python"
    return _findings(text, path, match_text(text, kind, rules, first_party, hipify), target)


def declares_extensions(kind: str, text: str) -> bool:
    """Can this file declare a CUDA/C++ extension (a Python file that mentions ``cpp_extension``)?"""
    return kind == "python" and "cpp_extension" in text


def _walk_declaring(text: str, rules: RuleSet, first_party: frozenset[str]
                    ) -> tuple[ModuleWalk | None, Extensions]:
    """One parse and one walk of a Python file that may declare extensions: the walk (for
    its findings) and the extensions it declares. A file no rule applies to is parsed
    for its extensions only, and then a parse error is no error of its own (the
    prefilter would not have parsed it): (None, ())."""
    from portscan.match.python import ModuleWalk

    applicable = rules.candidates(text)
    try:
        module = parse_python(text)
    except SourceError:
        if applicable:
            raise
        return None, ()
    walk = ModuleWalk(module, applicable, first_party, extensions=True)
    lines = LineIndex(text)
    return (walk if applicable else None,
            tuple((d.name, lines.position(d.offset)[0], d.sources) for d in walk.extensions))


def _findings(text: str, path: str, matches: list[Match], target: Target | None) -> tuple[Finding, ...]:
    if not matches:
        return ()
    for match in matches:  # non-Python matchers leave `matched` to the text itself
        if "matched" not in match.variables and isinstance(match.variables, dict):
            match.variables["matched"] = snippet(text[match.start:match.end])
    lines = LineIndex(text)
    findings = []
    for match in matches:
        base = match.rule.severity_for(target)
        if base is not None:
            findings.append(to_finding(match, path, lines, text, base))
    return tuple(sorted(findings, key=Finding.sort_key))


def read_source(path: Path, kind: str) -> str:
    data = read_bytes(path)
    return decode_python(data) if kind == "python" else decode_text(data)


@dataclass(frozen=True, slots=True)
class FileSettings:
    """What a scan applies to each file beyond the rules."""

    target: Target | None = None
    ignore: tuple[str, ...] = ()  #: code prefixes per-file-ignores turns off for this file
    report_unused: bool = False  #: list suppressions that silence nothing


def file_scan(source: SourcePath, text: str, rules: RuleSet, first_party: frozenset[str],
              hipify: frozenset[str] | None = None, target: Target | None = None) -> FileScan:
    """Findings in one file's text before suppressions (or why it cannot be scanned), and
    the extensions it declares, from one parse. Pure and never raises: this is what the
    cache stores and the workers return."""
    extensions: Extensions = ()  # known before matching, so kept if matching fails

    def scan() -> tuple[Finding, ...]:
        nonlocal extensions
        if declares_extensions(source.kind, text):
            walk, extensions = _walk_declaring(text, rules, first_party)
            return _findings(text, source.rel, walk.matches() if walk is not None else [], target)
        return scan_source(text, source.rel, rules, first_party, source.kind, hipify, target)

    error: FileError
    try:
        with paused_gc():
            return FileScan(with_deep_stack(scan), extensions)
    except SourceError as exc:
        error = FileError(source.rel, exc.kind, exc.message)
    except PatternTimeout as exc:
        error = FileError(source.rel, "timeout", f"{exc}; file skipped")
    except RecursionError:
        error = FileError(source.rel, "parse", "code nested too deeply to analyse")
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the scan
        error = FileError(source.rel, "internal", f"internal error ({type(exc).__name__}: {exc}); "
                                                  "please report it")
    return FileScan(error, extensions)


def finish(source: SourcePath, text: str, raw: Raw, rules: RuleSet, settings: FileSettings) -> FileResult:
    """Apply per-file-ignores and the file's suppression comments to its raw findings."""
    if isinstance(raw, FileError):
        return FileResult(source.rel, error=raw)
    kept = tuple(f for f in raw if not f.rule.startswith(settings.ignore)) if settings.ignore else raw
    if not kept and not settings.report_unused:
        return FileResult(source.rel, (), suppressed=len(raw))
    comments = suppressions(text, source.rel, source.kind, rules.by_code)
    kept, unused = apply_suppressions(kept, comments)
    return FileResult(source.rel, kept, suppressed=len(raw) - len(kept),
                      unused=tuple(unused) if settings.report_unused else ())


# -- parallel workers: Python files that pass the prefilter are parsed in a process pool

#: fewer candidate files than this are parsed in the main process (a pool costs ~0.1 s)
PARALLEL_MIN = 24
#: with this many Python files not in the cache, the workers run the prefilter as well
BULK_MIN = 200
_WORKER: dict[str, Any] = {}


def _init_worker(rules: RuleSet, target: Target | None) -> None:
    _WORKER["rules"], _WORKER["target"] = rules, target


def _work(batch: list[tuple[SourcePath, str, frozenset[str]]]) -> list[FileScan]:
    return [file_scan(source, text, _WORKER["rules"], first_party, None, _WORKER["target"])
            for source, text, first_party in batch]


def _parallel(jobs: list[tuple[SourcePath, str, frozenset[str]]], rules: RuleSet, target: Target | None,
              workers: int) -> list[FileScan]:
    """The :func:`file_scan` of each of ``jobs`` in order, from ``workers`` processes
    (largest files first, so one big file does not finish last)."""
    import concurrent.futures
    import multiprocessing

    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][1]))
    batches = [[jobs[i] for i in order[k::workers * 4]] for k in range(workers * 4)]
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                          else "spawn")
    results: dict[int, FileScan] = {}
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                                                initargs=(rules, target)) as pool:
        for k, raws in enumerate(pool.map(_work, batches)):
            for i, raw in zip(order[k::workers * 4], raws, strict=True):
                results[i] = raw
    return [results[i] for i in range(len(jobs))]


def _resolve_sources(base: Path, globs: Sequence[str]) -> tuple[list[Path], list[str]]:
    """Existing source files (globs expanded) and the names that matched nothing."""
    files: list[Path] = []
    missing: list[str] = []
    for pattern in globs:
        matched = sorted(base.glob(pattern)) if any(c in pattern for c in "*?[") \
            else [base / pattern] if (base / pattern).is_file() else []
        files += [p for p in matched if p.is_file()]
        if not matched:
            missing.append(pattern)
    return files, missing


class _Run:
    """The state of one scan: the queue of files, their results, lazily loaded tables."""

    def __init__(self, rules: RuleSet, root: Path, overrides: Mapping[Path, str],
                 config: Config | None, report_unused: bool, cache: Cache | None) -> None:
        self.rules = rules
        self.overrides = overrides
        self.config = config
        self.report_unused = report_unused
        self.cache = cache
        self.target = config.target if config else None
        self.root = root
        self._first_party = FirstParty(root)
        self.results: dict[Path, FileResult] = {}
        self.raw: dict[Path, Raw] = {}  #: computed ahead (cache, workers)
        self._texts: dict[Path, str] = {}
        self._no_extensions: set[Path] = set()  #: Python files known not to mention cpp_extension
        self._extensions: dict[Path, Extensions] = {}  #: declared by files that may declare some
        self.notes: list[str] = []
        self._hipify: frozenset[str] | None = None
        self._hipify_loaded = False

    def hipify(self) -> frozenset[str] | None:
        if not self._hipify_loaded:
            self._hipify_loaded = True
            if any(r.pattern.kind == "cuda-api" for r in self.rules.rules):
                self._hipify = load_hipify_names()
        return self._hipify

    def first_party(self, source: SourcePath) -> frozenset[str]:
        return self._first_party(source.path.parent)

    def text(self, source: SourcePath) -> str:
        """The file's text, read once per run (kept until :meth:`forget`)."""
        key = source.path.absolute()
        if key not in self._texts:
            override = self.overrides.get(key)
            self._texts[key] = override if override is not None else read_source(source.path, source.kind)
        return self._texts[key]

    def forget(self, source: SourcePath) -> None:
        self._texts.pop(source.path.absolute(), None)

    def prepare(self, sources: Sequence[SourcePath], workers: int | None) -> None:
        """Work out the raw results of Python files ahead: from the cache, from the
        prefilter (no candidate rule: nothing to parse), or in a process pool. With many
        files to look at, the workers run the prefilter too, and they also find the
        extensions declared in the files they parse."""
        pending: list[tuple[SourcePath, str, frozenset[str], str | None]] = []
        for source in sources:
            if source.kind != "python":
                continue
            try:
                text = self.text(source)
            except SourceError:
                continue  # scan() reports it
            first_party = self.first_party(source)
            key, cached = self._lookup(source, text, first_party)
            if "cpp_extension" not in text:
                self._no_extensions.add(source.path.absolute())
            if cached is not None:
                self._settle(source, cached, None)
            else:
                pending.append((source, text, first_party, key))
        count = workers if workers is not None else min(os.cpu_count() or 1, 8)
        if count > 1 and len(pending) >= BULK_MIN:
            jobs = pending
        else:
            jobs = []
            for job in pending:
                if self.rules.candidates(job[1]) or declares_extensions(job[0].kind, job[1]):
                    jobs.append(job)
                else:
                    self._settle(job[0], FileScan(()), job[3])
            if len(jobs) < PARALLEL_MIN or count <= 1:
                return  # scan() parses them one by one
        results = _parallel([(source, text, first_party) for source, text, first_party, _ in jobs],
                            self.rules, self.target, count)
        for (source, _, _, key), scanned in zip(jobs, results, strict=True):
            self._settle(source, scanned, key)

    def _settle(self, source: SourcePath, scanned: FileScan, key: str | None) -> None:
        """Keep a result computed ahead (and cache it); drop the text if nothing needs it."""
        absolute = source.path.absolute()
        self.raw[absolute] = scanned.raw
        self._keep_extensions(source, scanned)
        self._store(key, scanned)
        if scanned.raw == () and absolute in self._no_extensions and not self.report_unused:
            self.forget(source)  # keep memory flat

    def _keep_extensions(self, source: SourcePath, scanned: FileScan) -> None:
        if source.kind == "python" and source.path.absolute() not in self._no_extensions:
            self._extensions[source.path.absolute()] = scanned.extensions

    def _lookup(self, source: SourcePath, text: str, first_party: frozenset[str]
                ) -> tuple[str | None, FileScan | None]:
        """(cache key, the cached result or None); (None, None) without a cache."""
        if self.cache is None:
            return None, None
        key = self.cache.key(source.kind, source.rel, first_party, text)
        return key, self.cache.get(key)

    def _store(self, key: str | None, scanned: FileScan) -> None:
        """Cache a result; internal errors and timeouts are not kept (they may not recur)."""
        raw = scanned.raw
        if self.cache and key and not (isinstance(raw, FileError) and raw.kind in ("internal", "timeout")):
            self.cache.put(key, scanned)

    def scan(self, source: SourcePath) -> FileResult:
        key = source.path.absolute()
        if key in self.results:
            return self.results[key]
        if self.raw.get(key) == () and not self.report_unused:  # known clean: the text is not needed
            del self.raw[key]
            self.results[key] = FileResult(source.rel, ())
            return self.results[key]
        try:
            text = self.text(source)
        except SourceError as exc:
            self.results[key] = FileResult(source.rel, error=FileError(source.rel, exc.kind, exc.message))
            return self.results[key]
        raw = self.raw.pop(key, None)
        if raw is None:
            first_party = self.first_party(source) if source.kind == "python" else frozenset()
            cache_key, scanned = self._lookup(source, text, first_party)
            if scanned is None:
                hipify = self.hipify() if source.kind in ("cuda", "cpp") else None
                scanned = file_scan(source, text, self.rules, first_party, hipify, self.target)
                self._store(cache_key, scanned)
            if declares_extensions(source.kind, text):
                self._extensions[key] = scanned.extensions
            raw = scanned.raw
        settings = FileSettings(
            target=self.target, ignore=ignored_codes(self.config, source.path) if self.config else (),
            report_unused=self.report_unused)
        self.results[key] = finish(source, text, raw, self.rules, settings)
        return self.results[key]

    def extensions(self, source: SourcePath) -> Extensions:
        """The extensions a scanned Python file declares, found by the same parse as its
        findings (:meth:`scan`, :meth:`prepare`)."""
        return self._extensions.pop(source.path.absolute(), ())

    def source(self, path: Path, kind: str) -> SourcePath:
        return SourcePath(path, relative(path, self.root), kind)


def scan_paths(paths: Sequence[Path], rules: RuleSet, overrides: Mapping[Path, str] | None = None,
               *, config: Config | None = None, force_exclude: bool = False, report_unused: bool = False,
               progress: Callable[[int, int], None] | None = None, cache: Path | None = None,
               workers: int | None = None) -> ScanResult:
    """Scan files and directories. Raises :class:`portscan.discover.UsageError` for a
    path that does not exist; every per-file problem lands in ``errors``.

    ``overrides`` maps absolute paths to text scanned instead of the file's content
    (``portscan fix --diff`` scans the tree as it would be after fixing). ``config``
    brings excludes, per-file-ignores and the target; ``force_exclude`` applies the
    excludes to files named explicitly; ``progress(done, total)`` is called per file.
    ``cache`` is the cache folder (see :mod:`portscan.cache`; None: no cache);
    ``workers`` the size of the process pool (None: one per core when there is enough
    to parse; 1: none). Results do not depend on either."""
    excludes = Excludes(config.base, config.exclude, config.extend_exclude) if config else None
    discovery = discover(paths, excludes, force_exclude)
    salt = f"{rules.digest}|{config.target if config else None}|{table_digest()}"
    store = Cache(cache, salt) if cache is not None else None
    run = _Run(rules, discovery.root, overrides or {}, config, report_unused, store)
    try:
        run.prepare(discovery.files, workers)
        return _drain(run, discovery, progress)
    finally:
        if store is not None:
            store.close()


def _extension(run: _Run, declaring: SourcePath, name: str, line: int, files: list[Path],
               missing: list[str]) -> Extension:
    """An extension's summary: its sources and the project headers they include, each
    scanned as its own file kind (so a source reads the same whether the walk or the
    extension reaches it first), with the findings of both counted."""
    dirs = list(dict.fromkeys([*(f.parent for f in files), declaring.path.parent]))
    headers = [h for h in included_headers(files, dirs, lambda path: _text_or_none(run, path))
               if h.resolve().is_relative_to(run.root.resolve())]  # a scan reports inside its root
    sources = [run.source(f, file_kind(f) or "cuda") for f in files]
    included = [run.source(h, file_kind(h) or "cpp") for h in headers]
    results = [run.scan(s) for s in [*sources, *included]]
    return Extension(name=name, path=declaring.rel, line=line, sources=tuple(s.rel for s in sources),
                     findings=sum(len(r.findings) for r in results), missing=tuple(missing),
                     headers=tuple(h.rel for h in included))


def _text_or_none(run: _Run, path: Path) -> str | None:
    try:
        return run.text(run.source(path, file_kind(path) or "cpp"))
    except SourceError:
        return None


def _drain(run: _Run, discovery: Discovery, progress: Callable[[int, int], None] | None) -> ScanResult:
    queue = list(discovery.files)
    extensions: list[Extension] = []
    done = 0
    while queue:
        source = queue.pop(0)
        run.scan(source)
        done += 1
        if progress is not None:
            progress(done, done + len(queue))
        if source.kind == "requirements":
            try:
                text = run.text(source)  # read once, by run.scan
            except SourceError:
                continue
            run.forget(source)
            for include in requirements_includes(text):
                target = source.path.parent / include
                if target.is_file() and target.absolute() not in run.results:
                    queue.append(run.source(target, "requirements"))
        elif source.kind == "python":
            declared = run.extensions(source)
            run.forget(source)
            for name, line, globs in declared:
                files, missing = _resolve_sources(source.path.parent, globs)
                extensions.append(_extension(run, source, name, line, files, missing))
    findings = [f for result in run.results.values() for f in result.findings]
    errors = list(discovery.errors) + [r.error for r in run.results.values() if r.error]
    return ScanResult(
        root=str(discovery.root),
        files_scanned=len(run.results),
        findings=tuple(sorted(findings, key=Finding.sort_key)),
        errors=tuple(sorted(errors, key=lambda e: e.path)),
        extensions=tuple(sorted(extensions, key=lambda e: (e.path, e.line))),
        notes=tuple(run.notes),
        suppressed=sum(r.suppressed for r in run.results.values()),
        scanned=tuple(sorted(r.path for r in run.results.values())),
        unused_suppressions=tuple(u for r in run.results.values() for u in r.unused),
    )
