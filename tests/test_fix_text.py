"""`portscan fix` beyond Python (issue 20, item 1): CUDA wheel pins and PyTorch's CUDA
index URLs rewritten in requirements files, pyproject, conda environments, Dockerfiles,
CI definitions and shell scripts, with the guarantees Python fixes have: bytes around
the rewrite kept, unsafe tier, idempotent, declined with a reason where the data cannot
choose."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from portscan.cli import main
from portscan.fix.text import _unreadable, fix_text
from portscan.match.textfix import IN_PYTHON
from portscan.ruleset.loader import RuleSet, load_rules
from portscan.scan import scan_source

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RULES = load_rules()
PACKAGING = RuleSet(r for r in RULES.rules if r.code in ("PS801", "PS802"))


def fixed(text: str, path: str, kind: str, unsafe: bool = True):
    result = fix_text(textwrap.dedent(text).lstrip("\n"), path, kind, PACKAGING, unsafe=unsafe)
    assert result.error is None, result.error
    return result


def reasons(result) -> list[str]:
    return [f"{n.rule}:{n.line} {n.reason}" for n in result.not_fixed]


def copy_fixture(name: str, tmp_path: Path) -> Path:
    repo = tmp_path / name
    shutil.copytree(FIXTURES / name, repo)
    return repo


def test_cuda_trainer_manifests_are_ported_and_a_second_run_changes_nothing(tmp_path: Path, capsys) -> None:
    repo = copy_fixture("cuda-trainer", tmp_path)
    main(["fix", "--unsafe-fixes", "--no-cache", str(repo)])
    requirements = (repo / "requirements.txt").read_text().splitlines()
    assert requirements[:3] == ["--extra-index-url https://download.pytorch.org/whl/rocm5.2",
                                "torch==1.13.1+rocm5.2", "torchvision==0.14.1+rocm5.2"]
    pyproject = (repo / "pyproject.toml").read_text()
    assert '"torch==1.13.1+rocm5.2",' in pyproject
    tomllib.loads(pyproject)
    after = {f.rule for p in ("requirements.txt", "pyproject.toml")
             for f in scan_source((repo / p).read_text(), p, RULES)}
    assert not after & {"PS801", "PS802"}
    capsys.readouterr()
    assert main(["fix", "--unsafe-fixes", "--no-cache", "--diff", str(repo)]) == 0
    assert capsys.readouterr().out == ""


def test_without_unsafe_fixes_manifests_are_left_and_counted(tmp_path: Path, capsys) -> None:
    repo = copy_fixture("cuda-trainer", tmp_path)
    before = (repo / "requirements.txt").read_bytes()
    main(["fix", "--no-cache", str(repo)])
    assert (repo / "requirements.txt").read_bytes() == before
    out = capsys.readouterr().out
    assert "PS801 ×3" in out and "PS802" in out


def test_ci_definitions_keep_their_yaml_and_say_why_templated_urls_stay(tmp_path: Path, capsys) -> None:
    repo = copy_fixture("ci-pipelines", tmp_path)
    main(["fix", "--unsafe-fixes", "--show-fixes", "--no-cache", str(repo)])
    out = " ".join(capsys.readouterr().out.split())
    workflow = (repo / ".github/workflows/test.yml").read_text()
    yaml.safe_load(workflow)
    assert "--extra-index-url https://download.pytorch.org/whl/rocm" in workflow
    assert "whl/${{ matrix.torch-cuda }}" in workflow  # the matrix value is where to change it
    assert "test.yml:28 PS802 pytorch-cuda-wheel-index: the index comes from a variable" in out
    assert "wheels.yml:29 PS802 pytorch-cuda-wheel-index: the nightly indexes" in out
    assert "torch==2.3.1+rocm6.0" in (repo / "Jenkinsfile").read_text()


def test_a_pin_takes_the_rocm_label_of_its_release_and_keeps_markers_and_comments() -> None:
    result = fixed("""
        torch==2.5.1+cu124  # newest that works
        torchaudio==2.5.1+cu124; platform_system == "Linux"
        """, "requirements.txt", "requirements")
    assert result.fixed == ('torch==2.5.1+rocm6.2  # newest that works\n'
                            'torchaudio==2.5.1+rocm6.2; platform_system == "Linux"\n')
    assert [a.line for a in result.applied] == [1, 2]


@pytest.mark.parametrize(("text", "why"), [
    ("torchvision==0.16.0+cu121\n", "torchvision's ROCm build follows torch's"),
    ("torch==1.7.1+cu110\n", "torch 1.7.1 has no ROCm wheels"),
    ("xformers==0.0.23.post1+cu118\n", "no ROCm build of xformers"),
    ("torch==2.1.0+cu121\ntorch==2.2.0+cu121\ntorchvision==0.16.0+cu121\n", "torchvision's ROCm build"),
])
def test_a_pin_the_data_cannot_place_is_declined_with_the_reason(text: str, why: str) -> None:
    result = fixed(text, "requirements.txt", "requirements")
    assert any(why in r for r in reasons(result)), reasons(result)
    if "torch==2.1.0" not in text:
        assert not result.changed


def test_the_index_follows_the_torch_requirement_of_the_file() -> None:
    bounded = fixed("""
        --index-url https://download.pytorch.org/whl/cu118
        torch>=2.0,<2.2
        """, "requirements.txt", "requirements")
    assert bounded.fixed.startswith("--index-url https://download.pytorch.org/whl/rocm5.6\n")
    unpinned = fixed("pip install torch --index-url https://download.pytorch.org/whl/cu121/\n",
                     "install.sh", "shell")
    assert "whl/rocm7.1/" in unpinned.fixed  # the newest release the table lists; the slash kept
    unmet = fixed("--extra-index-url https://download.pytorch.org/whl/cu110\ntorch==1.7.1\n",
                  "requirements.txt", "requirements")
    assert not unmet.changed and any("no torch release with ROCm wheels meets" in r for r in reasons(unmet))
    page = fixed("-f https://download.pytorch.org/whl/cu113/torch_stable.html\ntorch==1.12.1\n",
                 "requirements.txt", "requirements")
    assert not page.changed and any("a page of the CUDA index" in r for r in reasons(page))


def test_scan_marks_only_what_fix_rewrites() -> None:
    text = "torch==2.1.0+cu121\ntorch-scatter==2.1.2+pt21cu121\n"
    marks = {f.span.line: f.fix for f in scan_source(text, "requirements.txt", PACKAGING)}
    assert marks == {1: "unsafe", 2: None}
    setup = 'from setuptools import setup\nsetup(install_requires=["torch==2.1.0+cu121"])\n'
    found = scan_source(setup, "setup.py", PACKAGING)
    assert [(f.rule, f.fix) for f in found] == [("PS801", None)]


def test_python_code_is_not_rewritten_by_a_text_fix(tmp_path: Path, capsys) -> None:
    (tmp_path / "setup.py").write_text('from setuptools import setup\nsetup(install_requires=["torch==2.1.0+cu121"])\n')
    main(["fix", "--unsafe-fixes", "--show-fixes", "--no-cache", str(tmp_path)])
    assert "torch==2.1.0+cu121" in (tmp_path / "setup.py").read_text()
    assert IN_PYTHON.split(";")[0] in " ".join(capsys.readouterr().out.split())


def test_line_endings_bom_and_suppressions_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_bytes(b"\xef\xbb\xbftorch==2.4.0+cu121\r\ntorchvision==0.19.0+cu121  # noqa: PS801\r\n")
    main(["fix", "--unsafe-fixes", "--no-cache", str(tmp_path)])
    assert path.read_bytes() == b"\xef\xbb\xbftorch==2.4.0+rocm6.1\r\ntorchvision==0.19.0+cu121  # noqa: PS801\r\n"


def test_a_file_that_is_not_utf8_is_never_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    data = b"# caf\xe9\ntorch==2.4.0+cu121\n"
    path.write_bytes(data)
    main(["fix", "--unsafe-fixes", "--no-cache", str(tmp_path)])
    assert path.read_bytes() == data


def test_a_result_that_no_longer_reads_as_its_kind_is_refused() -> None:
    assert _unreadable("pyproject", "dependencies = [\n") is not None
    assert _unreadable("conda", "dependencies:\n  - [\n") is not None
    assert _unreadable("requirements", "anything") is None
    if shutil.which("bash"):
        assert _unreadable("shell", "if true; then\n") is not None
        assert _unreadable("shell", "pip install torch\n") is None
