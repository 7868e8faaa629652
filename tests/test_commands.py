"""`portscan rules`, `explain`, `docs` and the markdown migration report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portscan.cli import main
from portscan.docs import render_all
from portscan.ruleset import load_rules

from conftest import FIXTURE, REPO

RULES = load_rules()


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_rules_json_lists_every_rule(capsys) -> None:
    code, out, _ = run_cli(capsys, "rules", "--format", "json")
    listed = json.loads(out)
    assert code == 0
    assert [r["code"] for r in listed] == [r.code for r in RULES.rules]
    for entry in listed:
        assert set(entry) >= {"code", "name", "severity", "category", "confidence", "fix",
                              "message", "rocm", "rewrite", "references"}
        assert entry["references"]


def test_rules_table_lists_every_rule(capsys) -> None:
    code, out, _ = run_cli(capsys, "rules")
    assert code == 0
    assert f"{len(RULES)} rules" in out
    for rule in RULES.rules:
        assert rule.code in out


@pytest.mark.parametrize("rule", RULES.rules, ids=[r.code for r in RULES.rules])
def test_explain_every_rule(capsys, rule) -> None:
    code, out, _ = run_cli(capsys, "explain", rule.code)
    assert code == 0
    for heading in ("What it flags", "What happens on ROCm", "Rewrite", "Example", "Fix safety",
                    "References"):
        assert heading in out
    assert rule.references[0][:40] in out.replace("\n", "")


def test_explain_by_name_and_unknown_code(capsys) -> None:
    assert run_cli(capsys, "explain", "apex-amp")[0] == 0
    code, _, err = run_cli(capsys, "explain", "PS999")
    assert code == 2 and "no rule 'PS999'" in err


def test_committed_rule_docs_are_up_to_date() -> None:
    folder = REPO / "docs" / "rules"
    expected = render_all(RULES.rules)
    committed = {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*.md")}
    assert sorted(committed) == sorted(expected), "run `portscan docs`"
    stale = [name for name, text in expected.items() if committed[name] != text]
    assert stale == [], "run `portscan docs`"


def test_docs_command_writes_and_checks(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rules"
    assert run_cli(capsys, "docs", "--check", "--out", str(out))[0] == 1
    assert run_cli(capsys, "docs", "--out", str(out))[0] == 0
    assert len(list(out.glob("*.md"))) == len(RULES) + 1
    assert run_cli(capsys, "docs", "--check", "--out", str(out))[0] == 0
    (out / "PS101.md").write_text("edited\n")
    (out / "PS000.md").write_text("stale\n")
    code, _, err = run_cli(capsys, "docs", "--check", "--out", str(out))
    assert code == 1 and "PS101.md is out of date" in err and "PS000.md" in err
    run_cli(capsys, "docs", "--out", str(out))
    assert not (out / "PS000.md").exists()
    assert (out / "PS101.md").read_text() == render_all(RULES.rules)["PS101.md"]


def test_markdown_report_on_the_fixture(capsys) -> None:
    code, out, _ = run_cli(capsys, "scan", "--format", "markdown", str(FIXTURE))
    assert code == 1
    assert out.startswith("# ROCm migration report: cuda-trainer\n")
    assert "**Not ready:" in out
    blockers = out.split("## Blockers")[1].split("## By category")[0]
    assert "`scripts/export_tensorrt.py:4` | PS101 tensorrt-import" in blockers
    assert "PS202" not in blockers  # warnings are not blockers
    assert "| apex | 0 | " in out
    assert "Heuristic: each rule counts once per file" in out
    assert "## Auto-fixable" in out


def test_markdown_report_on_clean_and_warning_only_trees(tmp_path: Path, capsys) -> None:
    (tmp_path / "ok.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    assert "**Ready:**" in run_cli(capsys, "scan", "--format", "markdown", str(tmp_path))[1]
    (tmp_path / "warn.py").write_text("import torch\ntorch.backends.cudnn.benchmark = True\n")
    assert "**Runs with changes:" in run_cli(capsys, "scan", "--format", "markdown", str(tmp_path))[1]


def test_the_pack_is_large_sourced_and_covers_every_python_category() -> None:
    assert len(RULES) >= 60
    assert all(rule.references for rule in RULES.rules)
    categories = {rule.category for rule in RULES.rules}
    assert {"inference", "apex", "backends", "version", "hardware", "tooling", "libraries"} <= categories
    severities = {rule.severity.value for rule in RULES.rules}
    assert severities == {"error", "warning", "info"}  # not every CUDA-ism is an error
