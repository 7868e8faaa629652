"""Value types shared by every stage: severities, spans, findings and scan results.

Everything here is a frozen dataclass or a string enum, so results can be compared,
sorted, hashed and sent across process boundaries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import PurePosixPath


class OwnModules(frozenset[str]):
    """The project's own top-level modules as one Python file sees them, with the dotted
    package the file is in (``package``; empty outside a package): what its absolute and
    its relative imports name of the project itself. A plain frozenset of names
    elsewhere, so it passes through every layer unchanged."""

    __slots__ = ("package",)
    package: str

    def __new__(cls, names: Iterable[str] = (), package: str = "") -> OwnModules:
        made = super().__new__(cls, names)
        made.package = package
        return made

    def __reduce__(self) -> tuple[type[OwnModules], tuple[tuple[str, ...], str]]:
        return OwnModules, (tuple(self), self.package)

    def __repr__(self) -> str:
        return f"OwnModules({sorted(self)!r}, package={self.package!r})"


def folders_of(path: str) -> tuple[str, ...]:
    """The folders of a path relative to the scan root (``a/b/c.py`` -> ``("a", "b")``)."""
    return PurePosixPath(path).parts[:-1]


def package_of(own: Iterable[str]) -> str:
    """The dotted package a file's own modules were listed for ("" when unknown)."""
    return own.package if isinstance(own, OwnModules) else ""


class Severity(str, Enum):
    """How a pattern behaves on a PyTorch ROCm build."""

    ERROR = "error"  #: fails on ROCm (ImportError, build failure, crash, GPU silently unused)
    WARNING = "warning"  #: runs, but differs, is slower, or needs another package
    INFO = "info"  #: works unchanged; worth knowing

    @property
    def rank(self) -> int:
        """Higher is more severe; used for sorting and thresholds."""
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


class Confidence(str, Enum):
    """How well the rule's ROCm claim is sourced."""

    HIGH = "high"  #: stated directly by an official source
    MEDIUM = "medium"  #: supported by code, issues or PRs, or version-dependent
    LOW = "low"  #: inference or a single community report


@dataclass(frozen=True, slots=True)
class Span:
    """A source range. Lines and columns are 1-based; ``end_column`` is exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule matched at one place in one file."""

    rule: str  #: stable code, e.g. ``PS401``
    name: str  #: the rule's short kebab-case name
    severity: Severity
    category: str
    confidence: Confidence
    path: str  #: relative to the scan root, ``/`` separators
    span: Span
    message: str
    rewrite: str  #: the suggested ROCm-safe rewrite, as prose
    references: tuple[str, ...]
    guard: str | None = None  #: why the severity was lowered (see portscan.match.guards)
    fix: str | None = None  #: ``safe``/``unsafe`` when the rule declares a fix for this place
    #: hash of rule, path and the finding's source lines with whitespace normalised: stable
    #: when code moves (see :func:`portscan.scan.fingerprint`); baselines and SARIF use it
    fingerprint: str = ""
    #: other places this finding stands for, as (line, column): the later uses of the same
    #: import by the same rule, the uses of a guarded import's names, the later includes
    #: of a library's headers in a kernel source (see :func:`portscan.scan.collapse`); one
    #: finding per import, not one per use
    uses: tuple[tuple[int, int], ...] = ()

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.span.line, self.span.column, self.rule)


@dataclass(frozen=True, slots=True)
class FileError:
    """A file that could not be scanned, and why. The scan goes on without it."""

    path: str
    kind: str  #: ``read``, ``decode``, ``binary``, ``parse`` or ``internal``
    message: str


@dataclass(frozen=True, slots=True)
class Suppression:
    """One rule code silenced by one comment (see :mod:`portscan.suppress`)."""

    path: str
    line: int  #: the comment's line
    code: str
    file: bool = False  #: a file-level suppression

    def describe(self) -> str:
        form = f"portscan: ignore-file[{self.code}]" if self.file else f"noqa: {self.code}"
        return f"{self.path}:{self.line}: `{form}` silences nothing"


@dataclass(frozen=True, slots=True)
class FileResult:
    """What scanning one file produced: findings, or an error."""

    path: str
    findings: tuple[Finding, ...] = ()
    error: FileError | None = None
    suppressed: int = 0  #: findings silenced by comments or per-file-ignores
    unused: tuple[Suppression, ...] = ()  #: suppressions that silenced nothing (when asked)


@dataclass(frozen=True, slots=True)
class Extension:
    """A CUDA extension a build script declares, with the kernel hazards of its sources."""

    name: str
    path: str  #: the declaring file (``setup.py``), relative to the scan root
    line: int
    sources: tuple[str, ...]  #: resolved source files, relative to the scan root
    findings: int  #: findings in those sources and in the headers they include
    missing: tuple[str, ...] = ()  #: sources named but not found
    headers: tuple[str, ...] = ()  #: project headers the sources include (``#include "..."``)


@dataclass(frozen=True, slots=True)
class ScanResult:
    """The outcome of one ``portscan scan`` run."""

    root: str  #: absolute path that finding paths are relative to
    files_scanned: int
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    errors: tuple[FileError, ...] = field(default_factory=tuple)
    extensions: tuple[Extension, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = field(default_factory=tuple)  #: checks that could not run
    suppressed: int = 0  #: findings silenced by comments, per-file-ignores or the baseline
    scanned: tuple[str, ...] = field(default_factory=tuple)  #: paths of the files scanned
    unused_suppressions: tuple[Suppression, ...] = field(default_factory=tuple)
