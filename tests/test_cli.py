"""The command line as a user runs it: the JSON contract and every exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from portscan import __version__
from portscan.cli import main

from conftest import FIXTURE

FINDING_KEYS = {"rule": str, "name": str, "severity": str, "category": str, "confidence": str,
                "path": str, "line": int, "column": int, "end_line": int, "end_column": int,
                "message": str, "rewrite": str, "references": list, "guard": type(None),
                "fix": type(None), "fingerprint": str, "uses": list}


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract(capsys) -> None:
    code, out, _ = run_cli(capsys, "scan", "--format", "json", str(FIXTURE))
    assert code == 1
    document = json.loads(out)
    assert set(document) == {"schema_version", "portscan_version", "root", "findings", "errors",
                             "extensions", "notes", "unused_suppressions", "summary"}
    assert document["extensions"] == [{
        "name": "fused_bias_gelu", "path": "setup.py", "line": 29,
        "sources": ["csrc/fused_bias_gelu.cpp", "csrc/fused_bias_gelu.cu"], "findings": 8,
        "missing": [], "headers": []}]
    assert document["notes"] == []
    assert document["schema_version"] == 1 and document["portscan_version"] == __version__
    assert document["root"] == str(FIXTURE)
    assert document["errors"] == []
    assert len(document["findings"]) == 75
    fixes = {(f["path"], f["rule"]): f["fix"] for f in document["findings"]}
    assert fixes[("utils/gpu.py", "PS602")] == "safe" and fixes[("train.py", "PS209")] == "unsafe"
    assert fixes[("train.py", "PS301")] is None
    for finding in document["findings"]:
        assert set(finding) == set(FINDING_KEYS)
        for key, kind in FINDING_KEYS.items():
            assert isinstance(finding[key], kind) or (key in ("guard", "fix") and isinstance(finding[key], str))
        assert finding["fix"] in (None, "safe", "unsafe")
        assert finding["severity"] in {"error", "warning", "info"}
        assert not finding["path"].startswith("/") and "\\" not in finding["path"]
        assert finding["line"] >= 1 and finding["column"] >= 1
        assert (finding["end_line"], finding["end_column"]) > (finding["line"], finding["column"])
        assert all(url.startswith("https://") for url in finding["references"])
    summary = document["summary"]
    assert summary["findings"] == 75 and summary["files_scanned"] == 16 and summary["errors"] == 0
    assert summary["by_severity"] == {"error": 35, "warning": 26, "info": 14}
    guarded = [f for f in document["findings"] if f["guard"]]
    assert [(f["path"], f["line"], f["guard"]) for f in guarded] == [("utils/gpu.py", 20, "vendor-branch")]
    assert sum(summary["by_category"].values()) == 75


def test_json_columns_point_at_the_code(capsys) -> None:
    _, out, _ = run_cli(capsys, "scan", "--format", "json", str(FIXTURE))
    for finding in json.loads(out)["findings"]:
        if finding["line"] == finding["end_line"]:
            line = (FIXTURE / finding["path"]).read_text().splitlines()[finding["line"] - 1]
            text = line[finding["column"] - 1 : finding["end_column"] - 1]
            assert text.strip() == text and text, finding


def test_exit_0_when_clean(tmp_path: Path, capsys) -> None:
    (tmp_path / "ok.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    code, out, _ = run_cli(capsys, "scan", "--format", "json", str(tmp_path))
    assert code == 0
    assert json.loads(out)["summary"]["findings"] == 0


def test_exit_1_on_findings(tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.py").write_text("import pynvml\n")
    assert run_cli(capsys, "scan", str(tmp_path))[0] == 1


def test_exit_1_when_a_file_cannot_be_parsed(tmp_path: Path, capsys) -> None:
    (tmp_path / "old.py").write_text('import pynvml\nprint "GPU count", pynvml.nvmlDeviceGetCount()\n')
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "unparsed.py").write_text('print "no rule token here, so never parsed"\n')
    code, out, _ = run_cli(capsys, "scan", "--format", "json", str(tmp_path))
    document = json.loads(out)
    assert code == 1
    assert document["findings"] == []
    assert [(e["path"], e["kind"]) for e in document["errors"]] == [("old.py", "parse")]
    assert "Python 2" in document["errors"][0]["message"]


def test_exit_2_on_a_missing_path(tmp_path: Path, capsys) -> None:
    code, out, err = run_cli(capsys, "scan", str(tmp_path / "nope"))
    assert code == 2 and out == ""
    assert "no such file or directory" in err


def test_exit_2_on_usage_errors(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["scan", "--format", "yaml"])
    assert info.value.code == 2
    assert main([]) == 2


def test_exit_2_on_a_broken_rule_file(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "broken.toml").write_text('code = "PS999"\n')
    monkeypatch.setattr("portscan.ruleset.loader.builtin_rules_dir", lambda: tmp_path)
    code, out, err = run_cli(capsys, "scan", str(FIXTURE))
    assert code == 2 and out == ""
    assert f"{tmp_path / 'broken.toml'}: name: missing required key" in err


def test_exit_2_on_an_internal_error(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "a.py").write_text("import pynvml\n")
    (tmp_path / "b.py").write_text("import pynvml\n")

    def explode(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr("portscan.match.python.match_python", explode)
    code, out, _ = run_cli(capsys, "scan", "--format", "json", str(tmp_path))
    errors = json.loads(out)["errors"]
    assert code == 2
    assert [(e["path"], e["kind"]) for e in errors] == [("a.py", "internal"), ("b.py", "internal")]
    assert "ValueError: boom" in errors[0]["message"]


def test_paths_are_relative_to_the_single_directory_or_the_cwd(tmp_path: Path, capsys,
                                                               monkeypatch) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("import pynvml\n")
    _, out, _ = run_cli(capsys, "scan", "--format", "json", str(tmp_path / "pkg"))
    assert json.loads(out)["findings"][0]["path"] == "m.py"
    monkeypatch.chdir(tmp_path)
    _, out, _ = run_cli(capsys, "scan", "--format", "json", "pkg/m.py")
    assert json.loads(out)["findings"][0]["path"] == "pkg/m.py"


def test_full_report_on_the_fixture(capsys) -> None:
    code, out, _ = run_cli(capsys, "scan", str(FIXTURE))
    assert code == 1
    assert "train.py" in out and "PS202" in out and "rewrite:" in out
    assert " > 13 │ from apex import amp" in out
    assert "75 findings in 12 of 16 files: 35 error, 26 warning, 14 info" in out


@pytest.mark.parametrize("argv", [["-m", "portscan"], ["-c", "from portscan.cli import main; "
                                                              "raise SystemExit(main())"]])
def test_entry_points_run_as_a_subprocess(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, *argv, "scan", "--format", "json", str(FIXTURE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert len(json.loads(done.stdout)["findings"]) == 75


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"portscan {__version__}"
