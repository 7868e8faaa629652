"""Reporters: render a :class:`~portscan.model.ScanResult` for people or machines."""

from __future__ import annotations

import re
from collections import Counter

from portscan.model import ScanResult, Severity


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


#: control characters, ANSI escape sequences' ESC included (tab and newline are not)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """Printable text: control characters (escape codes included) become ``?``, so a
    file name or a message cannot drive the reader's terminal."""
    return _CONTROL.sub("?", text.replace("\t", "    "))
