"""``--format sarif``: SARIF 2.1.0 for GitHub code scanning and SARIF viewers.

One run; ``tool.driver.rules`` holds the rules the findings reference (ordered by code),
each result points at its rule by id and index. Locations are relative to the scan root
through the ``%SRCROOT%`` base id, columns count code points (``columnKind``), and
``partialFingerprints.primaryLocationLineHash`` carries the finding's move-stable
fingerprint, so GitHub keeps one alert per finding across pushes.

Findings whose rule declares a fix carry ``fixes``: the file is fixed again with that
rule alone and the line diff near the finding becomes SARIF replacements. GitHub
ignores ``fixes``; VS Code's SARIF viewer and other tools apply them.
"""

from __future__ import annotations

import difflib
import json
import re
import string
from pathlib import Path
from urllib.parse import quote

from portscan.discover import FirstParty
from portscan.docs import render_rule_page
from portscan.fix.engine import fix_source
from portscan.model import Confidence, FileError, Finding, ScanResult, Severity
from portscan.parse import LineIndex, SourceError, decode_python, read_bytes
from portscan.report import guard_note
from portscan.ruleset.schema import Rule
from portscan.ruleset.loader import RuleSet

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
SRCROOT = "%SRCROOT%"
TEXT_MAX = 1024  #: GitHub's limit for shortDescription and fullDescription
CONTEXT_LINES = 3  #: a fix hunk this close to a finding belongs to it

LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
PROBLEM_SEVERITY = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "recommendation"}
PRECISION = {Confidence.HIGH: "high", Confidence.MEDIUM: "medium", Confidence.LOW: "low"}
FIX_DESCRIPTION = {"safe": "portscan fix", "unsafe": "portscan fix --unsafe-fixes"}
#: template variables, shown as placeholders where no finding fills them in
PLACEHOLDER = {"matched": "expression"}
_LINE_END = re.compile(r"\r\n|\r|\n")

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


class _Fixes:
    """SARIF ``fixes`` for findings: each (file, rule) is fixed once, with that rule alone."""

    def __init__(self, root: str, rules: RuleSet, findings: tuple[Finding, ...]) -> None:
        self.root = Path(root)
        self.rules = rules
        #: the other findings a file's fix for a rule may belong to
        self.siblings: dict[tuple[str, str], list[Finding]] = {}
        for finding in findings:
            if finding.fix in FIX_DESCRIPTION:
                self.siblings.setdefault((finding.path, finding.rule), []).append(finding)
        self.first_party = FirstParty(self.root)
        self.texts: dict[str, str | None] = {}
        self.hunks: dict[tuple[str, str, bool], list[tuple[int, int, Json]]] = {}

    def _text(self, path: str) -> str | None:
        if path not in self.texts:
            try:
                self.texts[path] = decode_python(read_bytes(self.root / path))
            except SourceError:
                self.texts[path] = None
        return self.texts[path]

    def _file_hunks(self, finding: Finding) -> list[tuple[int, int, Json]]:
        """(first line, last line, replacement) for each change the fix makes to the file."""
        unsafe = finding.fix == "unsafe"
        key = (finding.path, finding.rule, unsafe)
        if key not in self.hunks:
            self.hunks[key] = []
            text = self._text(finding.path)
            if text is not None and finding.rule in self.rules.by_code:
                try:
                    fixed = fix_source(text, finding.path, self.rules.select([finding.rule]), unsafe=unsafe,
                                       first_party=self.first_party((self.root / finding.path).parent)).fixed
                except Exception:  # noqa: BLE001 - a fix problem must not cost the report
                    fixed = text
                if fixed != text:
                    self.hunks[key] = diff_replacements(text, fixed)
        return self.hunks[key]

    def for_finding(self, finding: Finding) -> list[Json] | None:
        if finding.fix not in FIX_DESCRIPTION:
            return None
        hunks = self._file_hunks(finding)
        if not hunks:
            return None
        near = [r for first, last, r in hunks if _near(finding, first, last)]
        # nothing near (a transform that edits elsewhere, e.g. imports): the changes that
        # belong to no other finding of this rule in the file
        replacements = near or [r for first, last, r in hunks
                                if not any(_near(other, first, last)
                                           for other in self.siblings.get((finding.path, finding.rule), ())
                                           if other is not finding)]
        if not replacements:
            return None
        return [{"description": {"text": FIX_DESCRIPTION[finding.fix or ""]},
                 "artifactChanges": [{"artifactLocation": _artifact(finding.path),
                                      "replacements": replacements}]}]


def _near(finding: Finding, first: int, last: int) -> bool:
    return first <= finding.span.end_line + CONTEXT_LINES and last >= finding.span.line - CONTEXT_LINES


def _split_lines(text: str) -> list[str]:
    """Lines with their endings (only ``\\r\\n``, ``\\r`` and ``\\n`` end a line)."""
    lines: list[str] = []
    start = 0
    for match in _LINE_END.finditer(text):
        lines.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def diff_replacements(old: str, new: str) -> list[tuple[int, int, Json]]:
    """The line diff from ``old`` to ``new`` as SARIF replacements, each with the 1-based
    lines of ``old`` it touches (an insertion touches the line it is inserted before)."""
    a, b = _split_lines(old), _split_lines(new)
    starts = [0]
    for line in a:
        starts.append(starts[-1] + len(line))
    index = LineIndex(old)
    hunks: list[tuple[int, int, Json]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        start_line, start_column = index.position(starts[i1])
        end_line, end_column = index.position(starts[i2])
        replacement: Json = {"deletedRegion": {"startLine": start_line, "startColumn": start_column,
                                               "endLine": end_line, "endColumn": end_column}}
        inserted = "".join(b[j1:j2])
        if inserted:
            replacement["insertedContent"] = {"text": inserted}
        hunks.append((i1 + 1, max(i1 + 1, i2), replacement))
    return hunks


def _notification(error: FileError) -> Json:
    return {
        "level": "error" if error.kind == "internal" else "warning",
        "message": {"text": f"{error.path}: {error.message}"},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(error.path)}}],
        "properties": {"portscan/kind": error.kind},
    }


def render_sarif(result: ScanResult, rules: RuleSet, tool_version: str) -> str:
    """The SARIF 2.1.0 log of one scan, as indented JSON with a trailing newline.

    ``rules`` is the rule set the scan ran with: it supplies rule metadata and the fixes.
    """
    codes = sorted({f.rule for f in result.findings})
    index = {code: i for i, code in enumerate(codes)}
    first = {f.rule: f for f in result.findings}
    descriptors = [_rule_descriptor(rules.by_code[code]) if code in rules.by_code
                   else _fallback_descriptor(first[code]) for code in codes]
    fixes = _Fixes(result.root, rules, result.findings)
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
