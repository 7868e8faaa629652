"""Does a version specifier keep a package below a given release?

Used by the ``requirement`` kind's ``below`` key: a library that gained ROCm support in
release X (bitsandbytes shipped ROCm binaries from 0.49.0) is a porting problem only where
the project's requirement rules X and everything after it out (``>=0.45.2,<0.45.5``,
``==0.43.1``, ``~=0.44.0``). Requirements are conjunctions, so one clause that caps the
version below X is enough; a specifier that caps nothing (``>=0.45``, unpinned) allows
the ROCm-capable releases and is not reported.
"""

from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def only_below(specifier: str, below: str) -> bool:
    """True when no version at or above ``below`` meets ``specifier``. Local labels
    (``+cu121``) are dropped first; an unparsable specifier is never reported."""
    try:
        ceiling = Version(below)
        spec = SpecifierSet(",".join(c.strip().split("+", 1)[0] for c in specifier.split(",") if c.strip()))
        return any(_caps_below(clause, ceiling) for clause in spec)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _caps_below(clause: Specifier, ceiling: Version) -> bool:
    """Does this one clause admit only versions below ``ceiling``?"""
    operator, text = clause.operator, clause.version
    if operator == "<":
        return Version(text) <= ceiling
    if operator in ("<=", "==", "===") and not text.endswith(".*"):
        return Version(text) < ceiling
    if operator == "==":  # ==0.45.*: every 0.45.x, so below 0.46
        return _next(Version(text[:-2]).release) <= ceiling
    if operator == "~=":  # ~=0.45.2 means >=0.45.2, ==0.45.*
        return _next(Version(text).release[:-1]) <= ceiling
    return False  # >=, >, != cap nothing


def _next(release: tuple[int, ...]) -> Version:
    """The first release after every ``release.*``: (0, 45) -> 0.46."""
    return Version(".".join(map(str, (*release[:-1], release[-1] + 1))))
