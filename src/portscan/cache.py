"""A content cache for per-file scan results, in ``.portscan_cache/``.

An entry is keyed by a hash of the file's text, its path and kind, the project's own
module names, the rule pack (every rule file's bytes), the target and the portscan
version, so any change to any of them misses. It stores the file's raw findings (before
suppressions and per-file-ignores, which are cheap and read the text anyway), or the
reason it could not be scanned.

The store is one SQLite database: safe under concurrent runs (a locked database is
skipped, not waited on for long), and a corrupt or unreadable cache is ignored and
rebuilt, never an error. The folder holds a ``.gitignore`` with ``*``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from portscan import __version__
from portscan.model import FileError, Finding

FOLDER = ".portscan_cache"
ENVIRONMENT = "PORTSCAN_CACHE_DIR"  #: puts the cache folder elsewhere (CI caches, tests)


def cache_folder(base: Path) -> Path:
    """The cache folder for a project whose root is ``base``."""
    override = os.environ.get(ENVIRONMENT)
    return Path(override) if override else base / FOLDER
Raw = tuple[Finding, ...] | FileError  #: what scanning one file's text produced


def entry_key(salt: str, kind: str, path: str, first_party: Iterable[str], text: str) -> str:
    digest = hashlib.sha256()
    for part in (salt, kind, path, ",".join(sorted(first_party))):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


class Cache:
    """Raw results by key; every failure degrades to "not cached"."""

    def __init__(self, directory: Path, salt: str) -> None:
        self.salt = f"{__version__}|{salt}"
        self._pending: dict[str, bytes] = {}
        self._db: sqlite3.Connection | None = None
        try:
            folder = cache_folder(directory)
            folder.mkdir(parents=True, exist_ok=True)
            ignore = folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# created by portscan\n*\n", encoding="utf-8")
            self._db = sqlite3.connect(folder / "results-v1.sqlite", timeout=2.0, isolation_level=None)
            self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value BLOB)")
        except (OSError, sqlite3.Error):
            self._db = None

    def key(self, kind: str, path: str, first_party: Iterable[str], text: str) -> str:
        return entry_key(self.salt, kind, path, first_party, text)

    def get_value(self, key: str) -> object | None:
        if self._db is None:
            return None
        try:
            row = self._db.execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            return pickle.loads(row[0])  # noqa: S301 - our own cache file, keyed by content hash
        except Exception:  # noqa: BLE001 - a corrupt entry is a miss
            return None

    def get(self, key: str) -> Raw | None:
        value = self.get_value(key)
        if isinstance(value, FileError):
            return value
        if isinstance(value, tuple) and all(isinstance(f, Finding) for f in value):
            return value
        return None

    def put(self, key: str, raw: object) -> None:
        if self._db is not None:
            self._pending[key] = pickle.dumps(raw, protocol=pickle.HIGHEST_PROTOCOL)

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
