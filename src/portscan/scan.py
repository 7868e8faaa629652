"""Orchestration: discover -> read -> prefilter -> parse -> match -> findings.

:func:`scan_source` is pure (text in, findings out); :func:`scan_file` never raises;
:func:`scan_paths` runs a whole scan and is what the CLI calls. Python files go
through the prefilter and the libcst matcher; every other kind has a matcher of its
own (:data:`MATCHERS`). CUDA extensions declared in Python link their C++/CUDA sources
into the kernel scan.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from portscan.config import Config, ignored_codes
from portscan.discover import (
    Excludes,
    SourcePath,
    discover,
    file_kind,
    first_party_modules,
    modules_in,
    relative,
)
from portscan.match import Match
from portscan.match.containers import match_dockerfile
from portscan.match.guards import guarded_severity
from portscan.match.kernels import HIPIFY_UNAVAILABLE, load_hipify_names, match_cuda
from portscan.match.manifests import (
    match_conda,
    match_pyproject,
    match_requirements,
    match_setup_cfg,
    requirements_includes,
)
from portscan.match.python import find_extensions, match_python
from portscan.match.syntax import snippet
from portscan.match.shell import match_shell
from portscan.match.yamlfiles import match_compose
from portscan.config import Target
from portscan.suppress import apply as apply_suppressions
from portscan.suppress import suppressions
from portscan.model import Extension, FileError, FileResult, Finding, ScanResult, Severity
from portscan.parse import (
    LineIndex,
    SourceError,
    decode_python,
    decode_text,
    parse_python,
    read_bytes,
)
from portscan.ruleset import Rule, RuleSet

#: File kind -> matcher, for everything that is neither Python nor a kernel source.
MATCHERS: dict[str, Callable[[str, Sequence[Rule]], list[Match]]] = {
    "requirements": match_requirements,
    "pyproject": match_pyproject,
    "setupcfg": match_setup_cfg,
    "conda": match_conda,
    "dockerfile": match_dockerfile,
    "compose": match_compose,
    "shell": match_shell,
}


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
        fix=rule.fix.tier.value if rule.fix is not None and match.guard is None and match.fixable else None,
        fingerprint=fingerprint(rule.code, path, text[first:last]),
    )


def match_text(text: str, kind: str, rules: RuleSet, first_party: frozenset[str] = frozenset(),
               hipify: frozenset[str] | None = None) -> list[Match]:
    """Every match in one file's text. Raises :class:`SourceError` for unparsable Python.

    Python files that contain none of the literal tokens the rules need are not parsed.
    """
    if kind == "python":
        candidates = rules.candidates(text)
        if not candidates:
            return []
        return match_python(parse_python(text), candidates, first_party)
    applicable = rules.for_surface(kind)
    if not applicable:
        return []
    if kind == "cuda":
        return match_cuda(text, applicable, hipify)
    return MATCHERS[kind](text, applicable)


def scan_source(text: str, path: str, rules: RuleSet, first_party: frozenset[str] = frozenset(),
                kind: str | None = None, hipify: frozenset[str] | None = None,
                target: Target | None = None) -> tuple[Finding, ...]:
    """Findings in one source text; the kind comes from the file name unless given. With
    a ``target``, rules report at the severity they declare for it (or not at all)."""
    kind = kind or file_kind(PurePosixPath(path)) or "python"
    matches = match_text(text, kind, rules, first_party, hipify)
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


def scan_file(source: SourcePath, rules: RuleSet, first_party: frozenset[str],
              hipify: frozenset[str] | None = None, text: str | None = None,
              settings: FileSettings = FileSettings()) -> FileResult:
    """Scan one file (or ``text`` in its place), then apply per-file-ignores and the
    file's suppression comments. Never raises: problems come back as ``FileResult.error``."""
    try:
        if text is None:
            text = read_source(source.path, source.kind)
        findings = scan_source(text, source.rel, rules, first_party, source.kind, hipify, settings.target)
        kept = tuple(f for f in findings if not f.rule.startswith(settings.ignore)) if settings.ignore \
            else findings
        if not kept and not settings.report_unused:
            return FileResult(source.rel, (), suppressed=len(findings))
        comments = [c for c in suppressions(text, source.rel, source.kind) if c.code in rules.by_code]
        kept, unused = apply_suppressions(kept, comments)
        return FileResult(source.rel, kept, suppressed=len(findings) - len(kept),
                          unused=tuple(unused) if settings.report_unused else ())
    except SourceError as exc:
        return FileResult(source.rel, error=FileError(source.rel, exc.kind, exc.message))
    except RecursionError:
        return FileResult(source.rel, error=FileError(source.rel, "parse",
                                                      "code nested too deeply to analyse"))
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the scan
        return FileResult(source.rel, error=FileError(
            source.rel, "internal", f"internal error ({type(exc).__name__}: {exc}); please report it"))


def _extensions_in(source: SourcePath) -> list[tuple[str, int, list[Path], list[str]]]:
    """(name, line, existing source files, missing sources) for each extension a Python
    file declares; nothing if it does not mention ``cpp_extension`` or does not parse."""
    try:
        text = read_source(source.path, "python")
        if "cpp_extension" not in text:
            return []
        declarations = find_extensions(parse_python(text))
    except (SourceError, RecursionError):
        return []
    lines = LineIndex(text)
    base = source.path.parent
    found = []
    for declaration in declarations:
        files: list[Path] = []
        missing: list[str] = []
        for pattern in declaration.sources:
            matched = sorted(base.glob(pattern)) if any(c in pattern for c in "*?[") \
                else [base / pattern] if (base / pattern).is_file() else []
            files += [p for p in matched if p.is_file()]
            if not matched:
                missing.append(pattern)
        found.append((declaration.name, lines.position(declaration.offset)[0], files, missing))
    return found


class _Run:
    """The state of one scan: the queue of files, their results, lazily loaded tables."""

    def __init__(self, rules: RuleSet, root: Path, overrides: Mapping[Path, str],
                 config: Config | None, report_unused: bool) -> None:
        self.rules = rules
        self.overrides = overrides
        self.config = config
        self.report_unused = report_unused
        self.root = root
        self.project = first_party_modules(root)
        self.local: dict[Path, frozenset[str]] = {}
        self.results: dict[Path, FileResult] = {}
        self.notes: list[str] = []
        self._hipify: frozenset[str] | None = None
        self._hipify_loaded = False

    def hipify(self) -> frozenset[str] | None:
        if not self._hipify_loaded:
            self._hipify_loaded = True
            if any(r.pattern.kind == "cuda-api" for r in self.rules.rules):
                self._hipify = load_hipify_names()
                if self._hipify is None:
                    self.notes.append(HIPIFY_UNAVAILABLE)
        return self._hipify

    def scan(self, source: SourcePath) -> FileResult:
        key = source.path.absolute()
        if key not in self.results:
            directory = source.path.parent
            if directory not in self.local:
                self.local[directory] = self.project | modules_in(directory)
            hipify = self.hipify() if source.kind == "cuda" else None
            settings = FileSettings(
                target=self.config.target if self.config else None,
                ignore=ignored_codes(self.config, source.path) if self.config else (),
                report_unused=self.report_unused)
            self.results[key] = scan_file(source, self.rules, self.local[directory], hipify,
                                          self.overrides.get(key), settings)
        return self.results[key]

    def source(self, path: Path, kind: str) -> SourcePath:
        return SourcePath(path, relative(path, self.root), kind)


def scan_paths(paths: Sequence[Path], rules: RuleSet, overrides: Mapping[Path, str] | None = None,
               *, config: Config | None = None, force_exclude: bool = False, report_unused: bool = False,
               progress: Callable[[int, int], None] | None = None) -> ScanResult:
    """Scan files and directories. Raises :class:`portscan.discover.UsageError` for a
    path that does not exist; every per-file problem lands in ``errors``.

    ``overrides`` maps absolute paths to text scanned instead of the file's content
    (``portscan fix --diff`` scans the tree as it would be after fixing). ``config``
    brings excludes, per-file-ignores and the target; ``force_exclude`` applies the
    excludes to files named explicitly; ``progress(done, total)`` is called per file."""
    excludes = Excludes(config.base, config.exclude, config.extend_exclude) if config else None
    discovery = discover(paths, excludes, force_exclude)
    run = _Run(rules, discovery.root, overrides or {}, config, report_unused)
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
                text = read_source(source.path, "requirements")
            except SourceError:
                continue
            for include in requirements_includes(text):
                target = source.path.parent / include
                if target.is_file() and target.absolute() not in run.results:
                    queue.append(run.source(target, "requirements"))
        elif source.kind == "python":
            for name, line, files, missing in _extensions_in(source):
                results = [run.scan(run.source(f, "cuda")) for f in files]
                extensions.append(Extension(
                    name=name, path=source.rel, line=line,
                    sources=tuple(run.source(f, "cuda").rel for f in files),
                    findings=sum(len(r.findings) for r in results), missing=tuple(missing)))
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
