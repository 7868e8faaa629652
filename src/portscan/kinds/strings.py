"""The ``string`` kind: string literals with given values, or that a regex searches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from portscan.bounded import Regex
from portscan.kinds.python_surface import PythonSurface, rules_by
from portscan.kinds.common import PYTHON, WORDISH, code_list
from portscan.ruleset.prefilter import Token, regex_fragments, required_literals
from portscan.ruleset.table import PatternError, TableReader


@dataclass(frozen=True, slots=True)
class StringPattern:
    """A string literal with one of the given values, anywhere but a docstring
    (``"CUDAExecutionProvider"`` in a providers list built elsewhere), unless the
    list or tuple literal holding it also holds one of ``unless``. With ``regex``
    instead of ``values``: a string literal or f-string (placeholders read as ``\\0``)
    in which the regex finds a match (a CUDA wheel index URL inside a pip command)."""

    kind: ClassVar[str] = "string"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"strings"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "value"})
    values: tuple[str, ...]
    unless: tuple[str, ...] = ()
    regex: Regex | None = None  #: searched in the text of each string literal

    @classmethod
    def read(cls, r: TableReader) -> StringPattern:
        regex = r.regex("regex")
        values = r.texts("values", required=regex is None, check=WORDISH, what="word-like string")
        if regex is not None and values:
            raise PatternError(r.where, "give exactly one of `values` and `regex`")
        if regex is not None and not regex_fragments(regex):
            raise PatternError(r.key("regex"), "must start with literal text (the prefilter's token)")
        return cls(values=values, unless=r.texts("unless", required=False), regex=regex)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        if self.regex is not None:  # the leading text, and every literal run the regex needs
            required = set(required_literals(self.regex))
            return tuple(frozenset({f, *required}) for f in regex_fragments(self.regex))
        return tuple(frozenset({v}) for v in self.values)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        if self.regex is not None:
            return (f"String literals and f-strings outside docstrings in which `{self.regex.pattern}` "
                    "finds a match.")
        return f"String literals {code_list(map(repr, self.values))} outside docstrings."

    def found(self, text: str) -> str | None:
        """The matched text of a regex pattern in a string's text, or None."""
        match = self.regex.search(text) if self.regex is not None else None
        return match.group(0).replace("\0", "{...}") if match else None

    def accepts_siblings(self, siblings: frozenset[str]) -> bool:
        """``siblings``: the strings of the list, tuple or set literal holding this one."""
        return not siblings.intersection(self.unless)

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, StringPattern]], surface: PythonSurface) -> None:
        """String literals equal to a listed value, unless used as a lookup key or listed
        beside an ``unless`` value."""
        by_value = rules_by(rules, lambda p: p.values)
        searched = [(rule, p) for rule, p in rules if p.regex is not None]
        for node in surface.strings:
            if id(node) in surface.lookup_keys:
                continue  # a key looked up in a mapping names, it does not request
            text = surface.text(node)
            siblings = surface.string_siblings.get(id(node), frozenset())
            for rule, p in by_value.get(text or "", ()):
                if p.accepts_siblings(siblings):
                    surface.hit(rule, id(node), node, value=text or "")
            for rule, p in searched if text else ():
                value = p.found(text or "")
                if value is not None and p.accepts_siblings(siblings):
                    surface.hit(rule, id(node), node, value=value)
