"""Property tests on generated Python (hypothesis + hypothesmith): the scan never
raises, and `fix` (every tier) always leaves code that parses and is stable.

A bounded number of examples runs in CI; set PORTSCAN_FUZZ_EXAMPLES for a longer run
(the count reached is recorded in the closing notes of the issue that added this).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path, PurePosixPath

import pytest

hypothesis = pytest.importorskip("hypothesis")
if importlib.util.find_spec("hypothesmith") is None:
    pytest.skip("hypothesmith is not installed", allow_module_level=True)

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from portscan.filekinds import file_kind  # noqa: E402
from portscan.fix.engine import fix_source  # noqa: E402
from portscan.parse import SourceError, parse_python  # noqa: E402
from portscan.ruleset.loader import load_rules  # noqa: E402
from portscan.scan import scan_source  # noqa: E402

RULES = load_rules()
EXAMPLES = int(os.environ.get("PORTSCAN_FUZZ_EXAMPLES", "30"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize="PORTSCAN_FUZZ_EXAMPLES" not in os.environ,
                    suppress_health_check=list(HealthCheck))


def _grammar() -> st.SearchStrategy[str]:
    import hypothesmith  # 2.5 s (a parser for Python's grammar): only in the worker that draws from it

    return hypothesmith.from_grammar()


#: generated modules; one strategy for both tests, built at the first draw
MODULES = st.deferred(_grammar)
#: code every fix understands, to splice into generated modules so the fixes have work
SNIPPETS = sorted({e.before for r in RULES.rules if r.fix is not None for e in r.fix.examples}
                  | {e.source for r in RULES.rules for e in r.bad if e.path.endswith(".py")})


@SETTINGS
@given(MODULES)
def test_scan_never_raises_on_generated_modules(source: str) -> None:
    try:
        findings = scan_source(source, "generated.py", RULES)
    except SourceError:
        return  # documented: the file is reported as unparsable, the scan goes on
    assert all(f.span.line >= 1 for f in findings)


@SETTINGS
@given(generated=MODULES, snippet=st.sampled_from(SNIPPETS), first=st.booleans())
def test_fix_output_parses_and_a_second_fix_changes_nothing(generated: str, snippet: str, first: bool) -> None:
    source = snippet + "\n" + generated if first else generated + "\n" + snippet
    try:
        parse_python(source)
    except SourceError:
        assume(False)  # generated code that libcst itself refuses is outside the property
    result = fix_source(source, "generated.py", RULES, unsafe=True)
    assert result.error is None or "reproduce" in result.error, result.error
    parse_python(result.fixed)
    if _compiles(source):  # what compiled still compiles
        compile(result.fixed, "generated.py", "exec", dont_inherit=True)
    again = fix_source(result.fixed, "generated.py", RULES, unsafe=True)
    assert again.fixed == result.fixed


def _compiles(source: str) -> bool:
    try:
        compile(source, "generated.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _examples_by_path() -> list[tuple[str, str]]:
    """(path, source) of every rule example and fixture file of a file kind other than
    Python (the fixtures bring the kinds no example uses, such as Jenkinsfiles)."""
    found = {(e.path, e.source) for r in RULES.rules for e in (*r.bad, *r.good) if not e.path.endswith(".py")}
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    for path in sorted(fixtures.rglob("*")):
        kind = file_kind(PurePosixPath(path.name)) or file_kind(PurePosixPath(path.relative_to(fixtures).as_posix()))
        if path.is_file() and kind not in (None, "python") and path.stat().st_size < 20_000:
            found.add((path.relative_to(fixtures).as_posix(), path.read_text(encoding="utf-8", errors="replace")))
    return sorted(found)


TEXT_EXAMPLES = _examples_by_path()
#: characters that open, close or separate something in one of the text formats
SYNTAX = "\"'\\$(){}[]#:\n\t|&;<>=`-*@%"


@settings(SETTINGS, max_examples=max(EXAMPLES * 10, 300))  # a text file scans in ~1 ms
@given(example=st.sampled_from(TEXT_EXAMPLES), cut=st.integers(min_value=0, max_value=10_000),
       inserts=st.lists(st.tuples(st.integers(min_value=0, max_value=10_000), st.text(SYNTAX, min_size=1, max_size=4)),
                        max_size=6))
def test_every_reader_survives_mangled_files(example: tuple[str, str], cut: int,
                                             inserts: list[tuple[int, str]]) -> None:
    """The readers of the other file kinds (CMake, Makefiles, CI YAML, Jenkinsfiles,
    .gitmodules, Dockerfiles, Apptainer, manifests, shell, C++/CUDA) get their rules'
    examples truncated and with syntax characters spliced in: a file may be reported as
    unparsable, but nothing else raises and every finding lies inside the text."""
    path, source = example
    text = source[: cut % (len(source) + 1)]
    for at, chars in inserts:
        at %= len(text) + 1
        text = text[:at] + chars + text[at:]
    try:
        findings = scan_source(text, path, RULES)
    except SourceError:
        return  # documented: the file is reported as unparsable, the scan goes on
    lines = text.count("\n") + 1
    assert all(1 <= f.span.line <= f.span.end_line <= lines for f in findings), findings
