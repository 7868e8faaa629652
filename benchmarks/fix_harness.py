"""``portscan fix --unsafe-fixes`` on real trees, checked file by file.

    python benchmarks/fix_harness.py --git-trees /work/.mirror [--cache DIR] [--only ID ...] [--no-write]

The trees are the accuracy corpus's (benchmarks/accuracy/trees/, loaded with that
runner's own functions) and the apex-using repositories of benchmarks/fix/trees.toml.
Each tree is copied to a scratch folder (the cache is never modified) and fixed there
with ``python -m portscan fix --unsafe-fixes`` as a user runs it. Every changed Python
file is then checked:

parse, compile
    the fixed file parses and compiles (when the original did);
undefined
    pyflakes reports no undefined name the original did not have;
unused-import
    pyflakes reports no unused import the original did not have;
try-pass
    no more ``try:`` blocks whose body is only ``pass`` than before;
use-site
    where a ``replace`` fix that lists ``source_only`` names (attributes the source
    type has and the target lacks) was applied, the module uses none of them as
    ``.name``;
mixed
    no ``replace`` fix of a rule at warning or above (its source is missing or broken on
    ROCm) is applied to some uses in a module and declined on others there: the module
    then mixes the old and the new type, ``isinstance(m, FusedLayerNorm)`` beside
    ``nn.LayerNorm(...)``, and still imports the old one;

and every changed file that is not Python (requirements, pyproject, conda, CI, compose,
Dockerfile, shell: the text fixes) still reads as its kind where it did: TOML, YAML,
``bash -n`` (read);

and for the tree: a second ``fix --unsafe-fixes`` changes nothing (idempotence), and
the ``--diff`` output, applied to the original, gives exactly the files write mode
wrote (diff). The results go to benchmarks/FIX.md.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MANIFEST = HERE / "fix" / "trees.toml"


def _accuracy_runner():  # type: ignore[no-untyped-def]
    """benchmarks/accuracy/run.py as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("accuracy_run", HERE / "accuracy" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


accuracy = _accuracy_runner()
Tree = accuracy.Tree

#: the checks, in the order FIX.md lists them
CHECKS = ("parse", "compile", "undefined", "unused-import", "try-pass", "use-site", "mixed", "read", "idempotence",
          "diff", "fix-error")
#: the categories whose error-level findings a port must clear before the image or the build
#: runs at all (issue 20's "packaging, container and build")
BUILD_CATEGORIES = frozenset({"packaging", "kernels"})
UNDEFINED = ("UndefinedName", "UndefinedLocal", "UndefinedExport")


@dataclass(frozen=True)
class Failure:
    check: str
    path: str
    line: int
    detail: str


@dataclass
class TreeResult:
    id: str
    python_files: int = 0
    changed: list[str] = field(default_factory=list)
    applied: Counter[str] = field(default_factory=Counter)  #: rule -> fixes applied
    declined: Counter[str] = field(default_factory=Counter)  #: "rule: reason" -> count
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  #: new pyflakes messages of other kinds (not failures)
    seconds: float = 0.0
    findings: int = 0  #: unguarded findings before the fix
    fixed: int = 0  #: of those, how many a scan of the result no longer reports (per rule and file)
    #: error-level packaging/build findings whose rule has a documented rewrite: before, after
    rewrite_errors: tuple[int, int] = (0, 0)


# ----------------------------------------------------------------- per-file checks

def pyflakes_messages(text: str, path: str) -> list[tuple[str, str, int]]:
    """(message class, its first argument, line) of each pyflakes message, or [] when the
    text does not parse."""
    from pyflakes import checker

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return []
    found = checker.Checker(tree, filename=path)
    return [(type(m).__name__, str(m.message_args[0]) if m.message_args else "", m.lineno) for m in found.messages]


def _new(before: Iterable[tuple[str, str, int]], after: Iterable[tuple[str, str, int]],
         kinds: Sequence[str]) -> list[tuple[str, str, int]]:
    """Messages of ``kinds`` in ``after`` beyond those in ``before``, compared by kind and
    name (lines move when a fix adds or removes lines); the later ones are reported."""
    left = Counter((k, n) for k, n, _ in before if k in kinds)
    out = []
    for kind, name, line in after:
        if kind not in kinds:
            continue
        if left[(kind, name)] > 0:
            left[(kind, name)] -= 1
        else:
            out.append((kind, name, line))
    return out


def pass_only_trys(tree: ast.AST) -> list[int]:
    """Lines of the ``try`` statements whose body is nothing but ``pass``."""
    trys = [n for n in ast.walk(tree) if type(n).__name__ in ("Try", "TryStar")]
    return [n.lineno for n in trys if all(isinstance(s, ast.Pass) for s in n.body)]  # type: ignore[attr-defined]


def _parses(text: str, path: str) -> ast.Module | SyntaxError:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path)
    except SyntaxError as exc:
        return exc
    except ValueError as exc:  # NUL bytes
        return SyntaxError(str(exc))


def _compiles(text: str, path: str) -> SyntaxError | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return exc
    except ValueError as exc:
        return SyntaxError(str(exc))
    return None


def use_site_violations(tree: ast.AST, names: Iterable[str]) -> list[tuple[str, int]]:
    """(attribute, line) of each ``.name`` access of one of ``names``."""
    wanted = frozenset(names)
    return sorted((n.attr, n.lineno) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in wanted)


def check_file(path: str, before: str, after: str, applied_rules: Iterable[str] = (),
               source_only: Mapping[str, frozenset[str]] | None = None) -> tuple[list[Failure], list[str]]:
    """The failures of one fixed file (and notes: new pyflakes messages of other kinds).
    ``applied_rules``: the rules whose fixes changed it; ``source_only``: per rule, the
    attribute names its replaced type has and the target lacks."""
    failures: list[Failure] = []
    old, new = _parses(before, path), _parses(after, path)
    if isinstance(new, SyntaxError):
        if not isinstance(old, SyntaxError):
            failures.append(Failure("parse", path, new.lineno or 0, new.msg or str(new)))
        return failures, []
    if isinstance(old, SyntaxError):
        return failures, []  # a Python 2 file, say: nothing to compare with
    error = _compiles(after, path)
    if error is not None and _compiles(before, path) is None:
        failures.append(Failure("compile", path, error.lineno or 0, error.msg or str(error)))
    flakes_before, flakes_after = pyflakes_messages(before, path), pyflakes_messages(after, path)
    for kind, name, line in _new(flakes_before, flakes_after, UNDEFINED):
        failures.append(Failure("undefined", path, line, f"{kind} {name!r}"))
    for _, name, line in _new(flakes_before, flakes_after, ("UnusedImport",)):
        failures.append(Failure("unused-import", path, line, f"{name!r} imported but unused"))
    trys_before, trys_after = pass_only_trys(old), pass_only_trys(new)
    if len(trys_after) > len(trys_before):
        failures.append(Failure("try-pass", path, trys_after[0] if not trys_before else 0,
                                f"{len(trys_after) - len(trys_before)} more try whose body is only pass "
                                f"(now at lines {trys_after})"))
    for rule in sorted(set(applied_rules)):
        for attr, line in use_site_violations(new, (source_only or {}).get(rule, ())):
            failures.append(Failure("use-site", path, line, f"{rule}: .{attr} is not on the target type"))
    others = sorted({k for k, _, _ in flakes_after} - set(UNDEFINED) - {"UnusedImport"})
    notes = [f"{path}:{line} new pyflakes {kind} {name!r}" for kind, name, line in _new(flakes_before, flakes_after,
                                                                                         others)]
    return failures, notes


# ----------------------------------------------------------------- rules

def source_only_names(rules: Iterable[Any]) -> dict[str, frozenset[str]]:
    """Per rule code, the ``source_only`` names of its ``[[fix.replace]]`` tables, for the
    rules portscan's loader loaded (:func:`portscan.ruleset.loader.load_rules`). The field
    is read from the loaded ``Replace`` when the loader knows it, else from the rule file's
    TOML (``rule.origin``), so the check works before and after it joins the schema."""
    out: dict[str, frozenset[str]] = {}
    for rule in rules:
        if rule.fix is None or rule.fix.kind != "replace":
            continue
        names: set[str] = set()
        for entry in rule.fix.replace:
            names.update(getattr(entry, "source_only", ()) or ())
        if not names:
            names.update(raw_source_only(Path(rule.origin)))
        if names:
            out[rule.code] = frozenset(names)
    return out


def raw_source_only(path: Path) -> set[str]:
    """The ``source_only`` names of the ``[[fix.replace]]`` tables in one rule file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return set()
    fix = data.get("fix", {})
    return {str(n) for entry in fix.get("replace", []) if isinstance(entry, dict)
            for n in entry.get("source_only", [])}


# ----------------------------------------------------------------- running portscan

def portscan(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """``python -m portscan ARGS`` from this checkout's sources, run in ``cwd``."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), COLUMNS="100000", NO_COLOR="1",
               PYTHONIOENCODING="utf-8", TERM="dumb")
    return subprocess.run([sys.executable, "-m", "portscan", *args], cwd=cwd, env=env, capture_output=True,
                          check=False)


FIX_ARGS = ("fix", "--unsafe-fixes", "--no-cache", "--exit-zero")
_FIXES_LINE = re.compile(r"^ {2,4}(\S.*): ((?:PS\d+(?: ×\d+)?)(?:, PS\d+(?: ×\d+)?)*)$")
_CODE = re.compile(r"(PS\d+)(?: ×(\d+))?")
_DECLINED_LINE = re.compile(r"^ {2,4}(\S.*):(\d+) (PS\d+) (\S+): (.+)$")
#: a file kind's line under "Fixed": ``  Python: 12 in 4 files (PS209 ×2, ...)``
_KIND_LINE = re.compile(r"^  [^:]+: \d+ in \d+ files? \(")
_END = re.compile(r"^(No findings remain|\d+ findings? remains?)")


@dataclass(frozen=True)
class Summary:
    """What ``portscan fix --show-fixes`` printed, read back."""

    applied: Mapping[str, Counter[str]]  #: path -> rule -> count
    declined: tuple[tuple[str, int, str, str], ...]  #: (path, line, rule, reason)
    errors: tuple[tuple[str, str], ...]  #: (path, message)


def read_summary(text: str) -> Summary:
    applied: dict[str, Counter[str]] = {}
    declined: list[tuple[str, int, str, str]] = []
    errors: list[tuple[str, str]] = []
    section = "head"
    for line in text.splitlines():
        if line.startswith(("Fixed ", "Would fix ")):
            section = "fixes"
        elif line.startswith("Not fixed"):
            section = "declined"
        elif line.startswith("Check in review"):
            section = "check"  # rewrites that wrote the nearest match: applied, with a note
        elif _END.match(line):
            section = "end"
        elif not line.startswith("  ") or section in ("end", "check"):
            continue
        elif section == "fixes" and (m := _FIXES_LINE.match(line)):
            applied[m[1]] = Counter({c: int(n or 1) for c, n in _CODE.findall(m[2])})
        elif (re.match(r"^  \d+ more findings? in the fixed files", line) or line.startswith("  with --unsafe-fixes")
              or _KIND_LINE.match(line)):
            continue
        elif section == "declined" and (m := _DECLINED_LINE.match(line)):
            declined.append((m[1], int(m[2]), m[3], m[5]))
        elif ": " in line:
            path, _, message = line[2:].partition(": ")
            errors.append((path, message))
    return Summary(applied, tuple(declined), tuple(errors))


# ----------------------------------------------------------------- the diff

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DiffError(ValueError):
    pass


def split_diff(diff: str) -> dict[str, list[str]]:
    """The diff's lines per file (``b/`` path without its prefix). Lines are split as
    portscan splits source lines (``\\r\\n``, ``\\r``, ``\\n``), so each diff line is one
    source line with its own ending."""
    from portscan.parse import lines_with_ends

    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    lines = lines_with_ends(diff)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- a/") and i + 1 < len(lines) and lines[i + 1].startswith("+++ b/"):
            current = files.setdefault(lines[i + 1][6:].rstrip("\r\n"), [])
            i += 2
            continue
        if current is None:
            raise DiffError(f"diff line outside a file: {line!r}")
        current.append(line)
        i += 1
    return files


def apply_diff(original: str, lines: Sequence[str]) -> str:
    """``original`` with one file's hunks applied; the context must match exactly."""
    from portscan.parse import lines_with_ends

    source = lines_with_ends(original)
    out: list[str] = []
    at = 0  # next source line to copy
    i = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if not m:
            raise DiffError(f"expected a hunk header, got {lines[i]!r}")
        start = int(m[1]) - (0 if m[2] == "0" else 1)
        out += source[at:start]
        at = start
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            line = lines[i]
            body = line[1:]
            if i + 1 < len(lines) and lines[i + 1].startswith("\\"):
                body = body[:-1] if body.endswith("\n") else body  # the marker: no newline at the end
                i += 1
            if line[0] in " -":
                if at >= len(source) or source[at] != body:
                    raise DiffError(f"hunk line {body!r} does not match source line {at + 1}")
                at += 1
            if line[0] in " +":
                out.append(body)
            if line[0] not in " -+":
                raise DiffError(f"bad diff line {line!r}")
            i += 1
    out += source[at:]
    return "".join(out)


def diff_mismatches(diff: str, originals: Mapping[str, str], written: Mapping[str, str]) -> list[Failure]:
    """How ``--diff`` output disagrees with what write mode wrote: ``originals`` and
    ``written`` map each changed path to its text before and after."""
    try:
        per_file = split_diff(diff)
    except DiffError as exc:
        return [Failure("diff", "", 0, str(exc))]
    failures = [Failure("diff", p, 0, "written but not in the diff") for p in sorted(set(written) - set(per_file))]
    failures += [Failure("diff", p, 0, "in the diff but not written") for p in sorted(set(per_file) - set(written))]
    for path in sorted(set(per_file) & set(written)):
        try:
            result = apply_diff(originals[path], per_file[path])
        except DiffError as exc:
            failures.append(Failure("diff", path, 0, f"does not apply: {exc}"))
            continue
        if result != written[path]:
            pairs = zip(result.splitlines(), written[path].splitlines(), strict=False)
            first = next((n for n, (a, b) in enumerate(pairs, 1) if a != b), 0)
            failures.append(Failure("diff", path, first, "the diff applied differs from the written file"))
    return failures


# ----------------------------------------------------------------- a tree

def python_texts(root: Path) -> dict[str, str]:
    """Every ``*.py`` below ``root`` (relative POSIX path -> text as Python decodes it)."""
    from portscan.parse import SourceError, decode_python

    out = {}
    for path in sorted(root.rglob("*.py")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            out[path.relative_to(root).as_posix()] = decode_python(path.read_bytes())
        except (SourceError, OSError):
            continue
    return out


def file_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and not p.is_symlink()}


def run_tree(tree_id: str, root: Path, scratch: Path, source_only: Mapping[str, frozenset[str]] | None = None,
             mixed: frozenset[str] | None = None) -> TreeResult:
    """Fix a copy of ``root`` under ``scratch`` and check the result."""
    result = TreeResult(tree_id)
    start = time.perf_counter()
    work = scratch / tree_id
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(root, work, symlinks=True)
    before_bytes = file_bytes(work)
    before = python_texts(work)
    result.python_files = len(before)
    found_before = scan_findings(work)

    dry = portscan([*FIX_ARGS, "--diff", "."], work)
    if dry.returncode not in (0, 1):
        result.failures.append(Failure("fix-error", "", 0, f"--diff exited {dry.returncode}: "
                                                           f"{dry.stderr.decode(errors='replace')[-600:]}"))
    if file_bytes(work) != before_bytes:
        result.failures.append(Failure("diff", "", 0, "--diff changed files on disk"))
    wrote = portscan([*FIX_ARGS, "--show-fixes", "."], work)
    if wrote.returncode not in (0, 1):
        result.failures.append(Failure("fix-error", "", 0, f"fix exited {wrote.returncode}: "
                                                           f"{wrote.stderr.decode(errors='replace')[-600:]}"))
    summary = read_summary(wrote.stdout.decode("utf-8", errors="replace"))
    for path, message in summary.errors:
        result.failures.append(Failure("fix-error", path, 0, message))
    for counts in summary.applied.values():
        result.applied.update(counts)
    for _, _, rule, reason in summary.declined:
        result.declined[f"{rule}: {reason}"] += 1

    after_bytes = file_bytes(work)
    changed = sorted(p for p in set(before_bytes) | set(after_bytes) if before_bytes.get(p) != after_bytes.get(p))
    result.changed = changed
    after = python_texts(work)
    for path in changed:
        if not path.endswith(".py") and path in before_bytes and path in after_bytes:
            result.failures += text_failures(path, before_bytes[path], after_bytes[path])
            continue
        if path not in before or path not in after:
            result.failures.append(Failure("fix-error", path, 0, "a file was created, removed or is not readable"))
            continue
        failures, notes = check_file(path, before[path], after[path], summary.applied.get(path, {}), source_only)
        result.failures += failures
        result.notes += notes
    result.failures += mixed_failures(summary, mixed)
    for path in sorted(set(summary.applied) - set(changed)):
        result.failures.append(Failure("fix-error", path, 0, "reported as fixed but not changed on disk"))

    result.failures += diff_mismatches(dry.stdout.decode("utf-8"), _texts(changed, before, before_bytes),
                                       _texts(changed, after, after_bytes))

    again = portscan([*FIX_ARGS, "--diff", "."], work)
    if again.returncode not in (0, 1):
        result.failures.append(Failure("fix-error", "", 0, f"second --diff exited {again.returncode}"))
    result.failures += idempotence_failures(again.stdout.decode("utf-8", errors="replace"))
    found_after = scan_findings(work)
    result.findings, result.fixed = fixed_share(found_before, found_after)
    result.rewrite_errors = (len(rewrite_errors(found_before)), len(rewrite_errors(found_after)))
    result.seconds = time.perf_counter() - start
    return result


def _texts(paths: Iterable[str], python: Mapping[str, str], raw: Mapping[str, bytes]) -> dict[str, str]:
    """The texts of ``paths``: Python as Python decodes it, the rest as UTF-8 (all a text fix rewrites)."""
    out = {}
    for path in paths:
        if path in python:
            out[path] = python[path]
        elif path in raw and not path.endswith(".py"):
            try:
                out[path] = raw[path].decode("utf-8")
            except UnicodeDecodeError:
                continue
    return out


def text_failures(path: str, before: bytes, after: bytes) -> list[Failure]:
    """A changed file that is not Python must still read as its kind where it did."""
    from portscan.filekinds import file_kind
    from portscan.fix.text import unreadable

    kind = file_kind(PurePosixPath(path))
    try:
        old, new = before.decode("utf-8"), after.decode("utf-8")
    except UnicodeDecodeError:
        return [Failure("read", path, 0, "a file that is not UTF-8 was rewritten")]
    if kind is None or kind == "python":
        return [Failure("fix-error", path, 0, "a file no fix rewrites changed")]
    problem = unreadable(kind, new) if unreadable(kind, old) is None else None
    return [Failure("read", path, 0, problem)] if problem else []


def scan_findings(root: Path) -> list[dict[str, Any]]:
    """The findings of ``portscan scan --format json`` on ``root``."""
    done = portscan(["scan", "--no-cache", "--format", "json", "--exit-zero", "."], root)
    return list(json.loads(done.stdout.decode("utf-8"))["findings"])


def fixed_share(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(unguarded findings before, how many of them are gone): counted per rule and file,
    since a fix moves the lines below it."""
    def unguarded(found: Sequence[Mapping[str, Any]]) -> Counter[tuple[str, str]]:
        return Counter((f["rule"], f["path"]) for f in found if f.get("guard") is None)

    was, now = unguarded(before), unguarded(after)
    return sum(was.values()), sum((was - now).values())


def rewrite_errors(found: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Error-level packaging and build findings of rules that document a rewrite (a ``[fix]``)."""
    return [f for f in found if f["severity"] == "error" and f["category"] in BUILD_CATEGORIES
            and f["rule"] in _rules_with_fixes()]


@functools.cache
def _rules_with_fixes() -> frozenset[str]:
    from portscan.ruleset.loader import load_rules

    return frozenset(r.code for r in load_rules().rules if r.fix is not None)


def mixed_failures(summary: Summary, codes: frozenset[str] | None = None) -> list[Failure]:
    """A finding declined in a module where the same rule's fix was applied to others
    (only rules of ``codes``, when given: see :func:`mixed_codes`)."""
    return [Failure("mixed", path, line, f"{rule} fixed elsewhere in this module, declined here: {reason}")
            for path, line, rule, reason in summary.declined
            if rule in summary.applied.get(path, {}) and (codes is None or rule in codes)]


def mixed_codes(rules: Iterable[Any]) -> frozenset[str]:
    """The rules a partly fixed module is a failure for: ``replace`` fixes of findings at
    warning or above. (An info rule such as ``torch.cuda.amp.autocast`` -> ``torch.amp``
    works either way; a ``guard-import`` left off one import of several is not a mix of types.)"""
    return frozenset(r.code for r in rules if r.fix is not None and r.fix.kind == "replace"
                     and str(getattr(r.severity, "value", r.severity)) in ("warning", "error"))


def idempotence_failures(second_diff: str) -> list[Failure]:
    """A second run's ``--diff`` output, as failures: one per file it would change again."""
    try:
        files = split_diff(second_diff)
    except DiffError as exc:
        return [Failure("idempotence", "", 0, f"unreadable second diff: {exc}")]
    failures = []
    for path, lines in sorted(files.items()):
        hunk = next((m for line in lines if (m := _HUNK.match(line))), None)
        changes = [line.rstrip("\r\n") for line in lines if line[:1] in "+-"][:4]
        failures.append(Failure("idempotence", path, int(hunk[1]) if hunk else 0,
                                "a second run changes it again: " + " | ".join(changes)))
    return failures


# ----------------------------------------------------------------- trees and report

def manifest_trees(path: Path = MANIFEST) -> list:  # type: ignore[type-arg]
    """The extra git trees of benchmarks/fix/trees.toml, as accuracy-corpus ``Tree``s."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for entry in data.get("tree", []):
        if not re.fullmatch(r"[0-9a-f]{40}", entry.get("commit", "")) or "/" not in entry.get("repo", ""):
            raise ValueError(f"{path}: tree {entry.get('id')!r} needs repo = \"owner/name\" and a 40-hex commit")
        out.append(Tree(id=entry["id"], project=entry["repo"].split("/")[1], kind="fix", source="git",
                        repo=entry["repo"], commit=entry["commit"]))
    return out


def all_trees() -> list:  # type: ignore[type-arg]
    corpus = [accuracy.read_tree(p) for p in sorted((HERE / "accuracy" / "trees").glob("*.toml"))]
    return corpus + manifest_trees()


def commit_stamp() -> str:
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                           text=True)
    return (head.stdout.strip() or "unknown") + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def _counts(counter: Mapping[str, int]) -> str:
    return ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in sorted(counter.items())) or "-"


def render(results: Sequence[TreeResult], skipped: Sequence[str], command: str) -> str:
    import portscan as package

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    failing = Counter(f.check for r in results for f in r.failures)
    out = ["# `portscan fix --unsafe-fixes` on real code", "",
           f"Measured {stamp} with portscan {package.__version__} at commit {commit_stamp()} on "
           f"{platform.machine()}, Python {platform.python_version()}:", "", f"    {command}", "",
           f"{len(results)} trees: the accuracy corpus (benchmarks/accuracy/trees/) and the apex-using "
           "repositories of benchmarks/fix/trees.toml. Each is fixed in a scratch copy; every changed file is "
           "checked (see the docstring of benchmarks/fix_harness.py for what each check means).", ""]
    if skipped:
        out += [f"Skipped (tree not available; see `--git-trees`): {', '.join(skipped)}.", ""]
    files = sum(len(r.changed) for r in results)
    applied = sum(sum(r.applied.values()) for r in results)
    declined = sum(sum(r.declined.values()) for r in results)
    findings, fixed = sum(r.findings for r in results), sum(r.fixed for r in results)
    errors = (sum(r.rewrite_errors[0] for r in results), sum(r.rewrite_errors[1] for r in results))
    out += [f"**Totals:** {len(results)} trees, {sum(r.python_files for r in results)} Python files, "
            f"{files} changed, {applied} fixes applied, {declined} declined; failures: "
            + ", ".join(f"{c} {failing.get(c, 0)}" for c in CHECKS) + ".", "",
            f"**Fixed automatically:** {fixed} of {findings} unguarded findings "
            f"({fixed / max(findings, 1):.1%}; counted per rule and file). Error-level packaging and build "
            f"findings of rules with a documented rewrite: {errors[0]} before, {errors[1]} after (each one "
            "left is declined with its reason in the fix summary).", ""]
    out += ["| tree | .py files | changed | fixes | declined | findings | fixed | rewrite errors | "
            + " | ".join(CHECKS) + " | seconds |",
            "|---|---|---|---|---|---|---|---|" + "---|" * len(CHECKS) + "---|"]
    for r in results:
        per = Counter(f.check for f in r.failures)
        out.append(f"| {r.id} | {r.python_files} | {len(r.changed)} | {sum(r.applied.values())} "
                   f"| {sum(r.declined.values())} | {r.findings} | {r.fixed} "
                   f"| {r.rewrite_errors[0]} → {r.rewrite_errors[1]} | "
                   + " | ".join(str(per.get(c, 0)) for c in CHECKS) + f" | {r.seconds:.1f} |")
    out += ["", "## Fixes applied and declined, per tree", ""]
    for r in results:
        if r.applied or r.declined:
            out.append(f"- `{r.id}`: applied {_counts(r.applied)}; declined {_counts(r.declined)}")
    out += ["", "## Failures", ""]
    listed = [(r.id, f) for r in results for f in r.failures]
    out += [f"- `{tid}` [{f.check}] {f.path}:{f.line} {f.detail}" for tid, f in listed] or ["None."]
    notes = [(r.id, n) for r in results for n in r.notes]
    if notes:
        out += ["", "## New pyflakes messages of other kinds (not counted as failures)", ""]
        out += [f"- `{tid}` {n}" for tid, n in notes]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--git-trees", type=Path, metavar="DIR", help="where the git trees (or their repositories) are")
    parser.add_argument("--cache", type=Path, default=HERE / "accuracy" / ".cache", metavar="DIR",
                        help="downloads and extracted trees, shared with the accuracy runner "
                             "(default: benchmarks/accuracy/.cache)")
    parser.add_argument("--only", nargs="*", metavar="ID", help="run only these trees")
    parser.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/FIX.md alone")
    args = parser.parse_args()
    trees = all_trees()
    if args.only:
        trees = [t for t in trees if t.id in args.only]
    from portscan.ruleset.loader import load_rules

    rules = load_rules().rules
    source_only, mixed = source_only_names(rules), mixed_codes(rules)
    results, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="portscan-fix-harness-") as scratch:
        for tree in trees:
            try:
                root = (accuracy.fetch_pypi(tree, args.cache) if tree.source == "pypi"
                        else accuracy.find_git_tree(tree, args.git_trees, args.cache))
            except (OSError, accuracy.CorpusError) as exc:
                print(f"skipped {tree.id}: {exc}", file=sys.stderr)
                root = None
            if root is None:
                skipped.append(tree.id)
                continue
            result = run_tree(tree.id, root, Path(scratch), source_only, mixed)
            shutil.rmtree(Path(scratch) / tree.id, ignore_errors=True)
            results.append(result)
            print(f"{tree.id}: {len(result.changed)} files changed, {sum(result.applied.values())} fixes, "
                  f"{len(result.failures)} failures in {result.seconds:.1f} s", file=sys.stderr)
    command = "python benchmarks/fix_harness.py" + (f" --git-trees {args.git_trees}" if args.git_trees else "") + (
        f" --only {' '.join(args.only)}" if args.only else "")
    text = render(results, skipped, command)
    print(text)
    if not args.no_write:
        (HERE / "FIX.md").write_text(text, encoding="utf-8")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
