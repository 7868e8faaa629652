"""Precision: code that works on ROCm must not be reported as a warning or an error."""

from __future__ import annotations

from pathlib import Path

from portscan.model import Severity
from portscan.scan import scan_source

IDIOMS = Path(__file__).parent / "data" / "rocm_safe_idioms.py"


def test_rocm_safe_idioms_stay_at_info_or_below(rules) -> None:
    findings = scan_source(IDIOMS.read_text(), "rocm_safe_idioms.py", rules)
    loud = [f"{f.span.line}: {f.rule} {f.severity.value} {f.message}" for f in findings
            if f.severity is not Severity.INFO]
    assert loud == []


def test_the_idioms_file_exercises_the_guards(rules) -> None:
    """Guarded code in the file is still found (at info), so the test above is not vacuous."""
    findings = scan_source(IDIOMS.read_text(), "rocm_safe_idioms.py", rules)
    guards = {f.guard for f in findings}
    assert {"type-checking", "fallback-equivalent", "vendor-branch", "handled", "tuning"} <= guards
