"""`portscan test [DIR ...]`: an in-house rule directory's examples checked the way the
suite checks the built-in pack, with a pass/fail report and an exit status."""

from __future__ import annotations

from pathlib import Path

import pytest

from portscan.cli import main
from portscan.ruleset.loader import builtin_rules_dir, load_rules
from portscan.testing import example_cases, fix_cases

RULE = '''
code = "ACME101"
name = "acme-gpu-stats"
category = "tooling"
severity = "warning"
confidence = "high"
message = "`${matched}` reads NVIDIA-only GPU statistics"
rocm = "acme.gpustats calls NVML."
rewrite = "Use acme.rocm_stats."
references = ["https://example.org/acme"]

[match]
kind = "name"
names = ["acme.gpustats.read"]

[[bad]]
source = """
import acme.gpustats
# expect
acme.gpustats.read()
"""

[[good]]
source = "import acme\\nacme.rocm_stats()\\n"

[fix]
tier = "unsafe"
why = "rocm_stats reports fewer fields."
kind = "replace"

[[fix.replace]]
names = ["acme.gpustats.read"]
to = "acme.rocm_stats"

[[fix.example]]
before = """
import acme.gpustats
acme.gpustats.read()
"""
after = """
import acme.gpustats
acme.rocm_stats()
"""
'''


def rules_dir(tmp_path: Path, text: str = RULE) -> Path:
    folder = tmp_path / "acme-rules"
    folder.mkdir()
    (folder / "acme-gpu-stats.toml").write_text(text)
    return folder


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["test", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_passing_directory_exits_0_and_counts_its_examples(tmp_path: Path, capsys) -> None:
    folder = rules_dir(tmp_path)
    code, out, _ = run(capsys, str(folder))
    assert (code, out) == (0, "3 passed, 0 failed: 3 examples of 1 rules\n"), out
    code, out, _ = run(capsys, "-v", str(folder))
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()[:-1]] == [
        ["ok", "ACME101-acme-gpu-stats/bad-1"], ["ok", "ACME101-acme-gpu-stats/good-1"],
        ["ok", "ACME101-acme-gpu-stats/fix-1"]]


def test_failing_examples_are_listed_with_what_went_wrong(tmp_path: Path, capsys) -> None:
    broken = (RULE.replace("# expect\nacme.gpustats.read()", "acme.gpustats.read()\n# expect\nx = 1")
              .replace('source = "import acme\\nacme.rocm_stats()\\n"',
                       'source = "import acme.gpustats\\nacme.gpustats.read()\\n"')
              .replace("gpustats\nacme.rocm_stats()", "gpustats\nacme.rocm_stats(1)"))
    code, out, _ = run(capsys, str(rules_dir(tmp_path, broken)))
    assert code == 1
    assert "FAIL ACME101-acme-gpu-stats/bad-1 (" in out
    assert "    line 2: expected 0 finding(s), got 1\n    line 4: expected 1 finding(s), got 0\n" in out
    assert "FAIL ACME101-acme-gpu-stats/good-1" in out and "line 2: expected 0 finding(s), got 1" in out
    assert "FAIL ACME101-acme-gpu-stats/fix-1" in out and "the fix does not produce `after`" in out
    assert out.endswith("0 passed, 3 failed: 3 examples of 1 rules\n")


def test_default_is_the_configured_rules_dirs(tmp_path: Path, capsys, monkeypatch) -> None:
    rules_dir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.portscan]\nrules-dirs = ["acme-rules"]\n')
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "-v")
    assert code == 0 and "(acme-rules/acme-gpu-stats.toml)" in out and out.endswith("of 1 rules\n")


def test_a_built_in_category_runs_like_the_suite(capsys) -> None:
    folder = builtin_rules_dir() / "apex"
    pack = load_rules()
    apex = type(pack)([r for r in pack.rules if r.category == "apex"])
    expected = len(example_cases(apex)) + len(fix_cases(apex))
    code, out, _ = run(capsys, str(folder))
    assert code == 0 and out == f"{expected} passed, 0 failed: {expected} examples of {len(apex)} rules\n"


@pytest.mark.parametrize("setup, message", [
    (lambda d: (d / "bad.toml").write_text('code = "ACME1\n'), "invalid rule file"),
    (lambda d: None, "no rule files"),
])
def test_broken_or_empty_directories_exit_2(tmp_path: Path, capsys, setup, message: str) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    setup(folder)
    code, out, err = run(capsys, str(folder))
    assert code == 2 and message in err and out == ""


def test_a_check_that_raises_fails_its_case_and_the_run_goes_on(tmp_path: Path, capsys, monkeypatch) -> None:
    def explode(case):
        raise RecursionError("deep")

    monkeypatch.setattr("portscan.testing.check_example", explode)
    code, out, _ = run(capsys, str(rules_dir(tmp_path)))
    assert code == 1 and out.count("the check raised RecursionError: deep") == 2
    assert out.endswith("1 passed, 2 failed: 3 examples of 1 rules\n")
