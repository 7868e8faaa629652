"""Line diffs of a file before and after its fixes, fast on large files.

``difflib.SequenceMatcher`` without its junk heuristic is quadratic in the lines between
the first and the last change, and a fix of a large module changes lines from top to
bottom; lines that repeat (``return loss``, blank lines) make it worse. Small inputs
keep ``difflib``'s own answer; larger ones are cut at the lines that occur once on each
side, in the same order (patience diff), and ``difflib`` aligns the pieces between them.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Sequence

Opcode = tuple[str, int, int, int, int]  #: as ``SequenceMatcher.get_opcodes`` gives them
#: above this many line pairs, a piece is cut at unique lines first
DIRECT_PAIRS = 250_000


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """``difflib`` opcodes turning lines ``a`` into lines ``b``."""
    if len(a) * len(b) <= DIRECT_PAIRS:
        return [(tag, i1, i2, j1, j2) for tag, i1, i2, j1, j2 in
                difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()]
    found: list[Opcode] = []
    _diff(a, b, 0, len(a), 0, len(b), found)
    return _merged(found)


def _diff(a: Sequence[str], b: Sequence[str], i1: int, i2: int, j1: int, j2: int, out: list[Opcode]) -> None:
    start = (i1, j1)
    while i1 < i2 and j1 < j2 and a[i1] == b[j1]:
        i1, j1 = i1 + 1, j1 + 1
    if (i1, j1) != start:
        out.append(("equal", start[0], i1, start[1], j1))
    end = (i2, j2)
    while i2 > i1 and j2 > j1 and a[i2 - 1] == b[j2 - 1]:
        i2, j2 = i2 - 1, j2 - 1
    _middle(a, b, i1, i2, j1, j2, out)
    if (i2, j2) != end:
        out.append(("equal", i2, end[0], j2, end[1]))


def _middle(a: Sequence[str], b: Sequence[str], i1: int, i2: int, j1: int, j2: int, out: list[Opcode]) -> None:
    if i1 == i2 and j1 == j2:
        return
    if i1 == i2 or j1 == j2:
        out.append((_changed(i1, i2, j1, j2), i1, i2, j1, j2))
        return
    if (i2 - i1) * (j2 - j1) <= DIRECT_PAIRS:
        matcher = difflib.SequenceMatcher(None, a[i1:i2], b[j1:j2], autojunk=False)
        out += [(tag, i1 + p, i1 + q, j1 + r, j1 + s) for tag, p, q, r, s in matcher.get_opcodes()]
        return
    anchors = _anchors(a, b, i1, i2, j1, j2)
    if not anchors:  # no line to align on: one changed block (correct, if coarse)
        out.append(("replace", i1, i2, j1, j2))
        return
    at_a, at_b = i1, j1
    for i, j in anchors:
        _diff(a, b, at_a, i, at_b, j, out)
        out.append(("equal", i, i + 1, j, j + 1))
        at_a, at_b = i + 1, j + 1
    _diff(a, b, at_a, i2, at_b, j2, out)


def _anchors(a: Sequence[str], b: Sequence[str], i1: int, i2: int, j1: int, j2: int) -> list[tuple[int, int]]:
    """Pairs of lines that occur exactly once in each range, the longest run of them in
    the same order on both sides."""
    once_a, once_b = _once(a, i1, i2), _once(b, j1, j2)
    pairs = [(i, once_b[line]) for line, i in once_a.items() if i >= 0 and once_b.get(line, -1) >= 0]
    pairs.sort()
    return _increasing(pairs)


def _once(lines: Sequence[str], start: int, stop: int) -> dict[str, int]:
    """Each line of ``lines[start:stop]`` with its index, or -1 where it repeats."""
    found: dict[str, int] = {}
    for k in range(start, stop):
        found[lines[k]] = -1 if lines[k] in found else k
    return found


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of ``pairs`` (sorted by their first) whose seconds
    increase (patience sorting)."""
    tails: list[int] = []  # the second of the last pair of the best run of each length
    ends: list[int] = []  # that pair's index
    back: list[int] = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(tails, j)
        if length == len(tails):
            tails.append(j)
            ends.append(k)
        else:
            tails[length] = j
            ends[length] = k
        back[k] = ends[length - 1] if length else -1
    run: list[tuple[int, int]] = []
    k = ends[-1] if ends else -1
    while k >= 0:
        run.append(pairs[k])
        k = back[k]
    return run[::-1]


def _merged(found: list[Opcode]) -> list[Opcode]:
    """Adjacent opcodes of one kind as one; a delete next to an insert as a replace."""
    out: list[Opcode] = []
    for tag, i1, i2, j1, j2 in found:
        if i1 == i2 and j1 == j2:
            continue
        if out:
            last = out[-1]
            if last[0] == tag == "equal" or (last[0] != "equal" and tag != "equal"):
                merged = "equal" if tag == "equal" else _changed(last[1], i2, last[3], j2)
                out[-1] = (merged, last[1], i2, last[3], j2)
                continue
        out.append((tag, i1, i2, j1, j2))
    return out


def _changed(i1: int, i2: int, j1: int, j2: int) -> str:
    """The tag of a changed block: lines on both sides, only old ones, or only new ones."""
    return "replace" if i2 > i1 and j2 > j1 else "delete" if i2 > i1 else "insert"
