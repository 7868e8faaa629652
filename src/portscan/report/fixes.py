"""What ``portscan fix`` prints: a unified diff, and a summary of what changed and what
is left to do by hand."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.text import Text

from portscan.filekinds import kind_label
from portscan.fix.apply import Added, FixRun
from portscan.parse import lines_with_ends
from portscan.ruleset.fixspec import NEEDS_UNSAFE


_T = TypeVar("_T")


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


def _by_kind(paths_and_items: Iterable[tuple[str, _T]]) -> dict[str, list[tuple[str, _T]]]:
    """Items grouped by the label of their file's kind, Python first, then by name."""
    groups: dict[str, list[tuple[str, _T]]] = {}
    for path, item in paths_and_items:
        groups.setdefault(kind_label(path), []).append((path, item))
    return dict(sorted(groups.items(), key=lambda group: (group[0] != "Python", group[0].lower())))


def _files(n: int) -> str:
    return f"{n} file{'s' * (n != 1)}"


def render_fix_summary(run: FixRun, console: Console, *, wrote: bool,
                       show_fixes: bool) -> None:
    """Fixed / not fixed / remaining, in that order and each by file kind (Python,
    requirements files, Dockerfiles, ...); paths are relative to the root."""
    applied = [(f.path, a) for f in run.files for a in f.applied]
    verb = "Fixed" if wrote else "Would fix"
    if applied:
        console.print(Text(f"{verb} {len(applied)} finding{'s' * (len(applied) != 1)} "
                           f"in {_files(len({path for path, _ in applied}))}", style="bold green"))
        for label, group in _by_kind(applied).items():
            console.print(Text(f"  {label}: {len(group)} in {_files(len({path for path, _ in group}))} "
                               f"({_counts(a.rule for _, a in group)})"))
            if show_fixes:
                for file in run.files:
                    if file.applied and kind_label(file.path) == label:
                        console.print(Text(f"    {file.path}: {_counts(a.rule for a in file.applied)}"))
    else:
        console.print(Text("Nothing to fix", style="bold"))
    if run.added:
        console.print(Text(added_note(run.added)))
    checks = [(path, a) for path, a in applied if a.note]
    if checks:
        console.print(Text("Check in review (what a rewrite could not know for sure):", style="bold"))
        for path, check in checks:
            console.print(Text(f"  {path}:{check.line} {check.rule} {check.name}: {check.note}"))
    declined = [(f.path, n) for f in run.files for n in f.not_fixed if n.reason != NEEDS_UNSAFE]
    if declined:
        console.print(Text("Not fixed (left to you, with the reason):", style="bold yellow"))
        for label, left in _by_kind(declined).items():
            console.print(Text(f"  {label}:"))
            for path, item in left:
                console.print(Text(f"    {path}:{item.line} {item.rule} {item.name}: {item.reason}"))
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
    for label, kept in _by_kind((f.path, f) for f in remaining).items():
        parts = []
        if by_hand := [f.rule for _, f in kept if f not in unsafe]:
            parts.append(f"{len(by_hand)} by hand ({_counts(by_hand)})")
        if later := [f.rule for _, f in kept if f in unsafe]:
            parts.append(f"{len(later)} with --unsafe-fixes ({_counts(later)})")
        console.print(Text(f"  {label}: " + "; ".join(parts)))
