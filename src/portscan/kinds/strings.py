"""The ``string`` kind: string literals with given values, or that a regex searches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TYPE_CHECKING

from portscan.bounded import Regex
from portscan.kinds.python_surface import PythonSurface, rules_by

from portscan.kinds.common import ONE_LINE, PYTHON, WORDISH, code_list
from portscan.ruleset.prefilter import Token, regex_fragments, required_literals
from portscan.ruleset.table import IDENTIFIER, PatternError, TableReader
from portscan.parse import lazy_libcst

if TYPE_CHECKING:
    import libcst as cst
else:
    cst = lazy_libcst()


@dataclass(frozen=True, slots=True)
class StringPattern:
    """A string literal with one of the given values, anywhere but a docstring
    (``"CUDAExecutionProvider"`` in a providers list built elsewhere), unless the
    list or tuple literal holding it also holds one of ``unless``. With ``tested``, only
    where the text is looked for in another text (``"CUDA out of memory" in str(err)``,
    ``msg.startswith(...)``, ``re.search(...)``, ``==``): then a value may be any one-line
    text, spaces included, and a message that merely contains it is not a match; with
    ``alongside`` as well, only where the same ``and`` chain also looks for one of those
    texts (``"CUDA" in msg and "out of memory" in msg``). With ``unless_compared``, not
    where the literal is compared for equality (``providers[0] ==
    "TensorrtExecutionProvider"``, ``provider in ["CUDAExecutionProvider", ...]``), which
    reads a name and requests nothing (``"X" in get_available_providers()`` still
    counts: it asks for X), nor where it is removed from a collection
    (``providers.remove("X")``, and ``"X" in providers`` before it). With
    ``regex`` instead of ``values``: a string literal or f-string (placeholders read as
    ``\\0``) in which the regex finds a match (a CUDA wheel index URL inside a pip command).
    With ``unless_passed_as``, not a string that reaches one of those keyword arguments of
    a call, itself or through a local list (``setup(dependency_links=links)``). With
    ``unless_type_tested``, not a text looked for in an ``or`` chain that also tests the
    value's type against one of those classes (``"CUDA out of memory" in str(e) or
    isinstance(e, torch.cuda.OutOfMemoryError)``): the type test holds on ROCm."""

    kind: ClassVar[str] = "string"
    surfaces: ClassVar[frozenset[str]] = PYTHON
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"strings", "string-siblings", "compares", "calls"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "value"})
    values: tuple[str, ...]
    unless: tuple[str, ...] = ()
    regex: Regex | None = None  #: searched in the text of each string literal
    tested: bool = False
    #: not where the literal is compared for equality (``==``, ``!=``, ``x in ["..."]``) or
    #: removed from a collection (``x.remove("...")``, and the test ``"..." in x`` for it)
    unless_compared: bool = False
    #: with ``tested``: only where the same ``and`` chain also looks for one of these texts
    alongside: tuple[str, ...] = ()
    #: keyword arguments whose strings are no match (``dependency_links``: pip ignores them)
    unless_passed_as: tuple[str, ...] = ()
    #: with ``tested``: classes whose ``isinstance`` test in the same ``or`` chain makes the
    #: text test redundant (``torch.cuda.OutOfMemoryError``, raised for ROCm's OOM too)
    unless_type_tested: tuple[str, ...] = ()

    @classmethod
    def read(cls, r: TableReader) -> StringPattern:
        regex = r.regex("regex")
        tested, unless_compared = r.flag("tested"), r.flag("unless_compared")
        if tested and unless_compared:
            raise PatternError(r.key("unless_compared"), "give at most one of `tested` and `unless_compared`")
        check, what = (ONE_LINE, "one-line text") if tested else (WORDISH, "word-like string")
        values = r.texts("values", required=regex is None, check=check, what=what)
        if regex is not None and values:
            raise PatternError(r.where, "give exactly one of `values` and `regex`")
        if regex is not None and tested:
            raise PatternError(r.key("tested"), "`tested` goes with `values`, not `regex`")
        if regex is not None and not regex_fragments(regex):
            raise PatternError(r.key("regex"), "must start with literal text (the prefilter's token)")
        alongside = r.texts("alongside", required=False, check=ONE_LINE, what="one-line text")
        if alongside and not tested:
            raise PatternError(r.key("alongside"), "only with `tested = true`")
        passed = r.texts("unless_passed_as", required=False, check=IDENTIFIER, what="identifier")
        type_tested = r.dotted("unless_type_tested", required=False)
        if type_tested and not tested:
            raise PatternError(r.key("unless_type_tested"), "only with `tested = true`")
        return cls(values=values, unless=r.texts("unless", required=False), regex=regex, tested=tested,
                   unless_compared=unless_compared, alongside=alongside, unless_passed_as=passed,
                   unless_type_tested=type_tested)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        if self.regex is not None:  # the leading text, and every literal run the regex needs
            required = set(required_literals(self.regex))
            return tuple(frozenset({f, *required}) for f in regex_fragments(self.regex))
        if self.alongside:
            return tuple(frozenset({v, a}) for v in self.values for a in self.alongside)
        return tuple(frozenset({v}) for v in self.values)

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        passed = (f" Not one given to {code_list(f'{k}=' for k in self.unless_passed_as)} (itself, or in a "
                  "local list)." if self.unless_passed_as else "")
        if self.regex is not None:
            return (f"String literals and f-strings outside docstrings in which `{self.regex.pattern}` "
                    f"finds a match.{passed}")
        if self.tested:
            alongside = (f", in an `and` chain that also looks for {code_list(map(repr, self.alongside))}"
                         if self.alongside else "")
            typed = (f"; not in an `or` chain that also tests the value's type with `isinstance` against "
                     f"{code_list(self.unless_type_tested)}, which holds on ROCm" if self.unless_type_tested else "")
            return (f"String literals {code_list(map(repr, self.values))} looked for in another text "
                    f"(`in`, `==`, `startswith`, `find`, `re.search`, ...){alongside}{typed}.")
        compared = (", not compared for equality (`==`, `!=`, `x in [...]`) nor removed from a collection "
                    "(`x.remove(\"...\")`, and the test `\"...\" in x` before it): that reads a name and requests "
                    "nothing") if self.unless_compared else ""
        return f"String literals {code_list(map(repr, self.values))} outside docstrings{compared}."

    @property
    def extra_sites(self) -> frozenset[str]:
        """The sites only some patterns of the kind read (see ``python_sites``)."""
        return (frozenset({"conjunctions"}) if self.alongside else frozenset()) \
            | (frozenset({"disjunctions"}) if self.unless_type_tested else frozenset())

    @property
    def silent(self) -> bool:
        """A text looked for in a message is just not found on ROCm: nothing raises, so a
        ``try`` around the test copes with nothing."""
        return self.tested

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
        tested = _tested_texts(surface) if any(p.tested for _, p in rules) else frozenset()
        compared = frozenset(map(id, _compared_nodes(surface))) if any(p.unless_compared for _, p in rules) \
            else frozenset()
        paired = _paired_texts(surface, tested) if any(p.alongside for _, p in rules) else {}
        passed = {keywords: surface.keyword_strings(frozenset(keywords))
                  for keywords in {p.unless_passed_as for _, p in rules if p.unless_passed_as}}
        typed = {classes: _type_tested_texts(surface, frozenset(classes))
                 for classes in {p.unless_type_tested for _, p in rules if p.unless_type_tested}}
        for node in surface.strings:
            if id(node) in surface.lookup_keys:
                continue  # a key looked up in a mapping names, it does not request
            text = surface.text(node)
            siblings = surface.string_siblings.get(id(node), frozenset())
            for rule, p in by_value.get(text or "", ()):
                if (p.accepts_siblings(siblings) and (not p.tested or id(node) in tested)
                        and not (p.unless_compared and id(node) in compared)
                        and id(node) not in typed.get(p.unless_type_tested, ())
                        and (not p.alongside or not paired.get(id(node), frozenset()).isdisjoint(p.alongside))):
                    surface.hit(rule, id(node), node, value=text or "")
            for rule, p in searched if text else ():
                value = p.found(text or "")
                if (value is not None and p.accepts_siblings(siblings)
                        and id(node) not in passed.get(p.unless_passed_as, ())):
                    surface.hit(rule, id(node), node, value=value)


#: methods and ``re`` functions whose first argument is looked for in a text
_SEARCHES = frozenset({"startswith", "endswith", "find", "rfind", "index", "rindex", "count",
                       "search", "match", "fullmatch", "findall", "finditer"})
_TESTS = frozenset({"in", "not in", "==", "!="})


def _paired_texts(surface: PythonSurface, tested: frozenset[int]) -> dict[int, frozenset[str]]:
    """id(string looked for) -> the other texts its ``and`` chain looks for."""
    paired: dict[int, frozenset[str]] = {}
    for operands in surface.conjunctions:
        looked_for = [node for operand in operands for node in _looked_for(operand) if id(node) in tested]
        texts = {id(node): surface.text(node) for node in looked_for}
        for node in looked_for:
            others = frozenset(t for i, t in texts.items() if t is not None and i != id(node))
            paired[id(node)] = paired.get(id(node), frozenset()) | others
    return paired


def _type_tested_texts(surface: PythonSurface, classes: frozenset[str]) -> frozenset[int]:
    """ids of the texts looked for in an ``or`` chain that also asks ``isinstance(v, C)``
    for one of ``classes`` (or a tuple holding one)."""
    scopes = {id(call): scope for call, scope in surface.calls}
    found: set[int] = set()
    for operands in surface.disjunctions:
        if any(_tests_type(operand, scopes, classes) for operand in operands):
            found.update(id(node) for operand in operands for node in _looked_for(operand))
    return frozenset(found)


def _tests_type(operand: cst.BaseExpression, scopes: dict[int, Any], classes: frozenset[str]) -> bool:
    scope = scopes.get(id(operand))
    if (scope is None or not isinstance(operand, cst.Call) or len(operand.args) != 2
            or not isinstance(operand.func, cst.Name) or operand.func.value != "isinstance"):
        return False
    types = operand.args[1].value
    for item in [e.value for e in types.elements] if isinstance(types, cst.Tuple) else [types]:
        name = cst.helpers.get_full_name_for_node(item)
        if name is not None and classes.intersection(scope.qualified(name.split("."))):
            return True
    return False


def _looked_for(operand: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The texts one operand of an ``and`` or ``or`` chain looks for: ``"x" in s``,
    ``s.startswith("x")``, ``not ...`` of those."""
    while isinstance(operand, cst.UnaryOperation) and isinstance(operand.operator, cst.Not):
        operand = operand.expression
    if isinstance(operand, cst.Comparison):
        return [operand.left, *(target.comparator for target in operand.comparisons)]
    if isinstance(operand, cst.Call) and operand.args:
        return [operand.args[0].value]
    return []


def _tested_texts(surface: PythonSurface) -> frozenset[int]:
    """ids of the nodes whose text is looked for in (or compared with) another text."""
    return frozenset(map(id, _tested_nodes(surface)))


def tested_strings(surface: PythonSurface) -> frozenset[str]:
    """The string literals the module looks for in other texts (``'hip' not in path``,
    ``name.endswith("_hip.cpp")``); needs the ``compares`` and ``calls`` sites."""
    return frozenset(t for t in map(surface.text, _tested_nodes(surface)) if t is not None)


def _operand_pairs(surface: PythonSurface) -> Iterator[tuple[cst.BaseExpression, str, cst.BaseExpression, Any]]:
    """(left, operator, right, scope) of each link of every comparison chain
    (``a < b < c`` is ``a < b`` and ``b < c``)."""
    for comparison, scope in surface.compares:
        left = comparison.left
        for target in comparison.comparisons:
            yield left, surface.operator(target), target.comparator, scope
            left = target.comparator


def _tested_nodes(surface: PythonSurface) -> list[cst.BaseExpression]:
    found: list[cst.BaseExpression] = []
    for left, operator, right, scope in _operand_pairs(surface):
        if operator in _TESTS:
            found += _text_sources(surface, left, scope)
            if operator in ("==", "!="):
                found += _text_sources(surface, right, scope)
    for call, scope in surface.calls:
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _SEARCHES and call.args:
            found += _text_sources(surface, call.args[0].value, scope)
    return found


#: methods that take an item out of a list or set
_REMOVALS = frozenset({"remove", "discard"})


def _compared_nodes(surface: PythonSurface) -> list[cst.BaseExpression]:
    """The operands of ``==``/``!=`` and the items of a literal collection a text is looked
    up in (``provider in ["A", "B"]``): texts compared whole with another; and a text
    removed from a collection (``providers.remove("A")``), with the test that it is there
    (``if "A" in providers:``), which request it no more than a comparison does."""
    found: list[cst.BaseExpression] = []
    removed: set[tuple[str, str]] = set()  # (text, the collection's source)
    for call, _scope in surface.calls:
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _REMOVALS and call.args:
            found.append(call.args[0].value)
            text = surface.text(call.args[0].value)
            if text is not None:
                removed.add((text, surface.snippet(call.func.value)))
    for left, operator, right, _scope in _operand_pairs(surface):
        if operator in ("==", "!="):
            found += [left, right]
        elif operator in ("in", "not in") and isinstance(right, (cst.List, cst.Tuple, cst.Set)):
            found += [e.value for e in right.elements if isinstance(e, cst.Element)]
        elif operator == "in" and removed and (surface.text(left), surface.snippet(right)) in removed:
            found.append(left)  # `if "A" in providers: providers.remove("A")`; not `"A" not in providers`
    return found


def _text_sources(surface: PythonSurface, node: cst.BaseExpression, scope: Any) -> list[cst.BaseExpression]:
    """The node a test looks for, and for a name the literals it may hold: what it was
    assigned, or the items of the literal a loop over it ranges over
    (``any(s in str(err) for s in ["CUDA out of memory", ...])``)."""
    return [node, *surface.literal_values(node, scope)] if isinstance(node, cst.Name) else [node]
