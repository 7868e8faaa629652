"""Every rule's ``[[fix.example]]`` run through the real fix loop, plus the harness's
own checks. Adding a fix to a rule file adds its cases here."""

from __future__ import annotations

import pytest

from portscan.ruleset.fixspec import FIX_KINDS, FixExample, Tier
from portscan.ruleset.loader import load_rules
from portscan.testing import FixCase, check_fix_example, fix_cases

RULES = load_rules()
CASES = fix_cases(RULES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fix_example(case: FixCase) -> None:
    assert check_fix_example(case) == []


def test_the_pack_has_fixes_of_every_kind_and_tier() -> None:
    fixes = [r.fix for r in RULES.rules if r.fix is not None]
    assert {f.kind for f in fixes} == set(FIX_KINDS)
    assert {f.tier for f in fixes} == {Tier.SAFE, Tier.UNSAFE}
    assert len(fixes) >= 15


def _case(code: str, before: str, after: str | None) -> FixCase:
    return FixCase(RULES.by_code[code], FixExample(before, after), 0)


def test_harness_reports_a_wrong_after() -> None:
    case = _case("PS316", "import torch\ns = torch.cuda.amp.GradScaler()\n",
                 "import torch\ns = torch.amp.GradScaler()\n")
    problems = check_fix_example(case)
    assert len(problems) == 1 and "does not produce `after`" in problems[0]


def test_harness_reports_an_unexpected_change() -> None:
    case = _case("PS316", "import torch\ns = torch.cuda.amp.GradScaler()\n", None)
    assert check_fix_example(case)[0].startswith("expected no change")
