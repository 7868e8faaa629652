"""The one name resolver: the matcher's walk answers what the fixes ask about names
(:class:`portscan.match.python.Names`), and no fix resolves names another way."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst

from portscan.match.fixsites import Parents, parents
from portscan.match.python import ModuleWalk

SRC = Path(__file__).resolve().parents[1] / "src" / "portscan"

SOURCE = '''\
import torch.nn as nn
from apex import amp
import os
os = None

@amp.decorate(nn.Module)
def train(model, scaler=amp.default):
    scaler = 1
    amp.initialize(model)
    return [amp for _ in range(3)]

class Box:
    amp_here = amp.x
'''


def walk_of(source: str) -> tuple[cst.Module, ModuleWalk]:
    module = cst.parse_module(source)
    return module, ModuleWalk(module, ())


def find(module: cst.Module, kind: type, predicate=lambda node: True) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind) and predicate(node):
                found.append(node)
            return True

    module.visit(Collect())
    return found


def test_scopes_at_nodes_follow_python_rules() -> None:
    module, walk = walk_of(SOURCE)
    names, parent = walk.names, parents(module).get
    (function,) = find(module, cst.FunctionDef)
    body_statement = function.body.body[0]
    inner = names.scope_at(body_statement, parent)
    assert inner is not names.module and inner.lookup("scaler") is inner
    # decorators and defaults run in the enclosing scope, the body inside
    decorator = function.decorators[0].decorator
    assert names.scope_at(decorator, parent) is names.module
    default = function.params.params[1].default
    assert names.scope_at(default, parent) is names.module
    (comprehension,) = find(module, cst.ListComp)
    assert names.scope_at(comprehension.elt, parent) not in (inner, names.module)


def test_uses_of_a_binding_and_where_they_run() -> None:
    module, walk = walk_of(SOURCE)
    names = walk.names
    uses = names.uses("amp", names.module)
    assert len(uses) == 5  # decorator, default, call, comprehension, class body (the import is no use)
    assert sum(where.is_class for _, where in uses) == 1
    assert sum(where is names.module for _, where in uses) == 2  # decorator and default
    # a use that a local binding shadows is not a use of the module's
    assert names.uses("scaler", names.module) == []


def test_imported_names_only_when_imports_alone_bind_them() -> None:
    _, walk = walk_of(SOURCE)
    names = walk.names
    assert names.imported("nn") == "torch.nn"
    assert names.imported("amp") == "apex.amp"
    assert names.imported("os") is None  # also assigned
    assert names.imported("train") is None


def test_first_party_imports_count_as_imports() -> None:
    module = cst.parse_module("import mypkg\n")
    walk = ModuleWalk(module, (), frozenset({"mypkg"}))
    assert walk.names.imported("mypkg") == "mypkg"


def test_no_fix_resolves_names_with_another_provider() -> None:
    """Fixes ask the matcher's walk; LibCST's scope and qualified-name providers are
    not imported under fix/ (its import visitors keep their own bookkeeping)."""
    offenders = []
    for path in sorted((SRC / "fix").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("libcst.metadata"):
                offenders += [f"{path.name}: {a.name}" for a in node.names
                              if a.name in ("ScopeProvider", "QualifiedNameProvider", "FullyQualifiedNameProvider")]
    assert offenders == []


def test_the_parent_index_answers_as_the_whole_tree_map_does() -> None:
    """Module-level lines are indexed first, the rest on demand: same answers."""
    module = cst.parse_module(SOURCE)
    whole, index = parents(module), Parents(module)
    statement_lines = [s for s in module.body if isinstance(s, cst.SimpleStatementLine)]
    assert statement_lines and any(not isinstance(s, cst.SimpleStatementLine) for s in module.body)
    assert all(index.get(node) is parent for node, parent in whole.items())
    assert index.get(module) is None and index.all() == whole
