"""Guard names and what they do to a finding's severity (see :mod:`portscan.match.guards`
for how the Python matcher finds guarded code). No libcst here: the scan needs these
without parsing anything."""

from __future__ import annotations

from portscan.model import Severity

TYPE_CHECKING = "type-checking"
VENDOR_BRANCH = "vendor-branch"
FALLBACK = "fallback"

#: A guard's effect on severity; ``None`` means "one step lower".
_GUARD_SEVERITY: dict[str, Severity | None] = {
    TYPE_CHECKING: Severity.INFO,
    VENDOR_BRANCH: Severity.INFO,
    FALLBACK: None,
}
_ONE_STEP_DOWN = {Severity.ERROR: Severity.WARNING, Severity.WARNING: Severity.INFO,
                  Severity.INFO: Severity.INFO}
#: When regions nest, the strongest guard wins.
GUARD_ORDER = (TYPE_CHECKING, VENDOR_BRANCH, FALLBACK)


def guarded_severity(severity: Severity, guard: str | None, is_import: bool = False) -> Severity:
    if guard is None:
        return severity
    if guard == FALLBACK and is_import:
        return Severity.INFO
    target = _GUARD_SEVERITY[guard]
    return _ONE_STEP_DOWN[severity] if target is None else target
