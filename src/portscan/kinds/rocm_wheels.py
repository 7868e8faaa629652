"""Which releases of a package have ROCm wheels on download.pytorch.org, read from
``rocm-wheels.toml`` (data with its sources, extended when PyTorch publishes a release).

Used by the ``requirement`` kind (``rocm_wheels = "none"``: a specifier that no ROCm
wheel meets, so pip swaps the installed ROCm torch for PyPI's CUDA build) and by the
Markdown report's install recipe.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TABLE = Path(__file__).resolve().parent / "rocm-wheels.toml"


@dataclass(frozen=True, slots=True)
class RocmWheels:
    """One package's releases with ROCm wheels, newest first."""

    checked: Version  #: the newest release the list was read for
    indexes: tuple[tuple[Version, tuple[str, ...]], ...]  #: (release, ROCm indexes), newest first

    def newest(self) -> tuple[Version, str]:
        """The newest release and its newest ROCm index (``2.10.0``, ``rocm7.1``)."""
        version, names = self.indexes[0]
        return version, names[0]

    def none_meets(self, specifier: str) -> bool:
        """True when no listed ROCm release meets ``specifier`` and the specifier names no
        version past ``checked`` or before a release (``==2.7.0.dev20250201``: nightlies
        come for both vendors from the nightly indexes): the list speaks for releases only.
        CUDA local labels are dropped first: ``==2.1.0+cu121`` asks for 2.1.0, which the
        local-version rule reports."""
        try:
            spec = SpecifierSet(",".join(_public(s) for s in specifier.split(",") if s.strip()))
        except InvalidSpecifier:
            return False
        if not len(spec):
            return False
        try:
            named = [Version(s.version.rstrip(".*")) for s in spec]
            if any(v > self.checked or v.is_prerelease for v in named):
                return False
        except InvalidVersion:
            return False
        return not any(spec.contains(version, prereleases=True) for version, _ in self.indexes)

    def indexes_of(self, version: Version) -> tuple[str, ...]:
        """The ROCm indexes of one release, newest first (empty: it has no ROCm wheels)."""
        return next((names for listed, names in self.indexes if listed == version), ())

    def newest_meeting(self, specifiers: Sequence[str]) -> tuple[Version, str] | None:
        """The newest listed release that every specifier admits, and its newest index
        (no specifier: the newest release); None when none does or one is unreadable.
        CUDA local labels are dropped first, as in :meth:`none_meets`."""
        try:
            sets = [SpecifierSet(",".join(_public(c) for c in s.split(",") if c.strip())) for s in specifiers]
        except InvalidSpecifier:
            return None
        for version, names in self.indexes:
            if all(spec.contains(version, prereleases=True) for spec in sets):
                return version, names[0]
        return None


def _public(clause: str) -> str:
    """``==2.1.0+cu121`` -> ``==2.1.0``."""
    return clause.strip().split("+", 1)[0]


@functools.cache
def rocm_wheels(package: str) -> RocmWheels | None:
    """The table for a normalised package name, or None when the data has none."""
    with TABLE.open("rb") as handle:
        data = tomllib.load(handle).get(package)
    if not isinstance(data, dict):
        return None
    indexes = sorted(((Version(v), tuple(names)) for v, names in data["indexes"].items()),
                     reverse=True)
    return RocmWheels(Version(data["checked"]), tuple(indexes))
