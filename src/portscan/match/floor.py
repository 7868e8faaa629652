"""The oldest torch a project declares it runs on, and the fixes that need a newer one.

A rewrite such as ``torch.cuda.amp.GradScaler()`` -> ``torch.amp.GradScaler("cuda")`` is
behaviour-preserving only where the new API exists: ``torch.amp.GradScaler`` is torch 2.3.
A project that declares ``torch>=1.8`` promises to run on 1.8, so there the fix declines
and says why. Rules state what each fix needs (``torch = "2.3"`` in ``[fix]`` or in a
``[[fix.replace]]`` entry); this module reads what the project allows.

The torch requirement is read from the project root's manifests with the scan's own
parsers (:mod:`portscan.match.manifests`): ``pyproject.toml`` (``[project]`` dependencies
and extras, dependency groups, Poetry's tables), ``requirements*.txt`` and
``requirements/*.txt``, ``setup.cfg``, and ``setup.py``'s ``install_requires`` and
``extras_require``: literal lists, or names bound to one at module level. ``setup.py`` is
parsed with the standard library's :mod:`ast`, never run; not with LibCST, because the
scan asks too, and a scan whose files are all cached does not load LibCST. Build
requirements do not count: they are the build's environment, not the one the rewritten
code runs in. A project that names torch without a version, or not at all, has no floor:
a ROCm port runs a recent torch, so the fixes apply.

It sits below the scan and the fixer, like :mod:`portscan.match.fixsites`, because both
ask it: the fixer declines, and the scan does not mark ``[fix]`` what the fixer would
decline. It is not the ``requirement`` kind's business, which asks whether a specifier
caps a package below a release (:mod:`portscan.kinds.ceiling`), per file.
"""

from __future__ import annotations

import re
import sys
import ast
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from portscan.kinds.requirement import RequirementPattern
from portscan.match import Match
from portscan.match.common import requirement_matches
from portscan.model import Confidence, Finding, Severity
from portscan.parse import LineIndex
from portscan.ruleset.fixspec import FixSpec
from portscan.ruleset.schema import Rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: no lower bound: ``torch<2`` allows torch of any age
ANY_AGE = Version("0")
#: a manifest larger than this is not a manifest anyone writes by hand; skipped
_MAX_BYTES = 1 << 20
_POETRY_KEY = re.compile(r"""(?m)^\s*["']?torch["']?\s*=""")


@dataclass(frozen=True, slots=True)
class Floor:
    """The lowest torch a project's requirements allow, and where that is declared."""

    version: Version  #: :data:`ANY_AGE` when the specifier sets no lower bound (``torch<2``)
    where: str  #: ``requirements.txt:3``, relative to the project root
    requirement: str  #: as written (``torch>=1.8``)

    def describe(self) -> str:
        if self.version == ANY_AGE:
            return f"the project allows torch of any age (`{self.requirement}`, {self.where})"
        return f"the project allows torch {self.version} ({self.where})"


def lowest_allowed(specifier: SpecifierSet) -> Version | None:
    """The lowest release ``specifier`` admits: the highest of its lower bounds, with
    local labels and pre-release tags dropped (``>=1.8,<3`` -> 1.8; ``==2.1.0+cu118`` ->
    2.1.0; ``~=2.2`` -> 2.2; ``==2.1.*`` -> 2.1). :data:`ANY_AGE` when no clause bounds it
    from below (``<2``, ``!=1.9``); None for an empty specifier (no constraint)."""
    if not len(specifier):
        return None
    bounds = [_release(clause.version) for clause in specifier
              if clause.operator in (">=", ">", "~=", "==", "===")]
    known = [b for b in bounds if b is not None]
    return max(known) if known else ANY_AGE


def _release(text: str) -> Version | None:
    try:
        return Version(".".join(map(str, Version(text.removesuffix(".*")).release)))
    except InvalidVersion:  # ``===`` takes any string
        return None


def project_floor(root: Path) -> Floor | None:
    """The lowest torch the manifests at ``root`` allow; None where none constrains it.
    Unreadable or malformed manifests and lines are skipped, never raised."""
    floors = [floor for path in _manifests(root) for floor in _declared(root, path)]
    return min(floors, key=lambda f: f.version) if floors else None


def _manifests(root: Path) -> Iterator[Path]:
    for name in ("pyproject.toml", "setup.py", "setup.cfg"):
        yield root / name
    yield from sorted(root.glob("requirements*.txt"))
    yield from sorted((root / "requirements").glob("*.txt"))


def _declared(root: Path, path: Path) -> list[Floor]:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_BYTES:
            return []
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    where = path.relative_to(root).as_posix()
    found = [(m.start, m.variables.get("requirement", "")) for m in _torch_matches(path.name, text)]
    if path.name == "pyproject.toml":
        found += _poetry(text)
    floors = []
    lines = LineIndex(text)
    for offset, requirement in found:
        version = _requirement_floor(requirement)
        if version is not None:
            floors.append(Floor(version, f"{where}:{lines.position(offset)[0]}", requirement))
    return floors


def _torch_matches(name: str, text: str) -> list[Match]:
    from portscan.match.manifests import match_pyproject, match_requirements, match_setup_cfg  # only with a manifest

    rules = [_TORCH]
    if name == "pyproject.toml":
        return match_pyproject(text, rules)
    if name == "setup.cfg":
        return match_setup_cfg(text, rules)
    if name == "setup.py":
        return _match_setup_py(text)
    return match_requirements(text, rules)


def _match_setup_py(text: str) -> list[Match]:
    """Matches in the requirement strings of ``setup(install_requires=..., extras_require=...)``."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    bound = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for target in node.targets if isinstance(target, ast.Name)}
    starts = LineIndex(text).starts  # lines as ast numbers them (not str.splitlines')
    found: list[Match] = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or _callee(call.func) != "setup":
            continue
        for keyword in call.keywords:
            value = keyword.value
            if keyword.arg == "install_requires":
                values = [value]
            elif keyword.arg == "extras_require":
                value = bound.get(value.id, value) if isinstance(value, ast.Name) else value
                values = list(value.values) if isinstance(value, ast.Dict) else []
            else:
                continue
            for item in values:
                item = bound.get(item.id, item) if isinstance(item, ast.Name) else item
                for string in item.elts if isinstance(item, ast.List | ast.Tuple) else ():
                    if isinstance(string, ast.Constant) and isinstance(string.value, str):
                        # the offset of the line: where the string is is all a floor reports
                        found += requirement_matches(string.value, starts[string.lineno - 1], [_TORCH])
    return found


def _callee(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _requirement_floor(text: str) -> Version | None:
    try:
        return lowest_allowed(Requirement(text).specifier)
    except (InvalidRequirement, InvalidSpecifier):
        return None


def _poetry(text: str) -> list[tuple[int, str]]:
    """Poetry's ``torch = "^1.8"`` as PEP 440 (``torch>=1.8``): the scan reads only a pinned
    Poetry version, and a caret or tilde constraint has a floor too."""
    try:
        poetry = tomllib.loads(text).get("tool", {}).get("poetry", {})
    except tomllib.TOMLDecodeError:
        return []
    tables = [poetry.get("dependencies", {}), poetry.get("dev-dependencies", {})]
    tables += [g.get("dependencies", {}) for g in poetry.get("group", {}).values() if isinstance(g, dict)]
    key = _POETRY_KEY.search(text)
    found = []
    for table in tables:
        spec = table.get("torch") if isinstance(table, dict) else None
        version = spec.get("version") if isinstance(spec, dict) else spec
        if isinstance(version, str) and key is not None:
            found += [(key.start() + len(key.group(0)) - len(key.group(0).lstrip()), f"torch{alternative}")
                      for alternative in _poetry_specifiers(version)]
    return found


def _poetry_specifiers(constraint: str) -> list[str]:
    """Each ``||`` alternative of a Poetry constraint as a PEP 440 specifier."""
    out = []
    for alternative in re.split(r"\|\|?", constraint):
        clauses = []
        for token in re.split(r"[,\s]+", re.sub(r"([<>=!~^]+)\s+", r"\1", alternative.strip())):
            if not token or token == "*":
                continue
            if token[0] in "^~" and not token.startswith("~="):
                token = ">=" + token.lstrip("^~")
            elif token[0].isdigit():
                token = "==" + token
            clauses.append(token)
        out.append(",".join(clauses))
    return out


def needs(spec: FixSpec, name: str) -> Version | None:
    """The torch a fix needs at a use of ``name``: the higher of the fix's own ``torch``
    and that of the ``[[fix.replace]]`` entry for the name (None: any torch will do)."""
    entry = spec.replacement_for(name) if spec.kind == "replace" else None
    wanted = [Version(v) for v in (spec.torch, entry.torch if entry is not None else "") if v]
    return max(wanted) if wanted else None


def floor_declined(spec: FixSpec, name: str, floor: Floor | None) -> str | None:
    """Why a fix is left alone in a project that allows an older torch than it needs."""
    wanted = needs(spec, name)
    if floor is None or wanted is None or floor.version >= wanted:
        return None
    entry = spec.replacement_for(name) if spec.kind == "replace" else None
    what = f"`{entry.to}`" if entry is not None else f"the `{spec.transform or spec.kind}` fix"
    return f"{what} needs torch >= {wanted}; {floor.describe()}"


def declines_everywhere(spec: FixSpec, floor: Floor | None) -> bool:
    """Does the fix decline at every use in a project with this floor (each entry needs
    more than it allows)? The scan then does not mark the rule's findings fixable."""
    if floor is None:
        return False
    names = [entry.names[0] if entry.names else "" for entry in spec.replace] or [""]
    return all(floor_declined(spec, name, floor) is not None for name in names)


def wants_torch(rules: Sequence[Rule]) -> bool:
    """Does any rule's fix need a particular torch (so the project's floor matters)?"""
    return any(r.fix is not None and (r.fix.torch or any(e.torch for e in r.fix.replace)) for r in rules)


def unmark_declined(findings: Sequence[Finding], rules: Sequence[Rule], floor: Floor | None) -> list[Finding]:
    """Findings of rules whose fix declines at every use under ``floor`` lose their
    ``[fix]`` mark: the scan marks only what ``portscan fix`` rewrites. (A rule whose
    entries differ, say ``torch.amp.autocast`` 1.12 and ``GradScaler`` 2.3, keeps its
    marks under a floor between the two; ``portscan fix`` names the ones it leaves.)"""
    declined = {r.code for r in rules if r.fix is not None and declines_everywhere(r.fix, floor)}
    return [dataclasses.replace(f, fix=None) if f.fix is not None and f.rule in declined else f
            for f in findings]


_TORCH = Rule(code="FLOOR", name="torch-floor", category="fix", severity=Severity.INFO,
              confidence=Confidence.HIGH, message="", rocm="", rewrite="", references=(),
              pattern=RequirementPattern(names=("torch",), sections=("install", "optional")),
              supersedes=(), bad=(), good=(), origin=__name__)
