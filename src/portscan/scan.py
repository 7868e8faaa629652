"""Orchestration: discover -> read -> prefilter -> parse -> match -> findings.

:func:`scan_source` is pure (text in, findings out); :func:`scan_file` never raises;
:func:`scan_paths` runs a whole scan and is what the CLI calls.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence

from portscan.discover import SourcePath, discover, first_party_modules, modules_in
from portscan.match import Match
from portscan.match.guards import guarded_severity
from portscan.match.python import match_python
from portscan.model import FileError, FileResult, Finding, ScanResult
from portscan.parse import LineIndex, SourceError, decode_python, parse_python, read_bytes
from portscan.ruleset import RuleSet


def to_finding(match: Match, path: str, lines: LineIndex) -> Finding:
    rule = match.rule
    return Finding(
        rule=rule.code, name=rule.name, severity=guarded_severity(rule.severity, match.guard, rule.pattern.kind == "import"),
        category=rule.category, confidence=rule.confidence, path=path,
        span=lines.span(match.start, match.end), message=rule.render_message(match.variables),
        rewrite=rule.rewrite, references=rule.references, guard=match.guard,
    )


def scan_source(text: str, path: str, rules: RuleSet,
                first_party: frozenset[str] = frozenset()) -> tuple[Finding, ...]:
    """Findings in one Python source text. Raises :class:`SourceError` if it does not parse.

    Files that contain none of the literal tokens the rules need are not parsed.
    """
    candidates = rules.candidates(text)
    if not candidates:
        return ()
    module = parse_python(text)
    matches = match_python(module, candidates, first_party)
    if not matches:
        return ()
    lines = LineIndex(text)
    return tuple(sorted((to_finding(m, path, lines) for m in matches), key=Finding.sort_key))


def scan_file(source: SourcePath, rules: RuleSet, first_party: frozenset[str]) -> FileResult:
    """Scan one file. Never raises: problems come back as ``FileResult.error``."""
    try:
        text = decode_python(read_bytes(source.path))
        return FileResult(source.rel, scan_source(text, source.rel, rules, first_party))
    except SourceError as exc:
        return FileResult(source.rel, error=FileError(source.rel, exc.kind, exc.message))
    except RecursionError:
        return FileResult(source.rel, error=FileError(source.rel, "parse",
                                                      "code nested too deeply to analyse"))
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the scan
        return FileResult(source.rel, error=FileError(
            source.rel, "internal", f"internal error ({type(exc).__name__}: {exc}); please report it"))


def scan_paths(paths: Sequence[Path], rules: RuleSet) -> ScanResult:
    """Scan files and directories. Raises :class:`portscan.discover.UsageError` for a
    path that does not exist; every per-file problem lands in ``errors``."""
    discovery = discover(paths)
    project = first_party_modules(discovery.root)
    local: dict[Path, frozenset[str]] = {}  # directory -> project modules seen from there
    findings: list[Finding] = []
    errors = list(discovery.errors)
    for source in discovery.files:
        directory = source.path.parent
        if directory not in local:
            local[directory] = project | modules_in(directory)
        result = scan_file(source, rules, local[directory])
        findings.extend(result.findings)
        if result.error is not None:
            errors.append(result.error)
    return ScanResult(
        root=str(discovery.root),
        files_scanned=len(discovery.files),
        findings=tuple(sorted(findings, key=Finding.sort_key)),
        errors=tuple(sorted(errors, key=lambda e: e.path)),
    )
