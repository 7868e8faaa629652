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
import dataclasses
import warnings
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, ImportItem, RemoveImportsVisitor
from libcst.metadata import MetadataWrapper

from portscan.match.floor import Floor, floor_declined
from portscan.fix.rewrite import Declined, Edit, FixContext
from portscan.ruleset.fixspec import NEEDS_UNSAFE, Tier
from portscan.fix.templates import TEMPLATES
from portscan.fix.transforms import TRANSFORMS
from portscan.match import Match
from portscan.config import Target
from portscan.fix.linediff import opcodes
from portscan.match.guards import only_raises
from portscan.match.syntax import small_statements
from portscan.match.levels import FALLBACK, TYPE_CHECKING, VENDOR_BRANCH
from portscan.match.python import ModuleWalk
from portscan.model import Finding, folders_of
from portscan.scan import declares_extensions, findings_from
from portscan.leancst import is_view
from portscan.parse import (LineIndex, SourceError, lines_with_ends, parse_for_matching, parse_python, paused_gc,
                            with_deep_stack)
from portscan.suppress import covers, suppressions
from portscan.ruleset.schema import Rule
from portscan.ruleset.loader import RuleSet

MAX_PASSES = 12


@dataclass(frozen=True, slots=True)
class Applied:
    """One finding a fix removed: where it was in the input, and which places of the
    input its fix changed (see :class:`_Origins`), so each change belongs to a finding."""

    rule: str
    name: str
    tier: Tier
    line: int = 0  #: the finding's first line in the input (1-based)
    #: the input places the fix touched: ``2*i+1`` for input line ``i`` (0-based)
    #: replaced, ``2*i+2`` for a line inserted after it (``0``: before the first)
    touches: frozenset[int] = frozenset()
    #: what to check in review: the rewrite chose the nearest match, not an exact one
    note: str | None = None


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
    #: the findings of ``fixed`` before suppressions, from the engine's last match, so
    #: ``portscan fix`` reports the result without scanning the file again (None: the
    #: engine did not parse the file, or it declares extensions, which the scan follows)
    findings: tuple[Finding, ...] | None = None
    #: the same for ``source``, from the engine's first match (so ``fix`` counts what
    #: its fixes added without scanning the input again)
    before: tuple[Finding, ...] | None = None

    @property
    def changed(self) -> bool:
        return self.fixed != self.source

    def hunks(self) -> list[tuple[Applied, list[tuple[int, int, int, int]]]]:
        """Each applied fix with the blocks of the input -> fixed line diff (``difflib``
        opcodes, 0-based ``i1, i2, j1, j2``) that belong to it: its own edit and the import
        changes of the pass that made it. Blocks are those of ``portscan fix --diff``."""
        blocks = changed_blocks(self.source, self.fixed)
        return [(applied, [(i1, i2, j1, j2) for i1, i2, j1, j2 in blocks
                           if any(2 * i1 <= t <= 2 * i2 for t in applied.touches)])
                for applied in self.applied]


class _Pass(CodemodCommand):
    """One pass over one module. Results land in ``applied`` and ``not_fixed``."""

    def __init__(self, context: CodemodContext, rules: Sequence[Rule], first_party: frozenset[str],
                 unsafe: bool, silenced: Callable[[Match], bool], source: str, walk: ModuleWalk,
                 floor: Floor | None = None, target: Target | None = None) -> None:
        super().__init__(context)
        self.source = source  #: the text of the module the pass is given
        self.walk = walk  #: the matcher's walk of that module, for these rules
        self.rules = rules
        self.first_party = first_party
        self.unsafe = unsafe
        self.silenced = silenced
        self.floor = floor  #: the oldest torch the project allows (None: no constraint)
        self.target = target  #: the configured ROCm target (a fix may be right for some GPUs only)
        self.applied: list[tuple[Match, Tier]] = []
        self.not_fixed: list[tuple[Match, str]] = []
        self.matches: list[Match] = []  #: every match in the pass's input
        #: id(match) -> the input lines its rewrite owns beyond its own (see TransformResult.owned)
        self.owned: dict[int, tuple[int, int]] = {}
        #: id(match) -> what to check in review of its rewrite (see TransformResult.notes)
        self.notes: dict[int, str] = {}

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """The pass over ``tree`` (the module of ``walk``), then LibCST's import visitors
        for what it scheduled (as :class:`CodemodCommand` runs them), except where a walk
        of the result shows they have nothing to do: they cost most of a pass.

        The metadata wrapper does not copy ``tree`` (LibCST's ``Codemod`` deep-clones
        it): the pass owns its input, so the walk's nodes are the tree's own."""
        assert self.walk.module is tree
        wrapper = MetadataWrapper(tree, unsafe_skip_copy=True)
        outer = self.context
        with self.resolve(wrapper):
            self.context = dataclasses.replace(outer, wrapper=wrapper)
            try:
                tree = self.transform_module_impl(wrapper.module)
            finally:
                self.context = outer
        _drop_idle_import_changes(self.context, tree)
        for key, visitor in ((AddImportsVisitor.CONTEXT_KEY, AddImportsVisitor),
                             (RemoveImportsVisitor.CONTEXT_KEY, _RemoveImports)):
            if self.context.scratch.get(key):
                tree = self._instantiate_and_run(visitor, tree)
        return tree

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.matches = self.walk.matches()
        ctx = FixContext(self.context, self.walk.names, self.source, self.matches,
                         self.floor.version if self.floor is not None else None, self.target)
        matches = fixable(self.matches, self.silenced)
        transforms: dict[str, list[Match]] = {}
        edits: list[Edit] = []
        clean = copy.deepcopy(self.context.scratch)
        for match in matches:
            spec = match.rule.fix
            assert spec is not None
            if (reason := held(match, self.unsafe, self.target, self.floor)) is not None:
                self.not_fixed.append((match, reason))
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
            return tree.visit(_ApplyEdits(final, {id(a) for e in final for a in (e.node, *ctx.ancestors(e.node))}))
        for name in sorted(transforms):
            outcome = TRANSFORMS[name](ctx, transforms[name], self.unsafe)
            self.not_fixed += [(d.match, d.reason) for d in outcome.declined]
            if outcome.module is not None:
                self.applied += list(outcome.fixed)
                self.owned.update(outcome.owned)
                self.notes.update(outcome.notes)
                return outcome.module
            self.context.scratch.clear()
            self.context.scratch.update(copy.deepcopy(clean))
        return tree


def _drop_idle_import_changes(context: CodemodContext, tree: cst.Module) -> None:
    """Unschedule what the import visitors would not do anyway: adding ``import x`` where
    the module already binds ``x`` to it alone, and removing an import whose name the
    module still uses (a use the walk sees; anything else is left to the visitor)."""
    adds = context.scratch.get(AddImportsVisitor.CONTEXT_KEY, [])
    removes = context.scratch.get(RemoveImportsVisitor.CONTEXT_KEY, [])
    if not adds and not removes:
        return
    names = ModuleWalk(tree, ()).names

    def present(item: ImportItem) -> bool:
        plain = item.obj_name is None and item.alias is None and not item.relative
        return plain and "." not in item.module_name and names.imported(item.module_name) == item.module_name

    def used(module: str, obj: str | None, asname: str | None) -> bool:
        if obj is None and asname is None and "." in module:
            return False  # `import a.b` is used by uses of `a.b`, not of `a`: the visitor decides
        return bool(names.uses(asname or obj or module, names.module))

    context.scratch[AddImportsVisitor.CONTEXT_KEY] = [item for item in adds if not present(item)]
    context.scratch[RemoveImportsVisitor.CONTEXT_KEY] = [item for item in removes if not used(*item)]


class _RemoveImports(RemoveImportsVisitor):
    """LibCST's visitor, except that a block whose first statement (a local import) it
    removes does not start with the blank line that followed the import."""

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self.emptied: set[int] = set()  #: ids of statement lines it emptied (so removed)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        if not updated_node.body:
            self.emptied.add(id(original_node))
        return updated_node

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
                            ) -> cst.IndentedBlock:
        return updated_node.with_changes(body=_first_in_place(original_node.body, updated_node.body, self.emptied))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        updated_node = super().leave_Module(original_node, updated_node)
        return updated_node.with_changes(body=_first_in_place(original_node.body, updated_node.body, self.emptied))


def _first_in_place(original: Sequence[Any], body: Sequence[Any], removed: Container[int]) -> list[Any]:
    """``body``, the statements of a block once some of ``original`` were removed: where the
    first of them was, the first one left takes its blank lines in place of its own (and
    keeps its comments), so the block starts where it did, not a blank line lower."""
    if not original or id(original[0]) not in removed or not body:
        return list(body)
    own = list(body[0].leading_lines)
    while own and own[0].comment is None:
        own.pop(0)
    blank = [line for line in original[0].leading_lines if line.comment is None]
    return [body[0].with_changes(leading_lines=[*blank, *own]), *body[1:]]


def _template(ctx: FixContext, match: Match) -> Edit | Declined | None:
    spec = match.rule.fix
    assert spec is not None
    return TEMPLATES[spec.kind](ctx, match, spec)


class _ApplyEdits(cst.CSTTransformer):
    """Replace nodes by identity. A deleted statement's blank lines pass to the next one,
    so deleting a line does not glue two paragraphs together."""

    def __init__(self, edits: Sequence[Edit], holding: set[int]) -> None:
        self.edits = {e.node: e.replacement for e in edits}
        self.holding = holding  #: ids of the edited nodes and their ancestors

    def on_visit(self, node: cst.CSTNode) -> bool:
        """Only what holds an edit is rebuilt; the rest of the tree is kept as it is."""
        return id(node) in self.holding

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
        removed = {id(s) for s in original.body  # type: ignore[attr-defined]
                   if isinstance(self.edits.get(s), cst.RemovalSentinel)}
        return updated.with_changes(body=_first_in_place(original.body, body, removed))  # type: ignore[attr-defined]


def _non_overlapping(ctx: FixContext, edits: Sequence[Edit]) -> list[Edit]:
    """Edits whose nodes do not overlap, outermost first; the rest wait for the next pass."""
    where = ctx.positions([edit.node for edit in edits])

    def extent(edit: Edit) -> tuple[tuple[int, int], tuple[int, int]]:
        r = where[id(edit.node)]
        return (r.start.line, r.start.column), (r.end.line, r.end.column)

    chosen: list[Edit] = []
    nodes: set[int] = set()
    reach: tuple[int, int] | None = None  # the furthest end of a chosen edit
    for edit in sorted(edits, key=lambda e: (extent(e)[0], tuple(-x for x in extent(e)[1]))):
        start, end = extent(edit)
        # sorted by start, every chosen edit starts at or before this one: they overlap
        # where one ends after this one starts (an empty edit overlaps nothing)
        if id(edit.node) in nodes or (start < end and reach is not None and start < reach):
            continue
        chosen.append(edit)
        nodes.add(id(edit.node))
        reach = end if reach is None else max(reach, end)
    return chosen


def silencer(text: str, kind: str = "python") -> Callable[[Match], bool]:
    """Is a match's rule silenced by a ``noqa``/``portscan: ignore`` comment in ``text``
    (a file of this kind)? Those findings are not reported, so they are not rewritten
    either. The comments are read once per text."""
    found = suppressions(text, "", kind)
    if not found:
        return lambda match: False
    index = LineIndex(text)

    def silenced(match: Match) -> bool:
        first = index.position(match.start)[0]
        last = index.position(max(match.end - 1, match.start))[0]
        return any(covers(s, match.rule.code, first, last) for s in found)

    return silenced


def held(match: Match, unsafe: bool, target: Target | None = None, floor: Floor | None = None,
         imported: Callable[[], Mapping[str, str]] = dict) -> str | None:
    """Why a fixable match is left before its rewrite is tried (None: try it), for Python
    and text fixes alike. What no flag changes comes first (declined at this site, a
    torch the project allows, another GPU, code that must change first), so that
    "unsafe fix" is the reason only where ``--unsafe-fixes`` would fix the match.
    A transform decides its own tier per site (see :func:`portscan.match.fixsites.site_tiers`)."""
    spec = match.rule.fix
    assert spec is not None
    if match.declined is not None:  # decided at scan time, for this site
        return match.declined
    older = floor_declined(spec, match.variables.get("name", ""), floor)
    if older is not None:
        return older
    other_gpu = spec.arch_declined(target)
    if other_gpu is not None:
        return other_gpu
    if spec.code_first and (waits := spec.code_first_declined(imported())) is not None:
        return waits
    if spec.tier is Tier.UNSAFE and not unsafe and spec.kind != "transform":
        return NEEDS_UNSAFE
    return None


def fixable(matches: Sequence[Match], silenced: Callable[[Match], bool]) -> list[Match]:
    """The matches a fix may rewrite: the rule has a fix, the code is not guarded, the
    shape is one the rule can fix and no comment silences it."""
    return [m for m in matches if m.rule.fix is not None and m.guard is None and m.fixable and not silenced(m)]


#: why guarded code is not rewritten, per guard (see :mod:`portscan.match.guards`)
_GUARDED = {
    FALLBACK: "in a `try` whose handler copes with the failure (guarded: fallback); guarded code is never rewritten",
    VENDOR_BRANCH: "in a branch that already checks the GPU vendor (guarded: vendor-branch); left as it is",
    TYPE_CHECKING: "under `if TYPE_CHECKING:` (never runs); left as it is",
}

_FOLDED = ("its import is in a `try` whose handler binds a fallback (guarded: fallback); each path is "
           "left as it is")


def guarded(matches: Sequence[Match], silenced: Callable[[Match], bool]) -> list[tuple[Match, str]]:
    """The matches a fix skips because the code is guarded, with the reason, so every
    skipped site is listed. A guarded import whose rule's fix is to guard it is already
    what the fix would write; a fallback that binds an equivalent loses nothing."""
    return [(m, _FOLDED if m.folded and m.guard == FALLBACK else _GUARDED[m.guard]) for m in matches
            if m.rule.fix is not None and m.guard in _GUARDED and m.fixable
            and m.rule.fix.kind != "guard-import" and not silenced(m)]


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
    whose names a fix no longer uses: nothing in it can run, so it goes. Statements the
    pass left as they were (the same nodes as in its input) are not looked into."""

    def __init__(self, unchanged: set[int]) -> None:
        super().__init__()
        self.unchanged = unchanged

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) not in self.unchanged and super().on_visit(node)

    def leave_Try(self, original_node: cst.Try, updated_node: cst.Try):  # type: ignore[override]
        body = small_statements(updated_node.body)
        if not body or not all(isinstance(s, cst.Pass) for s in body) \
                or updated_node.orelse is not None or updated_node.finalbody is not None:
            return updated_node
        for handler in updated_node.handlers:
            caught = cst.helpers.get_full_name_for_node(handler.type) if handler.type is not None else None
            if caught not in ("ImportError", "ModuleNotFoundError") or not only_raises(handler):
                return updated_node
        return cst.RemoveFromParent()

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
                            ) -> cst.IndentedBlock:
        if updated_node.body:
            return updated_node
        return updated_node.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])


def fix_source(text: str, path: str, rules: RuleSet, unsafe: bool = False,
               first_party: frozenset[str] = frozenset(), target: Target | None = None,
               floor: Floor | None = None) -> FileFix:
    """Fix one Python source. Never raises for bad input: see ``FileFix.error``. The
    ``target`` sets the severities of :attr:`FileFix.findings`, as in a scan; a fix that
    needs a newer torch than the project's ``floor`` allows is declined (None: no floor,
    see :mod:`portscan.match.floor`)."""
    try:
        with paused_gc():
            return with_deep_stack(lambda: _fix_source(text, path, rules, unsafe, first_party, target, floor))
    except RecursionError:
        return FileFix(path, text, text, error="code nested too deeply to fix; the file is unchanged")


def _fix_source(text: str, path: str, rules: RuleSet, unsafe: bool, first_party: frozenset[str],
                target: Target | None, floor: Floor | None) -> FileFix:
    def found(final: str, matches: list[Match]) -> tuple[Finding, ...] | None:
        return None if declares_extensions("python", final) else findings_from(final, path, matches, target)

    candidates = rules.candidates(text)
    if not any(r.fix is not None for r in candidates):
        return FileFix(path, text, text)
    try:  # the scan's fast parse first: a file with nothing to fix never meets LibCST
        module = parse_for_matching(text)
    except SourceError as exc:
        return FileFix(path, text, text, error=exc.message)
    silenced = silencer(text)
    walk = ModuleWalk(module, candidates, first_party, folders=folders_of(path))
    matches = walk.matches()
    if not fixable(matches, silenced):  # the common case: no codemod
        index = LineIndex(text)
        skipped = tuple(NotFixed(m.rule.code, m.rule.name, index.position(m.start)[0], reason)
                        for m, reason in guarded(matches, silenced))
        return FileFix(path, text, text, not_fixed=skipped, findings=found(text, matches))
    if is_view(module):  # rewrites need LibCST's own tree
        del walk, matches, module  # the view goes before LibCST's parse (memory)
        module = parse_python(text)
        walk = ModuleWalk(module, candidates, first_party, folders=folders_of(path))
        matches = walk.matches()
    before = found(text, matches)
    # guarded code is never rewritten, so its places are the input's; a guard the fixes
    # write later (`torch.version.cuda is not None and ...`) is no reason to list
    input_index = LineIndex(text)
    guarded_input = {NotFixed(m.rule.code, m.rule.name, input_index.position(m.start)[0], reason)
                     for m, reason in guarded(matches, silenced)}
    compiled = _compiles(text, path)
    module_name, package = module_names(path)
    current = text
    origins = _Origins(text)
    applied: list[Applied] = []
    declined: list[tuple[Match, str]] = []
    # the input must come back byte for byte. LibCST's round trip is exact but for line
    # endings and indents with CR or form feed characters (lone CRs, CR/CRLF mixes,
    # `\f` in an indent), so only such a text pays for a whole codegen here (2 s on a
    # 2 MB module); what the passes write is LibCST's own code, so later passes need
    # no such check
    if ("\r" in text or "\f" in text) and module.code != current:
        return FileFix(path, text, text, error="LibCST does not reproduce this file byte for byte "
                                               "(unusual line endings?); left as it is")
    free = walk.names.free  # names the input uses without binding them (builtins, ...)
    for _ in range(MAX_PASSES):
        context = CodemodContext(filename=path, full_module_name=module_name, full_package_name=package)
        last = _Pass(context, candidates, first_party, unsafe, silenced, current, walk, floor, target)
        declined = last.not_fixed
        try:
            fixed = last.transform_module(module)
            if last.applied:
                fixed = fixed.visit(_DropDeadTry({id(statement) for statement in module.body}))
            new = fixed.code
        except RecursionError:
            raise  # fix_source retries with a deeper stack
        except Exception as exc:  # noqa: BLE001 - a fix bug must not lose the file
            return FileFix(path, text, text, error=f"a fix failed ({type(exc).__name__}: {exc}); "
                                                   "the file is unchanged; please report it")
        if new == current:
            matches = last.matches
            break
        done, owned, notes = last.applied, last.owned, last.notes
        imported, emptied = walk.names.from_imports, walk.names.emptied_fallbacks
        del last, fixed, walk, module  # the pass's trees go before the next parse (memory)
        try:  # the check, with the scan's fast parse: LibCST only if another pass is due
            module = parse_for_matching(new)
        except SourceError as exc:
            return FileFix(path, text, text, error=f"a fix produced code that does not parse "
                                                   f"({exc.message}); the file is unchanged")
        if compiled and not _compiles(new, path):
            return FileFix(path, text, text, error="a fix produced code that does not compile; "
                                                   "the file is unchanged")
        applied += origins.advance(new, done, owned, notes)
        current = new
        candidates, silenced = rules.candidates(current), silencer(current)
        walk = ModuleWalk(module, candidates, first_party, folders=folders_of(path))
        lost = sorted((walk.names.free - free) & imported)
        if lost:  # an import removed while the module still uses its name
            return FileFix(path, text, text, error=f"a fix left `{lost[0]}` used but no longer defined; "
                                                   "the file is unchanged; please report it")
        if walk.names.emptied_fallbacks > emptied:
            return FileFix(path, text, text, error="a fix left a `try` with a fallback holding only `pass`; "
                                                   "the file is unchanged; please report it")
        matches = walk.matches()
        if not fixable(matches, silenced):  # settled: nothing left
            declined = []
            break
        if is_view(module):  # the next pass rewrites: LibCST's own tree
            try:
                module = parse_python(new)
            except SourceError as exc:
                return FileFix(path, text, text, error=f"a fix produced code that does not parse "
                                                       f"({exc.message}); the file is unchanged")
            walk = ModuleWalk(module, candidates, first_party, folders=folders_of(path))
    else:
        return FileFix(path, text, text, error=f"fixes did not settle after {MAX_PASSES} passes; "
                                               "the file is unchanged")
    not_fixed = tuple(sorted({NotFixed(m.rule.code, m.rule.name, origins.input_line(m.start), reason)
                              for m, reason in declined} | guarded_input, key=lambda n: (n.line, n.rule)))
    return FileFix(path, text, current, tuple(applied), not_fixed, findings=found(current, matches),
                   before=before)


def changed_blocks(old: str, new: str) -> list[tuple[int, int, int, int]]:
    """``(i1, i2, j1, j2)`` of each block of lines that differs from ``old`` to ``new``."""
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in opcodes(lines_with_ends(old), lines_with_ends(new))
            if tag != "equal"]


class _Origins:
    """For each line of the text being fixed, the input line it is (0-based), or None
    for a line the fixes wrote; carried from pass to pass, so every pass's matches
    and changes are reported in the input's lines, where the user reads them."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.index = LineIndex(text)
        self._move(list(range(len(lines_with_ends(text)))))

    def _move(self, lines: list[int | None]) -> None:
        self.lines = lines
        #: per line, the input line of the last line before it that the fixes kept
        self._kept_before: list[int | None] = []
        last = None
        for origin in lines:
            self._kept_before.append(last)
            last = origin if origin is not None else last
        self._kept_before.append(last)

    def _before(self, line: int) -> int | None:
        """The input line of the last line before ``line`` that the fixes kept."""
        return self._kept_before[min(line, len(self.lines))]

    def places(self, first: int, last: int) -> set[int]:
        """The input places of lines ``first``..``last - 1`` of the current text (see
        :attr:`Applied.touches`); for an insertion or lines the fixes wrote: after the
        input line before them."""
        kept = {2 * o + 1 for o in self.lines[first:last] if o is not None}
        before = self._before(first)
        return kept or {2 * before + 2 if before is not None else 0}

    def input_line(self, offset: int) -> int:
        """An offset of the current text as a 1-based input line (a line the fixes
        wrote: the input line after the last one they kept above it)."""
        at = self.index.position(offset)[0] - 1
        origin = self.lines[at] if at < len(self.lines) else None
        if origin is not None:
            return origin + 1
        before = self._before(at)
        return before + 2 if before is not None else 1

    def advance(self, new: str, applied: Sequence[tuple[Match, Tier]],
                owned: Mapping[int, tuple[int, int]] | None = None,
                notes: Mapping[int, str] | None = None) -> list[Applied]:
        """Move on to ``new``, the pass's output: each applied match with the input
        places of the changed blocks that overlap it, or the lines its rewrite owns
        (``owned``: id(match) -> 1-based first and last line); blocks that overlap none,
        such as the imports a pass added or removed, belong to every match of the pass."""
        diff = opcodes(lines_with_ends(self.text), lines_with_ends(new))
        owned = owned or {}
        spans = [(owned[id(m)][0] - 1, owned[id(m)][1] - 1) if id(m) in owned else
                 (self.index.position(m.start)[0] - 1, self.index.position(max(m.end - 1, m.start))[0] - 1)
                 for m, _ in applied]
        touches: list[set[int]] = [set() for _ in applied]
        at_line: dict[int, list[int]] = {}  # line -> the applied matches spanning it
        for k, (first, last) in enumerate(spans):
            for line in range(first, last + 1):
                at_line.setdefault(line, []).append(k)
        for i1, i2 in ((i1, i2) for tag, i1, i2, _, _ in diff if tag != "equal"):
            owners = sorted({k for line in range(i1, max(i2, i1 + 1)) for k in at_line.get(line, ())})
            if not owners:  # an import added or removed: one place of it marks it for every match
                place = min(self.places(i1, i2))
                for k in range(len(applied)):
                    touches[k].add(place)
            for k in owners:  # each match: its own lines of the block (a block can span them all)
                first, last = spans[k]
                lo, hi = max(i1, first), min(i2, last + 1)
                touches[k] |= self.places(lo, hi) if lo < hi else self.places(i1, i2)
        notes = notes or {}
        done = [Applied(m.rule.code, m.rule.name, tier, self.input_line(m.start), frozenset(t), notes.get(id(m)))
                for (m, tier), t in zip(applied, touches, strict=True)]
        lines: list[int | None] = []
        for tag, i1, i2, j1, j2 in diff:
            lines += self.lines[i1:i2] if tag == "equal" else [None] * (j2 - j1)
        self.text, self.index = new, LineIndex(new)
        self._move(lines)
        return done
