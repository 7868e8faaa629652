"""The scan's fast parse (portscan.leancst) against LibCST, the parser of record.

A view must be LibCST's tree as the matcher reads it: the same classes in the same
shape, the same names, literal texts and operators, the same parentheses, and the same
character offsets for every expression and small statement. These tests compare the two
trees node by node, and the findings of both parsers on every rule example and every
fixture repository (issue 18: findings identical on both paths).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import libcst as cst
import pytest

from portscan import leancst
from portscan.filekinds import file_kind
from portscan.leancst import children
from portscan.match.locate import locate
from portscan.model import Finding
from portscan.parse import SourceError, parse_for_matching, parse_python
from portscan.ruleset.loader import RuleSet, load_rules
from portscan.scan import scan_paths, scan_source
from portscan.testing import example_cases, example_project

from conftest import REPO

#: the fields whose values the matcher reads, by class
SCALARS = {"Name": ("value",), "SimpleString": ("value", "evaluated_value"), "Integer": ("value",), "Float": ("value",),
           "Imaginary": ("value",), "FormattedStringText": ("value",), "FormattedStringExpression": ("conversion",),
           "FormattedString": ("start", "end"), "Arg": ("star",), "Index": ("star",), "Param": ("star",),
           "Comment": ("value",)}
#: LibCST children that carry no code (punctuation the view leaves out)
TRIVIA = ("SimpleWhitespace", "Colon", "Comma", "AssignEqual")
#: nodes whose offsets the matcher reads (blocks and compound statements are only ever
#: containers: their whitespace differs by design)
LOCATED = (cst.BaseExpression, cst.BaseSmallStatement, cst.Arg, cst.ImportAlias)


def _value(node: cst.CSTNode, field: str) -> object:
    value = getattr(node, field)
    return None if value == "" or isinstance(value, cst.MaybeSentinel) else value


def differences(text: str) -> list[str]:
    """Where the view of ``text`` differs from LibCST's tree (nothing: they agree)."""
    real = parse_python(text)
    view = leancst.parse_module(text)
    found: list[str] = []
    pairs = []
    stack: list[tuple[cst.CSTNode, cst.CSTNode, str]] = [(real, view, "Module")]
    while stack:
        r, v, trail = stack.pop()
        if type(r).__name__ != type(v).__name__ or not isinstance(v, type(r)):
            found.append(f"{trail}: {type(r).__name__} is {type(v).__name__} in the view")
            continue
        found += [f"{trail}.{f}: {_value(r, f)!r} is {_value(v, f)!r} in the view"
                  for f in SCALARS.get(type(r).__name__, ()) if _value(r, f) != _value(v, f)]
        if isinstance(r, cst.BaseExpression) and len(r.lpar) != len(v.lpar):  # type: ignore[attr-defined]
            found.append(f"{trail}: {len(r.lpar)} parentheses, {len(v.lpar)} in the view")  # type: ignore[attr-defined]
        if isinstance(r, cst.SimpleStatementLine) and v.leading_lines:  # type: ignore[attr-defined]
            blank = [line.comment is None for line in r.leading_lines]
            if blank != [line.comment is None for line in v.leading_lines]:  # type: ignore[attr-defined]
                found.append(f"{trail}: leading lines differ")
        real_kids = [k for k in children(r) if type(k).__name__ not in TRIVIA]
        view_kids = list(children(v))
        if [type(k).__name__ for k in real_kids] != [type(k).__name__ for k in view_kids]:
            found.append(f"{trail}: children {[type(k).__name__ for k in real_kids]} are "
                         f"{[type(k).__name__ for k in view_kids]} in the view")
            continue
        pairs.append((r, v))
        stack += [(a, b, f"{trail}/{type(a).__name__}") for a, b in zip(real_kids, view_kids, strict=True)]
    located = locate(real, [r for r, _ in pairs if isinstance(r, LOCATED)])
    for r, v in pairs:
        if id(r) in located and located[id(r)] != v._pos:  # type: ignore[attr-defined]
            start, end = located[id(r)]
            found.append(f"{type(r).__name__} {text[start:end]!r} at {located[id(r)]}, at {v._pos} "  # type: ignore[attr-defined]
                         "in the view")
    return found


def _python_files(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py"))


def _parses(text: str) -> bool:
    try:
        parse_python(text)
    except SourceError:
        return False
    return True


EXAMPLES = [c for c in example_cases(load_rules()) if file_kind(PurePosixPath(c.example.path)) == "python"]


@pytest.mark.parametrize("case", EXAMPLES, ids=[c.id for c in EXAMPLES])
def test_the_view_of_every_rule_example_is_libcsts_tree(case) -> None:
    if _parses(case.example.source):
        assert differences(case.example.source) == []


@pytest.mark.parametrize("path", _python_files(REPO / "fixtures", REPO / "tests" / "data", REPO / "src"),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_the_view_of_every_fixture_and_of_portscan_is_libcsts_tree(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if _parses(text):
        assert differences(text) == []


def _findings(case, parser: str) -> tuple[Finding, ...]:
    example = case.example
    return scan_source(example.source, example.path, RuleSet([case.rule]), example_project(example), parser=parser)


@pytest.mark.parametrize("case", EXAMPLES, ids=[c.id for c in EXAMPLES])
def test_every_rule_example_has_the_same_findings_with_either_parser(case) -> None:
    try:
        assert _findings(case, "ast") == _findings(case, "libcst")
    except SourceError as exc:
        with pytest.raises(SourceError, match=exc.message):
            _findings(case, "libcst")


def test_all_rules_find_the_same_in_every_example_with_either_parser(rules) -> None:
    """Every example scanned with the whole pack: the guards, collapses and other rules'
    sites of one module interact as in a real scan."""
    for case in EXAMPLES:
        source, path = case.example.source, case.example.path
        if _parses(source):
            assert (scan_source(source, path, rules, parser="ast")
                    == scan_source(source, path, rules, parser="libcst")), case.id


@pytest.mark.parametrize("repo", sorted(p.name for p in (REPO / "fixtures").iterdir() if p.is_dir()))
def test_every_fixture_repository_scans_the_same_with_either_parser(repo: str, rules) -> None:
    results = [scan_paths([REPO / "fixtures" / repo], rules, workers=1, parser=parser) for parser in PARSERS]
    assert results[0] == results[1] and results[0].files_scanned


PARSERS = ("ast", "libcst")

#: constructs whose view is easy to get wrong: each must be LibCST's tree
TRICKY = {
    "implicit concatenation with comments": 'x = (\n    "a"  # one\n    "b"\n    # two\n    "c"\n)\n',
    "f-strings": 'x = f"+cu{torch.version.cuda}" f"{a!r:>{w}}" rf"\\{b}\\"" f"{c=}" f"{d = !s}" f"\\N{EN DASH}{e}"\n',
    "f-string with a nested string and braces": "x = f'{\"a\" if b else {c: d}[e]}{{}}'\n",
    "multi-line f-string placeholder": 'x = f"""\nline {\n    a.b +\n    c\n} end"""\n',
    "parenthesised tuples": "a = (b), c\nd = ((e), f)\ng = ()\nh = (  # note\n)\nx[(1, 2)]\nx[1, 2:3]\n",
    "generators and sole arguments": "f(x for x in y)\ng((x for x in y), 1)\nh((a))\nk(*(b))\nm(key=(c))\n",
    "with statements": "with (a):\n    pass\nwith (b) as c, (d):\n    pass\nwith (e as f, g):\n    pass\n",
    "elif and else-if": "if a:\n    pass\nelif b:\n    pass\nelse:\n    if c: pass\n",
    "statement lines": "a = 1; b = 2\n\n# c\nc = 3\nif x: y = 1; z = 2\n",
    "operators": "x = not a and (b or c) and -d ** 2 // e @ f\ny = a < b <= c != d in e not in f is g is not h\n",
    "calls in source order": "f(a, *b, c=1, **d)\nf(key=1, *rest)\nclass A(B, metaclass=M): pass\n",
    "definitions": ("@dec(x)\nasync def f(a, /, b: int = 1, *c, d, e=2, **g) -> R:\n"
                    "    global h\n    nonlocal_ = lambda i, *, j=3: i\n    del a, b\n    return (yield)\n"),
    "imports": "import a.b.c as d, e\nfrom .. import f\nfrom . g.h import (i as j,\n    k)\nfrom l import *\n",
    "try": "try:\n    import a\nexcept (A, B) as e:\n    pass\nexcept C:\n    pass\nelse:\n    x = 1\nfinally:\n"
           "    y = 2\n",
    "comprehensions": "a = [x for x in y if x if not x for z in x]\nb = {k: v for k, v in c}\nd = {*e, *f}\n",
    "numbers and constants": "x = (0x1F, 1_000, 1.5e3, 2j, ..., None, True, b'\\x00', -1)\n",
    "non-ASCII columns": "naïve = 'é'; x = torch.version.cuda  # ünïcode\ny = f\"{naïve}é{torch.version.cuda}\"\n",
    "CRLF and tabs": "if a:\r\n    b =\ttorch.version.cuda\r\n    c = (d,\t# x\r\n         e)\r\n",
    "walrus, await, starred targets": "async def f():\n    if (n := await g()):\n        a, *b = n\n",
    "annotated and augmented": "x: int = 1\ny: list[int]\nz += 1\nw @= v\n",
    "subscripts and slices": "a[1:2, ::3]\nb[c][d:e:f]\ng[h,]\n",
    "decorated class": "@a.b\n@c()\nclass D(E, *F, **G):\n    x = 1\n",
}


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_constructs(name: str) -> None:
    assert differences(TRICKY[name]) == []


def test_the_node_makers_are_made_from_libcsts_field_names_alone() -> None:
    """What ``leancst`` compiles at import (its one ``exec``) is built from LibCST's own
    dataclass field names and nothing else (tests/test_security.py allows it for that)."""
    import dataclasses
    import inspect

    for name, view_class in leancst.V.items():
        base = view_class.__mro__[1]
        allowed = {f.name for f in dataclasses.fields(base)} | {"pos", "kids", "_value"}
        parameters = inspect.signature(getattr(leancst.make, name)).parameters
        assert set(parameters) <= allowed and all(p.isidentifier() for p in parameters), name


def test_what_the_view_does_not_build_is_parsed_by_libcst() -> None:
    source = "match x:\n    case torch.float8_e4m3fn:\n        pass\n"
    with pytest.raises(leancst.Unsupported):
        leancst.parse_module(source)
    module = parse_for_matching(source)
    assert not leancst.is_view(module) and isinstance(module.body[0], cst.Match)
    assert leancst.is_view(parse_for_matching("x = 1\n"))
    assert not leancst.is_view(parse_for_matching("x = 1\n", "libcst"))


def test_tab_indented_code_is_left_to_libcst_so_both_parsers_agree(rules) -> None:
    """CPython takes tabs after spaces that LibCST's tokenizer refuses (funasr's
    ``\\t\\t    return ...`` under a four-space ``def``): both parsers give LibCST's
    error, and plain tab indentation the same findings."""
    mixed = "import torch\nclass M:\n    def f(self):\n\t\t    return torch.cuda.amp.autocast()\n"
    with pytest.raises(leancst.Unsupported):
        leancst.parse_module(mixed)
    messages = []
    for parser in PARSERS:
        with pytest.raises(SourceError) as raised:
            parse_for_matching(mixed, parser)
        messages.append(raised.value.message)
    assert messages[0] == messages[1]
    tabs = "import torch\nif True:\n\tx = torch.cuda.amp.autocast()\n"
    assert [f.rule for f in scan_source(tabs, "m.py", rules)] == [
        f.rule for f in scan_source(tabs, "m.py", rules, parser="libcst")] != []


@pytest.mark.parametrize("source", ["def f(:\n    pass\n", "print 'hello'\n", "x = (\n"])
def test_syntax_errors_read_the_same_with_either_parser(source: str) -> None:
    messages = []
    for parser in PARSERS:
        with pytest.raises(SourceError) as raised:
            parse_for_matching(source, parser)
        messages.append(raised.value.message)
    assert messages[0] == messages[1] and messages[0].startswith("syntax error at line")


def test_a_match_statement_is_scanned_through_libcst(rules) -> None:
    source = "import torch\nmatch torch.version.cuda.split('.'):\n    case _:\n        pass\n"
    assert [f.rule for f in scan_source(source, "m.py", rules)] == [
        f.rule for f in scan_source(source, "m.py", rules, parser="libcst")] != []


def test_the_scanned_codes_own_compiler_warnings_are_not_printed() -> None:
    """``"\\d"`` is a SyntaxWarning from Python 3.12 (a DeprecationWarning before): the
    scanned code's business, not the scan's output (LibCST never warned either)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        leancst.parse_module('pattern = "\\d+"\nmessage = f"\\w{x}"\n')
    assert caught == []


def test_exactly_answers_as_isinstance_does_in_both_trees() -> None:
    """``type(node) in exactly(cls)`` stands in for ``isinstance`` on the matcher's hot
    paths: the same answer for every node of a view and of LibCST's tree; a class with
    subclasses of LibCST's own is refused (a set of exact classes would miss them)."""
    text = "import torch\nx = torch.version.cuda or f'rocm {y}'\nf(a.b, 'c')\n"
    classes = (cst.Name, cst.Attribute, cst.Call, cst.SimpleString, cst.FormattedStringText)
    for module in (leancst.parse_module(text), parse_python(text)):
        nodes, stack = [], [module]
        while stack:
            nodes.append(node := stack.pop())
            stack.extend(children(node))
        for cls in classes:
            assert [type(n) in leancst.exactly(cls) for n in nodes] == [isinstance(n, cls) for n in nodes]
            assert any(isinstance(n, cls) for n in nodes)
    with pytest.raises(ValueError):
        leancst.exactly(cst.BaseExpression)
