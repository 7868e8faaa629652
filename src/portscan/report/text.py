"""``--format full``: the human report, rendered with rich.

Findings are grouped by file, each with a code frame, the rule code, the message and
the suggested rewrite; a summary by severity and category closes the report. All
text that comes from scanned files is passed as ``rich.text.Text``, never as markup,
so a file name or a line of code cannot inject styles or escape codes.
"""

from __future__ import annotations

from itertools import groupby
from pathlib import Path

from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from portscan.model import Finding, ScanResult, Severity
from portscan.parse import SourceError, decode_python, read_bytes, split_lines
from portscan.report import FIX_SUFFIX, clean, fix_counts, guard_note, summary, uses_note

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
FRAME_CONTEXT = 1
def _read_lines(root: Path, rel: str) -> list[str] | None:
    try:
        return split_lines(decode_python(read_bytes(root / rel)))
    except SourceError:
        return None


def code_frame(lines: list[str], finding: Finding) -> Text:
    """A few numbered source lines with the finding's columns underlined."""
    span = finding.span
    first = max(1, span.line - FRAME_CONTEXT)
    last = min(len(lines), span.line + FRAME_CONTEXT)
    width = len(str(last))
    frame = Text(no_wrap=True, overflow="ellipsis")
    for number in range(first, last + 1):
        marker = ">" if number == span.line else " "
        frame.append(f" {marker} {number:>{width}} │ ", style="dim")
        frame.append(clean(lines[number - 1]) + "\n")
        if number == span.line:
            line = lines[number - 1]
            start = len(clean(line[: span.column - 1]))
            end_col = span.end_column if span.end_line == span.line else len(line) + 1
            length = max(1, len(clean(line[span.column - 1 : end_col - 1])))
            frame.append(f"   {' ' * width} │ ", style="dim")
            frame.append(" " * start + "^" * length + "\n", style=SEVERITY_STYLE[finding.severity])
    frame.rstrip()
    return frame


def render_finding(finding: Finding, lines: list[str] | None) -> Group:
    head = Text()
    head.append(f"{finding.span.line}:{finding.span.column} ", style="bold")
    head.append(f"{finding.rule} ", style="bold magenta")
    head.append(f"{finding.severity.value:<7} ", style=SEVERITY_STYLE[finding.severity])
    head.append(clean(finding.message))
    head.append(guard_note(finding) + uses_note(finding), style="dim")
    if finding.fix:
        head.append(FIX_SUFFIX.get(finding.fix, f" [{finding.fix} fix]"), style="cyan")
    parts: list[object] = [head]
    if lines is not None and finding.span.line <= len(lines):
        parts.append(code_frame(lines, finding))
    hint = Text("   rewrite: ", style="green")
    hint.append(clean(finding.rewrite))
    parts.append(hint)
    if finding.references:
        parts.append(Text(f"   see: {finding.references[0]}", style="dim"))
    parts.append(Text())
    return Group(*parts)  # type: ignore[arg-type]


def render_summary(result: ScanResult) -> Group:
    counts = summary(result)
    by_severity: dict[str, int] = counts["by_severity"]  # type: ignore[assignment]
    line = Text()
    if result.findings:
        line.append(f"{counts['findings']} findings in {counts['files_with_findings']} of "
                    f"{result.files_scanned} files: ", style="bold")
        line.append_text(Text(", ").join(
            Text(f"{by_severity[s.value]} {s.value}", style=SEVERITY_STYLE[s])
            for s in Severity if by_severity[s.value]))
    else:
        line.append(f"No findings in {result.files_scanned} files.", style="bold green")
    if result.errors:
        line.append(f"; {len(result.errors)} could not be scanned", style="bold red")
    parts: list[object] = [line]
    safe, unsafe = fix_counts(result.findings)
    if safe or unsafe:
        parts.append(Text(f"{safe} fixable with `portscan fix`, {unsafe} more with "
                          "`portscan fix --unsafe-fixes` (review the diff: `--diff`)"))
    if result.findings:
        table = Table(title=None, show_edge=False, box=None, pad_edge=False)
        table.add_column("category")
        for severity in Severity:
            table.add_column(severity.value, justify="right", style=SEVERITY_STYLE[severity])
        table.add_column("total", justify="right", style="bold")
        for category, group in groupby(sorted(result.findings, key=lambda f: f.category),
                                       key=lambda f: f.category):
            items = list(group)
            row = [sum(1 for f in items if f.severity is s) for s in Severity]
            table.add_row(category, *(str(n) if n else "-" for n in row), str(len(items)))
        parts.append(Padding(table, (1, 0, 0, 2), expand=False))
    return Group(*parts)  # type: ignore[arg-type]


def render_text(result: ScanResult, console: Console) -> None:
    root = Path(result.root)
    for path, group in groupby(result.findings, key=lambda f: f.path):
        console.print(Text(clean(path), style="bold underline"))
        lines = _read_lines(root, path)
        for finding in group:
            console.print(render_finding(finding, lines))
    if result.extensions:
        console.print(Text("CUDA extensions", style="bold"))
        for extension in result.extensions:
            text = Text("  ")
            text.append(clean(extension.name), style="bold")
            text.append(f" ({clean(extension.path)}:{extension.line}): ")
            text.append(f"{extension.findings} kernel finding(s)",
                        style="yellow" if extension.findings else "green")
            if extension.sources:
                text.append(" in " + ", ".join(clean(s) for s in extension.sources))
            if extension.headers:
                text.append(" and included " + ", ".join(clean(h) for h in extension.headers))
            if extension.missing:
                text.append(f"; not found: {', '.join(clean(m) for m in extension.missing)}",
                            style="dim")
            console.print(text)
        console.print()
    for note in result.notes:
        console.print(Text(f"Note: {clean(note)}", style="dim"))
    if result.errors:
        console.print(Text("Files that could not be scanned", style="bold red"))
        for error in result.errors:
            text = Text("  ")
            text.append(clean(error.path), style="bold")
            text.append(f" ({error.kind}): ", style="red")
            text.append(clean(error.message))
            console.print(text)
        console.print()
    console.print(render_summary(result))
