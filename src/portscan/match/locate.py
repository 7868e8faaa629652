"""Character offsets of CST nodes, computed by a code generation that only counts.

libcst's ``PositionProvider`` computes a range for every node of the module; the
matchers need a handful, so this tracks one integer and records just those.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext, suppress

import libcst as cst
from libcst._nodes.internal import CodegenState

from portscan.leancst import is_view

_NULL = nullcontext()


class _Done(Exception):
    """Every wanted node is located: the rest of the module need not be generated."""


class _Recorder:
    __slots__ = ("state", "node", "start")

    def __init__(self, state: _OffsetState, node: cst.CSTNode) -> None:
        self.state = state
        self.node = node
        self.start = 0

    def __enter__(self) -> None:
        self.start = self.state.offset

    def __exit__(self, *exc: object) -> None:
        self.state.record(id(self.node), self.start)


class _OffsetState(CodegenState):
    """Code generation that only counts characters and records the wanted nodes.

    libcst's ``PositionProvider`` computes a range for every node of the module; the
    matchers need a handful, so this tracks one integer and records just those.
    """

    __slots__ = ("offset", "wanted", "found", "starts")

    def __init__(self, module: cst.Module, wanted: set[int]) -> None:
        super().__init__(default_indent=module.default_indent,
                         default_newline=module.default_newline)
        self.offset = 0
        self.wanted = wanted
        self.found: dict[int, tuple[int, int]] = {}
        self.starts: dict[int, int] = {}

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            self.starts[id(node)] = self.offset

    def after_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.wanted and key not in self.found:  # blocks: whitespace included
            self.record(key, self.starts[key])

    def record(self, key: int, start: int) -> None:
        self.found[key] = (start, self.offset)
        if len(self.found) == len(self.wanted):
            raise _Done

    def add_token(self, value: str) -> None:
        self.offset += len(value)

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.offset += len(token)

    def pop_trailing_newline(self) -> None:
        pass

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None):  # type: ignore[override]
        return _Recorder(self, node) if id(node) in self.wanted else _NULL


def locate(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, tuple[int, int]]:
    """Character offsets ``(start, end)`` of CST nodes, keyed by ``id(node)``.

    Expression ranges exclude surrounding parentheses and whitespace, like libcst's
    ``PositionProvider``; other nodes (statement blocks) include their whitespace.
    """
    if is_view(module):  # a view knows where its nodes are (those in its tree)
        return {id(node): at for node in nodes if (at := getattr(node, "_pos", None)) is not None}
    wanted = {id(node) for node in nodes}
    if not wanted:
        return {}
    state = _OffsetState(module, wanted)
    with suppress(_Done):
        module._codegen(state)
    return state.found
