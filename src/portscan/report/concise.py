"""``--format concise``: one line per finding, as compilers and linters print them.

``path:line:col: CODE [severity] message``, then ``path: error: message`` for each file
that could not be scanned. Nothing else: summaries go to stderr elsewhere.
"""

from __future__ import annotations

import re

from portscan.model import FileError, Finding, ScanResult
from portscan.report import FIX_SUFFIX, clean, guard_note, uses_note

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _one_line(text: str) -> str:
    return clean(_LINE_BREAK.sub(" ", text))


def finding_line(finding: Finding) -> str:
    line = (f"{clean(finding.path)}:{finding.span.line}:{finding.span.column}: {finding.rule} "
            f"[{finding.severity.value}] {_one_line(finding.message)}")
    line += guard_note(finding) + uses_note(finding)
    if finding.fix:
        line += FIX_SUFFIX.get(finding.fix, f" [{finding.fix} fix]")
    return line


def error_line(error: FileError) -> str:
    return f"{clean(error.path)}: error: {_one_line(error.message)}"


def render_concise(result: ScanResult) -> str:
    lines = [finding_line(f) for f in result.findings] + [error_line(e) for e in result.errors]
    return "".join(line + "\n" for line in lines)
