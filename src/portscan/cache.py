"""A content cache for per-file scan results, kept outside every scanned tree.

An entry is keyed by a hash of the file's text, its path and kind, the project's own
module names, the rule pack (every rule file's bytes), the target and portscan itself
(its version and a digest of its own code and data files, so an edited checkout never
serves results of the code before the edit), so any change to any of them misses; entries are content-addressed, so one
store serves every project. It holds the file's raw findings (before suppressions and
per-file-ignores, which are cheap and read the text anyway), or the reason it could not
be scanned, together with the CUDA extensions it declares (:class:`FileScan`).

Trust: a scanned repository is untrusted, and so is anything it ships. The store lives
in the user's cache directory (``$XDG_CACHE_HOME/portscan``, ``~/.cache/portscan``, or
the platform's equivalent; :data:`ENVIRONMENT` overrides it), never in the tree, and the
command line refuses a cache folder that lies inside a scanned path
(:func:`inside`). Entries are JSON, rebuilt through :mod:`portscan.data` against the
types portscan writes: nothing read back is unpickled or evaluated, and an entry that
does not fit is a miss, never an error.

The store is one SQLite database: safe under concurrent runs (a locked database is
skipped, not waited on for long); a corrupt or unreadable one is ignored and rebuilt.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portscan import __version__
from portscan.data import dump, load
from portscan.model import FileError, Finding, package_of

ENVIRONMENT = "PORTSCAN_CACHE_DIR"  #: the cache folder to use instead of the user cache directory
DATABASE = "results-v2.sqlite"
#: the shape of a stored entry; a change here makes every older entry a miss
SHAPE = 3
Raw = tuple[Finding, ...] | FileError  #: what scanning one file's text produced
#: (name, line, source globs as written) of the extensions a file declares
Extensions = tuple[tuple[str, int, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class FileScan:
    """What one parse of a file gives: its raw result, and the extensions it declares."""

    raw: Raw
    extensions: Extensions = ()


def cache_root() -> Path:
    """The folder for portscan's caches: ``$PORTSCAN_CACHE_DIR``, else the user cache directory."""
    override = os.environ.get(ENVIRONMENT)
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("portscan", appauthor=False))


def inside(folder: Path, paths: Sequence[Path]) -> Path | None:
    """The scanned path that contains ``folder`` (symlinks resolved), if any: a cache
    there could have arrived with the tree, so it is not used."""
    resolved = folder.resolve()
    for path in paths:
        top = path.resolve()
        top = top if top.is_dir() else top.parent
        if resolved.is_relative_to(top):
            return path
    return None


def entry_key(salt: str, kind: str, path: str, first_party: Iterable[str], text: str) -> str:
    digest = hashlib.sha256()
    for part in (salt, kind, path, ",".join(sorted(first_party)), package_of(first_party)):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def tree_digest(root: Path) -> str:
    """A hash of every code and data file below ``root`` (names and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".txt", ".toml")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@functools.cache
def code_digest() -> str:
    """:func:`tree_digest` of the installed portscan package (a few ms, once per run)."""
    return tree_digest(Path(__file__).resolve().parent)


class Cache:
    """Values by key, each stored as JSON with the type it was written as; every
    failure degrades to "not cached"."""

    def __init__(self, folder: Path, salt: str) -> None:
        self.salt = f"{__version__}|{code_digest()}|shape {SHAPE}|{salt}"
        self._pending: dict[str, str] = {}
        self._db: sqlite3.Connection | None = None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(folder / DATABASE, timeout=2.0, isolation_level=None)
            self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT)")
        except (OSError, sqlite3.Error):
            self._db = None

    def key(self, kind: str, path: str, first_party: Iterable[str], text: str) -> str:
        return entry_key(self.salt, kind, path, first_party, text)

    def get_as(self, tp: Any, key: str) -> Any | None:
        """The value stored under ``key`` rebuilt as a ``tp``; None if absent or malformed."""
        if self._db is None:
            return None
        try:
            row = self._db.execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
            if row is None or not isinstance(row[0], str):
                return None
            return load(tp, json.loads(row[0]))
        except Exception:  # noqa: BLE001 - whatever a malformed entry raises, it is a miss
            return None

    def get(self, key: str) -> FileScan | None:
        return self.get_as(FileScan, key)  # type: ignore[no-any-return]

    def put_as(self, tp: Any, key: str, value: object) -> None:
        if self._db is not None:
            self._pending[key] = json.dumps(dump(tp, value), separators=(",", ":"))

    def put(self, key: str, scanned: FileScan) -> None:
        self.put_as(FileScan, key, scanned)

    def close(self) -> None:
        """Write what this run added, in one transaction; give up quietly if locked."""
        if self._db is None:
            return
        with contextlib.suppress(sqlite3.Error):
            if self._pending:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?)", self._pending.items())
                self._db.execute("COMMIT")
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        self._db = None
        self._pending.clear()
