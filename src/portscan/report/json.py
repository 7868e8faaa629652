"""``--format json``: one object, the public contract documented in docs/json-output.md."""

from __future__ import annotations

import json

from portscan import __version__
from portscan.model import Extension, FileError, Finding, ScanResult
from portscan.report import summary
from portscan.ruleset.schema import Rule

SCHEMA_VERSION = 1


def finding_to_dict(finding: Finding) -> dict[str, object]:
    return {
        "rule": finding.rule,
        "name": finding.name,
        "severity": finding.severity.value,
        "category": finding.category,
        "confidence": finding.confidence.value,
        "path": finding.path,
        "line": finding.span.line,
        "column": finding.span.column,
        "end_line": finding.span.end_line,
        "end_column": finding.span.end_column,
        "message": finding.message,
        "rewrite": finding.rewrite,
        "references": list(finding.references),
        "guard": finding.guard,
        "fix": finding.fix,
        "fingerprint": finding.fingerprint,
        "uses": [{"line": line, "column": column} for line, column in finding.uses],
    }


def rule_to_dict(rule: Rule) -> dict[str, object]:
    return {
        "code": rule.code,
        "name": rule.name,
        "severity": rule.severity.value,
        "category": rule.category,
        "confidence": rule.confidence.value,
        "fix": None if rule.fix is None else {"tier": rule.fix.tier.value, "kind": rule.fix.kind,
                                              "why": rule.fix.why},
        "kind": rule.pattern.kind,
        "message": rule.message,
        "rocm": rule.rocm,
        "rewrite": rule.rewrite,
        "references": list(rule.references),
    }


def extension_to_dict(extension: Extension) -> dict[str, object]:
    return {"name": extension.name, "path": extension.path, "line": extension.line,
            "sources": list(extension.sources), "findings": extension.findings,
            "missing": list(extension.missing), "headers": list(extension.headers)}


def error_to_dict(error: FileError) -> dict[str, object]:
    return {"path": error.path, "kind": error.kind, "message": error.message}


def render_json(result: ScanResult) -> str:
    document = {
        "schema_version": SCHEMA_VERSION,
        "portscan_version": __version__,
        "root": result.root,
        "findings": [finding_to_dict(f) for f in result.findings],
        "errors": [error_to_dict(e) for e in result.errors],
        "extensions": [extension_to_dict(e) for e in result.extensions],
        "notes": list(result.notes),
        "unused_suppressions": [{"path": u.path, "line": u.line, "code": u.code, "file": u.file}
                                for u in result.unused_suppressions],
        "summary": summary(result),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
