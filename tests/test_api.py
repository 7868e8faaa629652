"""portscan.api: the functions the CLI calls give the CLI's results without it."""

from __future__ import annotations

from pathlib import Path

from portscan import api

from conftest import FIXTURE


def test_a_baseline_written_from_a_scan_hides_all_of_it(tmp_path: Path, rules) -> None:
    result = api.scan([FIXTURE], rules)
    path = tmp_path / "baseline.json"
    assert api.write_baseline(result, path) == len(result.findings) > 0
    filtered, split = api.apply_baseline(result, path)
    assert filtered.findings == () and split.known == len(result.findings) and split.gone == 0
    assert filtered.suppressed == result.suppressed + len(result.findings)


def test_fix_without_writing_leaves_the_tree(rules) -> None:
    before = {p: p.read_bytes() for p in FIXTURE.rglob("*.py")}
    run = api.fix([FIXTURE], rules, write=False)
    assert run.changed and {p: p.read_bytes() for p in FIXTURE.rglob("*.py")} == before
