"""The example harness: every rule's embedded ``bad``/``good`` examples and every
``[[fix.example]]`` are tests, for the built-in pack (the test suite) and for any
rule directory (``portscan test DIR``).

In a ``bad`` example, a line whose only content is ``# expect`` (``// expect`` in
C++/CUDA sources) marks the next non-blank line as one where the rule must report
exactly one finding. Lines
without a marker must produce none. ``good`` examples must produce no finding.
The harness scans with the rule alone, through the same prefilter, parser and
matcher as a real scan, so a rule whose tokens or pattern are wrong fails here.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from portscan.config import Target
from portscan.filekinds import file_kind
from portscan.ruleset.fixspec import FixExample, Tier
from portscan.match.hipify import load_hipify_names
from portscan.model import OwnModules
from portscan.parse import SourceError, split_lines
from portscan.ruleset.schema import Example, Rule
from portscan.ruleset.loader import RuleSet
from portscan.scan import scan_source

if TYPE_CHECKING:
    from portscan.fix.engine import FileFix

_MARKER = re.compile(r"^\s*(#|//)\s*expect\s*$")


@dataclass(frozen=True, slots=True)
class ExampleCase:
    rule: Rule
    example: Example
    bad: bool
    index: int

    @property
    def id(self) -> str:
        label = self.example.name or str(self.index + 1)
        return f"{self.rule.code}-{self.rule.name}/{'bad' if self.bad else 'good'}-{label}"


def example_cases(rules: RuleSet) -> list[ExampleCase]:
    return [ExampleCase(rule, example, bad, i)
            for rule in rules.rules
            for bad, examples in ((True, rule.bad), (False, rule.good))
            for i, example in enumerate(examples)]


def expected_lines(source: str) -> list[int]:
    """1-based lines marked by ``# expect`` (the next line that is not blank)."""
    lines = split_lines(source)
    expected = []
    pending = False
    for number, line in enumerate(lines, start=1):
        if _MARKER.match(line):
            pending = True
        elif pending and line.strip():
            expected.append(number)
            pending = False
    return expected


def strip_markers(source: str) -> str:
    """The example as a user would write it: ``# expect`` marker lines removed."""
    return "".join(line for line in source.splitlines(keepends=True) if not _MARKER.match(line))


def example_project(example: Example) -> OwnModules:
    """What an example sees of its project: with ``first_party`` given, those modules, and
    the directories of its ``path`` are packages (``from . import x`` in
    ``pkg/ops/a.py`` is ``pkg.ops.x``)."""
    if not example.first_party:
        return OwnModules()
    return OwnModules(example.first_party, ".".join(PurePosixPath(example.path).parent.parts))


def check_example(case: ExampleCase) -> list[str]:
    """Problems with one example; an empty list means it behaves as documented."""
    example = case.example
    kind = file_kind(PurePosixPath(example.path))
    if kind is None:
        return [f"{example.path}: portscan does not scan files of this kind"]
    if kind not in case.rule.pattern.surfaces:
        return [f"{example.path}: a {case.rule.pattern.kind} rule does not apply to {kind} files"]
    expected = expected_lines(example.source) if case.bad else []
    if case.bad and not expected:
        return ["a bad example needs at least one `# expect` marker"]
    hipify = load_hipify_names() if case.rule.pattern.kind == "cuda-api" else None
    try:
        findings = scan_source(example.source, example.path, RuleSet([case.rule]), example_project(example),
                               hipify=hipify)
    except SourceError as exc:
        return [f"example does not parse: {exc.message}"]
    # a finding that lists other uses of its import reports those lines too (each line once)
    got = Counter(line for f in findings for line in [f.span.line, *sorted({use[0] for use in f.uses} - {f.span.line})])
    want = Counter(expected)
    problems = []
    for line in sorted(set(got) | set(want)):
        if got[line] != want[line]:
            problems.append(f"line {line}: expected {want[line]} finding(s), got {got[line]}")
    return problems


@dataclass(frozen=True, slots=True)
class FixCase:
    """One ``[[fix.example]]`` of a rule."""

    rule: Rule
    example: FixExample
    index: int

    @property
    def id(self) -> str:
        label = self.example.name or str(self.index + 1)
        return f"{self.rule.code}-{self.rule.name}/fix-{label}"


def fix_cases(rules: RuleSet) -> list[FixCase]:
    return [FixCase(rule, example, i) for rule in rules.rules if rule.fix is not None
            for i, example in enumerate(rule.fix.examples)]


def _unguarded(text: str, rule: Rule, path: str = "example.py") -> int:
    return sum(1 + len(f.uses) for f in scan_source(text, path, RuleSet([rule])) if f.guard is None)


def check_fix_example(case: FixCase) -> list[str]:
    """Problems with one fix example: ``before`` must become ``after`` with the rule's
    own tier (unchanged when ``after`` is absent, with a reason), the result must
    compile (or read as its file kind), lose the finding, and stay as it is on a second run."""
    from portscan.fix.engine import fix_source  # the fixer (LibCST's codemods) only where a fix is checked
    from portscan.fix.text import fix_text

    rule, example = case.rule, case.example
    assert rule.fix is not None
    single = RuleSet([rule])
    unsafe = rule.fix.tier is Tier.UNSAFE or example.unsafe
    path = example.path or "example.py"
    kind = file_kind(PurePosixPath(path)) or "python"

    # a fix that is right for some GPUs only is shown for the first of them
    target = Target(arch=rule.fix.arch[0]) if rule.fix.arch else None

    def fix(text: str, unsafe: bool) -> FileFix:
        return fix_source(text, path, single, unsafe=unsafe, target=target) if kind == "python" else \
            fix_text(text, path, kind, single, unsafe=unsafe, target=target)

    result = fix(example.before, unsafe)
    if result.error:
        return [f"the fix failed: {result.error}"]
    if example.after is None:
        if result.changed:
            return [f"expected no change, got:\n{result.fixed}"]
        return [] if result.not_fixed else ["a declined example must report why (not_fixed is empty)"]
    problems = []
    if result.fixed != example.after:
        diff = "".join(difflib.unified_diff(example.after.splitlines(True), result.fixed.splitlines(True),
                                            "expected", "got"))
        problems.append(f"the fix does not produce `after`:\n{diff}")
    if not result.applied:
        problems.append("no fix was recorded as applied")
    if kind == "python":
        try:
            compile(result.fixed, path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            problems.append(f"the fixed code does not compile: {exc}")
    if fix(result.fixed, True).changed:
        problems.append("not idempotent: a second run changes the fixed code again")
    if rule.fix.kind == "guard-import":  # the import is now guarded; its uses are listed with it
        if not any(f.guard for f in scan_source(result.fixed, "example.py", single)):
            problems.append("the guarded import is not recognised as guarded")
    elif _unguarded(result.fixed, rule, path) >= _unguarded(example.before, rule, path):
        problems.append("the fixed code still has as many findings of the rule")
    if unsafe and any(a.tier is not Tier.SAFE for a in fix(example.before, False).applied):
        problems.append("an unsafe fix was applied without --unsafe-fixes")
    return problems


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One checked example: its id, the rule file it came from and what went wrong."""

    id: str
    origin: str
    problems: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.problems


def _checked(case_id: str, origin: str, check: Callable[[], list[str]]) -> CaseResult:
    """Run one check; an in-house rule that crashes the harness fails its case, it does
    not stop the run."""
    try:
        problems = tuple(check())
    except Exception as exc:  # noqa: BLE001 - reported as the case's failure
        problems = (f"the check raised {type(exc).__name__}: {exc}",)
    return CaseResult(case_id, origin, problems)


def run_rule_tests(rules: RuleSet) -> list[CaseResult]:
    """Every ``bad``/``good`` example and ``[[fix.example]]`` of ``rules``, rule by rule,
    checked as the test suite checks the built-in pack (``portscan test``)."""
    results = []
    for rule in rules.rules:
        single = RuleSet([rule])
        results += [_checked(case.id, rule.origin, functools.partial(check_example, case))
                    for case in example_cases(single)]
        results += [_checked(case.id, rule.origin, functools.partial(check_fix_example, case))
                    for case in fix_cases(single)]
    return results
