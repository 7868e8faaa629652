"""Every rule's embedded bad/good examples, run through the real scan pipeline.

Adding a rule file adds its cases here; nothing else needs editing.
"""

from __future__ import annotations

import pytest

from portscan.ruleset.loader import load_rules
from portscan.testing import check_example, example_cases, expected_lines

CASES = example_cases(load_rules())


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_example(case) -> None:
    assert check_example(case) == []


def test_every_rule_has_bad_and_good_examples() -> None:
    by_rule: dict[str, set[bool]] = {}
    for case in CASES:
        by_rule.setdefault(case.rule.code, set()).add(case.bad)
    assert by_rule and all(kinds == {True, False} for kinds in by_rule.values())


def test_markers_point_at_the_next_code_line() -> None:
    source = "a = 1\n# expect\n\nb = 2\n  # expect\nc = 3\n"
    assert expected_lines(source) == [4, 6]


def test_harness_detects_a_missing_finding(rules) -> None:
    rule = rules.by_code["PS401"]
    case = type(CASES[0])(rule, type(rule.bad[0])("import torch\n# expect\nx = 1\n"), True, 0)
    assert check_example(case) == ["line 3: expected 1 finding(s), got 0"]


def test_harness_detects_an_unexpected_finding(rules) -> None:
    rule = rules.by_code["PS401"]
    case = type(CASES[0])(rule, type(rule.good[0])("import torch\nx = float(torch.version.cuda)\n"),
                          False, 0)
    assert check_example(case) == ["line 2: expected 0 finding(s), got 1"]
