"""LibCST-shaped trees built from CPython's ``ast``: the scan's fast parse.

LibCST keeps every token and every run of whitespace as a Python object, so its parse
is most of a scan's time and memory. The matcher reads none of that: it reads names,
values, the shape of expressions and statements, and where each node starts and ends.
:func:`parse_module` parses with CPython's own parser (several times faster, a fraction
of the memory) and builds, from its tree, nodes of LibCST's own classes with just those
fields, so the one matcher runs on either tree unchanged.

What a view node carries: every field LibCST's walk reads (:func:`portscan.match.syntax.
children`), with the values LibCST gives them (raw literal text, operators, ``lpar`` for
parenthesised expressions, statements grouped into lines, ``leading_lines`` of a
statement line); its children in source order (``_kids``); and its character offsets
(``_pos``), which :func:`portscan.match.locate.locate` reads instead of generating code.
Whitespace, commas and brackets are not there: a view is read, never rewritten or
printed (``portscan fix`` parses with LibCST, the parser of record for every rewrite).

Syntax the view does not build (``match`` statements, PEP 695 type parameters) raises
:class:`Unsupported`, and the caller parses with LibCST instead; ``tests/test_leancst.py``
compares both trees node by node.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import libcst as cst

_NEWLINE = re.compile(r"\r\n|\r|\n")


class Unsupported(Exception):
    """Syntax the view does not build; parse with LibCST."""


# --------------------------------------------------------------------------- node classes


def _view_class(base: type, **extra: Any) -> type:
    """A subclass of a LibCST node class that can be filled in field by field: the same
    ``isinstance`` answers, fields and properties (``evaluated_value``, ...), plus the
    node's children (``_kids``) and character offsets (``_pos``)."""
    return type(base.__name__, (base,), {
        "__slots__": ("_kids", "_pos", *extra.pop("slots", ())), "__setattr__": object.__setattr__,
        "__module__": __name__,
        "__doc__": f"A view of :class:`libcst.{base.__name__}` (see :mod:`portscan.leancst`).", **extra})


def _string_value(node: Any) -> str | bytes:
    """A string token's value: CPython's, where its parse had it (no ``literal_eval``)."""
    value = node._value
    return value if value is not None else cst.SimpleString.evaluated_value.fget(node)  # type: ignore[attr-defined]


_NODE_CLASSES = (
    "Name", "Attribute", "Call", "Arg", "Subscript", "SubscriptElement", "Index", "Slice", "Tuple", "List",
    "Set", "Dict", "DictElement", "StarredDictElement", "Element", "StarredElement", "ListComp", "SetComp",
    "DictComp", "GeneratorExp", "CompFor", "CompIf", "BooleanOperation", "BinaryOperation", "UnaryOperation",
    "Comparison", "ComparisonTarget", "IfExp", "Lambda", "NamedExpr", "Await", "Yield", "From", "SimpleString",
    "ConcatenatedString", "FormattedString", "FormattedStringText", "FormattedStringExpression", "Integer",
    "Float", "Imaginary", "Ellipsis", "Parameters", "Param", "ParamStar", "ParamSlash", "Annotation",
    "Decorator", "FunctionDef", "ClassDef", "Return", "Raise", "Assert", "Pass", "Break", "Continue", "Expr",
    "Global", "Nonlocal", "NameItem", "Del", "Assign", "AssignTarget", "AnnAssign", "AugAssign", "Import",
    "ImportFrom", "ImportAlias", "AsName", "ImportStar", "Dot", "If", "Else", "For", "While", "Try", "TryStar",
    "ExceptHandler", "ExceptStarHandler", "Finally", "With", "WithItem", "Asynchronous", "SimpleStatementLine",
    "SimpleStatementSuite", "IndentedBlock", "EmptyLine", "Comment", "LeftParen", "RightParen", "AssignEqual",
)
#: LibCST class name -> its view class
V: dict[str, type] = {name: _view_class(getattr(cst, name)) for name in _NODE_CLASSES}
V["SimpleString"] = _view_class(cst.SimpleString, slots=("_value",), evaluated_value=property(_string_value))
_NAME = V["Name"]


class Module(cst.Module):
    """The view of a whole module: its text, and nodes located by offsets into it."""

    __slots__ = ("_kids", "_pos", "_text")  # type: ignore[misc]
    __setattr__ = object.__setattr__  # type: ignore[assignment]

    @property
    def code(self) -> str:  # type: ignore[override]
        return self._text  # type: ignore[attr-defined, no-any-return]

    def code_for_node(self, node: cst.CSTNode) -> str:
        """The node's source as LibCST prints it: its own parentheses included."""
        start, end = node._pos  # type: ignore[attr-defined]
        text: str = self._text  # type: ignore[attr-defined]
        for _ in getattr(node, "lpar", ()):
            start = _skip_left(text, start) - 1
        for _ in getattr(node, "rpar", ()):
            end = _skip_right(text, end) + 1
        return text[start:end]


_new: Callable[[type], Any] = object.__new__  # a node of a view class, its fields unset


def _leaf(name: str) -> Any:
    """One shared node for a class without fields (operators, ``*``, ``pass``...)."""
    node = _new(V[name])
    node._kids = ()
    node._pos = None
    for field in ("lpar", "rpar"):
        if field in getattr(cst, name).__slots__:
            setattr(node, field, ())
    return node


_OPERATORS: dict[type, Any] = {
    ast.Add: "Add", ast.Sub: "Subtract", ast.Mult: "Multiply", ast.Div: "Divide", ast.FloorDiv: "FloorDivide",
    ast.Mod: "Modulo", ast.Pow: "Power", ast.LShift: "LeftShift", ast.RShift: "RightShift", ast.BitOr: "BitOr",
    ast.BitAnd: "BitAnd", ast.BitXor: "BitXor", ast.MatMult: "MatrixMultiply",
    ast.Eq: "Equal", ast.NotEq: "NotEqual", ast.Lt: "LessThan", ast.LtE: "LessThanEqual", ast.Gt: "GreaterThan",
    ast.GtE: "GreaterThanEqual", ast.Is: "Is", ast.IsNot: "IsNot", ast.In: "In", ast.NotIn: "NotIn",
    ast.And: "And", ast.Or: "Or", ast.Not: "Not", ast.USub: "Minus", ast.UAdd: "Plus", ast.Invert: "BitInvert",
}
for _name in set(_OPERATORS.values()) | {f"{n}Assign" for n in (
        "Add", "Subtract", "Multiply", "Divide", "FloorDivide", "Modulo", "Power", "LeftShift", "RightShift",
        "BitOr", "BitAnd", "BitXor", "MatrixMultiply")}:
    V[_name] = _view_class(getattr(cst, _name))

#: every view class (``children()`` reads the ``_kids`` of these)
VIEW_CLASSES = frozenset({*V.values(), Module})
_OP = {kind: _leaf(name) for kind, name in _OPERATORS.items()}
_AUG = {kind: _leaf(f"{name}Assign") for kind, name in _OPERATORS.items()
        if isinstance(kind, type) and issubclass(kind, ast.operator)}
_LPAR, _RPAR = _leaf("LeftParen"), _leaf("RightParen")
_ASYNC, _STAR, _DOT, _PARAM_STAR, _SLASH = (_leaf(n) for n in ("Asynchronous", "ImportStar", "Dot", "ParamStar",
                                                               "ParamSlash"))
_ASSIGN_EQUAL = _leaf("AssignEqual")
_SIMPLE = {ast.Pass: "Pass", ast.Break: "Break", ast.Continue: "Continue"}
_CONVERSIONS = {115: "s", 114: "r", 97: "a"}


# --------------------------------------------------------------------------- children of any node


#: fields that hold only whitespace, comments, brackets and punctuation
_TRIVIA_FIELDS = frozenset({"lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators",
                            "header", "footer", "newline", "trailing_whitespace", "dot", "equal", "colon",
                            "lbracket", "rbracket", "lbrace", "rbrace"})


#: where a node's fields are not declared in source order, the order LibCST visits them
_SOURCE_ORDER = {
    "Arg": ("star", "keyword", "value"),
    "Parameters": ("posonly_params", "posonly_ind", "params", "star_arg", "kwonly_params", "star_kwarg"),
    "IfExp": ("body", "test", "orelse"),
    "ExceptHandler": ("type", "name", "body"),
    "ExceptStarHandler": ("type", "name", "body"),
    "FunctionDef": ("decorators", "asynchronous", "name", "type_parameters", "params", "returns", "body"),
    "ClassDef": ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    "MatchCase": ("pattern", "guard", "body"),
    "TypeAlias": ("name", "type_parameters", "value"),
}


@functools.cache
def _child_fields(cls: type) -> tuple[str, ...]:
    names = [f.name for f in dataclasses.fields(cls)
             if f.name not in _TRIVIA_FIELDS and not f.name.startswith("whitespace")]
    order = _SOURCE_ORDER.get(cls.__name__)
    return tuple(sorted(names, key=order.index) if order else names)


def children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """A node's children that carry code, in source order: no whitespace, comments or
    punctuation; a view node holds its own, a LibCST node's are read off its fields (much
    cheaper than LibCST's ``node.children``, which rebuilds the node)."""
    if type(node) in VIEW_CLASSES:
        return node._kids  # type: ignore[attr-defined, no-any-return]
    found: list[cst.CSTNode] = []
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            found.append(value)
        elif type(value) is tuple or type(value) is list:
            found += [item for item in value if isinstance(item, cst.CSTNode)]
    return found


# --------------------------------------------------------------------------- text helpers


def _skip_left(text: str, index: int) -> int:
    """The index just after the nearest code character before ``index``: blanks, line
    continuations and a comment ending the line above are skipped."""
    while index > 0:
        char = text[index - 1]
        if char in " \t\f":
            index -= 1
        elif char in "\r\n":
            index -= 1
            line_start = max(text.rfind("\n", 0, index), text.rfind("\r", 0, index)) + 1
            comment = _comment_start(text[line_start:index])
            if comment is not None:
                index = line_start + comment
        elif char == "\\" and index < len(text) and text[index] in "\r\n":
            index -= 1
        else:
            break
    return index


def _comment_start(line: str) -> int | None:
    """Where a comment starts in a line of code (a ``#`` outside the line's strings)."""
    position = line.find("#")
    while position != -1:
        before = line[:position]
        if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
            return position
        position = line.find("#", position + 1)
    return None


def _skip_right(text: str, index: int) -> int:
    """The index of the nearest code character at or after ``index``: blanks, line
    continuations and comments are skipped (after an expression, ``#`` starts one)."""
    end = len(text)
    while index < end:
        char = text[index]
        if char in " \t\f\r\n" or char == "\\" and index + 1 < end and text[index + 1] in "\r\n":
            index += 1
        elif char == "#":
            found = _LINE_END.search(text, index)
            index = found.start() if found is not None else end
        else:
            break
    return index


_LINE_END = re.compile(r"[\r\n]")


def _wrapping(text: str, start: int, end: int) -> int:
    """How many parenthesis pairs enclose ``text[start:end]`` with nothing else between
    (most nodes are neither followed by ``)`` nor preceded by ``(``: one look each)."""
    count = 0
    size = len(text)
    while True:
        right = end
        while right < size and text[right] in " \t":
            right += 1
        if right >= size:
            return count
        if text[right] != ")":
            if text[right] not in "\r\n\\\f#":
                return count
            right = _skip_right(text, end)
            if right >= size or text[right] != ")":
                return count
        left = start
        while left > 0 and text[left - 1] in " \t":
            left -= 1
        if left == 0:
            return count
        if text[left - 1] != "(":
            if text[left - 1] not in "\r\n\\\f":
                return count
            left = _skip_left(text, start)
            if left == 0 or text[left - 1] != "(":
                return count
        count += 1
        start, end = left - 1, right + 1


def _word(text: str, value: str, index: int) -> int:
    """Where ``value`` next stands as a whole word at or after ``index`` (-1: nowhere)."""
    while True:
        found = text.find(value, index)
        if found == -1:
            return -1
        after = found + len(value)
        if (found == 0 or not (text[found - 1].isalnum() or text[found - 1] == "_")) and (
                after >= len(text) or not (text[after].isalnum() or text[after] == "_")):
            return found
        index = found + 1


#: one string literal token: an optional prefix, then quotes (f-strings are scanned apart)
_STRING_BODY = {
    "'''": re.compile(r"(?:[^'\\]|\\.|'(?!''))*'''", re.S),
    '"""': re.compile(r'(?:[^"\\]|\\.|"(?!""))*"""', re.S),
    "'": re.compile(r"(?:[^'\\\r\n]|\\.|\\\r\n)*'", re.S),
    '"': re.compile(r'(?:[^"\\\r\n]|\\.|\\\r\n)*"', re.S),
}
_PREFIX = re.compile(r"[A-Za-z]{0,2}")
_GAP = re.compile(r"(?:[ \t\f\r\n]|\\\r?\n|\\\r|#[^\r\n]*)*")
_FSTRING_STOP = re.compile(r"[{}\\]")


def _past(pattern: re.Pattern[str], text: str, index: int) -> int:
    """The index just past what ``pattern`` (which may match nothing) matches at ``index``."""
    found = pattern.match(text, index)
    return found.end() if found is not None else index


def _quote_at(text: str, index: int) -> str:
    three = text[index:index + 3]
    return three if three in ("'''", '"""') else text[index]


# --------------------------------------------------------------------------- the builder


class _Builder:
    """Builds the view of one parsed module (or of an f-string placeholder, whose
    offsets are shifted by ``delta`` into the module's text)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.size = len(text)
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
        self.ascii = text.isascii()
        self._encoded: dict[int, bytes] = {}

    # -- offsets -----------------------------------------------------------------

    def at(self, line: int, column: int) -> int:
        """The character offset of CPython's (line, UTF-8 column)."""
        start = self.starts[line - 1]
        if self.ascii:
            return start + column
        encoded = self._encoded.get(line)
        if encoded is None:
            end = self.starts[line] if line < len(self.starts) else len(self.text)
            encoded = self._encoded[line] = self.text[start:end].encode("utf-8", "surrogatepass")
        return start + len(encoded[:column].decode("utf-8", "surrogatepass"))

    def span(self, node: Any) -> tuple[int, int]:
        if self.ascii:
            starts = self.starts
            return starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset
        return self.at(node.lineno, node.col_offset), self.at(node.end_lineno, node.end_col_offset)

    # -- expressions --------------------------------------------------------------

    def e(self, node: Any, owned: int = 0) -> Any:
        """The view of an expression, with its own parentheses (``owned``: how many of
        those enclosing it belong to the parent, as a sole call argument's do)."""
        build = _EXPRESSIONS.get(type(node))
        if build is None:
            raise Unsupported(type(node).__name__)
        view = build(self, node)
        start, end = view._pos
        text = self.text
        if end < self.size and text[end] not in _MAY_CLOSE:
            return view  # neither ``)`` nor a blank follows: no parentheses (most nodes)
        count = _wrapping(text, start, end) - owned
        if count > 0:
            view.lpar = (_LPAR,) * count
            view.rpar = (_RPAR,) * count
        return view

    def opt(self, node: Any) -> Any:
        return None if node is None else self.e(node)

    def _name(self, node: ast.Name) -> Any:
        view = _new(_NAME)
        view.value = node.id
        view.lpar = view.rpar = view._kids = ()
        view._pos = self.span(node)
        return view

    def name_at(self, value: str, start: int) -> Any:
        """A ``Name`` written at a module offset (a keyword, a def's name, an alias)."""
        view = _new(_NAME)
        view.value = value
        view.lpar = view.rpar = view._kids = ()
        view._pos = (start, start + len(value))
        return view

    def find_name(self, value: str, after: int) -> Any:
        """The ``Name`` ``value`` at its first whole-word occurrence at or after an offset."""
        found = _word(self.text, value, after)
        return self.name_at(value, found if found != -1 else after)

    def _attribute(self, node: ast.Attribute) -> Any:
        view = _new(V["Attribute"])
        value = self.e(node.value)
        start, end = self.span(node)
        attr = self.name_at(node.attr, end - len(node.attr))
        view.value, view.attr = value, attr
        view.lpar = view.rpar = ()
        view._kids = (value, attr)
        view._pos = (start, end)
        return view

    def _call(self, node: ast.Call) -> Any:
        view = _new(V["Call"])
        func = self.e(node.func)
        args = self.arguments([*node.args, *node.keywords], self._outer_end(func))
        view.func, view.args = func, args
        view.lpar = view.rpar = ()
        view._kids = (func, *args)
        view._pos = self.span(node)
        return view

    def arguments(self, items: list[Any], after: int) -> list[Any]:
        """The ``Arg`` s of a call (or class bases) in the order written; ``after``: where
        the callee ends, so the call's own parenthesis is told from an argument's."""
        if len(items) > 1 and any(isinstance(i, ast.keyword) for i in items):
            items.sort(key=_position)  # f(key=1, *rest): LibCST keeps the order as written
        args = [self.arg(item) for item in items]
        if len(args) == 1 and args[0].star == "" and args[0].keyword is None:
            value = args[0].value  # f(x): the call's parentheses enclose x too
            if value.lpar and self._outer_start(value) == _skip_right(self.text, after):
                value.lpar, value.rpar = value.lpar[1:], value.rpar[1:]
                args[0]._pos = (self._outer_start(value), self._outer_end(value))
        return args

    def arg(self, item: Any) -> Any:
        view = _new(V["Arg"])
        keyword = None
        if isinstance(item, ast.keyword):
            start = self.at(item.lineno, item.col_offset)
            view.star = "**" if item.arg is None else ""
            if item.arg is not None:
                keyword = self.name_at(item.arg, start)
            value = self.e(item.value)
        elif isinstance(item, ast.Starred):
            view.star = "*"
            start = self.at(item.lineno, item.col_offset)
            value = self.e(item.value)
        else:
            view.star = ""
            value = self.e(item)
            start = self._outer_start(value) if value.lpar else value._pos[0]
        view.value, view.keyword = value, keyword
        view._kids = (value,) if keyword is None else (keyword, value)
        view._pos = (start, self._outer_end(value) if value.lpar else value._pos[1])
        return view

    def _constant(self, node: ast.Constant) -> Any:
        value = node.value
        if isinstance(value, (str, bytes)):
            return self._string(node)
        if value is None or value is True or value is False:
            view = _new(V["Name"])
            view.value = str(value)
            view._kids = ()
        elif value is ...:
            view = _new(V["Ellipsis"])
            view._kids = ()
        else:
            kind = "Integer" if isinstance(value, int) else "Float" if isinstance(value, float) else "Imaginary"
            view = _new(V[kind])
            start, end = self.span(node)
            view.value = self.text[start:end]
            view._kids = ()
        view.lpar = view.rpar = ()
        view._pos = self.span(node)
        return view

    def _subscript(self, node: ast.Subscript) -> Any:
        view = _new(V["Subscript"])
        value = self.e(node.value)
        inner = node.slice
        if isinstance(inner, ast.Tuple) and inner.elts:
            whole = self.e(inner)
            if whole.lpar:  # x[(a, b)]: one element, a tuple
                elements = [self.subscript_element(inner, whole)]
            else:  # x[a, b:c]
                elements = [self.subscript_element(item, element.value)
                            for item, element in zip(inner.elts, whole.elements, strict=True)]
        else:
            elements = [self.subscript_element(inner)]
        view.value, view.slice = value, elements
        view.lpar = view.rpar = ()
        view._kids = (value, *elements)
        view._pos = self.span(node)
        return view

    def subscript_element(self, node: Any, built: Any = None) -> Any:
        """An element of a subscript (``built``: the view of ``node``, made already)."""
        element = _new(V["SubscriptElement"])
        if isinstance(node, ast.Starred):
            raise Unsupported("starred subscript")
        if isinstance(node, ast.Slice):
            inner = built or self._slice(node)
        else:
            inner = _new(V["Index"])
            value = built or self.e(node)
            inner.value, inner.star = value, None
            inner._kids = (value,)
            inner._pos = value._pos
        element.slice = inner
        element._kids = (inner,)
        element._pos = inner._pos
        return element

    def _slice(self, node: ast.Slice) -> Any:
        view = _new(V["Slice"])
        lower, upper, step = self.opt(node.lower), self.opt(node.upper), self.opt(node.step)
        view.lower, view.upper, view.step = lower, upper, step
        view._kids = tuple(k for k in (lower, upper, step) if k is not None)
        view._pos = self.span(node)
        return view

    def elements(self, items: Sequence[Any]) -> list[Any]:
        found = []
        for item in items:
            if isinstance(item, ast.Starred):
                element = _new(V["StarredElement"])
                element.lpar = element.rpar = ()
            else:
                element = _new(V["Element"])
            value = self.e(item.value if isinstance(item, ast.Starred) else item)
            element.value = value
            element._kids = (value,)
            element._pos = self.span(item) if isinstance(item, ast.Starred) else value._pos
            found.append(element)
        return found

    def _tuple(self, node: ast.Tuple) -> Any:
        view = _new(V["Tuple"])
        start, end = self.span(node)
        elements = self.elements(node.elts)
        # LibCST: a tuple's own parentheses are its lpar/rpar, outside its range; the
        # parse's range holds them, or its first element's (``(a), b``)
        if self.text[start] == "(" and not (
                elements and self._outer_start(elements[0].value) == start):
            start = _skip_right(self.text, start + 1)
            end = _skip_left(self.text, end - 1) if elements else start
        view.elements = elements
        view.lpar = view.rpar = ()
        view._kids = tuple(elements)
        view._pos = (start, end)
        return view

    def _list(self, node: ast.List) -> Any:
        view = _new(V["List"])
        elements = self.elements(node.elts)
        view.elements = elements
        view.lpar = view.rpar = ()
        view._kids = tuple(elements)
        view._pos = self.span(node)
        return view

    def _set(self, node: ast.Set) -> Any:
        view = _new(V["Set"])
        elements = self.elements(node.elts)
        view.elements = elements
        view.lpar = view.rpar = ()
        view._kids = tuple(elements)
        view._pos = self.span(node)
        return view

    def _dict(self, node: ast.Dict) -> Any:
        view = _new(V["Dict"])
        elements = []
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                element = _new(V["StarredDictElement"])
                item = self.e(value)
                element.value = item
                element._kids = (item,)
                element._pos = item._pos
            else:
                element = _new(V["DictElement"])
                k, v = self.e(key), self.e(value)
                element.key, element.value = k, v
                element._kids = (k, v)
                element._pos = (k._pos[0], v._pos[1])
            elements.append(element)
        view.elements = elements
        view.lpar = view.rpar = ()
        view._kids = tuple(elements)
        view._pos = self.span(node)
        return view

    def _boolop(self, node: ast.BoolOp) -> Any:
        values = [self.e(v) for v in node.values]
        operator = _OP[type(node.op)]
        left = values[0]
        for right in values[1:]:  # a and b and c: ((a and b) and c), as LibCST nests it
            view = _new(V["BooleanOperation"])
            view.left, view.operator, view.right = left, operator, right
            view.lpar = view.rpar = ()
            view._kids = (left, operator, right)
            view._pos = (self._outer_start(left), self._outer_end(right))
            left = view
        return left

    def _outer_start(self, view: Any) -> int:
        start = view._pos[0]
        for _ in view.lpar:
            start = _skip_left(self.text, start) - 1
        return start

    def _outer_end(self, view: Any) -> int:
        end = view._pos[1]
        for _ in view.rpar:
            end = _skip_right(self.text, end) + 1
        return end

    def _binop(self, node: ast.BinOp) -> Any:
        view = _new(V["BinaryOperation"])
        left, right = self.e(node.left), self.e(node.right)
        operator = _OP[type(node.op)]
        view.left, view.operator, view.right = left, operator, right
        view.lpar = view.rpar = ()
        view._kids = (left, operator, right)
        view._pos = self.span(node)
        return view

    def _unaryop(self, node: ast.UnaryOp) -> Any:
        view = _new(V["UnaryOperation"])
        operator, expression = _OP[type(node.op)], self.e(node.operand)
        view.operator, view.expression = operator, expression
        view.lpar = view.rpar = ()
        view._kids = (operator, expression)
        view._pos = self.span(node)
        return view

    def _compare(self, node: ast.Compare) -> Any:
        view = _new(V["Comparison"])
        left = self.e(node.left)
        targets = []
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            target = _new(V["ComparisonTarget"])
            operator, value = _OP[type(op)], self.e(comparator)
            target.operator, target.comparator = operator, value
            target._kids = (operator, value)
            target._pos = value._pos
            targets.append(target)
        view.left, view.comparisons = left, targets
        view.lpar = view.rpar = ()
        view._kids = (left, *targets)
        view._pos = self.span(node)
        return view

    def _ifexp(self, node: ast.IfExp) -> Any:
        view = _new(V["IfExp"])
        body, test, orelse = self.e(node.body), self.e(node.test), self.e(node.orelse)
        view.test, view.body, view.orelse = test, body, orelse
        view.lpar = view.rpar = ()
        view._kids = (body, test, orelse)
        view._pos = self.span(node)
        return view

    def _lambda(self, node: ast.Lambda) -> Any:
        view = _new(V["Lambda"])
        params, body = self.parameters(node.args), self.e(node.body)
        view.params, view.body = params, body
        view.lpar = view.rpar = ()
        view._kids = (params, body)
        view._pos = self.span(node)
        return view

    def _namedexpr(self, node: ast.NamedExpr) -> Any:
        view = _new(V["NamedExpr"])
        target, value = self.e(node.target), self.e(node.value)
        view.target, view.value = target, value
        view.lpar = view.rpar = ()
        view._kids = (target, value)
        view._pos = self.span(node)
        return view

    def _await(self, node: ast.Await) -> Any:
        view = _new(V["Await"])
        expression = self.e(node.value)
        view.expression = expression
        view.lpar = view.rpar = ()
        view._kids = (expression,)
        view._pos = self.span(node)
        return view

    def _yield(self, node: ast.Yield | ast.YieldFrom) -> Any:
        view = _new(V["Yield"])
        value = self.opt(node.value)
        if isinstance(node, ast.YieldFrom):
            wrapper = _new(V["From"])
            wrapper.item = value
            wrapper._kids = (value,)
            wrapper._pos = value._pos
            value = wrapper
        view.value = value
        view.lpar = view.rpar = ()
        view._kids = () if value is None else (value,)
        view._pos = self.span(node)
        return view

    def _comp(self, node: Any) -> Any:
        kind = {ast.ListComp: "ListComp", ast.SetComp: "SetComp", ast.GeneratorExp: "GeneratorExp",
                ast.DictComp: "DictComp"}[type(node)]
        view = _new(V[kind])
        start, end = self.span(node)
        if isinstance(node, ast.DictComp):
            key, value = self.e(node.key), self.e(node.value)
            view.key, view.value = key, value
            results: tuple[Any, ...] = (key, value)
        else:
            elt = self.e(node.elt)
            view.elt = elt
            results = (elt,)
        for_in = None
        for generator in reversed(node.generators):
            comp = _new(V["CompFor"])
            target, iterable = self.e(generator.target), self.e(generator.iter)
            ifs = []
            for test in generator.ifs:
                compif = _new(V["CompIf"])
                value = self.e(test)
                compif.test = value
                compif._kids = (value,)
                compif._pos = value._pos
                ifs.append(compif)
            comp.target, comp.iter, comp.ifs, comp.inner_for_in = target, iterable, ifs, for_in
            comp.asynchronous = _ASYNC if generator.is_async else None
            comp._kids = tuple(k for k in (target, iterable, *ifs, for_in, comp.asynchronous) if k is not None)
            comp._pos = (target._pos[0], (for_in or (ifs[-1] if ifs else iterable))._pos[1])
            for_in = comp
        view.for_in = for_in
        view.lpar = view.rpar = ()
        view._kids = (*results, for_in)
        if kind == "GeneratorExp":  # its parentheses (or its call's) are outside LibCST's range
            start = _skip_right(self.text, start + 1)
            end = _skip_left(self.text, end - 1)
        view._pos = (start, end)
        return view

    def _starred(self, node: ast.Starred) -> Any:
        view = _new(V["StarredElement"])
        value = self.e(node.value)
        view.value = value
        view.lpar = view.rpar = ()
        view._kids = (value,)
        view._pos = self.span(node)
        return view

    # -- strings -------------------------------------------------------------------

    def _string(self, node: ast.Constant | ast.JoinedStr) -> Any:
        """A string literal as LibCST has it: one token a ``SimpleString`` or a
        ``FormattedString``, implicit concatenation a right-nested ``ConcatenatedString``."""
        start, end = self.span(node)
        text, first, last = self.text, start, end
        tokens: list[Any] = []
        index = first
        while index < last:
            tokens.append(self._token(index))
            index = _past(_GAP, text, tokens[-1]._pos[1])
        if len(tokens) == 1 and isinstance(node, ast.Constant):
            tokens[0]._value = node.value  # the token is the whole literal
        view = tokens[-1]
        for left in reversed(tokens[:-1]):
            joined = _new(V["ConcatenatedString"])
            joined.left, joined.right = left, view
            joined.lpar = joined.rpar = ()
            joined._kids = (left, view)
            joined._pos = (left._pos[0], view._pos[1])
            view = joined
        return view

    def _token(self, index: int) -> Any:
        """The string literal token at ``index`` of this builder's text."""
        text = self.text
        prefix = text[index:_past(_PREFIX, text, index)]
        quote = _quote_at(text, index + len(prefix))
        body = index + len(prefix) + len(quote)
        if "f" in prefix.lower():
            return self._fstring(index, prefix, quote, body)
        match = _STRING_BODY[quote].match(text, body)
        if match is None:
            raise Unsupported("string literal")
        view = _new(V["SimpleString"])
        view.value = text[index:match.end()]
        view._value = None
        view.lpar = view.rpar = ()
        view._kids = ()
        view._pos = (index, match.end())
        return view

    def _fstring(self, index: int, prefix: str, quote: str, body: int) -> Any:
        view = _new(V["FormattedString"])
        parts, end = self._fparts(body, quote, "r" in prefix.lower())
        view.parts, view.start, view.end = parts, prefix + quote, quote
        view.lpar = view.rpar = ()
        view._kids = tuple(parts)
        view._pos = (index, end + len(quote))
        return view

    def _fparts(self, index: int, stop: str, raw: bool) -> tuple[list[Any], int]:
        """The parts of an f-string (or a format spec, ``stop == "}"``) from ``index`` up
        to ``stop``; returns them and the index of ``stop``."""
        text = self.text
        parts: list[Any] = []
        literal = index
        while True:
            if stop != "}" and text.startswith(stop, index):
                break
            if index >= len(text):
                raise Unsupported("unterminated f-string")
            char = text[index]
            if char == "{" and text.startswith("{{", index) and stop != "}":
                index += 2
            elif char == "{":
                if index > literal:
                    parts.append(self._ftext(literal, index))
                part, index = self._fexpression(index + 1, raw)
                parts.append(part)
                literal = index
            elif char == "}":
                if stop == "}":
                    break
                index += 2  # }}
            elif char == "\\" and not raw and text.startswith("N{", index + 1):
                index = text.index("}", index) + 1  # \N{NAME}: a character, no placeholder
            elif char == "\\":  # escapes a quote even in a raw string, never a brace
                index += 1 if text[index + 1:index + 2] in ("{", "}") else 2
            elif char in "'\"" and stop == "}":
                index += 1  # a quote in a format spec is text
            else:
                found = _FSTRING_STOP.search(text, index + 1)
                nxt = found.start() if found is not None else len(text)
                quote_at = text.find(stop, index + 1) if stop != "}" else -1
                index = min(nxt, quote_at) if quote_at != -1 else nxt
        if index > literal:
            parts.append(self._ftext(literal, index))
        return parts, index

    def _ftext(self, start: int, end: int) -> Any:
        view = _new(V["FormattedStringText"])
        view.value = self.text[start:end]
        view._kids = ()
        view._pos = (start, end)
        return view

    def _fexpression(self, index: int, raw: bool) -> tuple[Any, int]:
        """A placeholder from just after its ``{``; returns it and the index after its ``}``."""
        text = self.text
        start = index
        depth = 0
        while True:
            if index >= len(text):
                raise Unsupported("unterminated f-string placeholder")
            char = text[index]
            if char in "'\"":
                quote = _quote_at(text, index)
                match = _STRING_BODY[quote].match(text, index + len(quote))
                if match is None:
                    raise Unsupported("string in an f-string placeholder")
                index = match.end()
                continue
            if char in "([{":
                depth += 1
            elif char in ")]" or (char == "}" and depth):
                depth -= 1
            elif depth == 0 and (char in "}:" or (char == "!" and text[index + 1:index + 2] != "=")):
                break
            elif depth == 0 and char == "=" and text[index + 1:index + 2] != "=" and text[index - 1] not in "=!<>":
                rest = _skip_right(text, index + 1)
                if rest < len(text) and text[rest] in "}!:":
                    break
            index += 1
        expression_end = index
        equal = None
        if text[index] == "=":
            equal = _ASSIGN_EQUAL
            index = _skip_right(text, index + 1)
        conversion = None
        if text[index] == "!":
            conversion = text[index + 1]
            index = _skip_right(text, index + 2)
        format_spec = None
        if text[index] == ":":
            format_spec, index = self._fparts(index + 1, "}", raw)
        if text[index] != "}":
            raise Unsupported("f-string placeholder")
        view = _new(V["FormattedStringExpression"])
        expression = self._placeholder(start, expression_end)
        view.expression, view.conversion, view.format_spec, view.equal = expression, conversion, format_spec, equal
        view._kids = (expression, *(format_spec or ()))
        view._pos = (start - 1, index + 1)
        return view, index + 1

    def _placeholder(self, start: int, end: int) -> Any:
        """An f-string placeholder's expression, parsed from its own text (CPython before
        3.12 locates these only roughly)."""
        source = "(" + self.text[start:end] + ")"
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError:
            raise Unsupported("f-string placeholder") from None
        view = _Builder(source).e(tree.body, owned=1)
        stack = [view]
        while stack:  # from the placeholder's own text to this one's
            node = stack.pop()
            if node._pos is not None:
                node._pos = (node._pos[0] + start - 1, node._pos[1] + start - 1)
            stack += node._kids
        return view

    # -- parameters --------------------------------------------------------------------

    def parameters(self, args: ast.arguments) -> Any:
        view = _new(V["Parameters"])
        positional = [*args.posonlyargs, *args.args]
        defaults: list[Any] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        made = [self.param(a, d) for a, d in zip(positional, defaults, strict=True)]
        posonly, params = made[:len(args.posonlyargs)], made[len(args.posonlyargs):]
        kwonly = [self.param(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
        star_arg: Any = self.param(args.vararg, None, "*") if args.vararg is not None else (
            _PARAM_STAR if args.kwonlyargs else cst.MaybeSentinel.DEFAULT)
        star_kwarg = self.param(args.kwarg, None, "**") if args.kwarg is not None else None
        posonly_ind: Any = _SLASH if posonly else cst.MaybeSentinel.DEFAULT
        view.posonly_params, view.params, view.kwonly_params = posonly, params, kwonly
        view.star_arg, view.star_kwarg, view.posonly_ind = star_arg, star_kwarg, posonly_ind
        view._kids = tuple(k for k in (*posonly, posonly_ind, *params, star_arg, *kwonly, star_kwarg)
                           if isinstance(k, cst.CSTNode))
        everything = [k for k in view._kids if k._pos is not None]
        view._pos = (everything[0]._pos[0], everything[-1]._pos[1]) if everything else None
        return view

    def param(self, arg: ast.arg, default: Any, star: str = "") -> Any:
        view = _new(V["Param"])
        start, end = self.span(arg)
        name = self.name_at(arg.arg, start)
        annotation = self.annotation(arg.annotation)
        value = self.opt(default)
        view.name, view.annotation, view.default = name, annotation, value
        view.star = star if star else cst.MaybeSentinel.DEFAULT
        view._kids = tuple(k for k in (name, annotation, value) if k is not None)
        view._pos = (start, value._pos[1] if value is not None else end)
        return view

    def annotation(self, node: Any) -> Any:
        if node is None:
            return None
        view = _new(V["Annotation"])
        value = self.e(node)
        view.annotation = value
        view._kids = (value,)
        view._pos = value._pos
        return view

    # -- statements ------------------------------------------------------------------

    def block(self, statements: Sequence[Any]) -> Any:
        """A compound statement's body: an ``IndentedBlock``, or a ``SimpleStatementSuite``
        when it sits on the header's line (``if x: return``)."""
        first = statements[0]
        start = self.at(first.lineno, first.col_offset)
        line_start = self.starts[first.lineno - 1]
        if self.text[line_start:start].strip():
            view = _new(V["SimpleStatementSuite"])
            body = [self.small(s) for s in statements]
        else:
            view = _new(V["IndentedBlock"])
            body = self.body(statements)
        view.body = body
        view._kids = tuple(body)
        view._pos = (body[0]._pos[0], body[-1]._pos[1])
        return view

    def body(self, statements: Sequence[Any]) -> list[Any]:
        """Statements as LibCST groups them: small statements on one line (``a = 1; b = 2``)
        in a ``SimpleStatementLine``, compound statements on their own."""
        found: list[Any] = []
        line: list[Any] = []
        #: the last line of the previous statement line (0: none, or a compound statement,
        #: whose trailing comments LibCST may count to its block)
        previous_end = 0
        for statement in statements:
            if line and type(statement) not in _COMPOUND and statement.lineno == line[-1].end_lineno:
                line.append(statement)  # a = 1; b = 2
                continue
            if line:
                found.append(self.line(line, previous_end))
                previous_end = line[-1].end_lineno
                line = []
            if type(statement) in _COMPOUND:
                found.append(self.compound(statement))
                previous_end = 0
            else:
                line = [statement]
        if line:
            found.append(self.line(line, previous_end))
        return found

    def line(self, statements: list[Any], previous_end: int) -> Any:
        view = _new(V["SimpleStatementLine"])
        body = [self.small(s) for s in statements]
        view.body = body
        view.leading_lines = self.leading_lines(previous_end, statements[0].lineno) if previous_end else ()
        view._kids = tuple(body)
        view._pos = (body[0]._pos[0], body[-1]._pos[1])
        return view

    def leading_lines(self, previous_end: int, line: int) -> tuple[Any, ...]:
        """The blank and comment lines between two statements of a block."""
        found = []
        for number in range(previous_end + 1, line):
            start = self.starts[number - 1]
            end = self.starts[number] if number < len(self.starts) else len(self.text)
            content = self.text[start:end].strip()
            empty = _new(V["EmptyLine"])
            comment = None
            if content.startswith("#"):
                comment = _new(V["Comment"])
                comment.value = content
                comment._kids = ()
                comment._pos = None
            empty.comment = comment
            empty._kids = () if comment is None else (comment,)
            empty._pos = None
            found.append(empty)
        return tuple(found)

    def small(self, statement: Any) -> Any:
        build = _STATEMENTS.get(type(statement))
        if build is None:
            raise Unsupported(type(statement).__name__)
        view = build(self, statement)
        if view._pos is None:
            view._pos = self.span(statement)
        return view

    compound = small

    def _simple(self, node: Any) -> Any:
        view = _new(V[_SIMPLE[type(node)]])
        view._kids = ()
        view._pos = self.span(node)
        return view

    def _expr_statement(self, node: ast.Expr) -> Any:
        view = _new(V["Expr"])
        value = self.e(node.value)
        view.value = value
        view._kids = (value,)
        view._pos = self.span(node)
        return view

    def _assign(self, node: ast.Assign) -> Any:
        view = _new(V["Assign"])
        targets = []
        for target in node.targets:
            wrapper = _new(V["AssignTarget"])
            value = self.e(target)
            wrapper.target = value
            wrapper._kids = (value,)
            wrapper._pos = value._pos
            targets.append(wrapper)
        value = self.e(node.value)
        view.targets, view.value = targets, value
        view._kids = (*targets, value)
        view._pos = self.span(node)
        return view

    def _augassign(self, node: ast.AugAssign) -> Any:
        view = _new(V["AugAssign"])
        target, operator, value = self.e(node.target), _AUG[type(node.op)], self.e(node.value)
        view.target, view.operator, view.value = target, operator, value
        view._kids = (target, operator, value)
        view._pos = self.span(node)
        return view

    def _annassign(self, node: ast.AnnAssign) -> Any:
        view = _new(V["AnnAssign"])
        target, annotation, value = self.e(node.target), self.annotation(node.annotation), self.opt(node.value)
        view.target, view.annotation, view.value = target, annotation, value
        view._kids = tuple(k for k in (target, annotation, value) if k is not None)
        view._pos = self.span(node)
        return view

    def _return(self, node: ast.Return) -> Any:
        view = _new(V["Return"])
        value = self.opt(node.value)
        view.value = value
        view._kids = () if value is None else (value,)
        view._pos = self.span(node)
        return view

    def _raise(self, node: ast.Raise) -> Any:
        view = _new(V["Raise"])
        exc = self.opt(node.exc)
        cause = None
        if node.cause is not None:
            cause = _new(V["From"])
            item = self.e(node.cause)
            cause.item = item
            cause._kids = (item,)
            cause._pos = item._pos
        view.exc, view.cause = exc, cause
        view._kids = tuple(k for k in (exc, cause) if k is not None)
        view._pos = self.span(node)
        return view

    def _assert(self, node: ast.Assert) -> Any:
        view = _new(V["Assert"])
        test, msg = self.e(node.test), self.opt(node.msg)
        view.test, view.msg = test, msg
        view._kids = (test,) if msg is None else (test, msg)
        view._pos = self.span(node)
        return view

    def _global(self, node: ast.Global | ast.Nonlocal) -> Any:
        view = _new(V["Global" if isinstance(node, ast.Global) else "Nonlocal"])
        start = self.at(node.lineno, node.col_offset) + (6 if isinstance(node, ast.Global) else 8)
        items = []
        for name in node.names:
            item = _new(V["NameItem"])
            found = self.find_name(name, start)
            start = found._pos[1]
            item.name = found
            item._kids = (found,)
            item._pos = found._pos
            items.append(item)
        view.names = items
        view._kids = tuple(items)
        view._pos = self.span(node)
        return view

    def _delete(self, node: ast.Delete) -> Any:
        view = _new(V["Del"])
        if len(node.targets) == 1:
            target = self.e(node.targets[0])
        else:
            target = _new(V["Tuple"])
            elements = self.elements(node.targets)
            target.elements = elements
            target.lpar = target.rpar = ()
            target._kids = tuple(elements)
            target._pos = (elements[0]._pos[0], elements[-1]._pos[1])
        view.target = target
        view._kids = (target,)
        view._pos = self.span(node)
        return view

    def dotted_at(self, dotted: str, start: int) -> Any:
        """A dotted module name written from a module offset, as LibCST has it: a ``Name``
        or nested ``Attribute`` s."""
        parts = dotted.split(".")
        node = self.find_name(parts[0], start)
        first = node._pos[0]
        for part in parts[1:]:
            attr = self.find_name(part, node._pos[1])
            view = _new(V["Attribute"])
            view.value, view.attr = node, attr
            view.lpar = view.rpar = ()
            view._kids = (node, attr)
            view._pos = (first, attr._pos[1])
            node = view
        return node

    def alias(self, alias: ast.alias, start: int) -> Any:
        view = _new(V["ImportAlias"])
        if hasattr(alias, "lineno"):
            start = self.at(alias.lineno, alias.col_offset)
        name = self.dotted_at(alias.name, start)
        asname = None
        if alias.asname is not None:
            asname = _new(V["AsName"])
            found = self.find_name(alias.asname, _as_keyword(self.text, name._pos[1]))
            asname.name = found
            asname._kids = (found,)
            asname._pos = found._pos
        view.name, view.asname = name, asname
        view._kids = (name,) if asname is None else (name, asname)
        view._pos = (name._pos[0], (asname or name)._pos[1])
        return view

    def _import(self, node: ast.Import) -> Any:
        view = _new(V["Import"])
        start = self.at(node.lineno, node.col_offset) + 6
        names = []
        for alias in node.names:
            names.append(self.alias(alias, start))
            start = names[-1]._pos[1]
        view.names = names
        view._kids = tuple(names)
        view._pos = self.span(node)
        return view

    def _importfrom(self, node: ast.ImportFrom) -> Any:
        view = _new(V["ImportFrom"])
        start = self.at(node.lineno, node.col_offset)
        index = _past(_DOTS, self.text, start + 4)
        module = self.dotted_at(node.module, index) if node.module is not None else None
        after = module._pos[1] if module is not None else index
        if len(node.names) == 1 and node.names[0].name == "*":
            names: Any = _STAR
            kids: tuple[Any, ...] = (_STAR,)
        else:
            names = []
            for alias in node.names:
                names.append(self.alias(alias, after + 7))
                after = names[-1]._pos[1]
            kids = tuple(names)
        relative = [_DOT] * (node.level or 0)
        view.module, view.names, view.relative = module, names, relative
        view._kids = (*((module,) if module is not None else ()), *kids, *relative)
        view._pos = self.span(node)
        return view

    def orelse(self, statements: Sequence[Any]) -> Any:
        if not statements:
            return None
        first = statements[0]
        if (len(statements) == 1 and isinstance(first, ast.If)
                and self.text.startswith("elif", self.at(first.lineno, first.col_offset))):
            return self.compound(first)
        view = _new(V["Else"])
        body = self.block(statements)
        view.body = body
        view._kids = (body,)
        view._pos = body._pos
        return view

    def _if(self, node: ast.If) -> Any:
        view = _new(V["If"])
        test = self.e(node.test)
        body = self.block(node.body)
        orelse = self.orelse(node.orelse)
        view.test, view.body, view.orelse = test, body, orelse
        view._kids = (test, body) if orelse is None else (test, body, orelse)
        view._pos = (self.at(node.lineno, node.col_offset), (orelse or body)._pos[1])
        return view

    def _for(self, node: ast.For | ast.AsyncFor) -> Any:
        view = _new(V["For"])
        target, iterable = self.e(node.target), self.e(node.iter)
        body = self.block(node.body)
        orelse = self.orelse(node.orelse)
        asynchronous = _ASYNC if isinstance(node, ast.AsyncFor) else None
        view.target, view.iter, view.body, view.orelse, view.asynchronous = target, iterable, body, orelse, asynchronous
        view._kids = tuple(k for k in (target, iterable, body, orelse, asynchronous) if k is not None)
        view._pos = self.span(node)
        return view

    def _while(self, node: ast.While) -> Any:
        view = _new(V["While"])
        test = self.e(node.test)
        body = self.block(node.body)
        orelse = self.orelse(node.orelse)
        view.test, view.body, view.orelse = test, body, orelse
        view._kids = (test, body) if orelse is None else (test, body, orelse)
        view._pos = self.span(node)
        return view

    def _with(self, node: ast.With | ast.AsyncWith) -> Any:
        view = _new(V["With"])
        items = []
        for item in node.items:
            wrapper = _new(V["WithItem"])
            value = self.e(item.context_expr)
            asname = None
            if item.optional_vars is not None:
                asname = _new(V["AsName"])
                target = self.e(item.optional_vars)
                asname.name = target
                asname._kids = (target,)
                asname._pos = target._pos
            wrapper.item, wrapper.asname = value, asname
            wrapper._kids = (value,) if asname is None else (value, asname)
            wrapper._pos = (value._pos[0], (asname or value)._pos[1])
            items.append(wrapper)
        value = items[0].item
        if len(items) == 1 and items[0].asname is None and value.lpar:
            keyword = self.at(node.lineno, node.col_offset) + (_word(self.text, "with",
                self.at(node.lineno, node.col_offset)) - self.at(node.lineno, node.col_offset))
            if self._outer_start(value) == _skip_right(self.text, keyword + 4):
                value.lpar, value.rpar = value.lpar[1:], value.rpar[1:]  # with (a): the statement's
                items[0]._pos = (self._outer_start(value), self._outer_end(value))
        body = self.block(node.body)
        asynchronous = _ASYNC if isinstance(node, ast.AsyncWith) else None
        view.items, view.body, view.asynchronous = items, body, asynchronous
        view._kids = (*items, body) if asynchronous is None else (*items, body, asynchronous)
        view._pos = self.span(node)
        return view

    def _try(self, node: Any) -> Any:
        star = type(node).__name__ == "TryStar"
        view = _new(V["TryStar" if star else "Try"])
        body = self.block(node.body)
        handlers = []
        for handler in node.handlers:
            wrapper = _new(V["ExceptStarHandler" if star else "ExceptHandler"])
            kind = self.opt(handler.type)
            name = None
            if handler.name is not None:
                name = _new(V["AsName"])
                after = kind._pos[1] if kind is not None else self.at(handler.lineno, handler.col_offset)
                found = self.find_name(handler.name, _as_keyword(self.text, after))
                name.name = found
                name._kids = (found,)
                name._pos = found._pos
            handler_body = self.block(handler.body)
            wrapper.type, wrapper.name, wrapper.body = kind, name, handler_body
            wrapper._kids = tuple(k for k in (kind, name, handler_body) if k is not None)
            wrapper._pos = self.span(handler)
            handlers.append(wrapper)
        orelse = self.orelse(node.orelse)
        finalbody = None
        if node.finalbody:
            finalbody = _new(V["Finally"])
            final = self.block(node.finalbody)
            finalbody.body = final
            finalbody._kids = (final,)
            finalbody._pos = final._pos
        view.body, view.handlers, view.orelse, view.finalbody = body, handlers, orelse, finalbody
        view._kids = tuple(k for k in (body, *handlers, orelse, finalbody) if k is not None)
        view._pos = self.span(node)
        return view

    def decorators(self, nodes: Sequence[Any]) -> list[Any]:
        found = []
        for node in nodes:
            view = _new(V["Decorator"])
            value = self.e(node)
            view.decorator = value
            view._kids = (value,)
            view._pos = value._pos
            found.append(view)
        return found

    def _functiondef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Any:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        view = _new(V["FunctionDef"])
        decorators = self.decorators(node.decorator_list)
        asynchronous = _ASYNC if isinstance(node, ast.AsyncFunctionDef) else None
        start = self.at(node.lineno, node.col_offset)
        name = self.find_name(node.name, start + (9 if asynchronous else 3))
        params = self.parameters(node.args)
        returns = self.annotation(node.returns)
        body = self.block(node.body)
        view.decorators, view.asynchronous, view.name, view.params = decorators, asynchronous, name, params
        view.returns, view.body, view.type_parameters = returns, body, None
        view._kids = tuple(k for k in (*decorators, asynchronous, name, params, returns, body) if k is not None)
        view._pos = (decorators[0]._pos[0] if decorators else start, body._pos[1])
        return view

    def _classdef(self, node: ast.ClassDef) -> Any:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        view = _new(V["ClassDef"])
        decorators = self.decorators(node.decorator_list)
        start = self.at(node.lineno, node.col_offset)
        name = self.find_name(node.name, start + 5)
        args = self.arguments([*node.bases, *node.keywords], name._pos[1])
        bases = [a for a in args if a.keyword is None and a.star != "**"]
        keywords = [a for a in args if a.keyword is not None or a.star == "**"]
        body = self.block(node.body)
        view.decorators, view.name, view.bases, view.keywords, view.body = decorators, name, bases, keywords, body
        view.type_parameters = None
        view._kids = (*decorators, name, *bases, *keywords, body)
        view._pos = (decorators[0]._pos[0] if decorators else start, body._pos[1])
        return view


_B = _Builder
#: how each expression of CPython's tree is built
_EXPRESSIONS: dict[type, Callable[[_Builder, Any], Any]] = {
    ast.Name: _B._name, ast.Attribute: _B._attribute, ast.Call: _B._call, ast.Constant: _B._constant,
    ast.Subscript: _B._subscript, ast.Tuple: _B._tuple, ast.List: _B._list, ast.Set: _B._set, ast.Dict: _B._dict,
    ast.BoolOp: _B._boolop, ast.BinOp: _B._binop, ast.UnaryOp: _B._unaryop, ast.Compare: _B._compare,
    ast.IfExp: _B._ifexp, ast.Lambda: _B._lambda, ast.NamedExpr: _B._namedexpr, ast.Await: _B._await,
    ast.Yield: _B._yield, ast.YieldFrom: _B._yield, ast.ListComp: _B._comp, ast.SetComp: _B._comp,
    ast.GeneratorExp: _B._comp, ast.DictComp: _B._comp, ast.JoinedStr: _B._string, ast.Starred: _B._starred,
    ast.Slice: _B._slice,
}
#: how each statement is built
_STATEMENTS: dict[type, Callable[[_Builder, Any], Any]] = {
    ast.Expr: _B._expr_statement, ast.Assign: _B._assign, ast.AugAssign: _B._augassign,
    ast.AnnAssign: _B._annassign, ast.Return: _B._return, ast.Raise: _B._raise, ast.Assert: _B._assert,
    ast.Pass: _B._simple, ast.Break: _B._simple, ast.Continue: _B._simple, ast.Global: _B._global,
    ast.Nonlocal: _B._global, ast.Delete: _B._delete, ast.Import: _B._import, ast.ImportFrom: _B._importfrom,
    ast.If: _B._if, ast.For: _B._for, ast.AsyncFor: _B._for, ast.While: _B._while, ast.With: _B._with,
    ast.AsyncWith: _B._with, ast.Try: _B._try, ast.FunctionDef: _B._functiondef,
    ast.AsyncFunctionDef: _B._functiondef, ast.ClassDef: _B._classdef,
    **({ast.TryStar: _B._try} if hasattr(ast, "TryStar") else {}),
}
#: what may follow an expression that parentheses enclose
_MAY_CLOSE = frozenset(") \t\f\r\n\\#")
#: statements that LibCST keeps on their own (not in a ``SimpleStatementLine``)
_COMPOUND = frozenset({ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
                       ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef}
                      | {getattr(ast, n) for n in ("TryStar", "Match") if hasattr(ast, n)})
_AS = re.compile(r"[\s\\]*as\b")
#: what follows ``from``: blanks and the dots of a relative import
_DOTS = re.compile(r"[\s.\\]*")


def _as_keyword(text: str, index: int) -> int:
    """The index just after the ``as`` that follows ``index`` (or ``index`` itself)."""
    match = _AS.match(text, index)
    if match is None:
        found = re.compile(r"\bas\b").search(text, index)
        return found.end() if found is not None else index
    return match.end()


def _position(node: Any) -> tuple[int, int]:
    return node.lineno, node.col_offset


def parse_module(text: str) -> Module:
    """The view of a module; raises SyntaxError (and the errors CPython's parser raises
    for input it cannot take) or :class:`Unsupported`."""
    tree = ast.parse(text)
    builder = _Builder(text)
    module = _new(Module)
    body = builder.body(tree.body)
    module.body = body
    module.header = module.footer = ()
    module.encoding = "utf-8"
    module.default_indent = "    "
    module.default_newline = "\n"
    module.has_trailing_newline = text.endswith(("\n", "\r"))
    module._kids = tuple(body)
    module._pos = (0, len(text))
    module._text = text
    return module


def is_view(module: cst.Module) -> bool:
    return type(module) is Module
