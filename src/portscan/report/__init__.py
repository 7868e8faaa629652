"""Reporters: render a :class:`~portscan.model.ScanResult` for people or machines."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from portscan.model import Finding, ScanResult, Severity


def summary(result: ScanResult) -> dict[str, object]:
    """Counts shared by every output format."""
    by_severity = Counter(f.severity.value for f in result.findings)
    return {
        "files_scanned": result.files_scanned,
        "files_with_findings": len({f.path for f in result.findings}),
        "findings": len(result.findings),
        "errors": len(result.errors),
        "by_severity": {s.value: by_severity.get(s.value, 0) for s in Severity},
        "by_category": dict(sorted(Counter(f.category for f in result.findings).items())),
        "suppressed": result.suppressed,
    }


#: how a finding with a fix is marked in one-line formats
FIX_SUFFIX = {"safe": " [fix]", "unsafe": " [unsafe fix]"}


def guard_note(finding: Finding) -> str:
    """`` (guarded: NAME)`` for a finding in code that already copes with ROCm, else ``""``."""
    return f" (guarded: {finding.guard})" if finding.guard else ""


def uses_note(finding: Finding) -> str:
    """`` (+N uses: lines a, b, ...)`` for a finding that stands for other uses of its import."""
    if not finding.uses:
        return ""
    lines = sorted({line for line, _ in finding.uses})
    shown = ", ".join(str(line) for line in lines[:USES_SHOWN]) + (", ..." if len(lines) > USES_SHOWN else "")
    noun = "use" if len(finding.uses) == 1 else "uses"
    return f" (+{len(finding.uses)} {noun}: line{'s' if len(lines) > 1 else ''} {shown})"


#: how many lines of a finding's uses the one-line formats show
USES_SHOWN = 5


def fix_counts(findings: Iterable[Finding]) -> tuple[int, int]:
    """(findings with a safe fix, findings with an unsafe fix)."""
    fixes = Counter(f.fix for f in findings)
    return fixes["safe"], fixes["unsafe"]


#: control characters, ANSI escape sequences' ESC included (tab and newline are not)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """Printable text: control characters (escape codes included) become ``?``, so a
    file name or a message cannot drive the reader's terminal."""
    return _CONTROL.sub("?", text.replace("\t", "    "))
