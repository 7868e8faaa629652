"""What every fix needs while it rewrites one module: parents, scopes, positions,
a way to spell a qualified name at a place, and import bookkeeping.

Imports go through LibCST's own codemod visitors: :class:`AddImportsVisitor` adds an
import once, :class:`RemoveImportsVisitor` removes an import only if nothing uses it
after the rewrite. Both run when the pass ends (see :mod:`portscan.fix.engine`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import (
    CodeRange,
    GlobalScope,
    ImportAssignment,
    ParentNodeProvider,
    PositionProvider,
    Scope,
    ScopeProvider,
)

from portscan.ruleset.fixspec import Tier
from portscan.match import Match

Replacement = cst.CSTNode | cst.FlattenSentinel | cst.RemovalSentinel

#: ``=`` of a keyword argument, spelled without spaces (``enabled=False``)
EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def single_small(statement: cst.CSTNode | None) -> cst.BaseSmallStatement | None:
    """The statement of a line that holds exactly one (``x = 1``, not ``x = 1; y = 2``)."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        return statement.body[0]
    return None


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``node`` (a node of the pass's tree) to fix ``match``."""

    node: cst.CSTNode
    replacement: Replacement
    match: Match
    tier: Tier


@dataclass(frozen=True, slots=True)
class Declined:
    """A finding whose fix does not apply to this shape of code, and why."""

    match: Match
    reason: str


class FixContext:
    """Metadata over one module for the length of one fix pass."""

    def __init__(self, context: CodemodContext) -> None:
        assert context.wrapper is not None
        self.context = context
        self.module = context.wrapper.module

    @functools.cached_property
    def _parents(self) -> Mapping[cst.CSTNode, cst.CSTNode]:
        assert self.context.wrapper is not None
        return self.context.wrapper.resolve(ParentNodeProvider)

    @functools.cached_property
    def _scopes(self) -> Mapping[cst.CSTNode, Scope | None]:
        assert self.context.wrapper is not None
        return self.context.wrapper.resolve(ScopeProvider)

    @functools.cached_property
    def _positions(self) -> Mapping[cst.CSTNode, CodeRange]:
        assert self.context.wrapper is not None
        return self.context.wrapper.resolve(PositionProvider)

    # -- structure --------------------------------------------------------------

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        found = []
        parent = self.parent(node)
        while parent is not None:
            found.append(parent)
            parent = self.parent(parent)
        return found

    def contains(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        """Is ``inner`` ``outer`` or inside it? (Climbs from ``inner``: no subtree walk.)"""
        return inner is outer or outer in self.ancestors(inner)

    def statement(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The statement line or compound statement that holds ``node``."""
        for candidate in [node, *self.ancestors(node)]:
            if isinstance(candidate, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return candidate
        return None

    def position(self, node: cst.CSTNode) -> CodeRange:
        return self._positions[node]

    def line(self, node: cst.CSTNode) -> int:
        return self._positions[node].start.line

    def scope(self, node: cst.CSTNode) -> Scope | None:
        return self._scopes.get(node)

    # -- names ------------------------------------------------------------------

    @functools.cached_property
    def _import_bindings(self) -> dict[str, tuple[str, frozenset[object]]]:
        """Module-level names bound only by absolute imports of one qualified name:
        local name -> (qualified, its bindings)."""
        scope = self._scopes.get(self.module)
        if not isinstance(scope, GlobalScope):
            return {}
        bindings: dict[str, tuple[str, frozenset[object]]] = {}
        for name in {a.name for a in scope.assignments if "." not in a.name}:
            assignments = scope.assignments[name]
            qualified = {_imported_name(a) if isinstance(a, ImportAssignment) else None
                         for a in assignments}
            only = qualified.pop() if len(qualified) == 1 else None
            if only is not None:
                bindings[name] = (only, frozenset(assignments))
        return bindings

    def reference(self, qualified: str, at: cst.CSTNode) -> cst.BaseExpression | None:
        """An expression naming ``qualified`` where ``at`` is, reusing the module's
        imports (``nn.LayerNorm`` after ``import torch.nn as nn``) or scheduling
        ``import <root>``. ``None`` when the root name means something else there."""
        scope = self.scope(at)
        if scope is None:
            return None
        parts = qualified.split(".")
        bindings = self._import_bindings
        best: tuple[int, str] | None = None
        for local, (bound, assignments) in bindings.items():
            bound_parts = bound.split(".")
            if parts[: len(bound_parts)] != bound_parts or frozenset(scope[local]) != assignments:
                continue
            if best is None or len(bound_parts) > best[0]:
                best = (len(bound_parts), local)
        if best is not None:
            return cst.parse_expression(".".join([best[1], *parts[best[0]:]]))
        root = parts[0]
        if scope[root]:  # bound to something that is not the module
            return None
        AddImportsVisitor.add_needed_import(self.context, root)
        return cst.parse_expression(qualified)

    def release_imports(self, node: cst.CSTNode) -> None:
        """Schedule the imports ``node`` used for removal, if nothing else uses them."""
        with contextlib.suppress(ValueError):  # a relative import of an unknown package: keep it
            RemoveImportsVisitor.remove_unused_import_by_node(self.context, node)


def _imported_name(assignment: ImportAssignment) -> str | None:
    node = assignment.node
    if isinstance(node, cst.Import):
        for alias in node.names:
            if alias.evaluated_alias == assignment.name:
                return alias.evaluated_name
            if alias.evaluated_alias is None and (alias.evaluated_name == assignment.name
                                                  or alias.evaluated_name.startswith(assignment.name + ".")):
                return assignment.name
        return None
    if isinstance(node, cst.ImportFrom) and not node.relative and node.module is not None \
            and not isinstance(node.names, cst.ImportStar):
        module = cst.helpers.get_full_name_for_node(node.module)
        for alias in node.names:
            if (alias.evaluated_alias or alias.evaluated_name) == assignment.name:
                return f"{module}.{alias.evaluated_name}"
    return None
