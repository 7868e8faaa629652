"""What every fix needs while it rewrites one module: parents, scopes, positions,
a way to spell a qualified name at a place, and import bookkeeping.

Names and scopes come from the matcher's own walk of the same tree
(:class:`portscan.match.python.Names`), so a fix reads a name the way the scan that
reported it did.

Imports go through LibCST's own codemod visitors: :class:`AddImportsVisitor` adds an
import once, :class:`RemoveImportsVisitor` removes an import only if nothing uses it
after the rewrite. Both run when the pass ends (see :mod:`portscan.fix.engine`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.helpers import get_absolute_module_from_package_for_import
from libcst.metadata import CodePosition, CodeRange
from packaging.version import Version

from portscan.config import Target
from portscan.ruleset.fixspec import Tier
from portscan.match import Match
from portscan.match.fixsites import Parents, probing
from portscan.match.locate import locate
from portscan.match.python import Names, Scope
from portscan.parse import LineIndex

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

    def __init__(self, context: CodemodContext, names: Names, text: str, matches: Sequence[Match] = (),
                 torch_floor: Version | None = None, target: Target | None = None) -> None:
        assert context.wrapper is not None
        self.context = context
        self.matches = matches  #: every match of the pass's rules in the module
        #: the oldest torch the project allows (None: no constraint), for transforms that
        #: write an older spelling where the newer one does not exist yet
        self.torch_floor = torch_floor
        self.target = target  #: the configured ROCm target: what a transform writes may depend on it
        self.module = context.wrapper.module
        self.names = names  #: from the matcher's walk of this same tree
        self.lines = LineIndex(text)  #: of the module's source, for the positions of its nodes

    @functools.cached_property
    def _parents(self) -> Parents:
        return Parents(self.module)  # the matcher's index (code-carrying nodes), shared with the scan's decisions

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

    def positions(self, nodes: Sequence[cst.CSTNode]) -> dict[int, CodeRange]:
        """Where each node is (by id), as LibCST's ``PositionProvider`` tells it: from one
        counting code generation up to the last of them (:func:`portscan.match.locate.locate`),
        rather than a position for every node of the module."""
        found = {}
        for key, (start, end) in locate(self.module, nodes).items():
            (line, column), (end_line, end_column) = self.lines.position(start), self.lines.position(end)
            found[key] = CodeRange(CodePosition(line, column - 1), CodePosition(end_line, end_column - 1))
        return found

    def line(self, node: cst.CSTNode) -> int:
        return self.positions([node])[id(node)].start.line

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def import_time_use(self, name: str) -> cst.CSTNode | None:
        """A use of the module-level ``name`` that runs at import time (see
        :class:`portscan.match.fixsites.ImportUses`)."""
        return next((use for use, where in self.names.uses(name, self.names.module)
                     if where is self.names.module or where.is_class), None)

    def scope(self, node: cst.CSTNode) -> Scope:
        """The scope ``node`` is evaluated in."""
        return self.names.scope_at(node, self.parent)

    # -- names ------------------------------------------------------------------

    def reference(self, qualified: str, at: cst.CSTNode) -> cst.BaseExpression | None:
        """An expression naming ``qualified`` where ``at`` is, reusing the module's
        imports (``nn.LayerNorm`` after ``import torch.nn as nn``) or scheduling
        ``import <root>``. ``None`` when the root name means something else there."""
        scope = self.scope(at)
        parts = qualified.split(".")
        best: tuple[int, str] | None = None
        for local, bound in self.names.module_imports.items():
            if parts[: len(bound.split("."))] != bound.split(".") or scope.lookup(local) is not self.names.module:
                continue
            if best is None or len(bound.split(".")) > best[0]:
                best = (len(bound.split(".")), local)
        if best is not None:
            return cst.parse_expression(".".join([best[1], *parts[best[0]:]]))
        root = parts[0]
        owner = scope.lookup(root)
        if owner is not None:  # bound here: usable only where every binding imports the root module
            return cst.parse_expression(qualified) if set(owner.bindings[root]) == {root} else None
        AddImportsVisitor.add_needed_import(self.context, root)
        return cst.parse_expression(qualified)

    def release_imports(self, node: cst.CSTNode) -> None:
        """Schedule the imports ``node`` used for removal; LibCST's
        :class:`RemoveImportsVisitor` removes those nothing else uses when the pass ends.
        (What ``remove_unused_import_by_node`` does, with the names resolved by the walk.)"""
        for local, statement in self.names.imports_used(node):
            if isinstance(statement, cst.ImportFrom) and isinstance(statement.names, cst.ImportStar):
                continue
            if probing(self, statement, local) is not None:
                continue  # a probe stays (and the scan declined the uses that need it)
            module = None
            if isinstance(statement, cst.ImportFrom):
                module = get_absolute_module_from_package_for_import(self.context.full_package_name, statement)
                if module is None:
                    continue  # a relative import of an unknown package: keep it
            for alias in statement.names:  # type: ignore[union-attr]
                prefix = alias.evaluated_alias or alias.evaluated_name
                if local != prefix and not local.startswith(prefix + "."):
                    continue
                if module is None:
                    RemoveImportsVisitor.remove_unused_import(self.context, alias.evaluated_name,
                                                              asname=alias.evaluated_alias)
                else:
                    RemoveImportsVisitor.remove_unused_import(self.context, module, obj=alias.evaluated_name,
                                                              asname=alias.evaluated_alias)
