"""What the CLI calls, as plain functions: scan a tree, fix it, hold a scan against a
baseline. Printing, exit codes and argument parsing stay in :mod:`portscan.cli`, so a
tool (an editor plugin, a CI script) gets the same results without the CLI.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from portscan import baseline
from portscan.baseline import BaselineError, Filtered
from portscan.fix.apply import FixRun, fix_paths
from portscan.model import ScanResult
from portscan.scan import scan_paths

__all__ = ["BaselineError", "Filtered", "FixRun", "apply_baseline", "fix", "scan", "write_baseline"]

#: scan files and directories (see :func:`portscan.scan.scan_paths`)
scan = scan_paths
#: fix the Python files below paths (see :func:`portscan.fix.apply.fix_paths`)
fix = fix_paths


def apply_baseline(result: ScanResult, path: Path) -> tuple[ScanResult, Filtered]:
    """``result`` without the findings the baseline at ``path`` records (counted as
    suppressed), and the split. Raises :class:`BaselineError` for an unreadable file."""
    known = baseline.apply(result.findings, baseline.read(path), result.scanned)
    return dataclasses.replace(result, findings=known.new, suppressed=result.suppressed + known.known), known


def write_baseline(result: ScanResult, path: Path) -> int:
    """Record ``result``'s findings at ``path``; how many it records."""
    return baseline.write(path, result.findings)
