"""`portscan rules`, `explain`, `docs` and the markdown migration report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from portscan.cli import main
from portscan.docs import message_text, render_all, render_rule_page
from portscan.ruleset.loader import load_rules

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


def test_rules_piped_is_one_tab_separated_line_per_rule(capsys) -> None:
    code, out, _ = run_cli(capsys, "rules")  # capsys is not a terminal
    header, *lines = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and header == ["code", "name", "severity", "category", "confidence", "fixable"]
    assert [(row[0], row[1], row[2]) for row in lines] == [(r.code, r.name, r.severity.value) for r in RULES.rules]
    assert {len(row) for row in lines} == {6}


def test_rules_table_keeps_whole_names_when_piped(capsys) -> None:
    code, out, _ = run_cli(capsys, "rules", "--format", "table")
    assert code == 0 and f"{len(RULES)} rules" in out
    longest = max(RULES.rules, key=lambda r: len(r.name))
    assert len(longest.name) > 30 and any(f" {longest.name} " in line for line in out.splitlines())
    assert "…" not in out


@pytest.mark.parametrize("rule", RULES.rules, ids=[r.code for r in RULES.rules])
def test_explain_every_rule(capsys, rule) -> None:
    code, out, _ = run_cli(capsys, "explain", rule.code)
    assert code == 0
    for heading in ("What it flags", "What happens on ROCm", "Rewrite", "Example", "Fix safety",
                    "References"):
        assert heading in out
    assert rule.references[0][:40] in out.replace("\n", "")
    message = out.split("What it flags")[0]  # the examples below may hold shell `${VARS}`
    assert "${" not in message and not any(f"${v}" in message for v in rule.pattern.variables)
    if rule.supersedes:
        assert out.index("Supersedes") < out.index("References")


@pytest.mark.parametrize("rule", RULES.rules, ids=[r.code for r in RULES.rules])
def test_rule_page_resolves_placeholders_and_ends_with_its_references(rule) -> None:
    page = render_rule_page(rule, banner=False)
    prose = re.sub(r"(?ms)^```.*?^```$", "", page)  # examples may hold shell `$VARS`
    assert "${" not in prose and not any(f"${v}" in prose for v in rule.pattern.variables)
    references = page.split("\n## References\n", 1)[1].strip().splitlines()
    assert references == [f"- <{url}>" for url in rule.references]


def test_message_placeholders_are_code_spans_outside_backticks() -> None:
    assert message_text(RULES.by_code["PS801"]) == ("`<requirement>` pins a CUDA build of `<package>`; "
                                                    "AMD GPUs need a ROCm build")


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
    (tmp_path / "warn.py").write_text("import torch\nimport torchao\nDTYPE = torch.float8_e4m3fn\n")
    assert "**Runs with changes:" in run_cli(capsys, "scan", "--format", "markdown", str(tmp_path))[1]


def test_the_pack_is_large_sourced_and_covers_every_python_category() -> None:
    assert len(RULES) >= 60
    assert all(rule.references for rule in RULES.rules)
    categories = {rule.category for rule in RULES.rules}
    assert {"inference", "apex", "backends", "version", "hardware", "tooling", "libraries"} <= categories
    severities = {rule.severity.value for rule in RULES.rules}
    assert severities == {"error", "warning", "info"}  # not every CUDA-ism is an error
