"""Where a rule's declared fix applies, decided per site from the scan's own parse.

The scan marks a finding ``[fix]`` only where ``portscan fix`` will rewrite it, so the
decision a fix makes about the shape of the code around a match lives here, below
both: the matcher records it on the :class:`~portscan.match.Match` and the fix reads
it back unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import libcst as cst

from portscan.match import Match
from portscan.match.guards import only_raises
from portscan.match.syntax import Walker, children, string_text
from portscan.ruleset.fixspec import FixSpec, Replace, Tier

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]
#: the qualified names a dotted chain (its outermost node) can stand for, as the scan resolved them
Qualify = Callable[[cst.CSTNode], Sequence[str]]


class Tree(Protocol):
    """Where a node sits: what :func:`probing` needs, from the scan's walk or from a fix
    pass's :class:`~portscan.fix.rewrite.FixContext` (so both decide alike)."""

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None: ...

    def line(self, node: cst.CSTNode) -> int: ...


class ImportUses(Tree, Protocol):
    """What :func:`guard_import_declined` needs: where a module-level name is used."""

    def import_time_use(self, name: str) -> cst.CSTNode | None:
        """A use of the module-level ``name`` that runs when the module is imported (in the
        module's own statements or a class body), if any."""

    def code(self, node: cst.CSTNode) -> str: ...


class Facts(ImportUses, Protocol):
    """What the scan's walk knows of the whole module, for the decisions that look past
    a site's own shape."""

    module: cst.Module

    def bindings(self, node: cst.CSTNode) -> tuple[str, tuple[str | None, ...]] | None:
        """What the first name of the chain holding ``node`` is bound to: (the name, each
        binding's qualified import, or None for a def, assignment or relative import)."""

    def qualify(self, node: cst.CSTNode) -> Sequence[str]: ...

    def imports_used(self, node: cst.CSTNode) -> list[tuple[str, cst.Import | cst.ImportFrom]]: ...

    def attributes(self, name: str) -> Sequence[cst.Attribute]:
        """Every ``x.<name>`` in the module."""

    def first(self, nodes: Sequence[cst.CSTNode]) -> cst.CSTNode:
        """The node that comes first in the module."""


#: why ``nvidia-gate`` leaves a helper's call alone (``requires_sm(9, 0)``, reported where it is called)
IN_A_HELPER = ("the comparison is in a helper this call reaches: put `torch.version.cuda is not None and` "
               "in front of it there, by hand")
#: why ``cuda-version-none`` leaves a value use alone that the version reaches through a name
CARRIED = ("the version reaches this use through `{name}`: a HIP version written where `{name}` is set would "
           "change every test of it too, so branch on torch.version.hip here by hand")
#: why ``cuda-version-none`` leaves the value uses of a module alone that formats a CUDA tag
CUDA_TAG = ("the module formats a CUDA tag ({tag!r}): a HIP version under it names a CUDA wheel or index, "
            "so build the ROCm tag from torch.version.hip by hand")
#: a string that puts a version after ``cu`` (``f"+cu{v}"``, ``"cu" + v``, ``"cu%s"``, ``"cu{}"``),
#: not a ``.cu`` file name
_CUDA_TAG = re.compile(r"(?i)(?:^|[^a-z.])cu(?:\x00|\{|%|$)")

#: Nodes a comparison is not looked for beyond: from outside them, the value is not
#: always evaluated when the comparison is (a branch, a lambda, a statement boundary).
_BOUNDARIES = (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda, cst.BooleanOperation, cst.IfExp)


def _inside(outer: cst.CSTNode, inner: cst.CSTNode, parent: Parent) -> bool:
    """Is ``inner`` ``outer`` or below it? (Climbs from ``inner``: no subtree walk.)"""
    node: cst.CSTNode | None = inner
    while node is not None:
        if node is outer:
            return True
        node = parent(node)
    return False


def enclosing_comparison(node: cst.CSTNode, parent: Parent) -> cst.Comparison | None:
    """The comparison that is evaluated whenever ``node`` is, if any."""
    ancestor = parent(node)
    while ancestor is not None:
        if isinstance(ancestor, cst.Comparison):
            return ancestor
        if isinstance(ancestor, _BOUNDARIES):
            return None
        if isinstance(ancestor, cst.BaseComp) and not _inside(ancestor.for_in.iter, node, parent):
            return None  # only a comprehension's first iterable is evaluated up front
        ancestor = parent(ancestor)
    return None


#: nvcc options that take the next list element as their value (``"-gencode", "arch=..."``)
NVCC_PAIRED = frozenset({"-gencode", "--generate-code", "-arch", "--gpu-architecture", "--gpu-code", "-code",
                         "-Xptxas", "--ptxas-options", "-maxrregcount", "--maxrregcount", "-Xnvlink",
                         "--nvlink-options", "-Xfatbin", "--fatbin-options", "-Xcompiler", "--compiler-options",
                         "-ccbin", "--compiler-bindir", "-t", "--threads", "--diag-suppress", "--diag_suppress",
                         "-diag-suppress", "-diag_suppress", "-Xcudafe",
                         "--keep-dir", "--default-stream"})
#: where a list of nvcc flags may stand for ``hip-nvcc-flags`` to make it ``[...] if hip else [...]``
_FLAG_LIST_PLACES = (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.DictElement, cst.Arg, cst.Return)


def nvcc_flag_list(node: cst.CSTNode, parent: Parent, module: cst.Module | None = None,
                   flagged: Callable[[str], bool] | None = None) -> cst.List | AppendedFlag | str:
    """Where ``hip-nvcc-flags`` can keep the nvcc flag ``node`` from hipcc: the list literal
    it is an element of (which gets a ROCm twin, ``[hip] if torch.version.hip else [the
    list as written]``), or the ``flags.append("-gencode")`` statement it is appended by
    (which goes under ``if not torch.version.hip:`` with the value appended after it);
    for a call of the module's own helper that adds the flag (``append_nvcc_threads(args)``,
    reported at the call), the list in the helper's ``return`` that holds a ``flagged``
    string; else why not."""
    if isinstance(node, cst.Call):
        return _helper_list(node, parent, module, flagged)
    element = parent(node)
    above = parent(element) if isinstance(element, (cst.Element, cst.Arg)) else None
    if isinstance(element, cst.Arg):
        return _appended(node, above, parent)
    if not isinstance(above, cst.List):
        return ("not an element of a list literal or a `.append(...)` statement (built in a comprehension or "
                "a helper): add it only `if not torch.version.hip` by hand")
    listed: cst.List = above
    holder = parent(listed)
    joined = isinstance(holder, cst.BinaryOperation) and isinstance(holder.operator, cst.Add) \
        and listed in (holder.left, holder.right)  # ["-O3", ...] + cc_flag
    if not joined and (not isinstance(holder, _FLAG_LIST_PLACES) or getattr(holder, "value", None) is not listed):
        return "the list is not assigned, returned, passed or added to as it stands: add the flag only for CUDA by hand"
    values = [flag_text(e.value) for e in listed.elements]
    last = values[-1] if values else None
    if last in NVCC_PAIRED:
        return f"`{last}` takes its value from outside this list: add both only for CUDA by hand"
    return listed


def _helper_list(call: cst.Call, parent: Parent, module: cst.Module | None,
                 flagged: Callable[[str], bool] | None) -> cst.List | str:
    """The flag list a module-level helper returns (``return args + ["--threads", "4"]``)."""
    helper = "the flag is added by a helper this call reaches: add it only `if not torch.version.hip` there, by hand"
    if module is None or flagged is None or not isinstance(call.func, cst.Name):
        return helper
    defs = [s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == call.func.value]
    if len(defs) != 1:
        return helper
    found = [node for node in _returned(defs[0]) if isinstance(node, cst.List) and flag_values(node, flagged)]
    if len(found) != 1:
        return helper
    element = found[0].elements[0]
    site = nvcc_flag_list(element.value, parent)
    return site if isinstance(site, (cst.List, str)) else helper


def flag_test(match: Match) -> Callable[[str], bool]:
    """Whether a string is one of the flags ``match``'s rule reports (for a helper's list)."""
    argument = match.variables.get("argument", "nvcc")
    accepts = getattr(match.rule.pattern, "accepts", None)  # a BuildArgPattern's
    return lambda value: accepts is not None and bool(accepts(argument, value))


def _returned(function: cst.FunctionDef) -> list[cst.CSTNode]:
    """The operands of the ``+`` chains (or the values) a function's top-level ``return`` statements give."""
    out: list[cst.CSTNode] = []
    lines = function.body.body if isinstance(function.body, cst.IndentedBlock) else [function.body]
    for line in lines:
        smalls = line.body if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
        for small in smalls:
            if isinstance(small, cst.Return) and small.value is not None:
                stack: list[cst.CSTNode] = [small.value]
                while stack:
                    value = stack.pop()
                    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
                        stack += [value.left, value.right]
                    else:
                        out.append(value)
    return out


@dataclass(frozen=True, slots=True)
class AppendedFlag:
    """``flags.append("-gencode")`` as a statement of its own, and the one after it that
    appends the option's value (``flags.append("arch=compute_80,code=sm_80")``), if paired."""

    statement: cst.SimpleStatementLine
    value: cst.SimpleStatementLine | None = None


def _appended(node: cst.CSTNode, call: cst.CSTNode | None, parent: Parent) -> AppendedFlag | str:
    expression = parent(call) if call is not None else None
    statement = parent(expression) if isinstance(expression, cst.Expr) else None
    target = _append_target(statement)
    if target is None or not isinstance(statement, cst.SimpleStatementLine):
        return ("not an element of a list literal or a `.append(...)` statement of its own: add it only "
                "`if not torch.version.hip` by hand")
    flag = flag_text(node)
    if flag not in NVCC_PAIRED:
        return AppendedFlag(statement)
    block = parent(statement)
    body = list(getattr(block, "body", ()))
    following = body[body.index(statement) + 1] if statement in body and body[-1] is not statement else None
    if _append_target(following) != target:
        return f"`{flag}` takes its value from a statement that does not follow it: add both only for CUDA by hand"
    assert isinstance(following, cst.SimpleStatementLine)
    return AppendedFlag(statement, following)


def _append_target(statement: cst.CSTNode | None) -> str | None:
    """``flags`` for a statement line that is only ``flags.append(<one value>)``."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    expression = statement.body[0]
    call = expression.value if isinstance(expression, cst.Expr) else None
    if not isinstance(call, cst.Call) or len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
        return None
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "append" and isinstance(func.value, cst.Name)):
        return None
    return func.value.value


def guard_import_declined(node: cst.CSTNode, tree: ImportUses) -> str | None:
    """Why ``guard-import`` cannot wrap the import holding ``node`` in ``try``/``except
    ImportError`` (None: it can, or ``node`` is a use of the name, not its import)."""
    line: cst.CSTNode | None = node
    inside_import = False
    while line is not None and not isinstance(line, cst.SimpleStatementLine):
        inside_import = inside_import or isinstance(line, (cst.Import, cst.ImportFrom))
        line = tree.parent(line)
    if not inside_import:
        return None
    if line is None or not isinstance(tree.parent(line), cst.Module):
        return "only module-level imports are guarded"
    if len(line.body) != 1 or not isinstance(line.body[0], (cst.Import, cst.ImportFrom)):
        return "the import shares its line with other statements"
    statement = line.body[0]
    if isinstance(statement, cst.ImportFrom) and isinstance(statement.names, cst.ImportStar):
        return "a star import cannot be guarded"
    for name in bound_names(statement):
        use = tree.import_time_use(name)
        if use is not None:
            return f"`{name}` is used at import time (`{_statement_text(use, tree)}`), not only inside functions"
    return None


def _statement_text(node: cst.CSTNode, tree: ImportUses) -> str:
    """The first line of the simple statement holding ``node``, shortened: where a reason
    names a place, it quotes it (a line number would be the fix pass's, not the input's)."""
    while True:
        above = tree.parent(node)
        if above is None or isinstance(above, (cst.SimpleStatementLine, cst.Module, cst.IndentedBlock)):
            break
        node = above
    code = tree.code(node).strip()
    text = code.splitlines()[0] if code else ""
    return text if len(text) <= 60 else text[:57] + "..."


def bound_names(statement: cst.Import | cst.ImportFrom) -> list[str]:
    """The names an import binds, once each (``import a.b`` binds ``a``)."""
    names = []
    assert not isinstance(statement.names, cst.ImportStar)
    for alias in statement.names:
        if alias.evaluated_alias is not None:
            names.append(alias.evaluated_alias)
        elif isinstance(statement, cst.Import):
            names.append(alias.evaluated_name.split(".")[0])
        else:
            names.append(alias.evaluated_name)
    return list(dict.fromkeys(names))


def cuda_home_test(node: cst.CSTNode, parent: Parent) -> str | None:
    """Why ``cuda-home-toolkit`` cannot make this ``CUDA_HOME`` read as "the toolkit of
    this build": it must be tested against None (``is None``, ``is not None``) or for
    truth (``if CUDA_HOME:``, ``not CUDA_HOME``, an ``and``/``or`` operand); a path built
    from it names a CUDA tool."""
    above = parent(node)
    if isinstance(above, cst.Comparison) and above.left is node and len(above.comparisons) == 1:
        target = above.comparisons[0]
        if isinstance(target.operator, (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)) and \
                isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            return None
    if isinstance(above, (cst.If, cst.While)) and above.test is node or \
            isinstance(above, cst.UnaryOperation) and isinstance(above.operator, cst.Not) or \
            isinstance(above, cst.BooleanOperation):
        return None
    return ("not a test of whether the toolkit was found: a path under CUDA_HOME names a CUDA tool "
            "(nvcc, lib64); use ROCM_HOME (hipcc, lib) on ROCm by hand")


def flag_text(node: cst.CSTNode) -> str | None:
    """The flag a plain string literal spells (``"-gencode"``); None for anything else."""
    return node.evaluated_value if isinstance(node, cst.SimpleString) and \
        isinstance(node.evaluated_value, str) else None


def flag_values(listed: cst.List, flagged: Callable[[str], bool]) -> list[cst.BaseExpression]:
    """The list's string elements that are ``flagged`` flags."""
    return [e.value for e in listed.elements if (text := flag_text(e.value)) is not None and flagged(text)]


def parents(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each code-carrying node's parent (iterative: deep nesting does not recurse)."""
    return _parents_below([module])


def _parents_below(roots: Sequence[cst.CSTNode]) -> dict[cst.CSTNode, cst.CSTNode]:
    found: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = list(roots)
    while stack:
        node = stack.pop()
        for child in children(node):
            found[child] = node
            stack.append(child)
    return found


class Parents:
    """A node's parent. The usual question is about a module-level simple statement (an
    import to guard, a flag list): those lines are indexed first, cheaply; the whole
    tree (hundreds of thousands of nodes in a generated module) only when a node lies
    elsewhere."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._lines: dict[cst.CSTNode, cst.CSTNode] | None = None
        self._all: dict[cst.CSTNode, cst.CSTNode] | None = None

    def get(self, node: cst.CSTNode) -> cst.CSTNode | None:
        if node is self.module:
            return None
        if self._lines is None:
            lines = [s for s in self.module.body if isinstance(s, cst.SimpleStatementLine)]
            self._lines = {**{s: self.module for s in self.module.body}, **_parents_below(lines)}
        found = self._lines.get(node)
        return found if found is not None else self.all().get(node)

    def all(self) -> dict[cst.CSTNode, cst.CSTNode]:
        """Every code-carrying node's parent."""
        if self._all is None:
            self._all = parents(self.module)
        return self._all


def _transform(match: Match) -> str | None:
    spec = match.rule.fix
    return spec.transform if spec is not None and spec.kind == "transform" else None


def _declined(match: Match, facts: Facts, blocked: dict[object, str | None]) -> str | None:
    spec = match.rule.fix
    if spec is None or match.guard is not None or not match.fixable:
        return None
    if spec.kind == "text":
        from portscan.match.textfix import IN_PYTHON  # the text-fix engine (YAML, wheels), not needed otherwise

        return IN_PYTHON
    if spec.kind == "guard-import":
        return guard_import_declined(match.node, facts)
    if spec.kind in ("replace", "delete"):
        reason = binding_conflict(facts.bindings(match.node)) or probed(facts, match.node)
        if reason is not None:
            return reason
    if spec.kind == "replace":
        entry = spec.replacement_for(match.variables.get("name", ""))
        if entry is not None and id(entry) not in blocked:  # the module's uses, once per entry
            blocked[id(entry)] = source_only_use(facts, entry, match.variables.get("name", ""))
        return replace_declined(match, spec, facts.parent, facts.qualify) or \
            (blocked[id(entry)] if entry is not None else None)
    if _cuda_value_use(match, facts.parent):
        if match.variables.get("via"):
            return CARRIED.format(name=match.variables.get("matched", ""))
        if "cuda-tag" not in blocked:  # once per module
            blocked["cuda-tag"] = cuda_tag(facts.module)
        tag = blocked["cuda-tag"]
        return CUDA_TAG.format(tag=tag) if tag is not None else None
    if _transform(match) == "nvidia-gate" and not isinstance(match.node, cst.Comparison):
        return IN_A_HELPER
    if _transform(match) == "cuda-home-toolkit":
        return cuda_home_test(match.node, facts.parent)
    if _transform(match) == "hip-nvcc-flags":
        site = nvcc_flag_list(match.node, facts.parent, facts.module, flag_test(match))
        return site if isinstance(site, str) else None
    return None


def cuda_tag(module: cst.Module) -> str | None:
    """The first string of ``module`` that formats a version after ``cu`` (a wheel tag,
    an index name), as written; f-string placeholders read as ``{}``."""
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.SimpleString, cst.FormattedString)):
            text = string_text(node)
            if text is not None and _CUDA_TAG.search(text):
                return text.replace("\0", "{}")
            continue
        stack.extend(reversed(list(children(node))))
    return None


def site_tiers(matches: Sequence[Match], facts: Callable[[], Facts]) -> list[Tier | None]:
    """Per match, the fix's tier at its site where it is not the rule's (None: the rule's):
    ``cuda-version-none`` guards a comparison (safe) but gives a value use the HIP
    version (unsafe)."""
    if not any(_transform(m) == "cuda-version-none" and m.guard is None for m in matches):
        return [None] * len(matches)
    parent = facts().parent
    return [Tier.UNSAFE if m.guard is None and _cuda_value_use(m, parent) else None for m in matches]


def _cuda_value_use(match: Match, parent: Parent) -> bool:
    """Is this a ``cuda-version-none`` match in no comparison (the version used as a value)?"""
    return _transform(match) == "cuda-version-none" and enclosing_comparison(match.node, parent) is None


def _decides(match: Match) -> bool:
    spec = match.rule.fix
    return spec is not None and match.guard is None and (spec.kind in ("replace", "delete", "text", "guard-import")
                                                         or spec.transform in ("cuda-version-none", "hip-nvcc-flags",
                                                                            "cuda-home-toolkit", "nvidia-gate"))


def decline_reasons(matches: Sequence[Match], facts: Callable[[], Facts]) -> list[str | None]:
    """Per match, why its fix does not apply at its site (None: it applies, or no fix
    decides by site). The module's facts are gathered only when some match needs them."""
    if not any(_decides(m) for m in matches):
        return [None] * len(matches)
    known = facts()
    blocked: dict[object, str | None] = {}
    reasons = [_declined(m, known, blocked) if _decides(m) else None for m in matches]
    kept = _kept_uses(matches, reasons, known)
    return [reason or (_split(m, kept, known) if _decides(m) else None)
            for m, reason in zip(matches, reasons, strict=True)]


def _kept_uses(matches: Sequence[Match], reasons: Sequence[str | None], facts: Facts
               ) -> dict[tuple[str, str], Match]:
    """Per (rule, name), the first use that is not called and stays as it is (guarded, not
    fixable, or declined)."""
    kept: dict[tuple[str, str], Match] = {}
    for match, reason in zip(matches, reasons, strict=True):
        spec = match.rule.fix
        if spec is None or spec.kind != "replace" or _called(match, facts):
            continue
        if match.guard is not None or not match.fixable or reason is not None:
            kept.setdefault((match.rule.code, match.variables.get("name", "")), match)
    return kept


def _split(match: Match, kept: dict[tuple[str, str], Match], facts: Facts) -> str | None:
    """Why a call is not rewritten: a use of the same name that stays as it is (one that is
    not called where the rule renames only calls, or whose own rewrite is declined) would go
    on meaning the old class, so ``isinstance(m, FusedLayerNorm)`` stops matching the layers
    the module now builds, and the module still imports apex."""
    spec = match.rule.fix
    if spec is None or spec.kind != "replace" or not _called(match, facts):
        return None
    other = kept.get((match.rule.code, match.variables.get("name", "")))
    if other is None:
        return None
    return (f"`{facts.code(other.node)}` at line {facts.line(other.node)} stays as it is, so it would "
            "no longer mean what this call builds; port the module's uses together by hand")


def _called(match: Match, facts: Facts) -> bool:
    up = facts.parent(match.node)
    return isinstance(up, cst.Call) and up.func is match.node


def binding_conflict(bound: tuple[str, tuple[str | None, ...]] | None) -> str | None:
    """Why a use is not rewritten when its first name is bound in more than one way in
    its scope: ``try``/``except`` or ``if``/``else`` imports of different modules, or an
    import with a fallback definition. The matcher resolves the use to the binding a
    rule knows, but a rewrite to that one binding's replacement would change what every
    other branch runs (a MUSA ``autocast`` becoming CUDA's, a Transformer Engine optimizer
    becoming plain torch's), so each branch is left to the user."""
    if bound is None:
        return None
    name, targets = bound
    distinct = sorted({t for t in targets if t is not None})
    if len(set(targets)) <= 1:
        return None
    shown = ", ".join(f"`{t}`" for t in distinct)
    also = " and by a definition or assignment" if None in targets else ""
    return (f"`{name}` is bound in more than one way here ({shown}{also}); a rewrite would change "
            "every branch, so each is left to port by hand")


def _probe(tree: Tree, statement: cst.CSTNode) -> bool:
    """Is this import in the body of a ``try`` whose handler copes? Then it is a probe:
    removing it changes more than the names it binds (``HAS_APEX = True`` after it
    would always run, or the ``try`` would be left as ``pass``)."""
    line = tree.parent(statement)
    block = tree.parent(line) if line is not None else None
    owner = tree.parent(block) if block is not None else None
    return isinstance(owner, cst.Try) and block is owner.body \
        and not all(only_raises(handler) for handler in owner.handlers)


def probing(tree: Tree, statement: cst.Import | cst.ImportFrom, name: str) -> str | None:
    """Why the names an import binds are not rewritten, if it is a probe: the import would
    have to stay, so the module would still test for the package and take the other path
    where it is missing; the rewrite would change only the machines that have it."""
    if not _probe(tree, statement):
        return None
    return (f"`{name}` comes from the `try` at line {tree.line(statement)}, which tests whether "
            "the package is installed; port that test and its branches by hand")


def probed(facts: Facts, node: cst.CSTNode) -> str | None:
    """:func:`probing` for each import a use relies on."""
    for local, statement in facts.imports_used(node):
        reason = probing(facts, statement, local.split(".")[0])
        if reason is not None:
            return reason
    return None


# ----------------------------------------------------------------------------- replace


def source_only_use(facts: Facts, entry: Replace, name: str) -> str | None:
    """Why the rewritten object would break: the module uses an attribute of it that only
    the source type has (``model.disable_allreduce()`` after apex DDP became torch DDP).
    Any receiver counts: the names are the source library's own, and the object often
    travels (``self.model``, a returned wrapper) where no binding follows it."""
    if not entry.source_only:
        return None
    uses = [use for name in entry.source_only for use in facts.attributes(name)]
    if not uses:
        return None
    first = facts.first(uses)
    assert isinstance(first, cst.Attribute)
    source = (entry.names[0] if entry.names else name).rsplit(".", 1)[-1]
    return (f"`{facts.code(first)}` (line {facts.line(first)}) is only on `{source}`; "
            f"`{entry.to}` has no `{first.attr.value}`")


def compatibility_path(node: cst.CSTNode, target: str, parent: Parent, qualify: Qualify | None = None
                       ) -> str | None:
    """Why ``node`` looks like the old-version branch of a compatibility shim, if it does:
    inside an ``except`` handler, or in a conditional that also spells the target
    (``torch.amp.GradScaler(...) if new_torch else torch.cuda.amp.GradScaler()``, or
    ``FusedLayerNorm if apex_available else LayerNorm`` after ``from torch.nn import
    LayerNorm``: rewritten, both branches would be the same)."""
    tail = target.split(".")[-2:]
    own = _spellings(node, tail, target, qualify)
    ancestor = parent(node)
    while ancestor is not None:
        if isinstance(ancestor, cst.ExceptHandler | cst.ExceptStarHandler):
            return "in an `except` handler: a fallback path, likely for older versions; left as it is"
        if isinstance(ancestor, cst.If | cst.IfExp) and _spellings(ancestor, tail, target, qualify) > own:
            return f"a compatibility branch next to `{'.'.join(tail)}`; left as it is"
        if isinstance(ancestor, cst.FunctionDef | cst.ClassDef):
            break
        ancestor = parent(ancestor)
    return None


def _spellings(node: cst.CSTNode, tail: list[str], target: str, qualify: Qualify | None) -> int:
    """How many names in the code under ``node`` end in ``tail``, or (with ``qualify``)
    stand for ``target`` under any import (comments and strings do not count)."""
    counted: set[int] = set()

    class Count(Walker):  # read-only: the matcher's walker, not a rebuilding LibCST visitor
        def visit_Attribute(self, attribute: cst.Attribute) -> None:
            name = cst.helpers.get_full_name_for_node(attribute)
            if name is not None and name.split(".")[-len(tail):] == tail:
                counted.add(id(attribute))
            self.qualified(attribute)

        def visit_Name(self, name: cst.Name) -> None:
            self.qualified(name)

        def qualified(self, chain: cst.CSTNode) -> None:
            if qualify is not None and target in qualify(chain):
                counted.add(id(chain))

    Count().walk(node)
    return len(counted)


def replace_declined(match: Match, spec: FixSpec, parent: Parent, qualify: Qualify | None = None) -> str | None:
    """Why a ``replace`` fix leaves this site alone, as far as the shape around it tells:
    no entry for the name, the old branch of a compatibility shim, or a use that is not
    called where only calls are rewritten. (A call's arguments are checked as it is
    rewritten.)"""
    node = match.node
    entry = spec.replacement_for(match.variables.get("name", ""))
    if entry is None:
        return f"no fix is declared for `{match.variables.get('name', '')}`"
    shim = compatibility_path(node, entry.to, parent, qualify)
    if shim is not None:
        return shim
    up = parent(node)
    if isinstance(up, cst.Call) and up.func is node:
        return None
    if entry.bare == "rename" or (entry.bare == "call" and isinstance(up, cst.Decorator)):
        return None
    return "only calls are rewritten; this use is not called"
