"""The fix loop for one Python source: match, rewrite, re-parse, repeat until stable.

Each pass parses the text, runs the same matcher as ``portscan scan`` over it and
rewrites inside one LibCST codemod, so the imports a fix needs are added and the ones
it made unused are removed by LibCST's :class:`AddImportsVisitor` and
:class:`RemoveImportsVisitor`. A pass applies either all declarative edits that do
not overlap, or one named transform; the loop ends when a pass changes nothing.

Guarantees: findings in guarded code (``if torch.version.hip``, ``try/except``) are
never rewritten; unsafe fixes only with ``unsafe=True``; every pass's output must
parse and, when the input compiled, compile, or the file is left as it was.
"""

from __future__ import annotations

import copy
import difflib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext

from portscan.fix.rewrite import Declined, Edit, FixContext
from portscan.ruleset.fixspec import NEEDS_UNSAFE, Tier
from portscan.fix.templates import TEMPLATES
from portscan.fix.transforms import TRANSFORMS
from portscan.match import Match
from portscan.match.python import match_python
from portscan.parse import LineIndex, SourceError, paused_gc, parse_python, split_lines, with_deep_stack
from portscan.suppress import covers, suppressions
from portscan.ruleset.schema import Rule
from portscan.ruleset.loader import RuleSet

MAX_PASSES = 12


@dataclass(frozen=True, slots=True)
class Applied:
    """One finding a fix removed."""

    rule: str
    name: str
    tier: Tier


@dataclass(frozen=True, slots=True)
class NotFixed:
    """A finding with a fix that was not applied: declined for its shape, or unsafe."""

    rule: str
    name: str
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class FileFix:
    path: str
    source: str  #: the text as read
    fixed: str  #: the text after fixing (``source`` when nothing changed or on error)
    applied: tuple[Applied, ...] = ()
    not_fixed: tuple[NotFixed, ...] = ()
    error: str | None = None  #: why the file was left as it was

    @property
    def changed(self) -> bool:
        return self.fixed != self.source


class _Pass(CodemodCommand):
    """One pass over one module. Results land in ``applied`` and ``not_fixed``."""

    def __init__(self, context: CodemodContext, rules: Sequence[Rule], first_party: frozenset[str],
                 unsafe: bool, silenced: Callable[[Match], bool]) -> None:
        super().__init__(context)
        self.rules = rules
        self.first_party = first_party
        self.unsafe = unsafe
        self.silenced = silenced
        self.applied: list[tuple[Match, Tier]] = []
        self.not_fixed: list[tuple[Match, str]] = []

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        ctx = FixContext(self.context)
        matches = fixable(match_python(tree, self.rules, self.first_party), self.silenced)
        transforms: dict[str, list[Match]] = {}
        edits: list[Edit] = []
        clean = copy.deepcopy(self.context.scratch)
        for match in matches:
            spec = match.rule.fix
            assert spec is not None
            if spec.tier is Tier.UNSAFE and not self.unsafe and spec.kind != "transform":
                self.not_fixed.append((match, NEEDS_UNSAFE))
            elif match.declined is not None:  # decided at scan time, for this site
                self.not_fixed.append((match, match.declined))
            elif spec.kind == "transform":
                transforms.setdefault(spec.transform, []).append(match)
            else:
                result = _template(ctx, match)
                if isinstance(result, Declined):
                    self.not_fixed.append((match, result.reason))
                elif result is not None:
                    edits.append(result)
        chosen = _non_overlapping(ctx, edits)
        self.context.scratch.clear()
        self.context.scratch.update(copy.deepcopy(clean))
        if chosen:  # again, so only the chosen edits schedule import changes
            chosen_matches = {id(e.match) for e in chosen}
            redo = [_template(ctx, e.match) for e in edits if id(e.match) in chosen_matches]
            final = [e for e in redo if isinstance(e, Edit)]
            self.applied += [(e.match, e.tier) for e in final]
            return tree.visit(_ApplyEdits(final))
        for name in sorted(transforms):
            outcome = TRANSFORMS[name](ctx, transforms[name], self.unsafe)
            self.not_fixed += [(d.match, d.reason) for d in outcome.declined]
            if outcome.module is not None:
                self.applied += list(outcome.fixed)
                return outcome.module
            self.context.scratch.clear()
            self.context.scratch.update(copy.deepcopy(clean))
        return tree


def _template(ctx: FixContext, match: Match) -> Edit | Declined | None:
    spec = match.rule.fix
    assert spec is not None
    return TEMPLATES[spec.kind](ctx, match, spec)


class _ApplyEdits(cst.CSTTransformer):
    """Replace nodes by identity. A deleted statement's blank lines pass to the next one,
    so deleting a line does not glue two paragraphs together."""

    def __init__(self, edits: Sequence[Edit]) -> None:
        self.edits = {e.node: e.replacement for e in edits}

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        if isinstance(updated_node, cst.Module | cst.IndentedBlock):
            return self._carry_blank_lines(original_node, updated_node)
        return self.edits.get(original_node, updated_node)

    def _carry_blank_lines(self, original: cst.CSTNode, updated: cst.Module | cst.IndentedBlock
                           ) -> cst.Module | cst.IndentedBlock:
        body = list(updated.body)
        kept = 0
        carry: list[cst.EmptyLine] = []
        for statement in original.body:  # type: ignore[attr-defined]
            if isinstance(self.edits.get(statement), cst.RemovalSentinel):
                carry += [line for line in statement.leading_lines if line.comment is None]
                continue
            if carry and kept < len(body) and not body[kept].leading_lines:  # type: ignore[attr-defined]
                body[kept] = body[kept].with_changes(leading_lines=carry)
            carry = []
            kept += 1
        return updated.with_changes(body=body)


def _non_overlapping(ctx: FixContext, edits: Sequence[Edit]) -> list[Edit]:
    """Edits whose nodes do not overlap, outermost first; the rest wait for the next pass."""
    def extent(edit: Edit) -> tuple[tuple[int, int], tuple[int, int]]:
        r = ctx.position(edit.node)
        return (r.start.line, r.start.column), (r.end.line, r.end.column)

    chosen: list[Edit] = []
    taken: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for edit in sorted(edits, key=lambda e: (extent(e)[0], tuple(-x for x in extent(e)[1]))):
        start, end = extent(edit)
        if any(start < t_end and t_start < end or edit.node is other.node
               for (t_start, t_end), other in zip(taken, chosen, strict=True)):
            continue
        chosen.append(edit)
        taken.append((start, end))
    return chosen


def silencer(text: str) -> Callable[[Match], bool]:
    """Is a match's rule silenced by a ``noqa``/``portscan: ignore`` comment in ``text``?
    Those findings are not reported, so they are not rewritten either. The comments are
    read once per text."""
    found = suppressions(text, "", "python")
    if not found:
        return lambda match: False
    index = LineIndex(text)

    def silenced(match: Match) -> bool:
        first = index.position(match.start)[0]
        last = index.position(max(match.end - 1, match.start))[0]
        return any(covers(s, match.rule.code, first, last) for s in found)

    return silenced


def fixable(matches: Sequence[Match], silenced: Callable[[Match], bool]) -> list[Match]:
    """The matches a fix may rewrite: the rule has a fix, the code is not guarded, the
    shape is one the rule can fix and no comment silences it."""
    return [m for m in matches if m.rule.fix is not None and m.guard is None and m.fixable and not silenced(m)]


def module_names(path: str) -> tuple[str, str]:
    """(module, package) for a path relative to the project root, for relative imports."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    module = ".".join(p for p in parts if p)
    return module, module.rpartition(".")[0]


def _compiles(text: str, path: str) -> bool:
    with warnings.catch_warnings():  # the file's own SyntaxWarnings are not ours to print
        warnings.simplefilter("ignore")
        try:
            compile(text, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


class _DropDeadTry(cst.CSTTransformer):
    """``try: pass`` / ``except ImportError: raise ...`` is what is left of a guarded import
    whose names a fix no longer uses: nothing in it can run, so it goes."""

    def leave_Try(self, original_node: cst.Try, updated_node: cst.Try):  # type: ignore[override]
        body = [s for line in updated_node.body.body
                for s in (line.body if isinstance(line, cst.SimpleStatementLine) else [line])]
        if not body or not all(isinstance(s, cst.Pass) for s in body) \
                or updated_node.orelse is not None or updated_node.finalbody is not None:
            return updated_node
        for handler in updated_node.handlers:
            caught = cst.helpers.get_full_name_for_node(handler.type) if handler.type is not None else None
            raises = [s for line in handler.body.body
                      for s in (line.body if isinstance(line, cst.SimpleStatementLine) else [line])]
            if caught not in ("ImportError", "ModuleNotFoundError") \
                    or not all(isinstance(s, cst.Raise) for s in raises):
                return updated_node
        return cst.RemoveFromParent()

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
                            ) -> cst.IndentedBlock:
        if updated_node.body:
            return updated_node
        return updated_node.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])


def fix_source(text: str, path: str, rules: RuleSet, unsafe: bool = False,
               first_party: frozenset[str] = frozenset()) -> FileFix:
    """Fix one Python source. Never raises for bad input: see ``FileFix.error``."""
    try:
        with paused_gc():
            return with_deep_stack(lambda: _fix_source(text, path, rules, unsafe, first_party))
    except RecursionError:
        return FileFix(path, text, text, error="code nested too deeply to fix; the file is unchanged")


def _fix_source(text: str, path: str, rules: RuleSet, unsafe: bool, first_party: frozenset[str]) -> FileFix:
    candidates = rules.candidates(text)
    if not any(r.fix is not None for r in candidates):
        return FileFix(path, text, text)
    try:
        module = parse_python(text)
    except SourceError as exc:
        return FileFix(path, text, text, error=exc.message)
    silenced = silencer(text)
    if not fixable(match_python(module, candidates, first_party), silenced):  # the common case: no codemod
        return FileFix(path, text, text)
    compiled = _compiles(text, path)
    module_name, package = module_names(path)
    current = text
    applied: list[Applied] = []
    declined: list[tuple[Match, str]] = []
    for _ in range(MAX_PASSES):
        if module.code != current:  # e.g. lone-CR line endings: writing would change bytes
            return FileFix(path, text, text, error="LibCST does not reproduce this file byte for byte "
                                                   "(unusual line endings?); left as it is")
        context = CodemodContext(filename=path, full_module_name=module_name, full_package_name=package)
        last = _Pass(context, candidates, first_party, unsafe, silenced)
        declined = last.not_fixed
        try:
            fixed = last.transform_module(module)
            if last.applied:
                fixed = fixed.visit(_DropDeadTry())
            new = fixed.code
        except RecursionError:
            raise  # fix_source retries with a deeper stack
        except Exception as exc:  # noqa: BLE001 - a fix bug must not lose the file
            return FileFix(path, text, text, error=f"a fix failed ({type(exc).__name__}: {exc}); "
                                                   "the file is unchanged; please report it")
        if new == current:
            break
        try:
            module = parse_python(new)  # the check, and the next pass's tree
        except SourceError as exc:
            return FileFix(path, text, text, error=f"a fix produced code that does not parse "
                                                   f"({exc.message}); the file is unchanged")
        if compiled and not _compiles(new, path):
            return FileFix(path, text, text, error="a fix produced code that does not compile; "
                                                   "the file is unchanged")
        applied += [Applied(m.rule.code, m.rule.name, tier) for m, tier in last.applied]
        current = new
        candidates, silenced = rules.candidates(current), silencer(current)
        if not fixable(match_python(module, candidates, first_party), silenced):  # settled: nothing left
            declined = []
            break
    else:
        return FileFix(path, text, text, error=f"fixes did not settle after {MAX_PASSES} passes; "
                                               "the file is unchanged")
    lines = _input_lines(text, current)
    not_fixed = tuple(sorted({NotFixed(m.rule.code, m.rule.name, lines(m.start), reason)
                              for m, reason in declined},
                             key=lambda n: (n.line, n.rule)))
    return FileFix(path, text, current, tuple(applied), not_fixed)


def _input_lines(source: str, current: str) -> Callable[[int], int]:
    """An offset in ``current`` (the fixed text) as a line of ``source`` (the input), so
    messages point where the user reads: a line the fixes kept maps to itself, one they
    wrote maps to the first input line of the block they replaced."""
    index = LineIndex(current)
    blocks = difflib.SequenceMatcher(None, split_lines(source), split_lines(current),
                                     autojunk=False).get_opcodes()

    def line(offset: int) -> int:
        at = index.position(offset)[0] - 1
        for tag, i1, _, j1, j2 in blocks:
            if j1 <= at < j2:
                return i1 + (at - j1 if tag == "equal" else 0) + 1
        return at + 1

    return line
