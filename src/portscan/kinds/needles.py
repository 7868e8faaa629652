"""Literal text every match of a regular expression contains, so a kernel rule can skip
a file without running its pattern (the kernel counterpart of the Python prefilter).

``\\bcg::reduce\\(|cooperative_groups/reduce\\.h`` needs ``cg::reduce(`` or
``cooperative_groups/reduce.h``; ``(?i:warp)_size`` needs ``warp_size`` in any case. A
pattern with a branch that needs nothing (``\\w+``) gives ``()``: always run it.
"""

from __future__ import annotations

import re
from typing import Any

try:  # Python 3.11+: the parser moved under re
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _parser  # type: ignore[no-redef]

Needle = tuple[str, bool]  #: (text, case-insensitive: compare lowercased)
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)}


def needles(pattern: str, flags: int = 0) -> tuple[Needle, ...]:
    """Pieces of literal text, one of which is in every match; () when none can be told."""
    try:
        parsed = _parser.parse(pattern, flags)
    except Exception:  # noqa: BLE001 - an unusual pattern just runs on every file
        return ()
    found = _sequence(list(parsed), bool(flags & re.IGNORECASE))
    return tuple(found) if found else ()


#: words nearly every C++ file has: a needle made only of them tells nothing
_COMMON = frozenset({"define", "include", "namespace", "static_cast", "const", "unsigned", "int",
                     "return", "template", "typename", "if", "else", "endif", "ifdef", "ifndef"})


def _score(found: list[Needle] | None) -> tuple[int, int, int, int]:
    """Rank candidates: telling words first, up to 4 characters the longer the better,
    then fewer alternatives, then longer ones."""
    if not found:
        return (0, 0, 0, 0)
    shortest = min(len(text) for text, _ in found)
    telling = all(text.lower().strip("#<") not in _COMMON for text, _ in found)
    return (1 + telling, min(shortest, 4), -len(found), shortest)


def _sequence(items: list[Any], icase: bool) -> list[Needle] | None:
    """A concatenation needs what its most telling element (or run of literals) needs."""
    best: list[Needle] | None = None
    run = ""
    for op, av in [*items, (None, None)]:
        if op is _c.LITERAL:
            run += chr(av)
            continue
        if run:
            candidate = [(run.lower() if icase else run, icase)]
            best = candidate if _score(candidate) > _score(best) else best
            run = ""
        if op is None:
            break
        found = _element(op, av, icase)
        if _score(found) > _score(best):
            best = found
    return best


def _element(op: Any, av: Any, icase: bool) -> list[Needle] | None:
    if op is _c.SUBPATTERN:
        add_flags, del_flags, body = av[1], av[2], av[3]
        inner = (icase or bool(add_flags & re.IGNORECASE)) and not del_flags & re.IGNORECASE
        return _sequence(list(body), inner)
    if op is _c.BRANCH:
        union: list[Needle] = []
        for branch in av[1]:
            found = _sequence(list(branch), icase)
            if not found:
                return None
            union += found
        return union
    if op in _REPEATS and av[0] >= 1:
        return _sequence(list(av[2]), icase)
    if op is getattr(_c, "ATOMIC_GROUP", None):
        return _sequence(list(av), icase)
    return None  # classes, lookarounds, anchors, references: nothing certain


def present(found: tuple[Needle, ...], code: str, lowered: str) -> bool:
    """Is one of the needles in the text (``lowered``: the text lowercased)?"""
    return not found or any((text in lowered) if icase else (text in code) for text, icase in found)
