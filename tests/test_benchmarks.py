"""The speed benchmark's pure parts (benchmarks/run.py): the targets table, the RESULTS.md
insertion, the generated module, and that its peak RSS counts pool workers. Nothing is
timed here; the benchmark measures, tests only check its bookkeeping."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from conftest import REPO

_SPEC = importlib.util.spec_from_file_location("bench_run", REPO / "benchmarks" / "run.py")
assert _SPEC is not None and _SPEC.loader is not None
bench = importlib.util.module_from_spec(_SPEC)
sys.modules["bench_run"] = bench  # dataclasses look their module up while the class is built
_SPEC.loader.exec_module(bench)

ALL_MET = {"regex_s": 1.0, "cold_s": 2.5, "warm_s": 0.5, "cold_rss_mb": 250.0, "ast_parse_s": 2.0,
           "generated_s": 3.9, "generated_rss_mb": 299.0, "precommit_s": 0.6, "fix_s": 9.9,
           "parser_differences": 0}


def statuses(measured: dict[str, float]) -> dict[str, str]:
    return {target: status for target, _, status in bench.target_rows(measured)}


def test_every_target_met_at_or_under_its_limit() -> None:
    rows = bench.target_rows(ALL_MET)
    assert len(rows) == len(bench.TARGETS) == 9
    assert all(status == "met" for _, _, status in rows)
    assert dict((t, v) for t, v, _ in rows)["pre-commit run ≤ 0.6 s"] == "0.60 s"  # the limit itself is met


def test_targets_are_computed_from_the_numbers() -> None:
    measured = {**ALL_MET, "cold_s": 24.0, "warm_s": 2.1, "cold_rss_mb": 888.0, "generated_s": 16.0}
    rows = {target: (value, status) for target, value, status in bench.target_rows(measured)}
    assert rows["torch tree cold ≤ 7x the regex pass"] == ("24.0x", "**missed** (3.4x the limit)")
    assert rows["torch tree cold ≤ 3 s"] == ("24.00 s", "**missed** (8.0x the limit)")
    assert rows["torch tree warm ≤ 2x the regex pass"][1].startswith("**missed**")
    assert rows["peak RSS of the cold torch scan ≤ 300 MB"] == ("888 MB", "**missed** (3.0x the limit)")
    assert rows["generated 3 MB module ≤ 2x ast.parse"] == ("8.0x", "**missed** (4.0x the limit)")
    assert rows["generated 3 MB module ≤ 300 MB"] == ("299 MB", "met")
    assert rows["pre-commit run ≤ 0.6 s"] == ("0.60 s", "met")


def test_the_parsers_must_agree_on_every_tree_and_fix_stay_under_ten_seconds() -> None:
    got = statuses({**ALL_MET, "parser_differences": 1, "fix_s": 12.0})
    assert got["trees whose findings differ between the parsers"] == "**missed**"
    assert got["fix on a 2.4 MB module < 10 s"] == "**missed** (1.2x the limit)"


def test_the_fix_scenarios_module_is_2_4_mb_with_one_fixable_import() -> None:
    module = bench.big_module()
    assert 2.3e6 < len(module.encode()) < 2.5e6 and module.startswith("import pynvml\n")
    ast.parse(module)


def test_reports_are_compared_by_what_they_find(tmp_path: Path) -> None:
    report = {"findings": [{"rule": "PS101"}], "errors": [], "extensions": [], "summary": {"findings": 1},
              "root": "/a"}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(bench.json.dumps(report))
    b.write_text(bench.json.dumps({**report, "root": "/b"}))
    assert bench.same_report(a, b)
    b.write_text(bench.json.dumps({**report, "findings": []}))
    assert not bench.same_report(a, b)


def test_a_target_whose_scenario_did_not_run_is_not_measured() -> None:
    only_generated = {"ast_parse_s": 2.0, "generated_s": 3.0, "generated_rss_mb": 400.0}
    got = statuses(only_generated)
    assert got["generated 3 MB module ≤ 2x ast.parse"] == "met"
    assert got["generated 3 MB module ≤ 300 MB"].startswith("**missed**")
    assert got["torch tree cold ≤ 3 s"] == got["pre-commit run ≤ 0.6 s"] == "not measured"
    assert got["torch tree cold ≤ 7x the regex pass"] == "not measured"  # cold_s without regex_s would not do


RESULTS = """# Benchmark results

Intro.

## Runs

### 2026-11-30 03:47 UTC — older

| a | b |

### 2026-11-29 — oldest

text
"""


def test_a_run_goes_first_under_runs_and_older_runs_stay() -> None:
    new = bench.insert_run(RESULTS, "### 2026-12-02 05:00 UTC — newest\n\n| x | y |\n")
    assert new.startswith("# Benchmark results\n\nIntro.\n\n## Runs\n\n"
                          "### 2026-12-02 05:00 UTC — newest\n\n| x | y |\n\n### 2026-11-30 03:47 UTC — older\n")
    assert new.endswith(RESULTS.split("## Runs\n\n")[1])
    again = bench.insert_run(new, "### 2026-12-03 — later\n")
    headings = [line for line in again.splitlines() if line.startswith("### ")]
    assert headings == ["### 2026-12-03 — later", "### 2026-12-02 05:00 UTC — newest",
                        "### 2026-11-30 03:47 UTC — older", "### 2026-11-29 — oldest"]


def test_runs_heading_is_added_when_missing_or_empty() -> None:
    assert bench.insert_run("# Results\n\ntext\n", "### run\n") == "# Results\n\ntext\n\n## Runs\n\n### run\n"
    assert bench.insert_run("# R\n\n## Runs\n", "### run\n") == "# R\n\n## Runs\n\n### run\n"


def test_the_real_results_file_keeps_its_runs() -> None:
    text = (REPO / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    new = bench.insert_run(text, "### new run\n")
    assert new.count("\n### ") == text.count("\n### ") + 1
    runs = new.split("## Runs\n", 1)[1]
    assert runs.lstrip("\n").startswith("### new run\n")
    assert new.replace("### new run\n\n", "", 1) == text


def test_report_carries_the_targets_table() -> None:
    report = bench.render("2026-12-02 05:00 UTC", "x86_64, 2 cores, Python 3.11.7", "commit abc", "Corpus: `t`", 3,
                          [("cold scan (no cache)", "2.50", "3.0x regex", "250 MB")], ALL_MET, ["a note."])
    assert report.startswith("### 2026-12-02 05:00 UTC — x86_64, 2 cores, Python 3.11.7; portscan commit abc\n")
    assert "| cold scan (no cache) | 2.50 | 3.0x regex | 250 MB |" in report
    assert "| torch tree cold ≤ 3 s | 2.50 s | met |" in report
    assert report.endswith("a note.\n")


def test_generated_module_shape() -> None:
    text = bench.generated_module()
    lines = text.splitlines()
    assert len(lines) == 120_000
    assert lines[0] == "v0 = torch.version.cuda" and lines[-1] == "v119999 = torch.version.cuda"
    assert 3_000_000 <= len(text.encode()) <= 3_500_000
    assert "import" not in text  # nothing to report: torch is never imported
    with_import = bench.generated_module(import_torch=True)
    assert with_import == "import torch\n" + text
    small = bench.generated_module(3, import_torch=True)
    assert small == "import torch\nv0 = torch.version.cuda\nv1 = torch.version.cuda\nv2 = torch.version.cuda\n"
    assert len(ast.parse(small).body) == 4


def test_write_generated(tmp_path: Path) -> None:
    plain = bench.write_generated(tmp_path, lines=2)
    imported = bench.write_generated(tmp_path, import_torch=True, lines=2)
    assert plain != imported
    assert plain.read_text(encoding="utf-8") == bench.generated_module(2)
    assert imported.read_text(encoding="utf-8").startswith("import torch\n")


def test_only_names_scenarios() -> None:
    assert bench.parse_only("cold,generated") == ("cold", "generated")
    assert bench.parse_only(None) == bench.SCENARIOS
    with pytest.raises(Exception, match="unknown scenario nope"):
        bench.parse_only("cold,nope")


def test_commit_outside_a_checkout(tmp_path: Path) -> None:
    assert bench.portscan_commit(tmp_path) == "not a git checkout"


HEAVY_WORKER = """
import concurrent.futures, multiprocessing
def work(mb):
    block = bytearray(mb * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    return len(block)
if __name__ == "__main__":
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        print(list(pool.map(work, [160])))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss units and wait4 semantics: Linux")
def test_peak_rss_counts_a_pool_worker() -> None:
    """The scanning happens in pool workers (portscan.pool); a measurement of the parent
    alone (about 10 MB here) would miss it."""
    got = bench.measure([sys.executable, "-c", HEAVY_WORKER])
    assert got.rss_mb >= 160


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss units and wait4 semantics: Linux")
def test_peak_rss_is_not_the_benchmarks_own() -> None:
    """A child's peak starts at the high-water mark of whoever forked it; measured from a
    fresh wrapper, a bare interpreter stays small however big the benchmark has grown."""
    block = bytearray(200 * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    got = bench.measure([sys.executable, "-c", "pass"])
    del block
    assert got.rss_mb < 100


def test_a_measured_tree_cannot_shadow_the_wrappers_modules(tmp_path: Path) -> None:
    """The torch tree has a `types.py`; the pre-commit scenario runs with it as the cwd."""
    (tmp_path / "types.py").write_text("raise SystemExit('shadowed')\n", encoding="utf-8")
    assert bench.measure([sys.executable, "-c", "pass"], cwd=tmp_path).seconds >= 0
