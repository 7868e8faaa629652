"""The ``call`` kind: calls of a qualified name, with conditions on their arguments."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TYPE_CHECKING

from portscan.kinds.python_surface import PythonSurface
from portscan.bounded import Regex
from portscan.kinds.common import ONE_LINE, PYTHON, WORDISH, code_list, name_matches
from portscan.kinds.strings import tested_strings
from portscan.kinds.sites import ArgumentSite
from portscan.parse import lazy_libcst
from portscan.ruleset.prefilter import Token, qualified_sets, regex_fragments
from portscan.ruleset.table import Literal, PatternError, TableReader, literal_in

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_libcst()


@dataclass(frozen=True, slots=True)
class ArgCondition:
    """A constraint on one argument, found by keyword or by position (0-based)."""

    keyword: str | None
    position: int | None
    equals: tuple[Literal, ...] = ()
    contains: tuple[Literal, ...] = ()
    present: bool | None = None
    regex: Regex | None = None  #: searched in a string-literal argument
    #: searched in the last part of the path the argument builds (``os.path.join(d, "*.cu")``)
    path_regex: Regex | None = None
    #: the argument is one text (a string, a path built from strings, a local bound to
    #: one) where a list of texts is meant; such a match is reported at the argument
    text: bool | None = None
    #: or (beside ``equals``) a call of one of these (``gpu=torch.cuda.is_available()``),
    #: directly or through a local every assignment of which is one
    calls: tuple[str, ...] = ()

    def needed_tokens(self) -> tuple[Token, ...]:
        """Tokens one of which a matching argument puts in the file (empty: unknown)."""
        values = self.equals + self.contains
        if self.calls:
            return ()  # the call's name may come through an import alias
        if values:
            words = tuple(v for v in values if isinstance(v, str) and WORDISH.match(v))
            return words if len(words) == len(values) else ()
        if self.regex is not None:
            return regex_fragments(self.regex, quoted=True)
        if self.path_regex is not None:
            return regex_fragments(self.path_regex)
        return ()

    @classmethod
    def read(cls, r: TableReader) -> ArgCondition:
        keyword = r.raw("keyword", False)
        position = r.raw("position", False)
        if keyword is None and position is None:
            raise PatternError(r.where, "an argument condition needs `keyword`, `position` or both")
        if keyword is not None and (not isinstance(keyword, str) or not keyword.isidentifier()):
            raise PatternError(r.key("keyword"), "expected an identifier")
        if position is not None and (isinstance(position, bool) or not isinstance(position, int)
                                     or position < 0):
            raise PatternError(r.key("position"), "expected an integer >= 0")
        present, text = r.raw("present", False), r.raw("text", False)
        for key, value in (("present", present), ("text", text)):
            if value is not None and not isinstance(value, bool):
                raise PatternError(r.key(key), "expected true or false")
        if text is False:
            raise PatternError(r.key("text"), "only `text = true` is a condition")
        condition = cls(keyword, position, r.literals("equals"), r.literals("contains"), present,
                        r.regex("regex"), r.regex("path_regex"), text, r.dotted("calls", required=False))
        given = sum((bool(condition.equals or condition.calls), bool(condition.contains), present is not None,
                     condition.regex is not None, condition.path_regex is not None, text is not None))
        if given != 1:
            raise PatternError(r.where, "give exactly one of `equals` (with or without `calls`), `calls`, "
                                        "`contains`, `present`, `regex`, `path_regex`, `text`")
        return condition


    def accepts(self, argument: ArgumentSite | None, hidden: bool) -> bool:
        """``argument``: the call's argument at this keyword or position (None: absent);
        ``hidden``: the call passes ``**kwargs``, which might carry it."""
        if self.present is not None:
            if argument is None and hidden:
                return False  # **kwargs might carry it: don't guess
            return (argument is not None) == self.present
        if argument is None:
            return False
        if self.equals:
            return literal_in(argument.value, self.equals)
        if self.regex is not None:
            return argument.text is not None and self.regex.search(argument.text) is not None
        return any(literal_in(item, self.contains) for item in argument.items)


@dataclass(frozen=True, slots=True)
class CallPattern:
    """A call of a qualified name, optionally constrained by literal argument values."""

    kind: ClassVar[str] = "call"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"calls"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "name"})
    callees: tuple[str, ...]
    args: tuple[ArgCondition, ...] = ()
    #: no match in a module that looks for one of these texts in another (``'hip' not in path``)
    unless_tested: tuple[str, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> CallPattern:
        callees = r.dotted("callees", wildcard=True)
        raw_args = r.raw("args", False) or []
        if not isinstance(raw_args, list):
            raise PatternError(r.key("args"), "expected an array of tables")
        args = []
        for i, table in enumerate(raw_args):
            sub = TableReader(table, f"{r.key('args')}[{i}]")
            args.append(ArgCondition.read(sub))
            sub.finish()
        return cls(callees=callees, args=tuple(args),
                   unless_tested=r.texts("unless_tested", required=False, check=ONE_LINE, what="one-line text"))

    @property
    def extra_sites(self) -> frozenset[str]:
        """The sites only some patterns of the kind read (see ``python_sites``)."""
        return frozenset({"compares"}) if self.unless_tested else frozenset()

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        """The callee's segments, plus one of the values an argument must have
        (``backend="tensorrt"`` needs "tensorrt" in the file), when they can be told."""
        sets: tuple[frozenset[Token], ...] = qualified_sets(self.callees)
        for condition in self.args:
            needed = condition.needed_tokens()
            if needed:
                sets = tuple(s | {token} for s in sets for token in needed)
        return sets

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        text = f"Calls of {code_list(self.callees)}, resolved through import aliases"
        conditions = []
        for c in self.args:
            where = " or ".join(filter(None, [f"keyword `{c.keyword}`" if c.keyword else "",
                                              f"position {c.position}" if c.position is not None else ""]))
            calls = (f"a call of {code_list(c.calls)} (directly or through a local every assignment "
                     "of which is one)") if c.calls else ""
            if c.equals:
                conditions.append(f"the argument at {where} is one of {code_list(map(repr, c.equals))}"
                                  + (f" or {calls}" if calls else ""))
            elif calls:
                conditions.append(f"the argument at {where} is {calls}")
            elif c.contains:
                conditions.append(f"the argument at {where} lists {code_list(map(repr, c.contains))}")
            elif c.regex is not None:
                conditions.append(f"the argument at {where} matches `{c.regex.pattern}`")
            elif c.path_regex is not None:
                conditions.append(f"the path the argument at {where} builds ends in a part matching "
                                  f"`{c.path_regex.pattern}`")
            elif c.text:
                conditions.append(f"the argument at {where} is one text (a string, a path built from "
                                  "strings, or a local bound to one), not a list; reported at the argument")
            else:
                conditions.append(f"the argument at {where} is {'present' if c.present else 'absent'}")
        unless = (f" Not in a module that looks for {code_list(map(repr, self.unless_tested))} in another "
                  "text.") if self.unless_tested else ""
        return text + (", where " + "; ".join(conditions) if conditions else "") + "." + unless

    def matched_callee(self, names: list[str]) -> str | None:
        """The first of a call's qualified names (``names``) that is one of the callees."""
        return next((n for n in names for c in self.callees if name_matches(n, c)), None)

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, CallPattern]], surface: PythonSurface) -> None:
        """Each call of a listed callee whose arguments meet the conditions."""
        tested = tested_strings(surface) if any(p.unless_tested for _, p in rules) else frozenset()
        for call, scope in surface.calls:
            names = surface.callee_names(call, scope)
            if not names:
                continue
            for rule, p in rules:
                name = p.matched_callee(names)
                if (name is not None and tested.isdisjoint(p.unless_tested)
                        and all(_meets(cond, call, scope, surface) for cond in p.args)):
                    at = next((a for c in p.args if c.text
                               for a in [surface.argument(call, c.position, c.keyword)] if a is not None), call)
                    surface.hit(rule, id(at), at, name=name)


def _meets(condition: ArgCondition, call: cst.Call, scope: Any, surface: PythonSurface) -> bool:
    argument = surface.argument(call, condition.position, condition.keyword)
    if condition.calls:
        if argument is not None and any(name_matches(n, c) for n in _called(argument, scope, surface)
                                        for c in condition.calls):
            return True
        if not condition.equals:
            return False
    if condition.text:
        return argument is not None and surface.is_text(argument, scope)
    if condition.path_regex is not None:
        return argument is not None and any(condition.path_regex.search(part)
                                            for part in surface.path_ends(argument, scope))
    return condition.accepts(surface.argument_site(call, condition.position, condition.keyword),
                             surface.passes_kwargs(call))


def _called(expr: cst.BaseExpression, scope: Any, surface: PythonSurface) -> list[str]:
    """The qualified names of the call ``expr`` is, or of the calls a local name is bound
    to where every assignment of it is one (``use_gpu = torch.cuda.is_available()``)."""
    if isinstance(expr, cst.Call):
        return surface.callee_names(expr, scope)
    if isinstance(expr, cst.Name):
        values = surface.assigned(expr.value, scope)
        calls = [(value, owner) for value, owner in values if isinstance(value, cst.Call)]
        if calls and len(calls) == len(values):
            return [n for value, owner in calls for n in surface.callee_names(value, owner)]
    return []
