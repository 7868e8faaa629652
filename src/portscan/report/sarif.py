"""``--format sarif``: SARIF 2.1.0 for GitHub code scanning and SARIF viewers.

One run; ``tool.driver.rules`` holds the rules the findings reference (ordered by code),
each result points at its rule by id and index. Locations are relative to the scan root
through the ``%SRCROOT%`` base id, columns count code points (``columnKind``), and
``partialFingerprints.primaryLocationLineHash`` carries the finding's move-stable
fingerprint, so GitHub keeps one alert per finding across pushes.

Findings marked fixable carry ``fixes``: the changes the fix engine makes for that
finding (its own edit and the imports it needs), as SARIF replacements; a file's fixes
are kept in the scan's cache, so an unchanged file is not fixed again. GitHub
ignores ``fixes``; VS Code's SARIF viewer and other tools apply them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
import re
import string
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from portscan.docs import render_rule_page
from portscan.cache import Cache
from portscan.discover import FirstParty
from portscan.model import Confidence, FileError, Finding, ScanResult, Severity
from portscan.parse import LineIndex, SourceError, decode_python, lines_with_ends, read_bytes
from portscan.report import guard_note
from portscan.ruleset.schema import Rule
from portscan.ruleset.loader import RuleSet

if TYPE_CHECKING:
    from portscan.fix.engine import FileFix

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
SRCROOT = "%SRCROOT%"
TEXT_MAX = 1024  #: GitHub's limit for shortDescription and fullDescription

LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
PROBLEM_SEVERITY = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "recommendation"}
PRECISION = {Confidence.HIGH: "high", Confidence.MEDIUM: "medium", Confidence.LOW: "low"}
FIX_DESCRIPTION = {"safe": "portscan fix", "unsafe": "portscan fix --unsafe-fixes"}
#: template variables, shown as placeholders where no finding fills them in
PLACEHOLDER = {"matched": "expression"}

Json = dict[str, object]


def _clip(text: str, limit: int = TEXT_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def neutral_message(template: str) -> str:
    """A rule's message template with its ``${variables}`` replaced by ``<placeholders>``."""
    def replace(match: re.Match[str]) -> str:
        if match.group("escaped") is not None:
            return "$"
        name = match.group("named") or match.group("braced")
        if name:
            return f"<{PLACEHOLDER.get(name, name)}>"
        return match.group(0)

    return string.Template.pattern.sub(replace, template)


def _uri(path: str) -> str:
    """A relative path as a URI reference (spaces, ``#``, ``%`` and non-ASCII escaped)."""
    return quote(path, safe="/")


def _artifact(path: str) -> Json:
    return {"uri": _uri(path), "uriBaseId": SRCROOT}


def _root_uri(root: str) -> str:
    uri = Path(root).absolute().as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _rule_descriptor(rule: Rule) -> Json:
    descriptor: Json = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": _clip(neutral_message(rule.message))},
        "fullDescription": {"text": _clip(rule.rocm)},
        "help": {"text": rule.rewrite, "markdown": render_rule_page(rule, banner=False)},
    }
    if rule.references:
        descriptor["helpUri"] = rule.references[0]
    descriptor["defaultConfiguration"] = {"level": LEVEL[rule.severity]}
    descriptor["properties"] = {"tags": [rule.category, "rocm"], "precision": PRECISION[rule.confidence],
                                "problem.severity": PROBLEM_SEVERITY[rule.severity]}
    return descriptor


def _fallback_descriptor(finding: Finding) -> Json:
    """For a finding whose rule is not in the rule set: what the finding itself says."""
    descriptor: Json = {
        "id": finding.rule,
        "name": finding.name,
        "shortDescription": {"text": _clip(finding.name)},
        "help": {"text": finding.rewrite or finding.name},
    }
    if finding.references:
        descriptor["helpUri"] = finding.references[0]
    descriptor["properties"] = {"tags": [finding.category, "rocm"],
                                "precision": PRECISION[finding.confidence]}
    return descriptor


@dataclass(frozen=True, slots=True)
class FileFixes:
    """What the fix engine does to one file, as SARIF needs it: (rule, line, the
    replacements as JSON) of each finding it fixes. What the cache keeps per file."""

    sites: tuple[tuple[str, int, str], ...] = ()


class _Fixes:
    """SARIF ``fixes``, from one run of the fix engine per file (``--unsafe-fixes``, so
    unsafe findings have theirs too): each finding gets the changed blocks the engine
    made for it (see :meth:`portscan.fix.engine.FileFix.hunks`), found by its rule and
    line, never guessed from line distance. With a cache folder, a file's fixes are
    kept under its text, path, project modules, the rules and portscan's own code, as
    scan results are, so an unchanged file is not fixed again."""

    def __init__(self, root: str, rules: RuleSet, findings: tuple[Finding, ...], cache: Path | None) -> None:
        base = Path(root)
        paths = sorted({f.path for f in findings if f.fix in FIX_DESCRIPTION and f.rule in rules.by_code})
        store = Cache(cache, f"{rules.digest}|sarif fixes") if cache is not None else None
        first_party = FirstParty(base)
        self.replacements: dict[tuple[str, str, int], list[Json]] = {}
        keys: dict[str, str] = {}
        todo: dict[str, str] = {}  #: path -> text, of the files to fix now
        try:
            for path in paths:
                try:
                    text = decode_python(read_bytes(base / path))
                except SourceError:
                    continue
                if store is not None:
                    keys[path] = store.key("python", path, first_party((base / path).parent), text)
                    known = store.get_as(FileFixes, keys[path])
                    if known is not None:
                        self._keep(path, known)
                        continue
                todo[path] = text
            for path, result in _fix(base, todo, rules).items():
                found = FileFixes(tuple(
                    (applied.rule, applied.line, json.dumps(replacements(result.source, result.fixed, blocks)))
                    for applied, blocks in result.hunks() if blocks))
                self._keep(path, found)
                if store is not None:
                    store.put_as(FileFixes, keys[path], found)
        finally:
            if store is not None:
                store.close()

    def _keep(self, path: str, fixes: FileFixes) -> None:
        for rule, line, replacements in fixes.sites:
            self.replacements[(path, rule, line)] = json.loads(replacements)

    def for_finding(self, finding: Finding) -> list[Json] | None:
        if finding.fix not in FIX_DESCRIPTION:
            return None
        replacements = self.replacements.get((finding.path, finding.rule, finding.span.line))
        if not replacements:
            return None
        return [{"description": {"text": FIX_DESCRIPTION[finding.fix or ""]},
                 "artifactChanges": [{"artifactLocation": _artifact(finding.path),
                                      "replacements": replacements}]}]


def _fix(root: Path, texts: dict[str, str], rules: RuleSet) -> dict[str, FileFix]:
    """The files fixed in memory (none when there is nothing to fix: the fixer, LibCST's
    codemods, is imported only then); a fix problem must not cost the report."""
    if not texts:
        return {}
    from portscan.fix.apply import fix_files

    try:
        return fix_files(root, texts, rules, unsafe=True)
    except Exception:  # noqa: BLE001
        return {}


def replacements(old: str, new: str, blocks: Sequence[tuple[int, int, int, int]]) -> list[Json]:
    """Changed blocks of lines (``i1, i2, j1, j2``, 0-based, as ``difflib`` gives them)
    as SARIF replacements of ``old``'s regions by ``new``'s lines."""
    a, b = lines_with_ends(old), lines_with_ends(new)
    starts = [0]
    for line in a:
        starts.append(starts[-1] + len(line))
    index = LineIndex(old)
    found: list[Json] = []
    for i1, i2, j1, j2 in blocks:
        start_line, start_column = index.position(starts[i1])
        end_line, end_column = index.position(starts[i2])
        change: Json = {"deletedRegion": {"startLine": start_line, "startColumn": start_column,
                                          "endLine": end_line, "endColumn": end_column}}
        inserted = "".join(b[j1:j2])
        if inserted:
            change["insertedContent"] = {"text": inserted}
        found.append(change)
    return found


def _notification(error: FileError) -> Json:
    return {
        "level": "error" if error.kind == "internal" else "warning",
        "message": {"text": f"{error.path}: {error.message}"},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(error.path)}}],
        "properties": {"portscan/kind": error.kind},
    }


def render_sarif(result: ScanResult, rules: RuleSet, tool_version: str, cache: Path | None = None) -> str:
    """The SARIF 2.1.0 log of one scan, as indented JSON with a trailing newline.

    ``rules`` is the rule set the scan ran with: it supplies rule metadata and the fixes;
    ``cache`` is the cache folder of the scan (see :mod:`portscan.cache`; None: none).
    """
    codes = sorted({f.rule for f in result.findings})
    index = {code: i for i, code in enumerate(codes)}
    first = {f.rule: f for f in result.findings}
    descriptors = [_rule_descriptor(rules.by_code[code]) if code in rules.by_code
                   else _fallback_descriptor(first[code]) for code in codes]
    fixes = _Fixes(result.root, rules, result.findings, cache)
    seen: dict[str, int] = {}
    results: list[Json] = []
    for finding in result.findings:
        message = finding.message + guard_note(finding)
        span = finding.span
        entry: Json = {
            "ruleId": finding.rule,
            "ruleIndex": index[finding.rule],
            "level": LEVEL[finding.severity],
            "message": {"text": message},
            "locations": [{"physicalLocation": {
                "artifactLocation": _artifact(finding.path),
                "region": {"startLine": span.line, "startColumn": span.column,
                           "endLine": span.end_line, "endColumn": span.end_column},
            }}],
        }
        if finding.uses:
            entry["relatedLocations"] = [
                {"id": i, "message": {"text": "another use of the same import"},
                 "physicalLocation": {"artifactLocation": _artifact(finding.path),
                                      "region": {"startLine": line, "startColumn": column}}}
                for i, (line, column) in enumerate(finding.uses, 1)]
        if finding.fingerprint:
            seen[finding.fingerprint] = seen.get(finding.fingerprint, 0) + 1
            entry["partialFingerprints"] = {"primaryLocationLineHash":
                                            f"{finding.fingerprint}:{seen[finding.fingerprint]}"}
        fix = fixes.for_finding(finding)
        if fix:
            entry["fixes"] = fix
        if finding.fix:
            entry["properties"] = {"portscan/fix": finding.fix}
        results.append(entry)
    notifications = [_notification(e) for e in result.errors]
    notifications += [{"level": "note", "message": {"text": note}} for note in result.notes]
    run: Json = {
        "tool": {"driver": {"name": "portscan", "version": tool_version, "rules": descriptors}},
        "invocations": [{
            "executionSuccessful": not any(e.kind == "internal" for e in result.errors),
            "toolExecutionNotifications": notifications,
        }],
        "originalUriBaseIds": {SRCROOT: {"uri": _root_uri(result.root)}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    log = {"$schema": SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
