"""Rule files: strict loading from TOML, and the rule set the matchers run.

A rule file is data. It is parsed with ``tomllib``; nothing in it is evaluated as
code (literals in ``[match]`` are TOML values, messages are ``string.Template``
strings with a closed set of variables). Any problem is a :class:`RuleFileError`
that names the file and the key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
import tempfile
import string
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Mapping, Sequence

from packaging.specifiers import SpecifierSet

from portscan import __version__
from portscan.config import Target, specifier
from portscan.data import DataError, dump, load
from portscan.fix.spec import FixSpec, read_fix
from portscan.model import Confidence, Severity
from portscan.patterns import Fragment, Pattern, PatternError, TableReader, Token, import_lines, read_pattern

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_CODE = re.compile(r"^[A-Z]{2,8}[0-9]{3}$")
_WORD = re.compile(r"\w+")
_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_URL = re.compile(r"^https://\S+$")
_ARCH_GLOB = re.compile(r"^gfx[0-9a-f*?]+$")
MESSAGE_MAX = 160


class RuleFileError(ValueError):
    """A rule file cannot be used. ``str()`` reads ``path: key: problem``."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        super().__init__(f"{path}: {key}: {problem}" if key else f"{path}: {problem}")
        self.path = path
        self.key = key
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Example:
    """Embedded example code. In ``bad`` examples, a line holding only ``# expect``
    marks the next code line as one where the rule must report."""

    source: str
    name: str = ""
    path: str = "example.py"


@dataclass(frozen=True, slots=True)
class TargetOverride:
    """``[[targets]]``: on a matching target the rule reports at ``severity`` (None: not
    at all), for the stated reason."""

    arch: tuple[str, ...]  #: glob patterns such as ``gfx11*``; empty: any arch
    rocm: SpecifierSet | None  #: e.g. ``>=7.0``; None: any release
    severity: Severity | None
    why: str


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    name: str
    category: str
    severity: Severity
    confidence: Confidence
    message: str  #: ``string.Template``; variables come from the pattern kind
    rocm: str  #: what happens on ROCm
    rewrite: str  #: the suggested ROCm-safe rewrite
    references: tuple[str, ...]
    pattern: Pattern
    supersedes: tuple[str, ...]  #: codes this more specific rule replaces at the same place
    bad: tuple[Example, ...]
    good: tuple[Example, ...]
    origin: str  #: the file it was loaded from
    fix: FixSpec | None = None  #: ``None``: the rewrite is a suggestion only
    targets: tuple[TargetOverride, ...] = ()
    digest: str = ""  #: hash of the rule file's bytes (cache keys)

    def severity_for(self, target: Target | None) -> Severity | None:
        """The severity on ``target`` (None: the rule does not apply there)."""
        if target is not None and target.is_set:
            for override in self.targets:
                if target.matches(override.arch, override.rocm):
                    return override.severity
        return self.severity

    def render_message(self, variables: Mapping[str, str]) -> str:
        return string.Template(self.message).safe_substitute(variables)


def builtin_rules_dir() -> Path:
    """The rules shipped in the wheel, or the repository's ``rules/`` in a checkout."""
    packaged = Path(__file__).resolve().parent / "rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "rules"


def _template_variables(template: str) -> set[str]:
    names = set()
    for match in string.Template.pattern.finditer(template):
        if match.group("invalid") is not None:
            raise ValueError(f"stray `$` at offset {match.start()} (write `$$` for a dollar)")
        name = match.group("named") or match.group("braced")
        if name:
            names.add(name)
    return names


def prose(text: str) -> str:
    """Rule prose is hard-wrapped in TOML: join each paragraph into one line."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def _read_examples(data: Any, key: str) -> tuple[Example, ...]:
    if not isinstance(data, list) or not data:
        raise PatternError(key, "expected at least one [[" + key + "]] example")
    examples = []
    for i, table in enumerate(data):
        r = TableReader(table, f"{key}[{i}]")
        examples.append(Example(source=r.text("source"), name=r.text("name", required=False),
                                path=r.text("path", required=False, default="example.py")))
        r.finish()
    return tuple(examples)


#: fix kind -> the match kinds it can work from
_FIX_NEEDS = {"replace": ("name",), "guard-import": ("import",)}


def _read_fix(data: Any, pattern: Pattern) -> FixSpec | None:
    if data is None:
        return None
    if "python" not in pattern.surfaces:
        raise PatternError("fix", f"fixes rewrite Python; a {pattern.kind} rule has none")
    names = tuple(getattr(pattern, "names", ()))
    fix = read_fix(data, names)
    needs = _FIX_NEEDS.get(fix.kind)
    if needs is not None and pattern.kind not in needs:
        raise PatternError("fix.kind", f"a {fix.kind} fix needs a {' or '.join(needs)} rule, "
                                       f"not {pattern.kind}")
    if fix.kind == "transform":
        from portscan.fix.transforms import TRANSFORMS

        if fix.transform not in TRANSFORMS:
            raise PatternError("fix.transform", f"no transform named {fix.transform!r}; "
                                                f"known: {', '.join(sorted(TRANSFORMS))}")
    return fix


def _read_targets(data: Any) -> tuple[TargetOverride, ...]:
    if data is None:
        return ()
    if not isinstance(data, list) or not data:
        raise PatternError("targets", "expected one or more [[targets]] tables")
    overrides = []
    for i, table in enumerate(data):
        r = TableReader(table, f"targets[{i}]")
        arch = r.texts("arch", required=False, check=_ARCH_GLOB, what="gfx target pattern")
        rocm_text = r.text("rocm", required=False)
        try:
            rocm = specifier(rocm_text) if rocm_text else None
        except ValueError as exc:
            raise PatternError(r.key("rocm"), f"not a version condition: {exc}") from None
        if not arch and rocm is None:
            raise PatternError(r.key("arch"), "give arch and/or rocm")
        severity = r.choice("severity", (*(s.value for s in Severity), "off"))
        overrides.append(TargetOverride(arch, rocm, None if severity == "off" else Severity(severity),
                                        prose(r.text("why"))))
        r.finish()
    return tuple(overrides)


def parse_rule(data: Mapping[str, Any], origin: str) -> Rule:
    """Validate one decoded rule file. Raises :class:`RuleFileError`."""
    try:
        r = TableReader(dict(data), "")
        code = r.text("code")
        if not _CODE.match(code):
            raise PatternError("code", f"{code!r} is not a code like PS101")
        name = r.text("name")
        category = r.text("category")
        for key, value in (("name", name), ("category", category)):
            if not _KEBAB.match(value):
                raise PatternError(key, f"{value!r} is not kebab-case")
        severity = Severity(r.choice("severity", tuple(s.value for s in Severity)))
        confidence = Confidence(r.choice("confidence", tuple(c.value for c in Confidence)))
        message = r.text("message")
        if "\n" in message.strip() or len(message) > MESSAGE_MAX:
            raise PatternError("message", f"must be one line of at most {MESSAGE_MAX} characters")
        references = r.texts("references", check=_URL, what="https URL")
        supersedes = r.texts("supersedes", required=False, check=_CODE, what="rule code")
        pattern = read_pattern(r.raw("match", True))
        try:
            unknown = _template_variables(message) - pattern.variables
        except ValueError as exc:
            raise PatternError("message", str(exc)) from None
        if unknown:
            raise PatternError("message", f"unknown variable ${{{sorted(unknown)[0]}}}; "
                               f"{pattern.kind} rules offer {', '.join(sorted(pattern.variables))}")
        fix = _read_fix(r.raw("fix", False), pattern)
        targets = _read_targets(r.raw("targets", False))
        rule = Rule(
            code=code, name=name, category=category, severity=severity, confidence=confidence,
            message=message.strip(), rocm=prose(r.text("rocm")),
            rewrite=prose(r.text("rewrite")), references=references, pattern=pattern,
            supersedes=supersedes, bad=_read_examples(r.raw("bad", True), "bad"),
            good=_read_examples(r.raw("good", True), "good"), origin=origin, fix=fix,
            targets=targets,
        )
        r.finish()
        return rule
    except PatternError as exc:
        raise RuleFileError(origin, exc.key, exc.problem) from None


def load_rule_file(path: Path) -> Rule:
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RuleFileError(str(path), "", f"invalid TOML: {exc}") from None
    except OSError as exc:
        raise RuleFileError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    return dataclasses.replace(parse_rule(data, str(path)), digest=hashlib.sha256(raw).hexdigest())


class RuleSetError(ValueError):
    """One or more rule files failed to load; ``errors`` lists every problem."""

    def __init__(self, errors: list[RuleFileError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors


def load_rules(dirs: Iterable[Path] | None = None) -> RuleSet:
    """Load every ``*.toml`` below ``dirs`` (default: the built-in rules).

    All files are read before failing, so one run reports every broken file.
    """
    rules: list[Rule] = []
    errors: list[RuleFileError] = []
    for directory in dirs if dirs is not None else [builtin_rules_dir()]:
        if not directory.is_dir():
            errors.append(RuleFileError(str(directory), "", "rule directory not found"))
            continue
        for path in sorted(directory.rglob("*.toml")):
            try:
                rules.append(load_rule_file(path))
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
    if errors:
        raise RuleSetError(errors)
    return RuleSet(rules)


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
    with contextlib.suppress(OSError, ValueError, DataError, RecursionError):
        return RuleSet(load(tuple[Rule, ...], json.loads(stored.read_text(encoding="utf-8"))))
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
        #: each Python rule with its token sets, worked out once
        python = tuple((rule, tuple(rule.pattern.token_sets()))
                       for rule in self.rules if "python" in rule.pattern.surfaces)
        tokens = {t for _, sets in python for s in sets for t in s}
        words = {t for t in tokens if isinstance(t, str)}
        self._words = frozenset(t for t in words if _WORD.fullmatch(t))
        #: tokens that are not plain words ("nvidia-smi"), each with its own bounded search
        self._compounds = {t: re.compile(r"(?<!\w)" + re.escape(t) + r"(?!\w)")
                           for t in sorted(words - self._words)}
        #: per rule, each token set split into plain words (a subset test) and the rest
        self._plans = tuple((rule, tuple((frozenset(t for t in s if t in self._words),
                                          tuple(t for t in s if t not in self._words)) for s in sets))
                            for rule, sets in python)
        #: some token set needs no plain word (only "nvidia-smi", say)
        self._wordless = any(not cheap for _, plans in self._plans for cheap, _ in plans)

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
        """Rules that could match ``text``: every token of one of their token sets occurs.

        Each segment of a qualified name occurs literally in any file that uses it
        (aliases rename only a prefix, which the import statement spells out), so a
        file for which this returns nothing needs no parsing. Words are found in one
        regex pass; the costlier tokens (compounds, fragments, anchors) are looked for
        only for rules whose words are all there, and at most once each.
        """
        words = self._words.intersection(_WORD.findall(text))
        if not words and not self._wordless:
            return ()
        known: dict[Token, bool] = {}
        folded: list[str] = []
        imports: list[str] = []

        def occurs(token: Token) -> bool:
            if isinstance(token, str):  # not a plain word: those were tested as a set
                if token not in known:
                    known[token] = token in text and self._compounds[token].search(text) is not None
                return known[token]
            if token not in known:
                if isinstance(token, Fragment):
                    if token.ignore_case and not folded:
                        folded.append(text.casefold())
                    known[token] = token.occurs(text, folded[0] if folded else text)
                else:
                    if not imports:
                        imports.append(import_lines(text))
                    known[token] = token.occurs(imports[0])
            return known[token]

        return tuple(rule for rule, plans in self._plans
                     if any(cheap <= words and all(occurs(t) for t in rest) for cheap, rest in plans))
