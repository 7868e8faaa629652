"""Orchestration: discover -> read -> prefilter -> parse -> match -> findings.

:func:`scan_source` is pure (text in, findings out); :func:`file_scan` never raises;
:func:`scan_paths` runs a whole scan and is what the CLI calls. Python files go
through the prefilter and the libcst matcher; every other kind has a matcher of its
own (:data:`portscan.filekinds.FILE_KINDS`). CUDA extensions declared in Python link their C++/CUDA sources
into the kernel scan; they come from the same parse and walk as the file's findings
(:func:`file_scan`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING
from pathlib import Path, PurePosixPath

from portscan.config import Config, ignored_codes
from portscan.filekinds import BY_NAME, MatchContext, file_kind
from portscan.headers import cuda_headers, declared_cuda_names, included_headers
from portscan.discover import (
    Excludes,
    Discovery,
    SourcePath,
    discover,
    FirstParty,
    project_imports,
    relative,
)
from portscan.match import Match, snippet
from portscan.kinds.common import is_at_or_below
from portscan.match.hipify import load_hipify_names, table_digest
from portscan.gated import gated_paths, inside
from portscan.ported import hip_built, manifests, ported_files, rocm_builds_listed
from portscan.vendored import vendored_library, vendored_roots
from portscan.unreferenced import VENDORED_FOLDER, unreferenced
from portscan.match.levels import (TYPE_CHECKING as TYPE_CHECKING_GUARD, ROCM_BUILD, UNREFERENCED, VENDOR_BRANCH,
                                   VENDORED)
from portscan.match.levels import guarded_severity
from portscan.match.floor import project_floor, unmark_declined, wants_torch
from portscan.bounded import PatternTimeout
from portscan.pool import map_in_processes
from portscan.cache import Cache, Extensions, FileScan, Raw
from portscan.config import Target
from portscan.suppress import apply as apply_suppressions
from portscan.suppress import suppressions
from portscan.model import Extension, FileError, FileResult, Finding, ScanResult, Severity, folders_of
from portscan.parse import (
    paused_gc,
    with_deep_stack,
    LineIndex,
    SourceError,
    decode_python,
    decode_text,
    parse_for_matching,
    read_bytes,
)
from portscan.ruleset.loader import RuleSet

if TYPE_CHECKING:
    from portscan.match.python import ModuleWalk

#: the identifier a finding or a use starts at
_WORD_AT = re.compile(r"\w+")


def fingerprint(rule: str, path: str, text: str) -> str:
    """A finding's identity that survives moves: rule, path and its source lines with all
    whitespace collapsed (semgrep's "syntactic context"), hashed."""
    normalised = " ".join(text.split())
    return hashlib.sha256(f"{rule}\0{path}\0{normalised}".encode()).hexdigest()[:20]


def to_finding(match: Match, path: str, lines: LineIndex, text: str, base: Severity | None = None,
               target: Target | None = None) -> Finding:
    rule = match.rule
    # a folded use is no import: the rule's guarded severity is for the import itself
    severity = guarded_severity(base or rule.severity, match.guard, None if match.folded else rule.guarded_severity)
    span = lines.span(match.start, match.end)
    first, last = lines.starts[span.line - 1], lines.starts[span.end_line] if span.end_line < len(
        lines.starts) else len(text)
    return Finding(
        rule=rule.code, name=rule.name, severity=severity, category=rule.category,
        confidence=rule.confidence, path=path, span=span,
        message=rule.render_message(match.variables), rewrite=rule.rewrite,
        references=rule.references, guard=match.guard,
        fix=(match.tier or rule.fix.tier).value if rule.fix is not None and match.guard is None and match.fixable
        and match.declined is None and rule.fix.arch_declined(target) is None else None,
        fingerprint=fingerprint(rule.code, path, text[first:last]),
        uses=tuple(sorted({lines.position(offset) for offset in match.also})),
    )


def match_text(text: str, kind: str, rules: RuleSet, first_party: frozenset[str] = frozenset(),
               hipify: frozenset[str] | None = None, parser: str = "ast", path: str = "") -> list[Match]:
    """Every match in one file's text (at ``path``, relative to the scan root). Raises
    :class:`SourceError` for unparsable Python.

    Python files that contain none of the literal tokens the rules need are not parsed.
    """
    file = BY_NAME[kind]
    applicable = rules.candidates(text) if file.prefiltered else rules.for_surface(kind)
    if not applicable:
        return []
    matches = file.matcher(text, applicable, MatchContext(first_party, hipify, parser, folders_of(path)))
    handled = {r.code for r in applicable if hasattr(r.pattern, "handled_in") and r.pattern.handled_in(text)}
    if handled:  # an env rule's file that also names the alternative variable
        matches = [m for m in matches if m.rule.code not in handled]
    if kind == "python":
        return matches
    from portscan.match.textfix import mark_text_fixes  # YAML and the wheel tables: for text files only

    return mark_text_fixes(text, kind, matches)


def scan_source(text: str, path: str, rules: RuleSet, first_party: frozenset[str] = frozenset(),
                kind: str | None = None, hipify: frozenset[str] | None = None,
                target: Target | None = None, parser: str = "ast") -> tuple[Finding, ...]:
    """Findings in one source text; the kind comes from the file name unless given. With
    a ``target``, rules report at the severity they declare for it (or not at all)."""
    kind = kind or file_kind(PurePosixPath(path)) or "python"
    return findings_from(text, path, match_text(text, kind, rules, first_party, hipify, parser, path), target)


def declares_extensions(kind: str, text: str) -> bool:
    """Can this file declare a CUDA/C++ extension (a Python file that mentions ``cpp_extension``)?"""
    return kind == "python" and "cpp_extension" in text


def _walk_declaring(text: str, rules: RuleSet, first_party: frozenset[str], parser: str, path: str
                    ) -> tuple[ModuleWalk | None, Extensions]:
    """One parse and one walk of a Python file that may declare extensions: the walk (for
    its findings) and the extensions it declares. A file no rule applies to is parsed
    for its extensions only, and then a parse error is no error of its own (the
    prefilter would not have parsed it): (None, ())."""
    from portscan.match.python import ModuleWalk

    applicable = rules.candidates(text)
    try:
        module = parse_for_matching(text, parser)
    except SourceError:
        if applicable:
            raise
        return None, ()
    walk = ModuleWalk(module, applicable, first_party, extensions=True, folders=folders_of(path))
    lines = LineIndex(text)
    return (walk if applicable else None,
            tuple((d.name, lines.position(d.offset)[0], d.sources) for d in walk.extensions))


def findings_from(text: str, path: str, matches: list[Match], target: Target | None) -> tuple[Finding, ...]:
    """The findings of one text's matches (before suppressions), sorted; with a ``target``,
    at the severity each rule declares for it."""
    if not matches:
        return ()
    for match in matches:  # non-Python matchers leave `matched` to the text itself
        if "matched" not in match.variables and isinstance(match.variables, dict):
            match.variables["matched"] = snippet(text[match.start:match.end])
    lines = LineIndex(text)
    pairs = []
    for match in matches:
        base = match.rule.severity_for(target)
        if base is not None:
            pairs.append((match, to_finding(match, path, lines, text, base, target)))
    return tuple(sorted(collapse(pairs), key=Finding.sort_key))


def _specificity(match: Match) -> tuple[str, int]:
    """The module an import rule reports, and how many dotted parts the longest of the
    rule's modules covering it has (``apex.normalization`` is more specific than ``apex``)."""
    module = match.variables.get("module", "")
    covering = [m for m in getattr(match.rule.pattern, "modules", ()) if is_at_or_below(module, m)]
    return module, max((m.count(".") + 1 for m in covering), default=0)


def _less_specific(a: Match, b: Match) -> bool:
    """Does ``b`` name ``a``'s module or one below it, with a more specific rule?"""
    (module_a, depth_a), (module_b, depth_b) = _specificity(a), _specificity(b)
    return is_at_or_below(module_b, module_a) and (module_b != module_a or depth_b > depth_a)


def collapse(pairs: Sequence[tuple[Match, Finding]]) -> list[Finding]:
    """One finding per CUDA-only import rather than one per use (issue 17, item 6):

    - on one import statement, only the most specific import rules are kept
      (``apex.normalization`` over ``apex``);
    - a folded use (an attribute use a ``uses = true`` rule asks for, or a name the
      ``try``'s handler binds to a fallback too) is listed in ``uses`` of its import's
      finding instead of being a finding of its own;
    - the other uses of one import that the same rule reports at the same severity are
      one finding, at the first, with the rest in ``uses``, where an import rule reports
      the import (the module is CUDA-only);
    - so are the uses through one import of a ``per_import`` name rule's library (NVIDIA
      Warp, CUDA-only as a whole), where no import rule reports the import;
    - a rule's findings on one subject (the local an ``if``/``elif`` table of device names
      compares, or the file of a ``once_per_file`` kernel rule's includes) are one finding,
      at the first, with the rest in ``uses``;
    - a module imported again by an import statement no guard lowers (``import cudnn`` at
      the top and inside a function) is one finding per rule and severity, at the first
      import, the others in ``uses``, with the uses of what they bind; a guarded import
      keeps its own finding, since each ``try`` has its own fallback.

    A finding with a fix marker stays one of its own: ``portscan fix`` rewrites it there,
    and the marker says so.
    """
    imports: dict[int, list[tuple[Match, Finding]]] = {}
    for match, finding in pairs:
        if match.binding is not None and match.rule.pattern.kind == "import" and not match.folded:
            imports.setdefault(match.binding, []).append((match, finding))
    dropped: set[int] = set()
    for found in imports.values():
        dropped.update(id(f) for m, f in found if any(other.rule.code != m.rule.code and _less_specific(m, other)
                                                      for other, _ in found))
    kept_imports = {binding: [f for _, f in found if id(f) not in dropped] for binding, found in imports.items()}
    extra: dict[int, list[tuple[int, int]]] = {}  # id(finding) -> its uses
    anchors: dict[tuple[object, ...], Finding] = {}
    merged: dict[int, int] = {}  # id(a finding listed as a use of another) -> id(that one)
    out: list[Finding] = []
    for match, finding in sorted(pairs, key=lambda pair: pair[1].sort_key()):
        if id(finding) in dropped:
            continue
        owners = kept_imports.get(match.binding, []) if match.binding is not None else []
        place = (finding.span.line, finding.span.column)
        if match.folded and owners:
            owner = next((f for f in owners if f.rule == finding.rule), owners[0])
            extra.setdefault(id(owner), []).append(place)
            continue
        key: tuple[object, ...] | None = None
        if ((owners or getattr(match.rule.pattern, "per_import", False)) and match.binding is not None
                and match.rule.pattern.kind != "import" and finding.fix is None):
            key = (finding.rule, match.binding, finding.severity, finding.guard)
        elif match.subject is not None and finding.fix is None:
            key = (finding.rule, "subject", match.subject, finding.severity, finding.guard)
        elif (match.rule.pattern.kind == "import" and match.binding is not None and finding.guard is None
              and finding.fix is None and match.variables.get("module")):
            key = (finding.rule, "import", match.variables["module"], finding.severity)
        if key is not None:
            if key in anchors:
                extra.setdefault(id(anchors[key]), []).append(place)
                merged[id(finding)] = id(anchors[key])
                continue
            anchors[key] = finding
        out.append(finding)
    for fid in [fid for fid in extra if fid in merged]:  # the uses of an import merged into an earlier one
        extra.setdefault(merged[fid], []).extend(extra.pop(fid))
    return [dataclasses.replace(f, uses=tuple(sorted({*f.uses, *extra[id(f)]}))) if id(f) in extra else f
            for f in out]


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
              hipify: frozenset[str] | None = None, target: Target | None = None, parser: str = "ast"
              ) -> FileScan:
    """Findings in one file's text before suppressions (or why it cannot be scanned), and
    the extensions it declares, from one parse. Pure and never raises: this is what the
    cache stores and the workers return."""
    extensions: Extensions = ()  # known before matching, so kept if matching fails

    def scan() -> tuple[Finding, ...]:
        nonlocal extensions
        if declares_extensions(source.kind, text):
            walk, extensions = _walk_declaring(text, rules, first_party, parser, source.rel)
            return findings_from(text, source.rel, walk.matches() if walk is not None else [], target)
        return scan_source(text, source.rel, rules, first_party, source.kind, hipify, target, parser)

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


#: the file kinds whose files a scan works out ahead, in the process pool when there are
#: enough: Python (prefiltered on the rules' tokens) and C++/CUDA kernel code
POOLED = frozenset({"python", "cpp", "cuda"})
_KERNEL_KINDS = frozenset({"cpp", "cuda"})


def _work(settings: tuple[RuleSet, Target | None, frozenset[str] | None, str],
          job: tuple[SourcePath, str, frozenset[str]]) -> FileScan:
    rules, target, hipify, parser = settings
    source, text, first_party = job
    return file_scan(source, text, rules, first_party, hipify if source.kind in _KERNEL_KINDS else None, target,
                     parser)


def _parallel(jobs: list[tuple[SourcePath, str, frozenset[str]]], rules: RuleSet, target: Target | None,
              hipify: frozenset[str] | None, parser: str, workers: int,
              meanwhile: Callable[[], None] | None = None) -> list[FileScan]:
    """The :func:`file_scan` of each of ``jobs`` in order, from ``workers`` processes
    (``meanwhile``: this process's own work while they run)."""
    return map_in_processes(_work, (rules, target, hipify, parser), jobs, workers, size=lambda job: len(job[1]),
                            meanwhile=meanwhile)


def _resolve_sources(base: Path, globs: Sequence[str]) -> tuple[list[Path], list[str]]:
    """Existing source files (globs expanded) and the names that matched nothing. Paths
    are normalised (``functions/../src/k.cu`` is ``src/k.cu``), so a source the walk
    found too is scanned, and reported, once."""
    files: list[Path] = []
    missing: list[str] = []
    for pattern in globs:
        matched = sorted(base.glob(pattern)) if any(c in pattern for c in "*?[") \
            else [base / pattern] if (base / pattern).is_file() else []
        files += [Path(os.path.normpath(p)) for p in matched if p.is_file()]
        if not matched:
            missing.append(pattern)
    return files, missing


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What every file of one scan is scanned with; nothing here changes during the scan
    but ``facts``, a memo of what the tree says, which each fact enters once."""

    rules: RuleSet
    root: Path
    overrides: Mapping[Path, str]  #: absolute path -> text scanned instead of the file's
    config: Config | None
    report_unused: bool
    cache: Cache | None
    known: Mapping[Path, tuple[Finding, ...]]  #: absolute path -> raw findings worked out already
    first_party: FirstParty
    hipify: Callable[[], frozenset[str] | None]  #: loaded on first use
    parser: str = "ast"  #: how Python is parsed (see :data:`portscan.parse.PARSERS`)
    #: project-level facts worked out in this scan (see :func:`_cached_fact`), by name
    facts: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def target(self) -> Target | None:
        return self.config.target if self.config else None

    @property
    def excludes(self) -> Excludes | None:
        return Excludes.of(self.config)

    def source(self, path: Path, kind: str) -> SourcePath:
        return SourcePath(path, relative(path, self.root), kind)

    def text(self, source: SourcePath) -> str:
        override = self.overrides.get(source.path.absolute())
        return override if override is not None else read_source(source.path, source.kind)

    def settings(self, source: SourcePath) -> FileSettings:
        ignore = ignored_codes(self.config, source.path) if self.config else ()
        return FileSettings(target=self.target, ignore=ignore, report_unused=self.report_unused)

    def own_modules(self, source: SourcePath) -> frozenset[str]:
        """The project's own top-level modules as a Python file sees them (other kinds
        do not use them: no directory listing for them)."""
        return self.first_party(source.path.parent) if source.kind == "python" else frozenset()

    def lookup(self, source: SourcePath, text: str) -> tuple[str | None, FileScan | None]:
        """(cache key, the result worked out already or cached, else None); no key
        without a cache or for a result worked out already."""
        known = self.known.get(source.path.absolute())
        if known is not None:
            return None, FileScan(known)
        if self.cache is None:
            return None, None
        key = self.cache.key(source.kind, source.rel, self.own_modules(source), text)
        return key, self.cache.get(key)

    def store(self, key: str | None, scanned: FileScan) -> None:
        """Cache a result; internal errors and timeouts are not kept (they may not recur)."""
        raw = scanned.raw
        if self.cache and key and not (isinstance(raw, FileError) and raw.kind in ("internal", "timeout")):
            self.cache.put(key, scanned)

    def scanned(self, source: SourcePath, text: str) -> FileScan:
        """The file's raw result: worked out already, cached, or scanned now (and cached)."""
        key, cached = self.lookup(source, text)
        if cached is not None:
            return cached
        hipify = self.hipify() if source.kind in _KERNEL_KINDS else None
        scanned = file_scan(source, text, self.rules, self.own_modules(source), hipify, self.target, self.parser)
        self.store(key, scanned)
        return scanned


@dataclass(frozen=True, slots=True)
class _Ahead:
    """A Python or kernel file's raw result worked out before the file's turn (cache,
    prefilter, process pool), with its text when finishing it still needs the text."""

    scanned: FileScan
    text: str | None


@dataclass(frozen=True, slots=True)
class _Outcome:
    """One file scanned: its result, the files it brings in (``-r`` includes) and the
    extensions it declares."""

    result: FileResult
    includes: tuple[Path, ...] = ()
    declared: Extensions = ()


def _needs_text(scanned: FileScan, text: str, inputs: _Inputs) -> bool:
    return scanned.raw != () or inputs.report_unused or declares_extensions("python", text)


def _ahead(sources: Sequence[SourcePath], inputs: _Inputs, workers: int | None,
           early: Callable[[list[Finding]], None] | None = None) -> dict[Path, _Ahead]:
    """The raw results of Python and kernel files worked out ahead: worked out already
    (``known``), from the cache, from a prefilter (Python: no candidate rule; C++: no
    CUDA token; either way nothing to parse), or in a process pool. With many Python
    files to look at, the workers run the prefilter too, and they also find the
    extensions declared in the files they parse, while this process settles the kernel
    files and then calls ``early`` with their raw findings (to work out project-level
    facts while the pool still runs). Files left out are scanned in their turn."""
    ahead: dict[Path, _Ahead] = {}

    def settle(source: SourcePath, text: str, scanned: FileScan) -> None:
        ahead[source.path.absolute()] = _Ahead(scanned, text if _needs_text(scanned, text, inputs) else None)

    def pending(kinds: frozenset[str]) -> list[tuple[SourcePath, str, str | None]]:
        """The files of these kinds still to scan; the rest settled (cache, prefilter)."""
        found = []
        for source in sources:
            if source.kind not in kinds:
                continue
            try:
                text = inputs.text(source)
            except SourceError:
                continue  # its turn reports it
            key, cached = inputs.lookup(source, text)
            if cached is not None:
                settle(source, text, cached)
            elif BY_NAME[source.kind].may_match(text):
                found.append((source, text, key))
            else:
                inputs.store(key, FileScan(()))
                settle(source, text, FileScan(()))
        return found

    def scan_here(jobs: Sequence[tuple[SourcePath, str, str | None]]) -> None:
        for source, text, key in jobs:
            scanned = file_scan(source, text, inputs.rules, inputs.own_modules(source),
                                inputs.hipify() if source.kind in _KERNEL_KINDS else None, inputs.target,
                                inputs.parser)
            inputs.store(key, scanned)
            settle(source, text, scanned)

    def kernels_meanwhile() -> None:
        scan_here(pending(_KERNEL_KINDS))
        if early is not None:
            settled = (ahead.get(s.path.absolute()) for s in sources if s.kind in _KERNEL_KINDS)
            early([f for a in settled if a is not None and isinstance(a.scanned.raw, tuple) for f in a.scanned.raw])

    count = workers if workers is not None else min(os.cpu_count() or 1, 8)
    python = pending(frozenset({"python"}))
    if count > 1 and len(python) >= BULK_MIN:  # the pool takes the Python files; kernels meanwhile
        jobs, meanwhile = python, kernels_meanwhile
    else:
        jobs, meanwhile = [], None
        for source, text, key in [*python, *pending(_KERNEL_KINDS)]:
            if (source.kind != "python" or inputs.rules.candidates(text)
                    or declares_extensions(source.kind, text)):
                jobs.append((source, text, key))
            else:
                inputs.store(key, FileScan(()))
                settle(source, text, FileScan(()))
        if len(jobs) < PARALLEL_MIN or count <= 1:
            return ahead  # the rest are parsed one by one, in their turn
    hipify = inputs.hipify() if any(source.kind in _KERNEL_KINDS for source, _, _ in jobs) else None
    results = _parallel([(source, text, inputs.own_modules(source)) for source, text, _ in jobs],
                        inputs.rules, inputs.target, hipify, inputs.parser, count, meanwhile)
    for (source, text, key), scanned in zip(jobs, results, strict=True):
        inputs.store(key, scanned)
        settle(source, text, scanned)
    return ahead


def _outcome(source: SourcePath, inputs: _Inputs, ahead: _Ahead | None) -> _Outcome:
    """Scan one file (or finish what was worked out ahead for it)."""
    if ahead is not None and ahead.text is None:  # known clean, declares nothing: no need to read it
        return _Outcome(FileResult(source.rel, ()))
    try:
        text = ahead.text if ahead is not None and ahead.text is not None else inputs.text(source)
    except SourceError as exc:
        return _Outcome(FileResult(source.rel, error=FileError(source.rel, exc.kind, exc.message)))
    scanned = ahead.scanned if ahead is not None else inputs.scanned(source, text)
    result = finish(source, text, scanned.raw, inputs.rules, inputs.settings(source))
    if source.kind == "requirements":
        from portscan.match.manifests import requirements_includes  # the manifest reader, for manifests only

        includes = tuple(source.path.parent / include for include in requirements_includes(text))
        return _Outcome(result, includes=tuple(p for p in includes if p.is_file()))
    declared = scanned.extensions if declares_extensions(source.kind, text) else ()
    return _Outcome(result, declared=declared)


def open_cache(cache: Path | None, rules: RuleSet, config: Config | None, parser: str = "ast") -> Cache | None:
    """The scan cache in folder ``cache`` for this rule pack, target and parser (None: no
    cache; the parsers give the same findings, but a cache is no place to find out)."""
    salt = f"{rules.digest}|{config.target if config else None}|{table_digest()}|{parser}"
    return Cache(cache, salt) if cache is not None else None


def scan_paths(paths: Sequence[Path], rules: RuleSet, overrides: Mapping[Path, str] | None = None,
               *, config: Config | None = None, force_exclude: bool = False, report_unused: bool = False,
               progress: Callable[[int, int], None] | None = None, cache: Path | None = None,
               workers: int | None = None, known: Mapping[Path, tuple[Finding, ...]] | None = None,
               parser: str = "ast") -> ScanResult:
    """Scan files and directories. Raises :class:`portscan.discover.UsageError` for a
    path that does not exist; every per-file problem lands in ``errors``.

    ``overrides`` maps absolute paths to text scanned instead of the file's content
    (``portscan fix --diff`` scans the tree as it would be after fixing). ``config``
    brings excludes, per-file-ignores and the target; ``force_exclude`` applies the
    excludes to files named explicitly; ``progress(done, total)`` is called per file.
    ``cache`` is the cache folder (see :mod:`portscan.cache`; None: no cache);
    ``workers`` the size of the process pool (None: one per core when there is enough
    to parse; 1: none). Results do not depend on either. ``known`` maps absolute paths of
    Python files to their findings before suppressions, already worked out from the
    same text (``portscan fix`` passes those of its last pass). ``parser`` says how
    Python is parsed (:data:`portscan.parse.PARSERS`; the findings are the same)."""
    excludes = Excludes.of(config)
    discovery = discover(paths, excludes, force_exclude)
    store = open_cache(cache, rules, config, parser)
    wants_table = any(r.pattern.kind == "cuda-api" for r in rules.rules)
    inputs = _Inputs(rules, discovery.root, overrides or {}, config, report_unused, store, known or {},
                     FirstParty(discovery.root),
                     functools.cache(lambda: load_hipify_names() if wants_table else None), parser)
    discovery = _headers_as_cuda(discovery, inputs)
    try:
        early = functools.partial(_facts_ahead, discovery, inputs)
        return _scan(discovery, inputs, _ahead(discovery.files, inputs, workers, early), progress)
    finally:
        if store is not None:
            store.close()


def _headers_as_cuda(discovery: Discovery, inputs: _Inputs) -> Discovery:
    """The discovered C++ headers that CUDA sources include become ``cuda`` files (see
    :func:`portscan.headers.cuda_headers`), so the walk and an extension's summary read
    them alike whichever reaches them first."""
    sources = [s.path for s in discovery.files if s.kind == "cuda"]
    if not sources:
        return discovery
    included = cuda_headers(sources, lambda path: _text_or_none(inputs, path))
    if not included:
        return discovery
    return dataclasses.replace(discovery, files=tuple(
        dataclasses.replace(s, kind="cuda") if s.kind == "cpp" and s.path.resolve() in included else s
        for s in discovery.files))


def _extension(inputs: _Inputs, scan: Callable[[SourcePath], _Outcome], declaring: SourcePath, name: str,
               line: int, files: list[Path], missing: list[str]) -> Extension:
    """An extension's summary: its sources and the project headers they include, each
    scanned as its own file kind (so a source reads the same whether the walk or the
    extension reaches it first), with the findings of both counted."""
    dirs = list(dict.fromkeys([*(f.parent for f in files), declaring.path.parent]))
    headers = [h for h in included_headers(files, dirs, lambda path: _text_or_none(inputs, path))
               if h.resolve().is_relative_to(inputs.root.resolve())]  # a scan reports inside its root
    sources = [inputs.source(f, file_kind(f) or "cuda") for f in files]
    kernels = [f for f in files if file_kind(f) == "cuda"]
    in_cuda = cuda_headers(kernels, lambda path: _text_or_none(inputs, path)) if kernels else frozenset()
    included = [inputs.source(h, "cuda" if h.resolve() in in_cuda else file_kind(h) or "cpp") for h in headers]
    results = [scan(s).result for s in [*sources, *included]]
    return Extension(name=name, path=declaring.rel, line=line, sources=tuple(s.rel for s in sources),
                     findings=sum(len(r.findings) for r in results), missing=tuple(missing),
                     headers=tuple(h.rel for h in included))


def _text_or_none(inputs: _Inputs, path: Path) -> str | None:
    return _source_text(inputs, inputs.source(path, file_kind(path) or "cpp"))


def _source_text(inputs: _Inputs, source: SourcePath) -> str | None:
    """A file's text, or None where it cannot be read or decoded (its own turn reports that)."""
    try:
        return inputs.text(source)
    except SourceError:
        return None


def _in_vendored_library(findings: list[Finding], discovery: Discovery) -> list[Finding]:
    """Findings inside a vendored copy of a library (CUTLASS under ``third_party/cutlass``,
    Eigen, CMake's ``FindCUDA.cmake``) take the ``vendored`` guard: none of them is the
    project's to port; its own uses of the library stay reported (see :mod:`portscan.vendored`)."""
    roots = vendored_roots(discovery.files) if findings else {}
    if not roots:
        return findings
    return [dataclasses.replace(f, severity=Severity.INFO, guard=VENDORED, fix=None)
            if f.guard != TYPE_CHECKING_GUARD and vendored_library(f.path, roots) is not None else f
            for f in findings]


def _vendor_gated(findings: list[Finding], discovery: Discovery, inputs: _Inputs,
                  extensions: Sequence[Extension]) -> list[Finding]:
    """Findings in the project's modules that it imports only inside vendor branches, and
    in the sources and headers of the extensions those modules declare (see
    :mod:`portscan.gated`), and in what :mod:`portscan.ported` finds (the sources its own
    CMake builds for HIP, files with a ROCm sibling, files named for one CUDA release),
    take the ``vendor-branch`` guard."""
    if not any(f.severity is not Severity.INFO for f in findings):
        return findings
    root = discovery.root
    gated = _gated_cached(discovery, inputs)
    gated |= {root / rel for e in extensions if inside(root / e.path, gated) for rel in (*e.sources, *e.headers)}
    # hip_built reads the CMake files, then the sources and headers they build: without a
    # CMake file it reads nothing and finds nothing, so there is no key to make then
    cmake = [s for s in discovery.files if s.kind == "cmake"]
    built = _cached_fact(inputs, "hip-built", cmake + [s for s in discovery.files if s.kind in _KERNEL_KINDS],
                         lambda: tuple(sorted(hip_built(discovery.files, lambda path: _text_or_none(inputs, path),
                                                        root)))) if cmake else ()
    ported = ported_files(discovery.files, frozenset(built))
    if not gated and not ported:
        return findings
    return [dataclasses.replace(f, severity=Severity.INFO, guard=VENDOR_BRANCH, fix=None)
            if f.guard != TYPE_CHECKING_GUARD and (f.path in ported or (gated and inside(root / f.path, gated)))
            else f for f in findings]


def _own_cuda_names(findings: list[Finding], discovery: Discovery, inputs: _Inputs) -> list[Finding]:
    """Findings of ``cuda-api`` rules on a name the project's own C++ declares (gloo's
    ``cudaSum``, ``cudaNumDevices()``) are dropped: the project's name, no CUDA API (see
    :func:`portscan.headers.declared_cuda_names`; a project-level fact, read only when
    such a finding exists); so are such names among the uses an ``api_prefixes`` rule
    lists (CuPy's own ``cudnnSetPersistentRNNPlan`` stubs beside its ``#include <cudnn.h>``)."""
    api, folding = _api_codes(inputs.rules)
    flagged = [f for f in findings if _names_api(f, api, folding)]
    if not flagged:
        return findings
    names = _cuda_names(discovery, inputs)
    if not names:
        return findings

    @functools.cache
    def lines_of(path: str) -> list[str]:
        return (_text_or_none(inputs, discovery.root / path) or "").splitlines()

    def word_at(path: str, line: int, column: int) -> str:
        lines = lines_of(path)
        found = _WORD_AT.match(lines[line - 1], column - 1) if line <= len(lines) else None
        return found.group(0) if found else ""

    own = {id(f) for f in flagged if f.rule in api and word_at(f.path, f.span.line, f.span.column) in names}
    return [dataclasses.replace(f, uses=tuple(u for u in f.uses if word_at(f.path, *u) not in names))
            if f.rule in folding and f.uses else f
            for f in findings if id(f) not in own]


def _rocm_builds(findings: list[Finding], discovery: Discovery, inputs: _Inputs) -> list[Finding]:
    """Findings of rules whose library the project installs in a ROCm build of its own
    (a rule's ``rocm_builds``, listed in one of its manifests: ``cupy-rocm-7-0``) are
    ``info``, guard ``rocm-build``: the library works on ROCm for this project."""
    wanted = {rule.code: rule.rocm_builds for rule in inputs.rules.rules if rule.rocm_builds}
    if not any(f.rule in wanted and f.severity is not Severity.INFO for f in findings):
        return findings
    texts = [t for t in map(functools.partial(_text_or_none, inputs), (m.path for m in manifests(discovery.files)))
             if t is not None]
    listed = rocm_builds_listed(texts, {g for globs in wanted.values() for g in globs})
    settled = {code for code, globs in wanted.items() if listed.intersection(globs)}
    if not settled:
        return findings
    return [dataclasses.replace(f, severity=Severity.INFO, guard=ROCM_BUILD, fix=None)
            if f.rule in settled and f.guard != TYPE_CHECKING_GUARD and f.severity is not Severity.INFO else f
            for f in findings]


def _unreferenced_vendored(findings: list[Finding], discovery: Discovery, inputs: _Inputs) -> list[Finding]:
    """Findings in a vendored Python copy, inside a definition nothing else in the project
    names (their listed uses too), take the ``unreferenced`` guard (info): that code never
    runs here (see :mod:`portscan.unreferenced`)."""
    def places(f: Finding) -> list[tuple[str, int]]:  # its own line and the uses it lists
        return [(f.path, line) for line in (f.span.line, *(line for line, _ in f.uses))]

    candidates = [f for f in findings
                  if f.severity is not Severity.INFO and VENDORED_FOLDER.search(f.path) and f.path.endswith(".py")]
    if not candidates:
        return findings
    python = [s.rel for s in discovery.files if s.kind == "python"]
    dead = unreferenced([p for f in candidates for p in places(f)], python,
                        lambda rel: _text_or_none(inputs, discovery.root / rel))
    lowered = {id(f) for f in candidates if dead.issuperset(places(f))}
    return [dataclasses.replace(f, severity=Severity.INFO, guard=UNREFERENCED, fix=None) if id(f) in lowered else f
            for f in findings]


def _api_codes(rules: RuleSet) -> tuple[frozenset[str], frozenset[str]]:
    """The codes of the ``cuda-api`` rules, and of the rules whose ``api_prefixes`` list
    such names as uses."""
    return (frozenset(r.code for r in rules.rules if r.pattern.kind == "cuda-api"),
            frozenset(r.code for r in rules.rules if getattr(r.pattern, "api_prefixes", ())))


def _names_api(finding: Finding, api: frozenset[str], folding: frozenset[str]) -> bool:
    """Whether a finding names CUDA APIs the project might declare itself (see
    :func:`_api_codes`): :func:`_own_cuda_names` reads those."""
    return finding.rule in api or (finding.rule in folding and bool(finding.uses))


def _facts_ahead(discovery: Discovery, inputs: _Inputs, kernel_findings: list[Finding]) -> None:
    """Work out, while the process pool parses the Python files, the project-level facts
    the kernel files' raw findings will need (after the pool there is nothing to overlap
    with: on the torch tree these took 3.7 s of a 26 s cold scan). A fact needed only by a
    finding a later step drops is worked out for nothing, never wrongly: each is a pure
    function of the tree."""
    if any(f.severity is not Severity.INFO for f in kernel_findings):
        _gated_cached(discovery, inputs)
    api, folding = _api_codes(inputs.rules)
    if any(_names_api(f, api, folding) for f in kernel_findings):
        _cuda_names(discovery, inputs)


def _cuda_names(discovery: Discovery, inputs: _Inputs) -> frozenset[str]:
    """:func:`portscan.headers.declared_cuda_names` of the tree's C++ and CUDA sources."""
    kernels = [s for s in discovery.files if s.kind in _KERNEL_KINDS]
    return frozenset(_cached_fact(inputs, "cuda-names", kernels, lambda: tuple(sorted(declared_cuda_names(
        t for s in kernels if (t := _text_or_none(inputs, s.path)))))))


def _gated_cached(discovery: Discovery, inputs: _Inputs) -> frozenset[Path]:
    """:func:`portscan.gated.gated_paths`, kept in the cache under the size and mtime of
    every Python file of the tree (a warm scan reads no file twice for it)."""
    python = [s for s in discovery.files if s.kind == "python"]
    text = functools.partial(_source_text, inputs)
    found = _cached_fact(inputs, "gated", python, lambda: tuple(
        sorted(relative(g, discovery.root) for g in gated_paths(python, text, discovery.root))))
    return frozenset(discovery.root / rel for rel in found)


def _cached_fact(inputs: _Inputs, name: str, sources: Sequence[SourcePath],
                 compute: Callable[[], tuple[str, ...]]) -> tuple[str, ...]:
    """A project-level fact read from ``sources``, worked out once per scan (``name``
    says which; the sources are the tree's, the same at every call)."""
    found = inputs.facts.get(name)
    if found is None:
        found = inputs.facts[name] = _stored_fact(inputs, name, sources, compute)
    return found


def _stored_fact(inputs: _Inputs, name: str, sources: Sequence[SourcePath],
                 compute: Callable[[], tuple[str, ...]]) -> tuple[str, ...]:
    """A project-level fact kept in the cache under its sources' sizes and mtimes (a warm
    scan reads none of them again for it); worked out afresh without a cache or for
    texts held in memory (they have no mtime)."""
    cache = None if inputs.overrides else inputs.cache
    if cache is None:
        return compute()
    digest = hashlib.sha256(cache.salt.encode())
    try:
        for source in sources:
            stat = source.path.stat()
            digest.update(f"{source.rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    except OSError:
        return compute()
    key = f"{name}:{digest.hexdigest()}"
    cached = cache.get_as(tuple[str, ...], key)
    if cached is not None:
        return cached
    found = compute()
    cache.put_as(tuple[str, ...], key, found)
    return found


def escalated(findings: list[Finding], rules: RuleSet) -> list[Finding]:
    """Findings of rules with ``[escalate]`` raised where the scan also reports one of the
    rules it names: a project-level fact decides (``import bitsandbytes`` is a warning
    only where a requirement keeps bitsandbytes below its first ROCm release). Guards
    still lower the raised severity; a finding is never lowered here."""
    reported = {f.rule for f in findings if f.severity is not Severity.INFO}  # a guarded one decides nothing
    raise_to = {r.code: r for r in rules.rules
                if r.escalate is not None and reported.intersection(r.escalate.when)}
    if not raise_to:
        return findings
    out = []
    for f in findings:
        rule = raise_to.get(f.rule)
        if rule is not None and rule.escalate is not None:
            severity = guarded_severity(rule.escalate.severity, f.guard, rule.guarded_severity)
            if severity.rank > f.severity.rank:
                f = dataclasses.replace(f, severity=severity)
        out.append(f)
    return out


def _fix_marks(findings: list[Finding], rules: RuleSet, root: Path, excludes: Excludes | None = None
               ) -> list[Finding]:
    """Findings whose fix needs a newer torch than the project at ``root`` allows, or
    waits for a change to code that imports a module (``[fix] code-first``), are not
    marked fixable (project-level facts, like :func:`escalated`)."""
    marked = [r for code in {f.rule for f in findings if f.fix is not None}
              if (r := rules.by_code.get(code)) is not None]
    fixes = {r.code: r.fix for r in marked if r.fix is not None and r.fix.code_first}
    if fixes:
        imported = project_imports(root, {m for fix in fixes.values() for m in fix.code_first}, excludes)
        held = {code for code, fix in fixes.items() if fix.code_first_declined(imported)}
        findings = [dataclasses.replace(f, fix=None) if f.rule in held else f for f in findings]
    if not wants_torch(marked):
        return findings
    return unmark_declined(findings, rules.rules, project_floor(root))


def _scan(discovery: Discovery, inputs: _Inputs, ahead: dict[Path, _Ahead],
          progress: Callable[[int, int], None] | None) -> ScanResult:
    """Every discovered file in turn, then the files they bring in: requirement
    includes, and the C++/CUDA sources of the extensions Python files declare."""
    outcomes: dict[Path, _Outcome] = {}

    def scan(source: SourcePath) -> _Outcome:
        key = source.path.absolute()
        if key not in outcomes:
            outcomes[key] = _outcome(source, inputs, ahead.pop(key, None))
        return outcomes[key]

    queue = list(discovery.files)
    extensions: list[Extension] = []
    done = 0
    while queue:
        source = queue.pop(0)
        outcome = scan(source)
        done += 1
        if progress is not None:
            progress(done, done + len(queue))
        queue += [inputs.source(p, "requirements") for p in outcome.includes if p.absolute() not in outcomes]
        for name, line, globs in outcome.declared:
            files, missing = _resolve_sources(source.path.parent, globs)
            extensions.append(_extension(inputs, scan, source, name, line, files, missing))
    results = [o.result for o in outcomes.values()]
    errors = list(discovery.errors) + [r.error for r in results if r.error]
    findings = _own_cuda_names(_vendor_gated(_in_vendored_library([f for r in results for f in r.findings], discovery),
                                             discovery, inputs, extensions), discovery, inputs)
    findings = _unreferenced_vendored(_rocm_builds(findings, discovery, inputs), discovery, inputs)
    return ScanResult(
        root=str(discovery.root),
        files_scanned=len(results),
        findings=tuple(sorted(_fix_marks(escalated(findings, inputs.rules),
                                         inputs.rules, discovery.root, inputs.excludes),
                              key=Finding.sort_key)),
        errors=tuple(sorted(errors, key=lambda e: e.path)),
        extensions=tuple(sorted(extensions, key=lambda e: (e.path, e.line))),
        suppressed=sum(r.suppressed for r in results),
        scanned=tuple(sorted(r.path for r in results)),
        unused_suppressions=tuple(u for r in results for u in r.unused),
    )
