"""Loading rules: every rule file below some folders, checked together, and the
:class:`RuleSet` the matchers run (with its prefilter)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from portscan import __version__
from portscan.data import dump, load
from portscan.ruleset.prefilter import Prefilter
from portscan.ruleset.schema import Rule, RuleFileError, parse_rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


def builtin_rules_dir() -> Path:
    """The rules shipped in the wheel, or the repository's ``rules/`` in a checkout."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "rules"
    if packaged.is_dir():
        return packaged
    return package.parents[1] / "rules"


def load_rule_file(path: Path) -> Rule:
    return parse_rule_file(path, read_rule_file(path))


def read_rule_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RuleFileError(str(path), "", f"cannot read: {exc.strerror or exc}") from None


def parse_rule_file(path: Path, raw: bytes, digest: str | None = None) -> Rule:
    """The rule in ``raw``, the bytes of ``path`` (``digest``: their SHA-256, if known)."""
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RuleFileError(str(path), "", f"invalid TOML: {exc}") from None
    return dataclasses.replace(parse_rule(data, str(path)), digest=digest or hashlib.sha256(raw).hexdigest())


#: rule packs this process already built, by what they were built from (the files' paths
#: and bytes, or the bytes of a cached copy): each is the same pure function of its
#: input, so a CLI or API call that loads an unchanged pack again skips the TOML,
#: validation and prefilter (~0.1 s). A few entries: distinct packs in one process are rare.
_BUILT: dict[tuple[object, ...], RuleSet] = {}
_BUILT_MAX = 8
_BUILT_LOCK = threading.Lock()  # API callers may load from several threads


def _remember(key: tuple[object, ...], rules: RuleSet) -> RuleSet:
    with _BUILT_LOCK:
        while len(_BUILT) >= _BUILT_MAX:
            del _BUILT[next(iter(_BUILT))]
        _BUILT[key] = rules
    return rules


class RuleSetError(ValueError):
    """One or more rule files failed to load; ``errors`` lists every problem."""

    def __init__(self, errors: list[RuleFileError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors


def load_rules(dirs: Iterable[Path] | None = None) -> RuleSet:
    """Load every ``*.toml`` below ``dirs`` (default: the built-in rules).

    All files are read before failing, so one run reports every broken file.
    """
    sources: list[tuple[Path, bytes, str] | RuleFileError] = []
    for directory in dirs if dirs is not None else [builtin_rules_dir()]:
        if not directory.is_dir():
            sources.append(RuleFileError(str(directory), "", "rule directory not found"))
            continue
        for path in sorted(directory.rglob("*.toml")):
            try:
                raw = read_rule_file(path)
            except RuleFileError as exc:
                sources.append(exc)
            else:
                sources.append((path, raw, hashlib.sha256(raw).hexdigest()))
    files = [(str(source[0]), source[2]) for source in sources if not isinstance(source, RuleFileError)]
    built = ("toml", *files) if len(files) == len(sources) else None  # what the pack is built from
    if built is not None and (known := _BUILT.get(built)) is not None:
        return known
    rules: list[Rule] = []
    errors: list[RuleFileError] = []
    for source in sources:
        if isinstance(source, RuleFileError):
            errors.append(source)
            continue
        try:
            rules.append(parse_rule_file(*source))
        except RuleFileError as exc:
            errors.append(exc)
    seen: dict[str, Rule] = {}
    for rule in rules:
        for key, other in ((rule.code, seen.get(rule.code)), (rule.name, seen.get(rule.name))):
            if other is not None:
                errors.append(RuleFileError(rule.origin, "code" if key == rule.code else "name",
                                            f"{key!r} is already used by {other.origin}"))
        seen[rule.code] = seen[rule.name] = rule
    codes = {rule.code for rule in rules}
    for rule in rules:
        for code in rule.supersedes:
            if code not in codes:
                errors.append(RuleFileError(rule.origin, "supersedes", f"no rule {code}"))
        for code in rule.escalate.when if rule.escalate is not None else ():
            if code not in codes:
                errors.append(RuleFileError(rule.origin, "escalate.when", f"no rule {code}"))
    if errors:
        raise RuleSetError(errors)
    assert built is not None  # a read error is in errors
    return _remember(built, RuleSet(rules))


def load_rules_cached(dirs: Sequence[Path], cache: Path | None) -> RuleSet:
    """:func:`load_rules`, reusing a copy in the cache folder ``cache`` while no rule
    file was added, removed or changed (by path, size and mtime). Loading and validating
    ~200 TOML files costs ~0.3 s; the copy loads in a few tens of milliseconds. The copy
    is JSON rebuilt against the rule types (:mod:`portscan.data`): a malformed or planted
    file is a miss, never executed."""
    if cache is None:
        return load_rules(dirs)
    signature = hashlib.sha256(f"{__version__}|{sys.version}".encode())
    try:
        for directory in dirs:
            for path in sorted(directory.rglob("*.toml")):
                stat = path.stat()
                signature.update(f"{path}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    except OSError:
        return load_rules(dirs)
    stored = cache / f"rules-{signature.hexdigest()[:24]}.json"
    with contextlib.suppress(Exception):  # whatever a malformed copy raises, it is a miss
        raw = stored.read_bytes()
        key = ("copy", hashlib.sha256(raw).hexdigest())
        if (known := _BUILT.get(key)) is not None:
            return known
        return _remember(key, RuleSet(load(tuple[Rule, ...], json.loads(raw.decode("utf-8")))))
    rules = load_rules(dirs)
    with contextlib.suppress(OSError):
        stored.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=stored.parent, suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(dump(tuple[Rule, ...], rules.rules), out, separators=(",", ":"))
            os.replace(temporary, stored)
        finally:
            Path(temporary).unlink(missing_ok=True)
    return rules


class RuleSet:
    """An immutable, ordered collection of rules plus the literal prefilter they imply."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(sorted(rules, key=lambda rule: rule.code))
        self.by_code: dict[str, Rule] = {rule.code: rule for rule in self.rules}
        self._by_surface: dict[str, tuple[Rule, ...]] = {}
        #: each Python rule's token sets, worked out once
        self._prefilter = Prefilter((rule, rule.pattern.token_sets())
                                    for rule in self.rules if "python" in rule.pattern.surfaces)

    @functools.cached_property
    def digest(self) -> str:
        """Identifies the exact rule pack: every rule's code and file contents."""
        return hashlib.sha256("".join(sorted(f"{r.code}:{r.digest};" for r in self.rules)).encode()).hexdigest()

    def for_surface(self, kind: str) -> tuple[Rule, ...]:
        """Rules that apply to files of this kind (see ``Pattern.surfaces``)."""
        if kind not in self._by_surface:
            self._by_surface[kind] = tuple(r for r in self.rules if kind in r.pattern.surfaces)
        return self._by_surface[kind]

    def __len__(self) -> int:
        return len(self.rules)

    def filter(self, select: Iterable[str] = (), ignore: Iterable[str] = ()) -> RuleSet:
        """Rules whose code starts with a ``select`` prefix (all when empty) and with no
        ``ignore`` prefix, as in Ruff. Raises ``ValueError`` for a prefix that matches
        no rule (a typo would otherwise select nothing)."""
        select, ignore = list(select), list(ignore)
        if not select and not ignore:
            return self  # immutable: the same rules, and no second prefilter to build
        for prefix in select + ignore:
            if not any(rule.code.startswith(prefix) for rule in self.rules):
                raise ValueError(f"{prefix!r} matches no rule code; `portscan rules` lists them")
        return RuleSet(rule for rule in self.rules
                       if (not select or rule.code.startswith(tuple(select)))
                       and not rule.code.startswith(tuple(ignore)))

    def select(self, codes: Iterable[str]) -> RuleSet:
        wanted = set(codes)
        return RuleSet(rule for rule in self.rules if rule.code in wanted)

    def candidates(self, text: str) -> tuple[Rule, ...]:
        """Python rules that could match ``text`` (see :meth:`Prefilter.candidates`)."""
        return self._prefilter.candidates(text)
