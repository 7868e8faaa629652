"""Keeping a ported repository clean: configuration, targets, suppressions, baselines,
output formats and exit switches, through the command line as a user runs it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from portscan.cli import main
from portscan.config import ConfigError, find_config, load_config
from portscan.scan import scan_paths

CUDA_ONLY = textwrap.dedent("""\
    import pynvml
    import torch

    major = int(torch.version.cuda.split(".")[0])
    torch.backends.cuda.matmul.allow_tf32 = True
    """)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def concise(capsys, *argv: str) -> tuple[int, list[str]]:
    code, out, _ = run(capsys, "scan", "--format", "concise", *argv)
    return code, [line for line in out.splitlines() if line]


# ----------------------------------------------------------------------------- configuration


def test_nearest_config_wins_and_portscan_toml_first(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": "[tool.portscan]\nignore = ['PS401']\n",
                     "sub/pyproject.toml": "[project]\nname = 'x'\n",  # no [tool.portscan]: skipped
                     "sub/deeper/portscan.toml": "ignore = ['PS602']\n",
                     "sub/deeper/pyproject.toml": "[tool.portscan]\nignore = ['PS303']\n"})
    assert find_config(tmp_path / "sub") == tmp_path / "pyproject.toml"
    assert find_config(tmp_path / "sub" / "deeper") == tmp_path / "sub" / "deeper" / "portscan.toml"
    assert load_config(tmp_path / "sub" / "deeper" / "portscan.toml").ignore == ("PS602",)


@pytest.mark.parametrize(("text", "key"), [
    ("[tool.portscan]\nselct = ['PS1']\n", "tool.portscan.selct: unknown key"),
    ("[tool.portscan]\nfail-on = 'fatal'\n", "tool.portscan.fail-on"),
    ("[tool.portscan]\ntarget = { arch = 'sm_90' }\n", "tool.portscan.target.arch"),
    ("[tool.portscan]\nper-file-ignores = { 'a.py' = 'PS1' }\n", "tool.portscan.per-file-ignores.a.py"),
])
def test_config_errors_name_file_and_key(tmp_path: Path, capsys, text: str, key: str) -> None:
    write(tmp_path, {"pyproject.toml": text, "a.py": CUDA_ONLY})
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(tmp_path / "pyproject.toml")
    code, _, err = run(capsys, "scan", str(tmp_path))
    assert code == 2 and str(tmp_path / "pyproject.toml") in err and key in err


def test_select_ignore_and_flags_override_the_file(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"pyproject.toml": "[tool.portscan]\nselect = ['PS4']\n", "a.py": CUDA_ONLY})
    assert {line.split()[1] for line in concise(capsys, str(tmp_path))[1]} == {"PS401"}
    assert {line.split()[1] for line in concise(capsys, "--select", "PS6", str(tmp_path))[1]} == {"PS602"}
    _, lines = concise(capsys, "--select", "PS6", "--extend-select", "PS3", str(tmp_path))
    assert {line.split()[1] for line in lines} == {"PS602", "PS303"}


def test_per_file_ignores_and_fail_on(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"pyproject.toml": "[tool.portscan]\nper-file-ignores = { 'tools/*.py' = ['PS6'] }\n"
                                       "fail-on = 'error'\n",
                     "tools/probe.py": "import pynvml\n",
                     "a.py": "import torch\nimport torchao\nDTYPE = torch.float8_e4m3fn\n"})
    code, lines = concise(capsys, str(tmp_path))
    assert [line.split()[1] for line in lines] == ["PS503"]  # pynvml ignored under tools/
    assert code == 0  # only a warning, and fail-on is error
    assert concise(capsys, "--fail-on", "warning", str(tmp_path))[0] == 1


def test_exclude_applies_to_walks_and_with_force_exclude_to_named_files(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"pyproject.toml": "[tool.portscan]\nextend-exclude = ['legacy/', 'gen_*.py']\n",
                     "legacy/old.py": "import pynvml\n", "gen_api.py": "import pynvml\n", "a.py": "import pynvml\n"})
    assert [line.split(":")[0] for line in concise(capsys, str(tmp_path))[1]] == ["a.py"]
    named = [str(tmp_path / "legacy" / "old.py"), str(tmp_path / "gen_api.py")]
    assert len(concise(capsys, *named)[1]) == 2  # named explicitly: scanned
    code, lines = concise(capsys, "--force-exclude", *named)
    assert (code, lines) == (0, [])


def test_in_house_rules_dir_is_validated_like_builtin(tmp_path: Path, capsys, rules) -> None:
    builtin = Path(rules.by_code["PS602"].origin).read_text()
    inhouse = builtin.replace('code = "PS602"', 'code = "ACME101"').replace('name = "pynvml-import"',
                                                                          'name = "acme-nvml"')
    write(tmp_path, {"acme_rules/acme-nvml.toml": inhouse, "a.py": "import pynvml\n",
                     "pyproject.toml": "[tool.portscan]\nrules-dirs = ['acme_rules']\n"})
    assert {line.split()[1] for line in concise(capsys, str(tmp_path))[1]} == {"PS602", "ACME101"}
    (tmp_path / "acme_rules" / "broken.toml").write_text(inhouse.replace("severity = \"error\"", "severity = 3"))
    code, _, err = run(capsys, "scan", str(tmp_path))
    assert code == 2 and "broken.toml: severity" in err


def test_target_changes_what_target_dependent_rules_report(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"a.py": "import torch\nimport torchao\nDTYPE = torch.float8_e4m3fn\n",
                     "k.cu": "#define WARP_SIZE 32\n__global__ void k(float* x) {}\n"})

    def severities(*flags: str) -> dict[str, str]:
        _, lines = concise(capsys, *flags, str(tmp_path))
        return {line.split()[1]: line.split()[2].strip("[]") for line in lines}

    assert severities() == {"PS503": "warning", "PS910": "warning"}
    assert severities("--target-arch", "gfx942") == {"PS503": "error", "PS910": "warning"}
    # OCP FP8 is native on gfx12, whose wavefronts are 32 wide
    assert severities("--target-arch", "gfx1201") == {"PS910": "info"}
    (tmp_path / "portscan.toml").write_text("target = { rocm = '6.4', arch = 'gfx950' }\n")
    assert severities() == {"PS910": "warning"}


# ----------------------------------------------------------------------------- suppressions


def test_noqa_silences_exactly_its_line_and_code(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"a.py": """\
        import torch
        import pynvml  # noqa: PS602
        import pynvml as nv2  # noqa: PS101
        import pynvml as nv3  # portscan: ignore[PS602] probing only
        import pynvml as nv4  # noqa
        x = "import pynvml  # noqa: PS602"
        v = float(torch.version.cuda)  # noqa: E501, PS401
        """})
    _, lines = concise(capsys, str(tmp_path))
    assert [(line.split(":")[1], line.split()[1]) for line in lines] == [("3", "PS602"), ("5", "PS602")]


def test_file_level_suppression_and_unused_report(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"a.py": "# portscan: ignore-file[PS602]\nimport pynvml\nimport GPUtil  # noqa: PS602\n",
                     "requirements.txt": "pynvml  # noqa: PS809\ncupy-cuda12x\n"})
    code, out, err = run(capsys, "scan", "--format", "concise", "--report-unused-noqa", str(tmp_path))
    assert [line.split()[1] for line in out.splitlines()] == ["PS603", "PS806"]
    assert "a.py:3: `noqa: PS602` silences nothing" in err and code == 1
    code, out, err = run(capsys, "scan", "--format", "concise", "--select", "PS6", str(tmp_path))
    assert "silences nothing" not in err


# ----------------------------------------------------------------------------- baseline


def test_baseline_survives_lines_inserted_above(tmp_path: Path, capsys) -> None:
    repo = write(tmp_path / "repo", {"a.py": CUDA_ONLY, "b.py": "import pynvml\nimport pynvml\n"})
    baseline = tmp_path / "baseline.json"
    code, _, err = run(capsys, "scan", "--write-baseline", str(baseline), str(repo))
    assert code == 0 and "recorded 5 findings" in err
    assert run(capsys, "scan", "--baseline", str(baseline), str(repo))[0] == 0
    (repo / "a.py").write_text("'''Docstring added later.'''\n\n\n" + CUDA_ONLY.replace("major =", "major  ="))
    code, lines = concise(capsys, "--baseline", str(baseline), str(repo))
    assert (code, lines) == (0, [])
    (repo / "b.py").write_text("import pynvml\nimport pynvml\nimport pynvml\n")  # a third copy is new
    code, lines = concise(capsys, "--baseline", str(baseline), str(repo))
    assert code == 1 and len(lines) == 1 and lines[0].startswith("b.py:") and "PS602" in lines[0]
    (repo / "a.py").write_text("import torch\n")
    _, _, err = run(capsys, "scan", "--baseline", str(baseline), str(repo))
    assert "baseline entries are fixed" in err


def test_bad_baseline_is_a_usage_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.py").write_text("import pynvml\n")
    (tmp_path / "b.json").write_text("{}")
    code, _, err = run(capsys, "scan", "--baseline", str(tmp_path / "b.json"), str(tmp_path))
    assert code == 2 and "not a portscan baseline" in err


# ----------------------------------------------------------------------------- outputs and exits


def test_machine_formats_are_clean_and_o_writes_a_file(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    write(tmp_path, {"a.py": CUDA_ONLY})
    code, out, _ = run(capsys, "scan", "--format", "sarif", "--statistics", str(tmp_path))
    assert code == 1 and json.loads(out)["version"] == "2.1.0"  # statistics went to stderr
    code, out, _ = run(capsys, "scan", "--format", "github", str(tmp_path))
    assert all(line.startswith("::") for line in out.splitlines())
    report = tmp_path / "report.json"
    code, out, _ = run(capsys, "scan", "--format", "json", "-o", str(report), str(tmp_path))
    assert out == "" and len(json.loads(report.read_text())["findings"]) == 3
    code, out, _ = run(capsys, "scan", str(tmp_path))
    assert "\x1b[" not in out


def test_exit_switches_and_statistics(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"a.py": CUDA_ONLY})
    code, out, _ = run(capsys, "scan", "--exit-zero", "--statistics", "--format", "concise", str(tmp_path))
    assert code == 0
    stats = [line.split() for line in out.splitlines() if line.split()[:1] == ["1"]]
    assert {row[1] for row in stats} == {"PS303", "PS401", "PS602"} or len(stats) >= 3
    assert run(capsys, "scan", "--select", "PS9X", str(tmp_path))[0] == 2
    fixable = write(tmp_path / "f", {"a.py": "import torch\ns = torch.cuda.amp.GradScaler()\n"})
    assert run(capsys, "fix", "--exit-non-zero-on-fix", str(fixable))[0] == 1
    assert run(capsys, "fix", "--exit-non-zero-on-fix", str(fixable))[0] == 0  # nothing left to change


def test_progress_is_reported_per_file(tmp_path: Path, rules) -> None:
    write(tmp_path, {"a.py": CUDA_ONLY, "b.py": "import os\n", "requirements.txt": "torch\n"})
    calls: list[tuple[int, int]] = []
    scan_paths([tmp_path], rules, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (3, 3) and [done for done, _ in calls] == [1, 2, 3]


def test_fix_skips_suppressed_findings(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"a.py": "import torch\ns = torch.cuda.amp.GradScaler()  # noqa: PS316\n"
                             "t = torch.cuda.amp.GradScaler()\n"})
    run(capsys, "fix", str(tmp_path))
    assert (tmp_path / "a.py").read_text() == ("import torch\ns = torch.cuda.amp.GradScaler()  # noqa: PS316\n"
                                               't = torch.amp.GradScaler("cuda")\n')
