"""Layering: a module imports only from its own layer or a lower one, and no import
circle exists (imports inside functions count: they run too).

Layers, lowest first: the base (data types, reading files, settings), the rule tables,
the match kinds, the rules that hold them, the matchers, the file kinds (and the walk
and suppressions that use them), the scan, the fixer, the reporters and the CLI.
``verify`` stands apart, beside the fixer and the reporters: it may use the scan (for
hints) and the reporters' text helpers but not the fixer, and only the CLI imports it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping, Set
from pathlib import Path
from types import MappingProxyType

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: module prefix -> layer; the longest prefix that fits a module decides
LAYERS: dict[str, int] = {
    "portscan": 0, "portscan.model": 0, "portscan.bounded": 0, "portscan.data": 0,
    "portscan.config": 0, "portscan.parse": 0, "portscan.leancst": 0, "portscan.cache": 0, "portscan.pool": 0,
    "portscan.ruleset.table": 1, "portscan.ruleset.prefilter": 1, "portscan.ruleset.fixspec": 1,
    "portscan.kinds": 2,
    "portscan.ruleset": 3,
    "portscan.match": 4,
    "portscan.filekinds": 5, "portscan.discover": 5, "portscan.suppress": 5, "portscan.gated": 5, "portscan.ported": 5,
    "portscan.vendored": 5,
    "portscan.scan": 6,
    "portscan.fix": 7,
    "portscan.report": 8, "portscan.docs": 8, "portscan.testing": 8,
    "portscan.api": 8,  # scan, fix and baseline for the CLI and other tools
    "portscan.cli": 9, "portscan.__main__": 9,
}
APART = "portscan.verify"
#: what ``verify`` must not import
APART_AVOIDS = ("portscan.fix", "portscan.cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: frozenset[str]) -> set[str]:
    """The portscan modules ``path`` imports anywhere in its body."""
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules)
    return {name for name in found if name in modules}


@functools.cache
def import_graph() -> Mapping[str, frozenset[str]]:
    """Module -> the portscan modules it imports (read once: the sources do not change)."""
    paths = sorted((SRC / "portscan").rglob("*.py"))
    modules = frozenset(module_name(p) for p in paths)
    return MappingProxyType({module_name(p): frozenset(imports_of(p, modules) - {module_name(p)}) for p in paths})


def layer(module: str) -> int | None:
    if module == APART or module.startswith(APART + "."):
        return None
    best = max((prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")), key=len)
    return LAYERS[best]


def upward_imports(graph: Mapping[str, Set[str]]) -> list[str]:
    """Every import that reaches a higher layer, or into or out of ``verify`` wrongly."""
    problems = []
    for module, targets in sorted(graph.items()):
        here = layer(module)
        for target in sorted(targets):
            there = layer(target)
            if here is None and (target in APART_AVOIDS or target.startswith(tuple(f"{a}." for a in APART_AVOIDS))):
                problems.append(f"{module} (verify) imports {target}")
            elif there is None and here is not None and module != "portscan.cli":
                problems.append(f"{module} imports {target}; only the CLI imports verify")
            elif here is not None and there is not None and there > here:
                problems.append(f"{module} (layer {here}) imports {target} (layer {there})")
    return problems


def circles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer() -> None:
    for module in import_graph():
        assert module.startswith(APART) or layer(module) is not None


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_imports(import_graph()) == []


def test_there_is_no_import_circle() -> None:
    assert circles(import_graph()) == []


@pytest.mark.parametrize(("module", "target"), [
    ("portscan.ruleset.loader", "portscan.fix.transforms"),  # the circle this test broke
    ("portscan.match.python", "portscan.scan"),
    ("portscan.ruleset.table", "portscan.kinds.calls"),
    ("portscan.verify.hints", "portscan.fix.engine"),
    ("portscan.report.text", "portscan.verify.cli"),
])
def test_an_upward_import_is_caught(module: str, target: str) -> None:
    graph = dict(import_graph())
    graph[module] = graph[module] | {target}
    assert upward_imports(graph) != []


def test_a_circle_is_caught() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_transform_names_are_the_transforms() -> None:
    """The loader checks names against the declared set without importing the fixer."""
    from portscan.fix.transforms import TRANSFORMS
    from portscan.ruleset.fixspec import TRANSFORM_NAMES

    assert set(TRANSFORMS) == TRANSFORM_NAMES


def test_text_rewrite_names_are_the_rewrites() -> None:
    """The same for text fixes: the names rule files may give are the rewrites there are."""
    from portscan.match.textfix import TEXT_REWRITES
    from portscan.ruleset.fixspec import TEXT_REWRITE_NAMES

    assert set(TEXT_REWRITES) == TEXT_REWRITE_NAMES
