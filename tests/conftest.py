from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from portscan.model import Finding
from portscan.ruleset.loader import RuleSet, load_rules
from portscan.ruleset.schema import Rule, parse_rule
from portscan.scan import scan_source

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "fixtures" / "cuda-trainer"
#: `python train.py ...` in the fixture after `portscan fix --unsafe-fixes`: the README's
#: claim, run by tests/test_fix.py (longer runs reach `torch.cuda.synchronize()`, GPU only)
SMOKE_TRAINING = ("--config", "configs/smoke.yaml", "--steps", "2")


@pytest.fixture(scope="session", autouse=True)
def cache_outside_the_repository(tmp_path_factory) -> None:
    """CLI runs cache results; keep that out of the fixtures (a test can override it)."""
    os.environ["PORTSCAN_CACHE_DIR"] = str(tmp_path_factory.mktemp("portscan-cache"))


@pytest.fixture(scope="session")
def rules() -> RuleSet:
    return load_rules()


@pytest.fixture()
def scan(rules: RuleSet):
    """Scan dedented Python source with all rules, or only ``codes``."""

    def run(source: str, codes: list[str] | None = None,
            first_party: frozenset[str] = frozenset()) -> list[Finding]:
        selected = rules.select(codes) if codes else rules
        return list(scan_source(textwrap.dedent(source), "example.py", selected, first_party))

    return run


def inline_rule(code: str, match: dict, message: str = "${matched}", supersedes: tuple[str, ...] = ()) -> Rule:
    """A rule made in a test, with placeholder prose and examples around ``match``."""
    data: dict = {
        "code": code, "name": f"r-{code.lower()}", "category": "test", "severity": "warning",
        "confidence": "high", "message": message, "rocm": "r", "rewrite": "w",
        "references": ["https://example.org"], "match": match,
        "bad": [{"source": "x"}], "good": [{"source": "x"}],
    }
    if supersedes:
        data["supersedes"] = list(supersedes)
    return parse_rule(data, "inline")
