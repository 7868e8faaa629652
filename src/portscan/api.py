"""What the CLI calls, as plain functions: scan a tree, fix it, hold a scan against a
baseline. Printing, exit codes and argument parsing stay in :mod:`portscan.cli`, so a
tool (an editor plugin, a CI script) gets the same results without the CLI.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING

from portscan import baseline
from portscan.baseline import BaselineError, Filtered
from portscan.config import Config
from portscan.model import ScanResult
from portscan.ruleset.loader import RuleSet
from portscan.scan import scan_paths

__all__ = ["BaselineError", "Filtered", "apply_baseline", "fix", "scan", "write_baseline"]

#: scan files and directories (see :func:`portscan.scan.scan_paths`)
scan = scan_paths
if TYPE_CHECKING:
    from portscan.fix.apply import FixRun


def fix(paths: Sequence[Path], rules: RuleSet, unsafe: bool = False, write: bool = True,
        config: Config | None = None, force_exclude: bool = False, cache: Path | None = None,
        workers: int | None = None) -> FixRun:
    """Fix the Python files below paths (see :func:`portscan.fix.apply.fix_paths`). The
    fixer (LibCST's codemods) is imported only here: a scan does not pay for it."""
    from portscan.fix.apply import fix_paths

    return fix_paths(paths, rules, unsafe, write, config, force_exclude, cache, workers)


def apply_baseline(result: ScanResult, path: Path) -> tuple[ScanResult, Filtered]:
    """``result`` without the findings the baseline at ``path`` records (counted as
    suppressed), and the split. Raises :class:`BaselineError` for an unreadable file."""
    known = baseline.apply(result.findings, baseline.read(path), result.scanned)
    return dataclasses.replace(result, findings=known.new, suppressed=result.suppressed + known.known), known


def write_baseline(result: ScanResult, path: Path) -> int:
    """Record ``result``'s findings at ``path``; how many it records."""
    return baseline.write(path, result.findings)
