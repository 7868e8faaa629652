"""LibCST-shaped trees built from CPython's ``ast``: the scan's fast parse.

LibCST keeps every token and every run of whitespace as a Python object, so its parse
is most of a scan's time and memory. The matcher reads none of that: it reads names,
values, the shape of expressions and statements, and where each node starts and ends.
:func:`parse_module` parses with CPython's own parser (several times faster, a fraction
of the memory) and builds, from its tree, nodes of LibCST's own classes with just those
fields, so the one matcher runs on either tree unchanged.

What a view node carries: every field LibCST's walk reads (:func:`children`), with the
values LibCST gives them (raw literal text, operators, ``lpar`` for
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
import warnings
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
    "SimpleStatementSuite", "IndentedBlock", "EmptyLine", "Comment", "LeftParen", "RightParen",
)
#: LibCST class name -> its view class
V: dict[str, type] = {name: _view_class(getattr(cst, name)) for name in _NODE_CLASSES}
V["SimpleString"] = _view_class(cst.SimpleString, slots=("_value",), evaluated_value=property(_string_value))


class Module(cst.Module):
    """The view of a whole module: its text, and nodes located by offsets into it."""

    __slots__ = ("_kids", "_pos", "_text")  # type: ignore[misc]
    __setattr__ = object.__setattr__  # type: ignore[assignment]

    @property
    def code(self) -> str:  # type: ignore[override]
        return self._text  # type: ignore[attr-defined, no-any-return]

    def code_for_node(self, node: cst.CSTNode) -> str:
        """The node's source as LibCST prints it: its own parentheses included."""
        text: str = self._text  # type: ignore[attr-defined]
        return text[_outer_start(text, node):_outer_end(text, node)]


_new: Callable[[type], Any] = object.__new__  # a node of a view class, its fields unset


def _maker(view_class: type) -> Callable[..., Any]:
    """``make.<Class>(pos, kids, *, <field>=...)``: a view node with its fields, children
    and offsets. Generated per class, the way dataclasses make ``__init__``, so filling a
    node costs what assigning its fields by hand does (a view has a million of them)."""
    base = view_class.__mro__[1]
    fields = {f.name for f in dataclasses.fields(base)}
    own_slots: tuple[str, ...] = view_class.__slots__  # type: ignore[attr-defined]
    named = [*_child_fields(base), *(name for name in own_slots if name not in ("_kids", "_pos"))]
    if "leading_lines" in fields:
        named.append("leading_lines")
    parentheses = "    view.lpar = view.rpar = ()\n" if "lpar" in fields else ""  # Builder.e adds any
    parameters = [f"{name}=None" for name in named]
    assigned = "".join(f"    view.{name} = {name}\n" for name in named) + parentheses
    source = (f"def {base.__name__}(pos, kids{', *, ' + ', '.join(parameters) if parameters else ''}):\n"
              f"    view = new(cls)\n{assigned}    view._kids = kids\n    view._pos = pos\n    return view\n")
    namespace: dict[str, Any] = {"new": object.__new__, "cls": view_class}
    exec(source, namespace)  # noqa: S102 - our own text, from LibCST's field names
    return namespace[base.__name__]  # type: ignore[no-any-return]


def _present(*nodes: Any) -> tuple[Any, ...]:
    """The nodes that are there (an optional field is None where it is absent)."""
    return tuple([node for node in nodes if node is not None])


def _leaf(name: str) -> Any:
    """One shared node for a class without fields (operators, ``*``, ``.``, ``async``)."""
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
#: ``x += 1`` and the like: LibCST's class for each binary operator's augmented form
_AUGMENTED = {kind: f"{name}Assign" for kind, name in _OPERATORS.items() if issubclass(kind, ast.operator)}
V.update({name: _view_class(getattr(cst, name)) for name in {*_OPERATORS.values(), *_AUGMENTED.values()}})

#: every view class (``children()`` reads the ``_kids`` of these)
VIEW_CLASSES = frozenset({*V.values(), Module})
_OP = {kind: _leaf(name) for kind, name in _OPERATORS.items()}
_AUG = {kind: _leaf(name) for kind, name in _AUGMENTED.items()}
_LPAR, _RPAR = _leaf("LeftParen"), _leaf("RightParen")
_ASYNC, _STAR, _DOT, _PARAM_STAR, _SLASH = (_leaf(n) for n in ("Asynchronous", "ImportStar", "Dot", "ParamStar",
                                                               "ParamSlash"))


def exactly(*classes: type) -> frozenset[type]:
    """The classes a node of one of these LibCST leaf classes has in either tree: the
    class and its view class. ``type(node) in exactly(cst.Name)`` answers what
    ``isinstance(node, cst.Name)`` does without ABCMeta's ``__instancecheck__``, which
    LibCST's node classes (ABCs) run for every test whose class is not the node's own
    (a view node's never is): ten times the cost, on the matcher's hottest paths."""
    found: set[type] = set()
    for cls in classes:
        subclasses: list[type] = type.__subclasses__(cls)
        if any(sub.__module__ != __name__ for sub in subclasses):
            raise ValueError(f"libcst.{cls.__name__} has subclasses of its own: use isinstance")
        found |= {cls, V[cls.__name__]}
    return frozenset(found)


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


class _Makers:
    """``make.<Class>(pos, kids, *, <field>=...)`` for every view class (see :func:`_maker`),
    each generated on its first use: a scan of a few files needs few of them."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        maker = _maker(V[name])
        setattr(self, name, maker)
        return maker


make = _Makers()


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


def _outer_start(text: str, view: Any) -> int:
    """Where a view node starts with its own parentheses (its ``_pos``, like LibCST's
    range for it, leaves them out)."""
    start: int = view._pos[0]
    for _ in getattr(view, "lpar", ()):
        start = _skip_left(text, start) - 1
    return start


def _outer_end(text: str, view: Any) -> int:
    """Where a view node ends with its own parentheses."""
    end: int = view._pos[1]
    for _ in getattr(view, "rpar", ()):
        end = _skip_right(text, end) + 1
    return end


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
    """Builds the view of one parsed text (a module, or an f-string placeholder's
    expression, whose offsets the caller shifts into the module's text)."""

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
        if encoded is None:  # the line's UTF-8, or b"" for an ASCII line (columns are characters)
            end = self.starts[line] if line < len(self.starts) else len(self.text)
            text = self.text[start:end]
            encoded = self._encoded[line] = b"" if text.isascii() else text.encode("utf-8", "surrogatepass")
        return start + (len(encoded[:column].decode("utf-8", "surrogatepass")) if encoded else column)

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
        return make.Name(self.span(node), (), value=node.id)

    def name_at(self, value: str, start: int) -> Any:
        """A ``Name`` written at an offset (a keyword, a def's name, an alias)."""
        return make.Name((start, start + len(value)), (), value=value)

    def find_name(self, value: str, after: int) -> Any:
        """The ``Name`` ``value`` at its first whole-word occurrence at or after an offset."""
        found = _word(self.text, value, after)
        return self.name_at(value, found if found != -1 else after)

    def _attribute(self, node: ast.Attribute) -> Any:
        value = self.e(node.value)
        start, end = self.span(node)
        attr = self.name_at(node.attr, end - len(node.attr))
        return make.Attribute((start, end), (value, attr), value=value, attr=attr)

    def _call(self, node: ast.Call) -> Any:
        func = self.e(node.func)
        args = self.arguments([*node.args, *node.keywords], _outer_end(self.text, func))
        return make.Call(self.span(node), (func, *args), func=func, args=args)

    def arguments(self, items: list[Any], after: int) -> list[Any]:
        """The ``Arg`` s of a call (or class bases) in the order written; ``after``: where
        the callee ends, so the call's own parenthesis is told from an argument's."""
        if len(items) > 1 and any(isinstance(i, ast.keyword) for i in items):
            items.sort(key=_position)  # f(key=1, *rest): LibCST keeps the order as written
        args = [self.arg(item) for item in items]
        if len(args) == 1 and args[0].star == "" and args[0].keyword is None:
            value = args[0].value  # f(x): the call's parentheses enclose x too
            if value.lpar and _outer_start(self.text, value) == _skip_right(self.text, after):
                value.lpar, value.rpar = value.lpar[1:], value.rpar[1:]
                args[0]._pos = (_outer_start(self.text, value), _outer_end(self.text, value))
        return args

    def arg(self, item: Any) -> Any:
        keyword = None
        if isinstance(item, ast.keyword):
            start = self.at(item.lineno, item.col_offset)
            star = "**" if item.arg is None else ""
            if item.arg is not None:
                keyword = self.name_at(item.arg, start)
            value = self.e(item.value)
        elif isinstance(item, ast.Starred):
            star, start, value = "*", self.at(item.lineno, item.col_offset), self.e(item.value)
        else:
            star, value = "", self.e(item)
            start = _outer_start(self.text, value)
        return make.Arg((start, _outer_end(self.text, value)), _present(keyword, value), value=value, keyword=keyword,
                        star=star)

    def _constant(self, node: ast.Constant) -> Any:
        value = node.value
        if isinstance(value, (str, bytes)):
            return self._string(node)
        start, end = self.span(node)
        if value is None or value is True or value is False:
            return make.Name((start, end), (), value=str(value))  # LibCST: True is a name
        if value is ...:
            return make.Ellipsis((start, end), ())
        kind = "Integer" if isinstance(value, int) else "Float" if isinstance(value, float) else "Imaginary"
        return getattr(make, kind)((start, end), (), value=self.text[start:end])

    def _subscript(self, node: ast.Subscript) -> Any:
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
        return make.Subscript(self.span(node), (value, *elements), value=value, slice=elements)

    def subscript_element(self, node: Any, built: Any = None) -> Any:
        """An element of a subscript (``built``: the view of ``node``, made already)."""
        if isinstance(node, ast.Starred):
            raise Unsupported("starred subscript")
        if isinstance(node, ast.Slice):
            inner = built or self._slice(node)
        else:
            value = built or self.e(node)
            inner = make.Index(value._pos, (value,), value=value, star=None)
        return make.SubscriptElement(inner._pos, (inner,), slice=inner)

    def _slice(self, node: ast.Slice) -> Any:
        lower, upper, step = self.opt(node.lower), self.opt(node.upper), self.opt(node.step)
        return make.Slice(self.span(node), _present(lower, upper, step), lower=lower, upper=upper, step=step)

    def elements(self, items: Sequence[Any]) -> list[Any]:
        found = []
        for item in items:
            if isinstance(item, ast.Starred):  # [*rest]
                value = self.e(item.value)
                found.append(make.StarredElement(self.span(item), (value,), value=value))
            else:
                value = self.e(item)
                found.append(make.Element(value._pos, (value,), value=value))
        return found

    def _tuple(self, node: ast.Tuple) -> Any:
        start, end = self.span(node)
        elements = self.elements(node.elts)
        # LibCST: a tuple's own parentheses are its lpar/rpar, outside its range; the
        # parse's range holds them, or its first element's (``(a), b``)
        if self.text[start] == "(" and not (
                elements and _outer_start(self.text, elements[0].value) == start):
            start = _skip_right(self.text, start + 1)
            end = _skip_left(self.text, end - 1) if elements else start
        return make.Tuple((start, end), tuple(elements), elements=elements)

    def _collection(self, node: ast.List | ast.Set) -> Any:
        elements = self.elements(node.elts)
        return getattr(make, type(node).__name__)(self.span(node), tuple(elements), elements=elements)

    def _dict(self, node: ast.Dict) -> Any:
        elements = []
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:  # {**other}
                item = self.e(value)
                elements.append(make.StarredDictElement(item._pos, (item,), value=item))
            else:
                k, v = self.e(key), self.e(value)
                elements.append(make.DictElement((k._pos[0], v._pos[1]), (k, v), key=k, value=v))
        return make.Dict(self.span(node), tuple(elements), elements=elements)

    def _boolop(self, node: ast.BoolOp) -> Any:
        values = [self.e(v) for v in node.values]
        operator = _OP[type(node.op)]
        left = values[0]
        for right in values[1:]:  # a and b and c: ((a and b) and c), as LibCST nests it
            left = make.BooleanOperation((_outer_start(self.text, left), _outer_end(self.text, right)),
                                         (left, operator, right), left=left, operator=operator, right=right)
        return left

    def _binop(self, node: ast.BinOp) -> Any:
        left, operator, right = self.e(node.left), _OP[type(node.op)], self.e(node.right)
        return make.BinaryOperation(self.span(node), (left, operator, right), left=left,
                                    operator=operator, right=right)

    def _unaryop(self, node: ast.UnaryOp) -> Any:
        operator, expression = _OP[type(node.op)], self.e(node.operand)
        return make.UnaryOperation(self.span(node), (operator, expression), operator=operator,
                                   expression=expression)

    def _compare(self, node: ast.Compare) -> Any:
        left = self.e(node.left)
        targets = []
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            operator, value = _OP[type(op)], self.e(comparator)
            targets.append(make.ComparisonTarget(value._pos, (operator, value), operator=operator,
                                                 comparator=value))
        return make.Comparison(self.span(node), (left, *targets), left=left, comparisons=targets)

    def _ifexp(self, node: ast.IfExp) -> Any:
        body, test, orelse = self.e(node.body), self.e(node.test), self.e(node.orelse)
        return make.IfExp(self.span(node), (body, test, orelse), test=test, body=body, orelse=orelse)

    def _lambda(self, node: ast.Lambda) -> Any:
        params, body = self.parameters(node.args), self.e(node.body)
        return make.Lambda(self.span(node), (params, body), params=params, body=body)

    def _namedexpr(self, node: ast.NamedExpr) -> Any:
        target, value = self.e(node.target), self.e(node.value)
        return make.NamedExpr(self.span(node), (target, value), target=target, value=value)

    def _await(self, node: ast.Await) -> Any:
        expression = self.e(node.value)
        return make.Await(self.span(node), (expression,), expression=expression)

    def _yield(self, node: ast.Yield | ast.YieldFrom) -> Any:
        value = self.opt(node.value)
        if isinstance(node, ast.YieldFrom):
            value = make.From(value._pos, (value,), item=value)
        return make.Yield(self.span(node), () if value is None else (value,), value=value)

    def _comp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> Any:
        start, end = self.span(node)
        if isinstance(node, ast.DictComp):
            key, value = self.e(node.key), self.e(node.value)
            results: dict[str, Any] = {"key": key, "value": value}
        else:
            results = {"elt": self.e(node.elt)}
        for_in = None
        for generator in reversed(node.generators):
            target, iterable = self.e(generator.target), self.e(generator.iter)
            ifs = [make.CompIf(test._pos, (test,), test=test) for test in map(self.e, generator.ifs)]
            asynchronous = _ASYNC if generator.is_async else None
            for_in = make.CompFor((target._pos[0], (for_in or (ifs[-1] if ifs else iterable))._pos[1]),
                                  tuple(k for k in (target, iterable, *ifs, for_in, asynchronous) if k is not None),
                                  target=target, iter=iterable, ifs=ifs, inner_for_in=for_in, asynchronous=asynchronous)
        if isinstance(node, ast.GeneratorExp):  # its parentheses (or its call's) are outside LibCST's range
            start, end = _skip_right(self.text, start + 1), _skip_left(self.text, end - 1)
        return getattr(make, type(node).__name__)((start, end), (*results.values(), for_in), for_in=for_in,
                           **results)

    def _starred(self, node: ast.Starred) -> Any:
        value = self.e(node.value)
        return make.StarredElement(self.span(node), (value,), value=value)

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
            view = make.ConcatenatedString((left._pos[0], view._pos[1]), (left, view), left=left, right=view)
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
        return make.SimpleString((index, match.end()), (), value=text[index:match.end()])

    def _fstring(self, index: int, prefix: str, quote: str, body: int) -> Any:
        parts, end = self._fparts(body, quote, "r" in prefix.lower())
        return make.FormattedString((index, end + len(quote)), tuple(parts), parts=parts, start=prefix + quote,
                                    end=quote)

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
        return make.FormattedStringText((start, end), (), value=self.text[start:end])

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
        if text[index] == "=":  # f"{x=}" shows the expression too
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
        expression = self._placeholder(start, expression_end)
        return make.FormattedStringExpression((start - 1, index + 1), (expression, *(format_spec or ())),
                                              expression=expression, conversion=conversion,
                                              format_spec=format_spec), index + 1

    def _placeholder(self, start: int, end: int) -> Any:
        """An f-string placeholder's expression, parsed from its own text (CPython before
        3.12 locates these only roughly)."""
        source = "(" + self.text[start:end] + ")"
        try:
            tree = _parse(source, mode="eval")
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
        positional = [*args.posonlyargs, *args.args]
        defaults: list[Any] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        made = [self.param(a, d) for a, d in zip(positional, defaults, strict=True)]
        posonly, params = made[:len(args.posonlyargs)], made[len(args.posonlyargs):]
        kwonly = [self.param(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
        star_arg: Any = self.param(args.vararg, None, "*") if args.vararg is not None else (
            _PARAM_STAR if args.kwonlyargs else cst.MaybeSentinel.DEFAULT)
        star_kwarg = self.param(args.kwarg, None, "**") if args.kwarg is not None else None
        posonly_ind: Any = _SLASH if posonly else cst.MaybeSentinel.DEFAULT
        kids: tuple[Any, ...] = tuple(k for k in (*posonly, posonly_ind, *params, star_arg, *kwonly, star_kwarg)
                                      if isinstance(k, cst.CSTNode))
        located = [k for k in kids if k._pos is not None]
        return make.Parameters((located[0]._pos[0], located[-1]._pos[1]) if located else None, kids,
                               posonly_params=posonly, params=params, kwonly_params=kwonly, star_arg=star_arg,
                               star_kwarg=star_kwarg, posonly_ind=posonly_ind)

    def param(self, arg: ast.arg, default: Any, star: str = "") -> Any:
        start, end = self.span(arg)
        name, annotation, value = self.name_at(arg.arg, start), self.annotation(arg.annotation), self.opt(default)
        return make.Param((start, value._pos[1] if value is not None else end), _present(name, annotation, value),
                          name=name, annotation=annotation, default=value, star=star or cst.MaybeSentinel.DEFAULT)

    def annotation(self, node: Any) -> Any:
        if node is None:
            return None
        value = self.e(node)
        return make.Annotation(value._pos, (value,), annotation=value)

    # -- statements ------------------------------------------------------------------

    def block(self, statements: Sequence[Any]) -> Any:
        """A compound statement's body: an ``IndentedBlock``, or a ``SimpleStatementSuite``
        when it sits on the header's line (``if x: return``)."""
        first = statements[0]
        if self.text[self.starts[first.lineno - 1]:self.at(first.lineno, first.col_offset)].strip():
            kind, body = "SimpleStatementSuite", [self.small(s) for s in statements]
        else:
            kind, body = "IndentedBlock", self.body(statements)
        return getattr(make, kind)((body[0]._pos[0], body[-1]._pos[1]), tuple(body), body=body)

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
                found.append(self.small(statement))
                previous_end = 0
            else:
                line = [statement]
        if line:
            found.append(self.line(line, previous_end))
        return found

    def line(self, statements: list[Any], previous_end: int) -> Any:
        body = [self.small(s) for s in statements]
        leading = self.leading_lines(previous_end, statements[0].lineno) if previous_end else ()  # type: tuple
        return make.SimpleStatementLine((body[0]._pos[0], body[-1]._pos[1]), tuple(body), body=body,
                                        leading_lines=leading)

    def leading_lines(self, previous_end: int, line: int) -> tuple[Any, ...]:
        """The blank and comment lines between two statements of a block."""
        found = []
        for number in range(previous_end + 1, line):
            end = self.starts[number] if number < len(self.starts) else len(self.text)
            content = self.text[self.starts[number - 1]:end].strip()
            comment = make.Comment(None, (), value=content) if content.startswith("#") else None
            found.append(make.EmptyLine(None, _present(comment), comment=comment))
        return tuple(found)

    def small(self, statement: Any) -> Any:
        """A statement (small or compound)."""
        build = _STATEMENTS.get(type(statement))
        if build is None:
            raise Unsupported(type(statement).__name__)
        return build(self, statement)

    def _simple(self, node: ast.Pass | ast.Break | ast.Continue) -> Any:
        return getattr(make, type(node).__name__)(self.span(node), ())

    def _expr_statement(self, node: ast.Expr) -> Any:
        value = self.e(node.value)
        return make.Expr(self.span(node), (value,), value=value)

    def _assign(self, node: ast.Assign) -> Any:
        targets = [make.AssignTarget(t._pos, (t,), target=t) for t in map(self.e, node.targets)]
        value = self.e(node.value)
        return make.Assign(self.span(node), (*targets, value), targets=targets, value=value)

    def _augassign(self, node: ast.AugAssign) -> Any:
        target, operator, value = self.e(node.target), _AUG[type(node.op)], self.e(node.value)
        return make.AugAssign(self.span(node), (target, operator, value), target=target, operator=operator,
                              value=value)

    def _annassign(self, node: ast.AnnAssign) -> Any:
        target, annotation, value = self.e(node.target), self.annotation(node.annotation), self.opt(node.value)
        return make.AnnAssign(self.span(node), _present(target, annotation, value), target=target,
                              annotation=annotation, value=value)

    def _return(self, node: ast.Return) -> Any:
        value = self.opt(node.value)
        return make.Return(self.span(node), _present(value), value=value)

    def _raise(self, node: ast.Raise) -> Any:
        exc, item = self.opt(node.exc), self.opt(node.cause)
        cause = make.From(item._pos, (item,), item=item) if item is not None else None
        return make.Raise(self.span(node), _present(exc, cause), exc=exc, cause=cause)

    def _assert(self, node: ast.Assert) -> Any:
        test, msg = self.e(node.test), self.opt(node.msg)
        return make.Assert(self.span(node), _present(test, msg), test=test, msg=msg)

    def _global(self, node: ast.Global | ast.Nonlocal) -> Any:
        kind = type(node).__name__
        start = self.at(node.lineno, node.col_offset) + len(kind)
        items = []
        for name in node.names:
            found = self.find_name(name, start)
            start = found._pos[1]
            items.append(make.NameItem(found._pos, (found,), name=found))
        return getattr(make, kind)(self.span(node), tuple(items), names=items)

    def _delete(self, node: ast.Delete) -> Any:
        if len(node.targets) == 1:
            target = self.e(node.targets[0])
        else:  # del a, b: LibCST's target is a tuple
            elements = self.elements(node.targets)
            target = make.Tuple((elements[0]._pos[0], elements[-1]._pos[1]), tuple(elements),
                                elements=elements)
        return make.Del(self.span(node), (target,), target=target)

    def dotted_at(self, dotted: str, start: int) -> Any:
        """A dotted module name written from an offset, as LibCST has it: a ``Name`` or
        nested ``Attribute`` s."""
        parts = dotted.split(".")
        node = self.find_name(parts[0], start)
        first = node._pos[0]
        for part in parts[1:]:
            attr = self.find_name(part, node._pos[1])
            node = make.Attribute((first, attr._pos[1]), (node, attr), value=node, attr=attr)
        return node

    def as_name(self, name: str, after: int) -> Any:
        """``as name`` after an offset (an import alias, an ``except`` clause)."""
        found = self.find_name(name, _as_keyword(self.text, after))
        return make.AsName(found._pos, (found,), name=found)

    def alias(self, alias: ast.alias) -> Any:
        name = self.dotted_at(alias.name, self.at(alias.lineno, alias.col_offset))
        asname = self.as_name(alias.asname, name._pos[1]) if alias.asname is not None else None
        return make.ImportAlias((name._pos[0], (asname or name)._pos[1]), _present(name, asname), name=name,
                                asname=asname)

    def _import(self, node: ast.Import) -> Any:
        names = [self.alias(alias) for alias in node.names]
        return make.Import(self.span(node), tuple(names), names=names)

    def _importfrom(self, node: ast.ImportFrom) -> Any:
        index = _past(_DOTS, self.text, self.at(node.lineno, node.col_offset) + 4)
        module = self.dotted_at(node.module, index) if node.module is not None else None
        if len(node.names) == 1 and node.names[0].name == "*":
            names: Any = _STAR
            kids: tuple[Any, ...] = (_STAR,)
        else:
            names = [self.alias(alias) for alias in node.names]
            kids = tuple(names)
        relative = [_DOT] * (node.level or 0)
        return make.ImportFrom(self.span(node), (*_present(module), *kids, *relative), module=module,
                               names=names, relative=relative)

    def orelse(self, statements: Sequence[Any]) -> Any:
        """What follows ``else:`` (or an ``elif``, which LibCST keeps as an ``If``)."""
        if not statements:
            return None
        first = statements[0]
        if (len(statements) == 1 and isinstance(first, ast.If)
                and self.text.startswith("elif", self.at(first.lineno, first.col_offset))):
            return self.small(first)
        body = self.block(statements)
        return make.Else(body._pos, (body,), body=body)

    def _if(self, node: ast.If) -> Any:
        test, body = self.e(node.test), self.block(node.body)
        orelse = self.orelse(node.orelse)
        return make.If((self.at(node.lineno, node.col_offset), (orelse or body)._pos[1]),
                       _present(test, body, orelse), test=test, body=body, orelse=orelse)

    def _for(self, node: ast.For | ast.AsyncFor) -> Any:
        target, iterable = self.e(node.target), self.e(node.iter)
        body, orelse = self.block(node.body), self.orelse(node.orelse)
        asynchronous = _ASYNC if isinstance(node, ast.AsyncFor) else None
        return make.For(self.span(node), _present(target, iterable, body, orelse, asynchronous), target=target,
                        iter=iterable, body=body, orelse=orelse, asynchronous=asynchronous)

    def _while(self, node: ast.While) -> Any:
        test, body = self.e(node.test), self.block(node.body)
        orelse = self.orelse(node.orelse)
        return make.While(self.span(node), _present(test, body, orelse), test=test, body=body, orelse=orelse)

    def _with(self, node: ast.With | ast.AsyncWith) -> Any:
        items = []
        for item in node.items:
            value = self.e(item.context_expr)
            asname = None
            if item.optional_vars is not None:
                target = self.e(item.optional_vars)
                asname = make.AsName(target._pos, (target,), name=target)
            items.append(make.WithItem((value._pos[0], (asname or value)._pos[1]), _present(value, asname),
                                       item=value, asname=asname))
        value = items[0].item
        if len(items) == 1 and items[0].asname is None and value.lpar:
            keyword = _word(self.text, "with", self.at(node.lineno, node.col_offset))
            if _outer_start(self.text, value) == _skip_right(self.text, keyword + 4):
                value.lpar, value.rpar = value.lpar[1:], value.rpar[1:]  # with (a): the statement's
                items[0]._pos = (_outer_start(self.text, value), _outer_end(self.text, value))
        body = self.block(node.body)
        asynchronous = _ASYNC if isinstance(node, ast.AsyncWith) else None
        return make.With(self.span(node), (*items, *_present(body, asynchronous)), items=items, body=body,
                         asynchronous=asynchronous)

    def _try(self, node: Any) -> Any:
        star = "Star" if type(node).__name__ == "TryStar" else ""
        body = self.block(node.body)
        handlers = []
        for handler in node.handlers:
            kind = self.opt(handler.type)
            name = None
            if handler.name is not None:
                after = kind._pos[1] if kind is not None else self.at(handler.lineno, handler.col_offset)
                name = self.as_name(handler.name, after)
            handler_body = self.block(handler.body)
            handler_kind = getattr(make, f"Except{star}Handler")
            handlers.append(handler_kind(self.span(handler), _present(kind, name, handler_body), type=kind, name=name,
                                         body=handler_body))
        orelse = self.orelse(node.orelse)
        finalbody = None
        if node.finalbody:
            final = self.block(node.finalbody)
            finalbody = make.Finally(final._pos, (final,), body=final)
        return getattr(make, f"Try{star}")(self.span(node), _present(body, *handlers, orelse, finalbody), body=body,
                                           handlers=handlers, orelse=orelse, finalbody=finalbody)

    def decorators(self, nodes: Sequence[Any]) -> list[Any]:
        return [make.Decorator(value._pos, (value,), decorator=value) for value in map(self.e, nodes)]

    def _functiondef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Any:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        decorators = self.decorators(node.decorator_list)
        asynchronous = _ASYNC if isinstance(node, ast.AsyncFunctionDef) else None
        start = self.at(node.lineno, node.col_offset)
        name = self.find_name(node.name, start + (9 if asynchronous else 3))
        params, returns = self.parameters(node.args), self.annotation(node.returns)
        body = self.block(node.body)
        return make.FunctionDef((decorators[0]._pos[0] if decorators else start, body._pos[1]),
                                (*decorators, *_present(asynchronous, name, params, returns, body)),
                                decorators=decorators, asynchronous=asynchronous, name=name, params=params,
                                returns=returns, body=body)

    def _classdef(self, node: ast.ClassDef) -> Any:
        if getattr(node, "type_params", None):
            raise Unsupported("type parameters")
        decorators = self.decorators(node.decorator_list)
        start = self.at(node.lineno, node.col_offset)
        name = self.find_name(node.name, start + 5)
        args = self.arguments([*node.bases, *node.keywords], name._pos[1])
        bases = [a for a in args if a.keyword is None and a.star != "**"]
        keywords = [a for a in args if a.keyword is not None or a.star == "**"]
        body = self.block(node.body)
        return make.ClassDef((decorators[0]._pos[0] if decorators else start, body._pos[1]),
                             (*decorators, name, *bases, *keywords, body), decorators=decorators, name=name,
                             bases=bases, keywords=keywords, body=body)


_B = _Builder
#: how each expression of CPython's tree is built
_EXPRESSIONS: dict[type, Callable[[_Builder, Any], Any]] = {
    ast.Name: _B._name, ast.Attribute: _B._attribute, ast.Call: _B._call, ast.Constant: _B._constant,
    ast.Subscript: _B._subscript, ast.Tuple: _B._tuple, ast.List: _B._collection, ast.Set: _B._collection,
    ast.Dict: _B._dict,
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


def _parse(text: str, mode: str = "exec") -> Any:
    """CPython's tree of ``text``, without the warnings its compiler prints for the code
    (an invalid escape such as ``"\\d"`` is a SyntaxWarning on stderr from Python 3.12):
    the scanned code's own, not the user's to read in a scan."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, mode=mode)


#: a line indented with a tab: CPython and LibCST's tokenizer disagree on some mixes of
#: tabs and spaces (CPython takes ``\t\t    `` under four spaces, LibCST rejects it)
_TAB_INDENT = re.compile(r"(?m)^ *\t")


def parse_module(text: str) -> Module:
    """The view of a module; raises SyntaxError (and the errors CPython's parser raises
    for input it cannot take) or :class:`Unsupported`. Tab-indented code is left to
    LibCST, so that both parsers take and refuse the same files."""
    if "\t" in text and _TAB_INDENT.search(text):
        raise Unsupported("tab indentation")
    tree = _parse(text)
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
