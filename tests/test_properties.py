"""Property tests on generated Python (hypothesis + hypothesmith): the scan never
raises, and `fix` (every tier) always leaves code that parses and is stable.

A bounded number of examples runs in CI; set PORTSCAN_FUZZ_EXAMPLES for a longer run
(the count reached is recorded in the closing notes of the issue that added this).
"""

from __future__ import annotations

import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
hypothesmith = pytest.importorskip("hypothesmith")

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from portscan.fix.engine import fix_source  # noqa: E402
from portscan.parse import SourceError, parse_python  # noqa: E402
from portscan.ruleset.loader import load_rules  # noqa: E402
from portscan.scan import scan_source  # noqa: E402

RULES = load_rules()
EXAMPLES = int(os.environ.get("PORTSCAN_FUZZ_EXAMPLES", "30"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize="PORTSCAN_FUZZ_EXAMPLES" not in os.environ,
                    suppress_health_check=list(HealthCheck))
#: code every fix understands, to splice into generated modules so the fixes have work
SNIPPETS = sorted({e.before for r in RULES.rules if r.fix is not None for e in r.fix.examples}
                  | {e.source for r in RULES.rules for e in r.bad if e.path.endswith(".py")})


@SETTINGS
@given(hypothesmith.from_grammar())
def test_scan_never_raises_on_generated_modules(source: str) -> None:
    try:
        findings = scan_source(source, "generated.py", RULES)
    except SourceError:
        return  # documented: the file is reported as unparsable, the scan goes on
    assert all(f.span.line >= 1 for f in findings)


@SETTINGS
@given(generated=hypothesmith.from_grammar(), snippet=st.sampled_from(SNIPPETS), first=st.booleans())
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
