"""What ``portscan fix`` prints: a unified diff, and a summary of what changed and what
is left to do by hand."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.text import Text

from portscan.fix.apply import Added, FixRun
from portscan.parse import lines_with_ends
from portscan.ruleset.fixspec import NEEDS_UNSAFE


def unified_diff(run: FixRun) -> str:
    """One unified diff for every file the fixes change (``a/``/``b/`` prefixes)."""
    chunks: list[str] = []
    for file in run.changed:
        for line in difflib.unified_diff(lines_with_ends(file.source), lines_with_ends(file.fixed),
                                         fromfile=f"a/{file.path}", tofile=f"b/{file.path}"):
            chunks.append(line)
            # a last line without an ending: the old side's as much as the new side's,
            # or the next diff line would run on from it (a patch `git apply` rejects)
            if not line.endswith(("\n", "\r")):
                chunks.append("\n\\ No newline at end of file\n")
    return "".join(chunks)


def _counts(codes: Iterable[str]) -> str:
    counted = Counter(codes)
    return ", ".join(f"{code} ×{n}" if n > 1 else code for code, n in sorted(counted.items()))


def added_note(added: Sequence[Added]) -> str:
    """Why the fixed files have more findings than before (see
    :class:`portscan.fix.apply.Added`): the uses of newly guarded imports, and findings
    on the code the fixes wrote."""
    uses = [a for a in added if a.uses]
    other = [a for a in added if not a.uses]
    total = sum(a.count for a in added)
    parts = []
    if uses:
        parts.append(f"{sum(a.count for a in uses)} uses of imports now guarded {_counted(uses)}, each reported "
                     "where it would fail now that the module imports without the package")
    if other:
        parts.append(f"{sum(a.count for a in other)} on code the fixes wrote {_counted(other)}; a guard such as "
                     "`torch.version.cuda is not None` is reported as info")
    return f"  {total} more finding{'s' * (total != 1)} in the fixed files than before: " + "; ".join(parts)


def _counted(added: Sequence[Added]) -> str:
    per_rule: Counter[str] = Counter()
    for item in added:
        per_rule[item.rule] += item.count
    return "(" + ", ".join(f"{code} ×{n}" if n > 1 else code for code, n in sorted(per_rule.items())) + ")"


def render_fix_summary(run: FixRun, console: Console, *, wrote: bool,
                       show_fixes: bool) -> None:
    """Fixed / not fixed / remaining, in that order; paths are relative to the root."""
    applied = [(f.path, a) for f in run.files for a in f.applied]
    verb = "Fixed" if wrote else "Would fix"
    if applied:
        files = len({path for path, _ in applied})
        console.print(Text(f"{verb} {len(applied)} finding{'s' * (len(applied) != 1)} "
                           f"in {files} file{'s' * (files != 1)}", style="bold green"))
        if show_fixes:
            for file in run.files:
                if file.applied:
                    console.print(Text(f"  {file.path}: {_counts(a.rule for a in file.applied)}"))
    else:
        console.print(Text("Nothing to fix", style="bold"))
    if run.added:
        console.print(Text(added_note(run.added)))
    declined = [(f.path, n) for f in run.files for n in f.not_fixed if n.reason != NEEDS_UNSAFE]
    if declined:
        console.print(Text("Not fixed (left to you, with the reason):", style="bold yellow"))
        for path, item in declined:
            console.print(Text(f"  {path}:{item.line} {item.rule} {item.name}: {item.reason}"))
    for error in run.errors:
        console.print(Text(f"  {error.path}: {error.message}", style="red"))
    remaining = run.after.findings
    waiting = {(file.path, n.rule, n.line) for file in run.files for n in file.not_fixed
               if n.reason == NEEDS_UNSAFE}
    unsafe = [f for f in remaining if (f.path, f.rule, f.span.line) in waiting]
    if not remaining:
        console.print(Text("No findings remain", style="bold green"))
        return
    manual = len(remaining) - len(unsafe)
    console.print(Text(f"{len(remaining)} finding{'s remain' if len(remaining) != 1 else ' remains'}: "
                       f"{len(unsafe)} fixable with --unsafe-fixes, {manual} to port by hand "
                       f"(`portscan scan` shows them with their rewrites)"))
    if unsafe:
        console.print(Text(f"  with --unsafe-fixes: {_counts(f.rule for f in unsafe)}"))
    by_hand = [f.rule for f in remaining if f not in unsafe]
    if by_hand:
        console.print(Text(f"  by hand: {_counts(by_hand)}"))
