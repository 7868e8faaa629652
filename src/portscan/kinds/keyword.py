"""The ``keyword`` kind: a numeric keyword argument above a limit, in any call.

Triton's launch parameters are keyword arguments of calls whose callee resolves to
nothing (``kernel[grid](x, num_warps=32)``) or of ``triton.Config``, and autotune
lists feed them through loop variables (``for w in [4, 8, 32]``), so neither the
``call`` kind (a qualified callee) nor ``assign`` reaches them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from portscan.kinds.python_surface import PythonSurface
from portscan.kinds.common import PYTHON, code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import IDENTIFIER, PatternError, TableReader


@dataclass(frozen=True, slots=True)
class KeywordPattern:
    """``name=<number>`` with the number above ``above``, whatever the callee."""

    kind: ClassVar[str] = "keyword"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"calls"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "keyword", "value"})
    keywords: tuple[str, ...]
    above: float

    @classmethod
    def read(cls, r: TableReader) -> KeywordPattern:
        keywords = r.texts("keywords", check=IDENTIFIER, what="identifier")
        above = r.raw("above", True)
        if isinstance(above, bool) or not isinstance(above, (int, float)):
            raise PatternError(r.key("above"), "expected a number")
        return cls(keywords=keywords, above=above)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return tuple(frozenset({keyword}) for keyword in self.keywords)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        return (f"Keyword arguments {code_list(self.keywords)} of any call (Triton launches "
                f"`kernel[grid](...)` included) set to a number above {self.above:g}: a literal, a "
                "variable assigned one, or a loop or comprehension variable over a list or tuple "
                "literal holding one (reported at that number).")

    def accepts(self, value: object) -> bool:
        """``value``: the literal, or ``MISSING`` when it is not one."""
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and value > self.above)

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, KeywordPattern]], surface: PythonSurface) -> None:
        """``kernel[grid](..., num_warps=32)``, ``triton.Config({...}, num_warps=w)`` with
        ``w`` from ``for w in [4, 8, 32]`` or ``w = 32``: each number above the limit."""
        for call, scope in surface.calls:
            for arg in call.args:
                if arg.keyword is None:
                    continue
                for rule, p in rules:
                    if arg.keyword.value not in p.keywords:
                        continue
                    for node in surface.literal_values(arg.value, scope):
                        if p.accepts(surface.literal(node)):
                            surface.hit(rule, id(node), node, keyword=arg.keyword.value,
                                        value=surface.snippet(node))
