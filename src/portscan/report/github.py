"""``--format github``: GitHub Actions workflow commands that annotate the changed code.

One ``::error``/``::warning``/``::notice`` line per finding, escaped as ``@actions/toolkit``
escapes them. GitHub shows at most 10 annotations of each level per step and drops the
rest silently, so at most ``per_level`` are printed per level (most severe first, then
in path and line order) and a final notice says how many were left out.
"""

from __future__ import annotations

from portscan.report import clean, guard_note, uses_note
from portscan.model import FileError, Finding, ScanResult, Severity

COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
LEVELS = ("error", "warning", "notice")
#: GitHub's limit of annotations per level and step
PER_LEVEL = 10


def escape_data(text: str) -> str:
    """A command's message (``escapeData`` in the toolkit's ``command.ts``)."""
    return clean(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    """A command property's value (``escapeProperty`` in the toolkit's ``command.ts``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, **properties: object) -> str:
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{level}{' ' + props if props else ''}::{escape_data(message)}"


def finding_command(finding: Finding) -> str:
    span = finding.span
    message = finding.message + guard_note(finding) + uses_note(finding)
    return command(COMMAND[finding.severity], message, file=finding.path, line=span.line,
                   endLine=span.end_line, col=span.column, endColumn=span.end_column,
                   title=f"{finding.rule} {finding.name}")


def error_command(error: FileError) -> str:
    return command("error", f"could not scan: {error.message}", file=error.path, title="portscan")


def render_github(result: ScanResult, per_level: int = PER_LEVEL) -> str:
    """Workflow commands for ``result``, one a line, ``per_level`` at most per level.

    File errors come first among the errors (they mean a file went unchecked); when
    anything is left out, the last line is a notice saying how many, and a notice slot
    is kept free for it.
    """
    queues: dict[str, list[str]] = {level: [] for level in LEVELS}
    queues["error"] += [error_command(e) for e in sorted(result.errors, key=lambda e: e.path)]
    for finding in sorted(result.findings, key=lambda f: (-f.severity.rank, f.sort_key())):
        queues[COMMAND[finding.severity]].append(finding_command(finding))
    total = sum(len(q) for q in queues.values())
    shown = {level: queues[level][:max(per_level, 0)] for level in LEVELS}
    if sum(len(s) for s in shown.values()) < total and per_level > 0 and len(shown["notice"]) == per_level:
        shown["notice"].pop()  # the summary notice needs a slot of its own
    lines = [line for level in LEVELS for line in shown[level]]
    dropped = total - len(lines)
    if dropped:
        noun = "finding is" if dropped == 1 else "findings are"
        lines.append(command("notice", f"portscan: {dropped} more {noun} not shown as annotations; "
                                       "upload SARIF (portscan scan --format sarif) to see them all"))
    return "".join(line + "\n" for line in lines)
