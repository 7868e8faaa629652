"""Map a crash back to the rules that predicted it.

Two sources, best first: an ``ImportError`` names a module, and the import rules say
which rule covers it; and the project's own frames in the traceback point at lines that
``portscan scan`` can look at. ``from apex import amp`` fails on ``apex`` (the package is
imported first), and the scan of that line says it is ``apex.amp`` (PS202), not just
``apex`` (PS201): the more specific finding wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from portscan.model import Finding
from portscan.kinds.common import is_at_or_below
from portscan.kinds.imports import ImportPattern
from portscan.ruleset.schema import Rule
from portscan.ruleset.loader import RuleSet
from portscan.verify.emulation import module_rules, rule_for_module
from portscan.verify.trace import Failure

MAX_FRAMES = 6


@dataclass(frozen=True, slots=True)
class Hint:
    """A rule that explains the failure, and where (relative path and line) if known."""

    rule: Rule
    message: str  #: the rule's message, rendered for this failure
    where: str | None = None
    line_text: str | None = None


def project_frames(failure: Failure, project: Path) -> list[tuple[Path, int]]:
    """Frames in the project's own files, innermost first (not site-packages or the stdlib)."""
    root = project.resolve()
    frames = []
    for file, line in reversed(failure.frames):
        path = Path(file)
        if not path.is_absolute():
            path = root / path
        try:
            path = path.resolve()
            path.relative_to(root)
        except (OSError, ValueError):
            continue
        if any(part in {"site-packages", "dist-packages", ".venv", "venv"} for part in path.parts):
            continue
        frames.append((path, line))
    return frames[:MAX_FRAMES]


def _findings_at(path: Path, line: int, project: Path, rules: RuleSet) -> list[Finding]:
    from portscan.discover import first_party_modules, modules_in
    from portscan.parse import decode_python, read_bytes
    from portscan.scan import scan_source

    try:
        text = decode_python(read_bytes(path))
        found = scan_source(text, path.name, rules, first_party_modules(project) | modules_in(path.parent))
    except Exception:  # noqa: BLE001 - a hint is best effort; the failure itself is still shown
        return []
    return [f for f in found if f.span.line <= line <= f.span.end_line]


def _line(path: Path, line: int) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return None


def _specificity(rule: Rule, module: str | None) -> int:
    """How closely an import rule names ``module`` (the longest related module); 0 otherwise."""
    if not module or not isinstance(rule.pattern, ImportPattern):
        return 0
    return max((len(name) for name in rule.pattern.modules
                if is_at_or_below(module, name) or is_at_or_below(name, module)), default=0)


def likely_rules(failure: Failure, project: Path, rules: RuleSet) -> tuple[Hint, ...]:
    """The rules that most likely explain ``failure``, most specific first (may be empty)."""
    owners = module_rules(rules)
    module = failure.module
    related = None
    if module:
        # rules for the failing module, its parents, or its submodules
        related = {code for name, code in owners.items()
                   if is_at_or_below(module, name) or is_at_or_below(name, module)}
    hints: list[Hint] = []
    for path, line in project_frames(failure, project):
        findings = _findings_at(path, line, project, rules)
        if related is not None:
            findings = [f for f in findings if f.rule in related]
        if findings:
            best = max(findings, key=lambda f: (_specificity(rules.by_code[f.rule], module),
                                                f.severity.rank))
            where = f"{path.relative_to(project.resolve()).as_posix()}:{line}"
            hints.append(Hint(rules.by_code[best.rule], best.message, where, _line(path, line)))
            break
    if module:
        code = rule_for_module(module, owners)
        if code is not None and all(h.rule.code != code for h in hints):
            rule = rules.by_code[code]
            hints.append(Hint(rule, rule.render_message({"module": module, "matched": module})))
    return tuple(hints)
