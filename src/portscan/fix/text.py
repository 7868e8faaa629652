"""The fix of one file that is not Python: each finding's text rewritten in place.

The rewrites (:mod:`portscan.match.textfix`) replace a finding's own characters, so the
rest of the file, comments and formatting included, stays byte for byte. One pass
suffices: what a rewrite writes (a ROCm label or index) is no finding of the rule, and
a check that a second pass changes nothing guards that. The result must still read as
its kind (TOML, YAML, shell by ``bash -n``) and lose the findings it rewrote, or the
file is left as it was.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import yaml

from portscan.config import Target
from portscan.fix.engine import Applied, FileFix, NotFixed, fixable, guarded, held, silencer
from portscan.match import Match
from portscan.match.textfix import rewrite
from portscan.model import Finding
from portscan.parse import LineIndex, SourceError
from portscan.ruleset.fixspec import Tier
from portscan.ruleset.loader import RuleSet
from portscan.scan import findings_from, match_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def has_text_fixes(rules: RuleSet, kind: str) -> bool:
    """Could a file of this kind hold a finding with a text fix?"""
    return kind != "python" and any(r.fix is not None and r.fix.kind == "text" for r in rules.for_surface(kind))


def fix_text(text: str, path: str, kind: str, rules: RuleSet, unsafe: bool = False,
             target: Target | None = None, imported: Callable[[], Mapping[str, str]] = dict) -> FileFix:
    """Fix one file of a non-Python kind. Never raises for bad input: see ``FileFix.error``.
    ``imported``: the modules the project's Python imports (module -> ``path:line``), asked
    only where a fix waits for code that imports one (``[fix] code-first``)."""
    try:
        matches = match_text(text, kind, rules)
    except SourceError as exc:
        return FileFix(path, text, text, error=exc.message)
    before = findings_from(text, path, matches, target)
    silenced = silencer(text, kind)
    index = LineIndex(text)

    def line(match: Match) -> int:
        return index.position(match.start)[0]

    not_fixed = [NotFixed(m.rule.code, m.rule.name, line(m), reason) for m, reason in guarded(matches, silenced)]
    edits: list[_Edit] = []
    for match in fixable([m for m in matches if m.rule.fix is not None and m.rule.fix.kind == "text"], silenced):
        if (reason := held(match, unsafe, target, imported=imported)) is not None:
            not_fixed.append(NotFixed(match.rule.code, match.rule.name, line(match), reason))
        else:
            done = rewrite(text, match, kind, target)
            assert done.new is not None  # a match the rewrite declines carries the reason
            start = match.start if done.start is None else done.start
            edits.append(_Edit(match, start, match.end if done.end is None else done.end, done.new, done.note))
    chosen = _non_overlapping(edits)
    if not chosen:
        return FileFix(path, text, text, not_fixed=tuple(not_fixed), findings=before, before=before)
    fixed = text
    for edit in sorted(chosen, key=lambda e: e.start, reverse=True):
        fixed = fixed[:edit.start] + edit.new + fixed[edit.end:]
    problem = (unreadable(kind, fixed) if unreadable(kind, text) is None else None) or \
        _unsettled(fixed, kind, rules, matches, [e.match for e in chosen])
    if problem is not None:
        return FileFix(path, text, text, not_fixed=tuple(not_fixed), error=f"{problem}; the file is unchanged",
                       findings=before, before=before)
    chosen += _carried(chosen, edits)
    applied = tuple(Applied(e.match.rule.code, e.match.rule.name, e.match.rule.fix.tier if e.match.rule.fix
                            else Tier.UNSAFE, line(e.match), _touches(index, e), e.note) for e in chosen)
    after: tuple[Finding, ...] = findings_from(fixed, path, match_text(fixed, kind, rules), target)
    return FileFix(path, text, fixed, applied, tuple(not_fixed), findings=after, before=before)


@dataclass(frozen=True, slots=True)
class _Edit:
    """One rewrite: ``text[start:end]`` becomes ``new``, for ``match``."""

    match: Match
    start: int
    end: int
    new: str
    note: str | None = None  #: what the reviewer should check (see :class:`Rewritten`)


def _touches(index: LineIndex, edit: _Edit) -> frozenset[int]:
    """The input lines a rewrite replaced (or inserted after), as :class:`Applied` counts places."""
    first = index.position(min(edit.start, edit.match.start))[0] - 1
    last = index.position(max(edit.end - 1, edit.start))[0] - 1
    return frozenset(2 * i + 1 for i in range(first, last + 1))


def _carried(chosen: Sequence[_Edit], edits: Sequence[_Edit]) -> list[_Edit]:
    """The edits left out for overlapping a chosen one of the same rule whose replaced
    text holds their match: that rewrite is theirs too (a conda environment's
    ``cudatoolkit`` line goes with the ``pytorch-cuda`` rewrite that spans both). They
    count as applied, owning the chosen edit's lines; nothing more is written."""
    taken = {id(e) for e in chosen}
    carried = []
    for edit in edits:
        outer = next((c for c in chosen if c.match.rule is edit.match.rule
                      and c.start <= edit.match.start and edit.match.end <= c.end), None)
        if id(edit) not in taken and outer is not None:
            carried.append(dataclasses.replace(edit, start=outer.start, end=outer.end, new=outer.new))
    return carried


def _non_overlapping(edits: Sequence[_Edit]) -> list[_Edit]:
    """The edits in text order, each dropped when it overlaps one kept before it (two
    rules on the same characters: the first wins; a second run does the rest)."""
    kept: list[_Edit] = []
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if kept and (edit.start < kept[-1].end or edit.start == kept[-1].start):
            continue
        kept.append(edit)
    return kept


def _unsettled(fixed: str, kind: str, rules: RuleSet, matches: Sequence[Match],
               done: Sequence[Match]) -> str | None:
    """Why the fixed text is not done: it still has a rewritten rule's finding that a
    rewrite was for (each rewrite must remove one)."""
    codes = Counter(m.rule.code for m in done)
    left = Counter(m.rule.code for m in match_text(fixed, kind, rules) if m.rule.code in codes)
    was = Counter(m.rule.code for m in matches if m.rule.code in codes)
    stuck = sorted(code for code in codes if left[code] > was[code] - codes[code])
    return f"the rewrite did not remove the {stuck[0]} finding it was for" if stuck else None


def _yaml(text: str) -> None:
    for _ in yaml.safe_load_all(text):
        pass


def _bash(text: str) -> None:
    bash = shutil.which("bash")
    if bash is None:
        return  # nothing to check with; the rewrite changed characters inside one word
    done = subprocess.run([bash, "-n"], input=text, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise ValueError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "bash -n failed")


#: file kind -> a reader that raises when the text is no longer a file of that kind
_READERS: dict[str, Callable[[str], object]] = {
    "pyproject": tomllib.loads,
    "conda": _yaml,
    "ci": _yaml,
    "compose": _yaml,
    "shell": _bash,
}


def unreadable(kind: str, text: str) -> str | None:
    """Why ``text`` no longer reads as its kind (None: it does, or the kind has no reader)."""
    reader = _READERS.get(kind)
    if reader is None:
        return None
    try:
        reader(text)
    except Exception as exc:  # noqa: BLE001 - any reader's complaint means "do not write this"
        return f"the fixed file would not read as {kind} ({type(exc).__name__}: {exc})"
    return None
