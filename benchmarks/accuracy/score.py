"""The accuracy corpus: tree files, their checks, and scoring findings against labels.

Pure functions over plain data, so the scorer is tested on a synthetic corpus
(tests/test_accuracy_scorer.py) and the runner (run.py) only fetches, scans and prints.
"""

from __future__ import annotations

import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KINDS = ("pair", "hand-checked", "precision")
SOURCES = ("pypi", "git")
CATEGORIES = ("python", "build", "packaging", "container", "ci", "shell", "kernel", "triton", "submodule")
VERDICTS = ("true", "false", "debatable")
WINDOW = 3  #: a finding within this many lines of a label counts for it
EXCERPT_MAX = 80
#: a label "carries a CUDA token nearby" when one of these is within WINDOW lines of it
CUDA_TOKEN = re.compile(r"cuda|nvcc|nvidia|nvml|cudnn|cublas|curand|cufft|cutlass|tensorrt|\bapex\b|\bptx\b"
                        r"|\bcu1[0-9]{1,2}\b|\bsm_?[0-9]{2}\b|__shfl|_sync\s*\(|warp|float8|e4m3|tf32",
                        re.IGNORECASE)
WARNING_UP = ("warning", "error")


@dataclass(frozen=True)
class Label:
    tree: str
    path: str
    line: int
    category: str
    kind: str  #: "true" or "trap"
    description: str
    excerpt: str
    port: str = ""


@dataclass(frozen=True)
class Judgement:
    tree: str
    rule: str
    path: str
    line: int
    verdict: str
    reason: str
    excerpt: str


@dataclass(frozen=True)
class Tree:
    id: str
    project: str
    kind: str
    source: str
    spec: str = ""
    sha256: str = ""
    repo: str = ""
    commit: str = ""
    port: str = ""
    shapes: tuple[str, ...] = ()
    labels: tuple[Label, ...] = ()
    judgements: tuple[Judgement, ...] = ()


@dataclass(frozen=True)
class Finding:
    rule: str
    path: str
    line: int
    severity: str
    #: a line another finding lists in its ``uses`` (a later use of the same import): it
    #: counts for recall, and is judged, but it is not a warning of its own
    use: bool = False


class CorpusError(ValueError):
    """A tree file that does not follow the format (benchmarks/accuracy/README.md)."""


def read_tree(path: Path) -> Tree:
    """One ``trees/<id>.toml``, validated; raises :class:`CorpusError` naming the problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CorpusError(f"{path}: {exc}") from None
    head = data.get("tree")
    if not isinstance(head, dict):
        raise CorpusError(f"{path}: no [tree] table")

    def need(table: Mapping[str, object], key: str, where: str, choices: Sequence[str] = ()) -> str:
        value = table.get(key)
        if not isinstance(value, str) or not value or (choices and value not in choices):
            wanted = f"one of {', '.join(choices)}" if choices else "a non-empty string"
            raise CorpusError(f"{path}: {where}{key}: expected {wanted}, got {value!r}")
        return value

    tree_id = need(head, "id", "tree.")
    if tree_id != path.stem:
        raise CorpusError(f"{path}: tree.id {tree_id!r} differs from the file name")
    source = need(head, "source", "tree.", SOURCES)
    if source == "pypi":
        need(head, "spec", "tree.")
        if not re.fullmatch(r"[0-9a-f]{64}", str(head.get("sha256", ""))):
            raise CorpusError(f"{path}: tree.sha256: expected 64 hex digits")
    elif not re.fullmatch(r"[0-9a-f]{40}", str(head.get("commit", ""))) or "/" not in str(head.get("repo", "")):
        raise CorpusError(f"{path}: a git tree needs repo = \"owner/name\" and a 40-hex commit")
    def entries(table: str) -> Iterable[tuple[str, Mapping[str, object], int, str]]:
        """(where, entry, line, excerpt) of each ``[[table]]``, with the fields both kinds share checked."""
        for i, raw in enumerate(data.get(table, [])):
            where = f"{table}[{i}]."
            line = raw.get("line")
            if not isinstance(line, int) or line < 1:
                raise CorpusError(f"{path}: {where}line: expected a positive integer")
            excerpt = need(raw, "excerpt", where)
            if len(excerpt) > EXCERPT_MAX:
                raise CorpusError(f"{path}: {where}excerpt: longer than {EXCERPT_MAX} characters")
            yield where, raw, line, excerpt

    labels = [Label(tree_id, need(raw, "path", where), line, need(raw, "category", where, CATEGORIES),
                    need(raw, "kind", where, ("true", "trap")), need(raw, "description", where),
                    excerpt, str(raw.get("port", ""))) for where, raw, line, excerpt in entries("label")]
    judgements = [Judgement(tree_id, need(raw, "rule", where), need(raw, "path", where), line,
                            need(raw, "verdict", where, VERDICTS), need(raw, "reason", where), excerpt)
                  for where, raw, line, excerpt in entries("judgement")]
    return Tree(id=tree_id, project=need(head, "project", "tree."), kind=need(head, "kind", "tree.", KINDS),
                source=source, spec=str(head.get("spec", "")), sha256=str(head.get("sha256", "")),
                repo=str(head.get("repo", "")), commit=str(head.get("commit", "")), port=str(head.get("port", "")),
                shapes=tuple(head.get("shapes", ())), labels=tuple(labels), judgements=tuple(judgements))


def drifted(tree: Tree, root: Path) -> dict[Label | Judgement, str]:
    """Labels and judgements whose excerpt is not on their line in the tree at ``root``,
    each with the problem."""
    problems: dict[Label | Judgement, str] = {}
    lines_of: dict[str, list[str] | None] = {}
    for item in (*tree.labels, *tree.judgements):
        if item.path not in lines_of:
            try:
                lines_of[item.path] = (root / item.path).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                lines_of[item.path] = None
        lines = lines_of[item.path]
        if lines is None:
            problems[item] = f"{tree.id}: {item.path}: no such file"
        elif item.line > len(lines) or item.excerpt not in lines[item.line - 1]:
            problems[item] = f"{tree.id}: {item.path}:{item.line}: excerpt {item.excerpt!r} not on that line"
    return problems


def cuda_nearby(label: Label, root: Path) -> bool:
    try:
        lines = (root / label.path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    window = lines[max(0, label.line - 1 - WINDOW):label.line + WINDOW]
    return any(CUDA_TOKEN.search(line) for line in window)


def near(findings: Iterable[Finding], path: str, line: int, window: int = WINDOW,
         severities: Sequence[str] = ()) -> list[Finding]:
    return [f for f in findings if f.path == path and abs(f.line - line) <= window
            and (not severities or f.severity in severities)]


@dataclass
class Tally:
    """Counts for one group of labels (a category, a project, everything)."""

    true: int = 0
    found: int = 0  #: true labels with a warning or error nearby
    found_any: int = 0  #: true labels with a finding of any severity nearby
    traps: int = 0
    violations: int = 0  #: traps with a warning or error nearby
    cuda_true: int = 0  #: true labels with a CUDA token nearby
    cuda_found: int = 0

    def add(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Score:
    """What scoring one or more trees gave."""

    by_category: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    by_project: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    total: Tally = field(default_factory=Tally)
    misses: list[tuple[Label, list[Finding]]] = field(default_factory=list)
    violations: list[tuple[Label, list[Finding]]] = field(default_factory=list)
    verdicts: Counter[str] = field(default_factory=Counter)  #: judged findings still reported
    #: judged use lines still reported (lines a finding lists in ``uses``)
    use_verdicts: Counter[str] = field(default_factory=Counter)
    unjudged: list[tuple[str, Finding]] = field(default_factory=list)  #: warnings/errors nobody judged
    gone: int = 0  #: judged findings no longer reported


def closer_to_a_true_label(finding: Finding, trap: Label, labels: Sequence[Label]) -> bool:
    """Is some true label of the same file at least as close to ``finding`` as ``trap``?
    Then the finding is that site's (a real finding two lines from a trap is not a
    violation of the trap)."""
    distance = abs(finding.line - trap.line)
    return any(x.kind == "true" and x.path == finding.path and abs(finding.line - x.line) <= distance
               for x in labels)


def score_tree(tree: Tree, findings: Sequence[Finding], has_cuda: Mapping[Label, bool], into: Score) -> None:
    """Add one tree's labels and judgements, against its findings, to ``into``."""
    for label in tree.labels:
        one = Tally()
        warned = near(findings, label.path, label.line, severities=WARNING_UP)
        if label.kind == "trap":
            warned = [f for f in warned if not closer_to_a_true_label(f, label, tree.labels)]
        if label.kind == "true":
            one.true, one.found = 1, int(bool(warned))
            one.found_any = int(bool(near(findings, label.path, label.line)))
            one.cuda_true = int(has_cuda.get(label, False))
            one.cuda_found = one.cuda_true * one.found
            if not warned:
                into.misses.append((label, near(findings, label.path, label.line, window=10)))
        else:
            one.traps, one.violations = 1, int(bool(warned))
            if warned:
                into.violations.append((label, warned))
        for group in (into.by_category[label.category], into.by_project[tree.project], into.total):
            group.add(one)
    if tree.kind == "precision":
        judged = {(j.rule, j.path, j.line): j.verdict for j in tree.judgements}
        warned = [f for f in findings if f.severity in WARNING_UP]
        # one verdict per (rule, place): a finding's own line over a use listed there too
        places = {(f.rule, f.path, f.line): f for f in sorted(warned, key=lambda f: not f.use)}
        for key, f in places.items():
            verdict = judged.get(key)
            if verdict is None:
                into.unjudged.append((tree.id, f))
            else:
                (into.use_verdicts if f.use else into.verdicts)[verdict] += 1
        into.gone += len(set(judged) - set(places))


def ratio(part: int, whole: int) -> str:
    return f"{part / whole:.2f}" if whole else "-"


def precision(verdicts: Mapping[str, int]) -> str:
    return ratio(verdicts.get("true", 0), verdicts.get("true", 0) + verdicts.get("false", 0))
