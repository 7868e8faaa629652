"""`portscan fix` beyond Python (issue 20, item 1): CUDA wheel pins and PyTorch's CUDA
index URLs rewritten in requirements files, pyproject, conda environments, Dockerfiles,
CI definitions and shell scripts, with the guarantees Python fixes have: bytes around
the rewrite kept, unsafe tier, idempotent, declined with a reason where the data cannot
choose."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from portscan.cli import main
from portscan.config import Target
from portscan.fix.text import unreadable, fix_text
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


def assert_shell_rewrite(before: str, after: str, rules: RuleSet, code: str) -> None:
    """``before`` (a shell script) becomes ``after`` by one rewrite of ``code``, unsafe only;
    the result still reads as shell and a second run changes nothing."""
    result = fix_text(before, "run.sh", "shell", rules, unsafe=True)
    assert result.fixed == after and [a.rule for a in result.applied] == [code]
    assert unreadable("shell", result.fixed) is None
    assert fix_text(after, "run.sh", "shell", rules, unsafe=True).fixed == after
    assert not fix_text(before, "run.sh", "shell", rules, unsafe=False).applied


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
    assert ("  requirements files: 4 by hand (PS804, PS808, PS809, PS814); "
            "3 with --unsafe-fixes (PS801 ×2, PS802)") in out
    assert "  pyproject.toml: 5 by hand (PS803, PS804, PS807, PS809, PS820); 1 with --unsafe-fixes (PS801)" in out


def test_ci_definitions_keep_their_yaml_and_say_why_templated_urls_stay(tmp_path: Path, capsys) -> None:
    repo = copy_fixture("ci-pipelines", tmp_path)
    main(["fix", "--unsafe-fixes", "--show-fixes", "--no-cache", str(repo)])
    out = " ".join(capsys.readouterr().out.split())
    workflow = (repo / ".github/workflows/test.yml").read_text()
    yaml.safe_load(workflow)
    assert "--extra-index-url https://download.pytorch.org/whl/rocm" in workflow
    assert "whl/${{ matrix.torch-cuda }}" in workflow  # the matrix value is where to change it
    assert "test.yml:28 PS802 pytorch-cuda-wheel-index: the index is built from a variable or matrix value" in out
    assert "wheels.yml:29 PS802 pytorch-cuda-wheel-index: nightly indexes follow the ROCm release" in out
    assert "whl/nightly/rocm" in (repo / ".github/workflows/wheels.yml").read_text()
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
    assert unreadable("pyproject", "dependencies = [\n") is not None
    assert unreadable("conda", "dependencies:\n  - [\n") is not None
    assert unreadable("requirements", "anything") is None
    if shutil.which("bash"):
        assert unreadable("shell", "if true; then\n") is not None
        assert unreadable("shell", "pip install torch\n") is None


# -- item 2 in part: TORCH_CUDA_ARCH_LIST and `--gpus all` --------------------------------

ARCH = RuleSet(r for r in RULES.rules if r.code == "PS610")
GPUS = RuleSet(r for r in RULES.rules if r.code == "PS834")
DEFAULT = 'PYTORCH_ROCM_ARCH="gfx90a;gfx942;gfx1100"'


def arch_fixed(text: str, path: str, kind: str, target=None):
    result = fix_text(textwrap.dedent(text).lstrip("\n"), path, kind, ARCH, unsafe=True, target=target)
    assert result.error is None, result.error
    return result


@pytest.mark.parametrize(("path", "kind", "before", "after"), [
    ("Dockerfile", "dockerfile", 'ENV TORCH_CUDA_ARCH_LIST="7.0 8.0+PTX" FORCE_CUDA=1\n',
     f'ENV TORCH_CUDA_ARCH_LIST="7.0 8.0+PTX" {DEFAULT} FORCE_CUDA=1\n'),
    ("Dockerfile", "dockerfile", "ENV TORCH_CUDA_ARCH_LIST 8.0;9.0\nRUN pip install .\n",
     f"ENV TORCH_CUDA_ARCH_LIST 8.0;9.0\nENV {DEFAULT}\nRUN pip install .\n"),
    ("build.sh", "shell", "TORCH_CUDA_ARCH_LIST='8.0' python setup.py build_ext  # CUDA\n",
     f"TORCH_CUDA_ARCH_LIST='8.0' {DEFAULT} python setup.py build_ext  # CUDA\n"),
    (".github/workflows/ci.yml", "ci", "jobs:\n  b:\n    env:\n      TORCH_CUDA_ARCH_LIST: '8.0'  # A100\n"
     "    steps:\n      - run: pip install .\n",
     "jobs:\n  b:\n    env:\n      TORCH_CUDA_ARCH_LIST: '8.0'  # A100\n"
     "      PYTORCH_ROCM_ARCH: \"gfx90a;gfx942;gfx1100\"\n"
     "    steps:\n      - run: pip install .\n"),
    ("Makefile", "makefile", "export TORCH_CUDA_ARCH_LIST ?= 8.0\nbuild:\n\tpip install .\n",
     "export TORCH_CUDA_ARCH_LIST ?= 8.0\nexport PYTORCH_ROCM_ARCH ?= gfx90a;gfx942;gfx1100\n"
     "build:\n\tpip install .\n"),
    ("Makefile", "makefile", "build:\n\tTORCH_CUDA_ARCH_LIST=8.0 python setup.py build\n",
     f"build:\n\tTORCH_CUDA_ARCH_LIST=8.0 {DEFAULT} python setup.py build\n"),
])
def test_the_rocm_arch_list_is_set_beside_the_cuda_one_which_stays(path: str, kind: str, before: str,
                                                                    after: str) -> None:
    result = arch_fixed(before, path, kind)
    assert result.fixed == after
    assert [a.rule for a in result.applied] == ["PS610"]
    assert not [f for f in result.findings or () if f.rule == "PS610"]
    # one insertion, and every byte of the input kept around it: NVIDIA builds are unchanged
    head = next(i for i, (a, b) in enumerate(zip(before + "\0", after, strict=False)) if a != b)
    tail = len(before) - head
    assert after[:head] + after[len(after) - tail:] == before
    assert "PYTORCH_ROCM_ARCH" in after[head:len(after) - tail] and "TORCH_CUDA" not in after[head:len(after) - tail]
    assert arch_fixed(result.fixed, path, kind).fixed == result.fixed  # a second run changes nothing
    if kind == "ci":
        assert yaml.safe_load(result.fixed)["jobs"]["b"]["env"]["PYTORCH_ROCM_ARCH"] == "gfx90a;gfx942;gfx1100"


def test_the_configured_target_arch_is_written(tmp_path: Path, capsys) -> None:
    from portscan.config import Target

    result = arch_fixed('export TORCH_CUDA_ARCH_LIST="8.0 9.0"\n', "build.sh", "shell", target=Target(arch="gfx942"))
    assert result.fixed == 'export TORCH_CUDA_ARCH_LIST="8.0 9.0" PYTORCH_ROCM_ARCH=gfx942\n'
    (tmp_path / "build.sh").write_text('export TORCH_CUDA_ARCH_LIST="8.0 9.0"\npip install -e .\n')
    main(["fix", "--unsafe-fixes", "--no-cache", "--target-arch", "gfx1100", str(tmp_path)])
    assert (tmp_path / "build.sh").read_text().splitlines()[0] == \
        'export TORCH_CUDA_ARCH_LIST="8.0 9.0" PYTORCH_ROCM_ARCH=gfx1100'
    capsys.readouterr()


@pytest.mark.parametrize(("text", "why"), [
    ("export TORCH_CUDA_ARCH_LIST=${ARCHS}\n", "comes from a variable"),
    ("env:\n  TORCH_CUDA_ARCH_LIST: >-\n    8.0 9.0\n", "not a plain YAML scalar"),
])
def test_an_arch_setting_it_cannot_place_beside_is_declined(text: str, why: str) -> None:
    path, kind = ("build.sh", "shell") if text.startswith("export") else (".gitlab-ci.yml", "ci")
    result = arch_fixed(text, path, kind)
    assert result.fixed == textwrap.dedent(text).lstrip("\n")
    assert [n.rule for n in result.not_fixed] == ["PS610"] and why in result.not_fixed[0].reason


def test_a_file_that_names_the_rocm_arch_variable_is_not_reported() -> None:
    both = 'ENV TORCH_CUDA_ARCH_LIST="8.0" PYTORCH_ROCM_ARCH="gfx942"\n'
    assert not [f for f in scan_source(both, "Dockerfile", RULES) if f.rule == "PS610"]
    assert [f.rule for f in scan_source('ENV TORCH_CUDA_ARCH_LIST="8.0"\n', "Dockerfile", RULES)
            if f.rule == "PS610"] == ["PS610"]
    python = 'import os\nos.environ["TORCH_CUDA_ARCH_LIST"] = "8.0"\nos.environ["PYTORCH_ROCM_ARCH"] = "gfx942"\n'
    assert not [f for f in scan_source(python, "setup.py", RULES) if f.rule == "PS610"]


@pytest.mark.parametrize(("before", "after"), [
    ("docker run --rm --gpus all img python train.py\n",
     "docker run --rm --device=/dev/kfd --device=/dev/dri --group-add video img python train.py\n"),
    ('docker run --gpus=all img\n', "docker run --device=/dev/kfd --device=/dev/dri --group-add video img\n"),
    ('docker run --gpus "all" img\n', "docker run --device=/dev/kfd --device=/dev/dri --group-add video img\n"),
])
def test_gpus_all_becomes_the_rocm_device_nodes(before: str, after: str) -> None:
    assert_shell_rewrite(before, after, GPUS, "PS834")


@pytest.mark.parametrize(("text", "why"), [
    ("docker run --gpus 2 img\n", "not `--gpus all`"),
    ("docker run --gpus '\"device=0,1\"' img\n", "not `--gpus all`"),
    ("docker run --gpus all --device=/dev/kfd img\n", "passes /dev/kfd already"),
])
def test_a_gpu_selection_without_a_1to1_form_is_declined(text: str, why: str) -> None:
    result = fix_text(text, "run.sh", "shell", GPUS, unsafe=True)
    assert result.fixed == text and why in result.not_fixed[0].reason


def test_ci_container_options_get_the_device_nodes() -> None:
    text = ("jobs:\n  t:\n    container:\n      image: rocm/pytorch:latest\n      options: --gpus all --shm-size 8g\n"
            "    steps:\n      - run: python -m pytest\n")
    result = fix_text(text, ".github/workflows/t.yml", "ci", GPUS, unsafe=True)
    assert yaml.safe_load(result.fixed)["jobs"]["t"]["container"]["options"] == \
        "--device=/dev/kfd --device=/dev/dri --group-add video --shm-size 8g"


# -- item 6: the summary and the markdown report by file kind -----------------------------

def test_the_fix_summary_and_the_markdown_report_group_by_file_kind(tmp_path: Path, capsys) -> None:
    repo = copy_fixture("cuda-trainer", tmp_path)
    main(["scan", "--format", "markdown", "--no-cache", str(repo)])
    report = capsys.readouterr().out
    table = report[report.index("| files | findings |"):].split("\n\n")[0].splitlines()
    rows = {line.split(" | ")[0].strip("| "): line for line in table[2:]}
    assert list(rows)[0] == "Python" and {"requirements files", "Dockerfiles", "shell scripts"} <= set(rows)
    assert rows["requirements files"].endswith("| 0 | 3 | 4 |")  # safe, unsafe, by hand
    main(["fix", "--unsafe-fixes", "--no-cache", str(repo)])
    out = capsys.readouterr().out
    fixed_part, _, rest = out.partition("Not fixed")
    assert "  requirements files: 3 in 1 file (PS801 ×2, PS802)" in fixed_part
    assert "  shell scripts: 1 in 1 file (PS834)" in fixed_part
    assert "  Python:\n    models/vit.py:21 PS503" in rest and "    models/vit.py:61 PS211" in rest
    remaining = rest[rest.index("findings remain"):]
    assert "  Dockerfiles: 1 by hand (PS611)" in remaining
    # the NGC image has no exact ROCm twin (Python 3.8): the summary says what to check
    assert "Check in review" in fixed_part and "Dockerfile:1 PS831" in fixed_part and "Python 3.9 for 3.8" in fixed_part


COMPOSE = RuleSet(r for r in RULES.rules if r.code == "PS838")
RESERVATION = """\
services:
  train:
    image: rocm/pytorch:latest
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              {count}
              capabilities: [gpu]
    command: python train.py
"""


@pytest.mark.parametrize("count", ["count: all", "capabilities: [utility]"])
def test_a_compose_gpu_reservation_becomes_the_device_nodes(count: str) -> None:
    before = RESERVATION.format(count=count)
    result = fix_text(before, "docker-compose.yml", "compose", COMPOSE, unsafe=True)
    assert [a.rule for a in result.applied] == ["PS838"]
    service = yaml.safe_load(result.fixed)["services"]["train"]
    assert service == {"image": "rocm/pytorch:latest", "devices": ["/dev/kfd", "/dev/dri"],
                       "group_add": ["video"], "command": "python train.py"}
    assert "nvidia" not in result.fixed and result.fixed.endswith("    command: python train.py\n")
    assert fix_text(result.fixed, "docker-compose.yml", "compose", COMPOSE, unsafe=True).fixed == result.fixed
    assert not fix_text(before, "docker-compose.yml", "compose", COMPOSE, unsafe=False).applied


@pytest.mark.parametrize(("count", "why"), [
    ("count: 2", "count"),
    ("device_ids: ['0', '3']", "device"),
])
def test_a_compose_reservation_of_some_gpus_is_declined(count: str, why: str) -> None:
    before = RESERVATION.format(count=count)
    result = fix_text(before, "docker-compose.yml", "compose", COMPOSE, unsafe=True)
    assert result.fixed == before and [n.rule for n in result.not_fixed] == ["PS838"]
    assert why in result.not_fixed[0].reason


def test_a_compose_deploy_block_with_other_settings_is_declined() -> None:
    before = RESERVATION.format(count="count: all").replace("      resources:\n",
                                                              "      replicas: 2\n      resources:\n")
    result = fix_text(before, "docker-compose.yml", "compose", COMPOSE, unsafe=True)
    assert result.fixed == before and [n.rule for n in result.not_fixed] == ["PS838"]


# -- item 3: nvidia-smi calls with a 1:1 AMD SMI form ------------------------------------

SMI = RuleSet(r for r in RULES.rules if r.code == "PS601")


@pytest.mark.parametrize(("before", "after"), [
    ("nvidia-smi\n", "amd-smi monitor\n"),
    ("nvidia-smi -L > gpus.txt  # inventory\n", "amd-smi list > gpus.txt  # inventory\n"),
    ("nvidia-smi --list-gpus\n", "amd-smi list\n"),
    ("nvidia-smi topo -m\n", "amd-smi topology\n"),
    ("nvidia-smi dmon\n", "amd-smi monitor\n"),
    ("nvidia-smi -l 5 &\n", "amd-smi monitor -w 5 &\n"),
    ("nvidia-smi --loop=5\n", "amd-smi monitor -w 5\n"),
    ("set -e\nnvidia-smi; python train.py\n", "set -e\namd-smi monitor; python train.py\n"),
])
def test_nvidia_smi_with_a_1to1_amd_smi_form_is_rewritten(before: str, after: str) -> None:
    assert_shell_rewrite(before, after, SMI, "PS601")


@pytest.mark.parametrize(("text", "why"), [
    ("nvidia-smi --query-gpu=name,memory.total --format=csv\n", "no field list"),
    ("nvidia-smi -q\n", "split across"),
    ("N=$(nvidia-smi -L | wc -l)\n", "feeds another command"),
    ("nvidia-smi -L | grep A100\n", "feeds another command"),
    # a Makefile recipe that checks for nvidia-smi first (in scripts, RUN lines and CI steps
    # the scan itself calls such a run handled)
    ("gpus:\n\twhich nvidia-smi && nvidia-smi -L\n", "checks for nvidia-smi"),
    ('nvidia-smi "$FLAGS"\n', "quoted or computed"),
])
def test_nvidia_smi_without_a_1to1_form_is_declined_with_the_reason(text: str, why: str) -> None:
    path, kind = ("Makefile", "makefile") if text.startswith("gpus:") else ("run.sh", "shell")
    result = fix_text(text, path, kind, SMI, unsafe=True)
    assert result.fixed == text and [n.rule for n in result.not_fixed] == ["PS601"]
    assert why in result.not_fixed[0].reason


@pytest.mark.parametrize(("text", "path", "kind"), [
    ("if command -v nvidia-smi >/dev/null; then\n  nvidia-smi\nfi\n", "run.sh", "shell"),
    ("which nvidia-smi && nvidia-smi -L\n", "run.sh", "shell"),
    ("jobs:\n  t:\n    steps:\n      - run: which nvidia-smi && nvidia-smi -L\n", ".github/workflows/t.yml", "ci"),
    ("FROM rocm/pytorch:latest\nRUN command -v nvidia-smi && nvidia-smi -L || true\n", "Dockerfile", "dockerfile"),
])
def test_a_script_that_checks_for_nvidia_smi_is_left_alone(text: str, path: str, kind: str) -> None:
    """The scan calls such a run handled (guarded, info), and guarded code is never rewritten."""
    result = fix_text(text, path, kind, SMI, unsafe=True)
    assert result.fixed == text and result.not_fixed == ()
    assert {f.guard for f in result.findings} == {"handled"}


def test_nvidia_smi_in_dockerfiles_compose_and_ci_steps_is_rewritten() -> None:
    docker = fix_text("FROM rocm/pytorch:latest\nRUN nvidia-smi -L && pip install .\n", "Dockerfile",
                      "dockerfile", SMI, unsafe=True)
    assert docker.fixed == "FROM rocm/pytorch:latest\nRUN amd-smi list && pip install .\n"
    ci = fix_text("jobs:\n  t:\n    steps:\n      - run: |\n          nvidia-smi\n          pytest\n",
                  ".github/workflows/t.yml", "ci", SMI, unsafe=True)
    assert yaml.safe_load(ci.fixed)["jobs"]["t"]["steps"][0]["run"] == "amd-smi monitor\npytest\n"


def test_the_smi_table_names_a_source_for_every_row() -> None:
    from portscan.match.textfix import SMI_TABLE

    text = SMI_TABLE.read_text()
    defined = dict(re.findall(r"^# - \[([A-Z0-9.-]+)\][^\n]*?(https://\S+)", text, re.M))
    data = tomllib.loads(text)
    assert {tuple(row["args"]) for row in data["equivalent"]} >= {(), ("-L",), ("topo", "-m")}
    for row in data["equivalent"]:
        cited = re.findall(r"\[([A-Z0-9.-]+)\]", row["why"])
        assert cited and set(cited) <= set(defined), row
    assert all(row["source"] in defined for row in data["declined"])


@pytest.mark.parametrize(("text", "path", "severities"), [
    ("jobs:\n  t:\n    steps:\n      - run: nvidia-smi\n", ".github/workflows/t.yml", ["error"]),
    ("jobs:\n  t:\n    steps:\n      - run: nvidia-smi || true\n", ".github/workflows/t.yml", ["info"]),
    ("V=$(nvidia-smi --query-gpu=driver_version --format=csv | head -n 1 || true)\n", "run.sh", ["info"]),
    ("nvidia-smi || :\nnvidia-smi || echo 'no GPU'\nnvidia-smi | tee log || true\n", "run.sh",
     ["info", "error", "info"]),
])
def test_a_program_whose_failure_is_tolerated_is_info(text: str, path: str, severities: list[str]) -> None:
    found = [f for f in scan_source(text, path, RULES) if f.rule == "PS601"]
    assert [f.severity.value for f in found] == severities
    assert all(f.guard == "handled" for f in found if f.severity.value == "info")


# -- item 2: CUDA images to their ROCm counterparts -------------------------------------

IMAGES = RuleSet(r for r in RULES.rules if r.code in ("PS830", "PS831", "PS832"))


@pytest.mark.parametrize(("path", "kind", "before", "after", "note"), [
    ("Dockerfile", "dockerfile", "FROM nvcr.io/nvidia/pytorch:24.05-py3\n",
     "FROM rocm/pytorch:rocm6.4.1_ubuntu22.04_py3.10_pytorch_release_2.4.1\n", None),
    ("Dockerfile", "dockerfile", "ARG BASE=nvcr.io/nvidia/pytorch:25.01-py3\nFROM ${BASE} AS base\n",
     "ARG BASE=rocm/pytorch:rocm6.4.3_ubuntu24.04_py3.12_pytorch_release_2.6.0\nFROM ${BASE} AS base\n", None),
    ("Dockerfile", "dockerfile", "FROM nvidia/cuda:11.8.0-runtime-ubuntu20.04\n",
     "FROM rocm/dev-ubuntu-20.04:6.4.1-complete\n", None),
    ("Dockerfile", "dockerfile", "FROM docker.io/nvidia/cuda:12.4.1-base-ubuntu24.04\n",
     "FROM rocm/dev-ubuntu-24.04:6.4.1\n", None),
    ("docker-compose.yml", "compose", "services:\n  t:\n    image: \"pytorch/pytorch:2.4.0-cuda12.1-cudnn9-devel\"\n",
     "services:\n  t:\n    image: \"rocm/pytorch:rocm6.3.3_ubuntu24.04_py3.12_pytorch_release_2.4.0\"\n",
     "Python 3.12"),
    (".github/workflows/t.yml", "ci", "jobs:\n  t:\n    container:\n      image: nvcr.io/nvidia/pytorch:23.01-py3\n",
     "jobs:\n  t:\n    container:\n      image: rocm/pytorch:rocm6.1_ubuntu20.04_py3.9_pytorch_2.0.1\n",
     "Python 3.9 for 3.8"),
])
def test_a_cuda_image_becomes_the_rocm_image_with_the_same_pytorch(path: str, kind: str, before: str, after: str,
                                                                    note: str | None) -> None:
    result = fix_text(before, path, kind, IMAGES, unsafe=True)
    assert result.error is None and result.fixed == after
    [applied] = result.applied
    assert (applied.note is None) if note is None else (note in (applied.note or ""))
    assert fix_text(after, path, kind, IMAGES, unsafe=True).fixed == after
    assert not fix_text(before, path, kind, IMAGES, unsafe=False).applied
    if kind != "dockerfile":
        yaml.safe_load(result.fixed)


@pytest.mark.parametrize(("path", "kind", "before", "after"), [
    ("docker-compose.yml", "compose", "services:\n  s:\n    image: ${IMAGE:-nvcr.io/nvidia/pytorch:24.05-py3}\n",
     "services:\n  s:\n    image: ${IMAGE:-rocm/pytorch:rocm6.4.1_ubuntu22.04_py3.10_pytorch_release_2.4.1}\n"),
    ("Dockerfile", "dockerfile", "ARG CUDA=12.4.1\nARG BASE=nvidia/cuda:${CUDA}-devel-ubuntu22.04\nFROM ${BASE}\n",
     "ARG CUDA=12.4.1\nARG BASE=rocm/dev-ubuntu-22.04:6.4.1-complete\nFROM ${BASE}\n"),
    ("Dockerfile", "dockerfile", "ARG UBUNTU\nFROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu${UBUNTU}\n",
     "ARG UBUNTU\nFROM rocm/dev-ubuntu-${UBUNTU}:6.4.1-complete\n"),
    (".gitlab-ci.yml", "ci",
     'variables:\n  CUDA: "12.1.1"\ndefault:\n  image: nvidia/cuda:${CUDA}-runtime-ubuntu22.04\n',
     'variables:\n  CUDA: "12.1.1"\ndefault:\n  image: rocm/dev-ubuntu-22.04:6.4.1-complete\n'),
])
def test_an_image_is_rewritten_where_it_is_written(path: str, kind: str, before: str, after: str) -> None:
    result = fix_text(before, path, kind, IMAGES, unsafe=True)
    assert result.fixed == after and len(result.applied) == 1
    assert fix_text(after, path, kind, IMAGES, unsafe=True).fixed == after


def test_the_target_rocm_release_picks_the_dev_image() -> None:
    from packaging.version import Version

    from portscan.config import Target

    result = fix_text("FROM nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04\n", "Dockerfile", "dockerfile", IMAGES,
                      unsafe=True, target=Target(rocm=Version("6.2")))
    assert result.fixed == "FROM rocm/dev-ubuntu-22.04:6.2-complete\n" and result.applied[0].note is None


@pytest.mark.parametrize(("text", "why"), [
    ("FROM nvcr.io/nvidia/pytorch:22.01-py3\n", "the nearest is rocm/pytorch:"),
    ("FROM nvcr.io/nvidia/pytorch:19.01-py3\n", "not in the table of NGC releases"),
    ("FROM nvcr.io/nvidia/tritonserver:24.01-py3\n", "no ROCm image with the same contents"),
    ("FROM nvidia/cuda:11.8.0-devel-ubuntu18.04\n", "no rocm/dev-ubuntu-18.04"),
    ("FROM nvidia/cuda:12.4.1-devel-rockylinux9\n", "not an Ubuntu tag"),
    ("FROM pytorch/pytorch:latest\n", "not a `<torch>-cuda"),
    ("ARG V=2.3.1\nFROM pytorch/pytorch:${V}-cuda12.1-cudnn8-devel\n", "built from variables"),
    ("ARG BASE\nFROM ${BASE:-nvidia/cuda}:12.1.1-devel-ubuntu22.04\n", "named through a variable"),
    ("FROM nvidia/cuda@sha256:" + "a" * 64 + "\n", "digest"),
])
def test_an_image_without_a_rocm_counterpart_in_the_table_is_declined(text: str, why: str) -> None:
    result = fix_text(text, "Dockerfile", "dockerfile", IMAGES, unsafe=True)
    assert result.fixed == text and len(result.not_fixed) == 1 and why in result.not_fixed[0].reason


def test_every_image_row_names_its_source_and_every_ngc_torch_is_a_release() -> None:
    from portscan.kinds.rocm_images import TABLE

    data = tomllib.loads(TABLE.read_text())
    for row in data["ngc"] + data["rocm_pytorch"]:
        assert row["source"] and row["confidence"] in ("high", "medium", "low"), row
    assert all(row["source"].startswith("https://") for row in data["rocm_pytorch"])
    assert all(row["tag"].startswith(f"rocm{row['rocm']}_ubuntu{row['ubuntu']}_py{row['python']}_pytorch")
               and row["tag"].endswith(row["torch"]) for row in data["rocm_pytorch"])


# -- item 1: conda's CUDA companions ----------------------------------------------------

CONDA = RuleSet(r for r in RULES.rules if r.code == "PS821")


def test_a_conda_environment_moves_pytorch_to_the_rocm_wheels(tmp_path: Path) -> None:
    before = (FIXTURES / "cuda-trainer" / "environment.yml").read_text()
    result = fix_text(before, "environment.yml", "conda", CONDA, unsafe=True)
    assert [a.rule for a in result.applied] == ["PS821", "PS821"]  # pytorch-cuda and cudatoolkit, one rewrite
    env = yaml.safe_load(result.fixed)
    assert "pytorch=1.13.1" not in env["dependencies"] and not any(
        str(d).startswith(("pytorch-cuda", "cudatoolkit")) for d in env["dependencies"])
    assert env["dependencies"][-1]["pip"][:3] == [
        "--extra-index-url https://download.pytorch.org/whl/rocm5.2", "torch==1.13.1+rocm5.2", "timm==0.6.12"]
    assert before.splitlines()[:7] == result.fixed.splitlines()[:7]  # name, channels, python: as they were
    assert fix_text(result.fixed, "environment.yml", "conda", CONDA, unsafe=True).fixed == result.fixed
    assert not fix_text(before, "environment.yml", "conda", CONDA, unsafe=False).applied


@pytest.mark.parametrize(("path", "kind", "text", "why"), [
    ("environment.yml", "conda", "dependencies:\n  - pytorch=1.13.1=py3.9_cuda11.7_cudnn8.5.0_0\n"
     "  - pytorch-cuda=11.7\n", "build string"),
    ("environment.yml", "conda", "dependencies:\n  - numpy\n  - cudatoolkit=11.3\n", "no pinned `pytorch`"),
    ("environment.yml", "conda", "dependencies:\n  - pytorch=1.5.0\n  - cudatoolkit=10.2\n", "no ROCm wheels"),
    ("setup.sh", "shell", "conda install -y pytorch==1.12.1 cudatoolkit=11.3 -c pytorch\n", "conda install"),
])
def test_a_conda_setup_it_cannot_move_is_declined(path: str, kind: str, text: str, why: str) -> None:
    result = fix_text(text, path, kind, CONDA, unsafe=True)
    assert result.fixed == text and result.not_fixed and all(why in n.reason for n in result.not_fixed)


def test_an_apptainer_definition_gets_the_rocm_image_and_amd_smi() -> None:
    rules = RuleSet(r for r in RULES.rules if r.code in ("PS831", "PS601"))
    before = ("Bootstrap: docker\nFrom: nvcr.io/nvidia/pytorch:24.05-py3\n"
              "\n%post\n    nvidia-smi -L\n    pip install timm\n")
    result = fix_text(before, "train.def", "apptainer", rules, unsafe=True)
    assert result.fixed == ("Bootstrap: docker\nFrom: rocm/pytorch:rocm6.4.1_ubuntu22.04_py3.10_pytorch_release_2.4.1\n"
                            "\n%post\n    amd-smi list\n    pip install timm\n")
    assert sorted(a.rule for a in result.applied) == ["PS601", "PS831"]


# -- CuPy's CUDA wheels: the ROCm build --------------------------------------------------

CUPY = RuleSet(r for r in RULES.rules if r.code == "PS806")


@pytest.mark.parametrize(("target", "before", "after", "source_build"), [
    # a ROCm release with a CuPy wheel whose versions meet the requirement: that wheel
    (Target(rocm=Version("7.0.2")), "cupy-cuda12x>=14.0  # arrays\n", "cupy-rocm-7-0>=14.0  # arrays\n", False),
    (Target(rocm=Version("5.0")), "cupy-cuda11x==13.0.0 ; sys_platform == 'linux'\n",
     "cupy-rocm-5-0==13.0.0 ; sys_platform == 'linux'\n", False),
    # ROCm 7.0's wheels start at CuPy 14: a 13 pin builds from source
    (Target(rocm=Version("7.0")), "cupy-cuda12x==13.3.0\n", "cupy==13.3.0\n", True),
    # no cupy-rocm-6-* package exists, and without a target the ROCm release is unknown
    (Target(rocm=Version("6.4")), "cupy-cuda12x\n", "cupy\n", True),
    (None, "cupy-cuda117>=10.0\n", "cupy>=10.0\n", True),
])
def test_a_cupy_cuda_wheel_becomes_the_rocm_build(target: Target | None, before: str, after: str,
                                                  source_build: bool) -> None:
    result = fix_text(before, "requirements.txt", "requirements", CUPY, unsafe=True, target=target)
    assert result.error is None and result.fixed == after
    [applied] = result.applied
    assert applied.tier.value == "unsafe"
    assert ("CUPY_INSTALL_USE_HIP=1" in (applied.note or "")) is source_build
    assert fix_text(after, "requirements.txt", "requirements", CUPY, unsafe=True, target=target).fixed == after
    assert not fix_text(before, "requirements.txt", "requirements", CUPY, unsafe=False, target=target).applied


def test_the_source_build_note_names_the_target_gpu() -> None:
    result = fix_text("cupy-cuda12x\n", "requirements.txt", "requirements", CUPY, unsafe=True,
                      target=Target(arch="gfx942"))
    assert "HCC_AMDGPU_TARGET=gfx942" in (result.applied[0].note or "")


@pytest.mark.parametrize(("path", "kind", "before", "after"), [
    ("pyproject.toml", "pyproject", '[project]\nname = "d"\nversion = "1"\ndependencies = ["cupy-cuda12x>=13"]\n',
     '[project]\nname = "d"\nversion = "1"\ndependencies = ["cupy>=13"]\n'),
    ("environment.yml", "conda", "dependencies:\n  - pip:\n      - cupy-cuda11x\n",
     "dependencies:\n  - pip:\n      - cupy\n"),
])
def test_a_cupy_wheel_is_rewritten_in_every_manifest(path: str, kind: str, before: str, after: str) -> None:
    result = fix_text(before, path, kind, CUPY, unsafe=True)
    assert result.error is None and result.fixed == after and len(result.applied) == 1


def test_the_cupy_table_names_a_source_for_every_package() -> None:
    table = (Path(__file__).resolve().parent.parent / "src/portscan/kinds/rocm-packages.toml").read_text()
    for package in tomllib.loads(table)["cupy"]["wheels"].values():
        assert f"https://pypi.org/project/{package['package']}/" in table


# -- NVML bindings: AMD SMI's Python package, once no code imports them ------------------

MONITORING = RuleSet(r for r in RULES.rules if r.code == "PS809")


@pytest.mark.parametrize(("target", "after", "pinned"), [
    (Target(rocm=Version("6.4.1")), "amdsmi==6.4.*  # logger\n", True),
    (Target(rocm=Version("7.1")), "amdsmi  # logger\n", False),  # PyPI has no 7.1 series (yet)
    (None, "amdsmi  # logger\n", False),
])
def test_an_nvml_binding_becomes_amdsmi_pinned_to_the_target(target: Target | None, after: str, pinned: bool) -> None:
    before = "nvidia-ml-py>=12.535  # logger\n"
    result = fix_text(before, "requirements.txt", "requirements", MONITORING, unsafe=True, target=target)
    assert result.fixed == after
    [applied] = result.applied
    assert (applied.note is None) is pinned and (pinned or "amdsmi==6.4.*" in (applied.note or ""))
    assert fix_text(after, "requirements.txt", "requirements", MONITORING, unsafe=True, target=target).fixed == after
    assert not fix_text(before, "requirements.txt", "requirements", MONITORING, unsafe=False).applied


@pytest.mark.parametrize(("path", "kind", "text", "why"), [
    ("requirements.txt", "requirements", "GPUtil==1.4.0\n", "no drop-in"),
    ("environment.yml", "conda", "dependencies:\n  - pynvml\n", "conda has no amdsmi package"),
])
def test_an_nvml_package_without_a_drop_in_is_left_with_the_reason(path: str, kind: str, text: str, why: str) -> None:
    result = fix_text(text, path, kind, MONITORING, unsafe=True)
    assert result.fixed == text and why in result.not_fixed[0].reason
    assert [f.fix for f in scan_source(text, path, MONITORING)] == [None]


def test_a_conda_pip_list_item_becomes_amdsmi() -> None:
    text = "dependencies:\n  - python=3.11\n  - pip:\n      - nvidia-ml-py\n"
    result = fix_text(text, "environment.yml", "conda", MONITORING, unsafe=True)
    assert result.fixed == text.replace("nvidia-ml-py", "amdsmi")
    yaml.safe_load(result.fixed)


def test_the_requirement_waits_while_the_project_code_imports_pynvml(tmp_path: Path, capsys) -> None:
    (tmp_path / "requirements.txt").write_text("torch\nnvidia-ml-py\n")
    monitor = tmp_path / "train" / "monitor.py"
    monitor.parent.mkdir()
    monitor.write_text("import torch\n\ndef busy():\n    import pynvml\n    return pynvml.nvmlInit()\n")
    args = ["--select", "PS809", "--no-cache"]
    assert main(["scan", *args, "--format", "json", str(tmp_path)]) == 1
    assert '"fix": null' in capsys.readouterr().out
    main(["fix", *args, "--unsafe-fixes", str(tmp_path)])
    out = capsys.readouterr().out
    assert "the project's code imports pynvml (train/monitor.py:4): port that code first" in out
    assert (tmp_path / "requirements.txt").read_text() == "torch\nnvidia-ml-py\n"

    # once the code reads the GPU through torch (amdsmi on ROCm), the package is swapped
    monitor.write_text("import torch\n\ndef busy():\n    return torch.cuda.utilization()\n")
    assert main(["scan", *args, "--format", "json", str(tmp_path)]) == 1
    assert '"fix": "unsafe"' in capsys.readouterr().out
    main(["fix", *args, "--unsafe-fixes", str(tmp_path)])
    assert (tmp_path / "requirements.txt").read_text() == "torch\namdsmi\n"


def test_project_imports_reads_every_import_shape(tmp_path: Path) -> None:
    from portscan.discover import project_imports

    (tmp_path / "a.py").write_text("import os, pynvml as nv\n")
    (tmp_path / "b.py").write_text("try:\n    from py3nvml.py3nvml import nvmlInit\nexcept ImportError:\n    pass\n")
    (tmp_path / "c.py").write_text("import pynvml_utils\nfrom pynvmlx import y\n# import pynvml? no: a comment\n")
    assert project_imports(tmp_path, {"pynvml", "py3nvml"}) == {"pynvml": "a.py:1", "py3nvml": "b.py:2"}
    (tmp_path / "a.py").unlink()
    assert project_imports(tmp_path, {"pynvml"}) == {}


@pytest.mark.parametrize(("path", "kind", "before", "after"), [
    (".gitlab-ci.yml", "ci",
     "variables:\n  TORCH_INDEX: https://download.pytorch.org/whl/cu121\nt:\n  script:\n"
     "    - pip install torch --extra-index-url $TORCH_INDEX\n",
     "variables:\n  TORCH_INDEX: https://download.pytorch.org/whl/rocm7.1\nt:\n  script:\n"
     "    - pip install torch --extra-index-url $TORCH_INDEX\n"),
    ("azure-pipelines.yml", "ci",
     "variables:\n  torchIndex: 'https://download.pytorch.org/whl/cu118'\nsteps:\n"
     "  - script: pip install torch==2.1.0 --index-url $(torchIndex)\n",
     "variables:\n  torchIndex: 'https://download.pytorch.org/whl/rocm5.6'\nsteps:\n"
     "  - script: pip install torch==2.1.0 --index-url $(torchIndex)\n"),
    (".github/workflows/t.yml", "ci",
     "on: push\nenv:\n  TORCH_INDEX: https://download.pytorch.org/whl/cu124\njobs:\n  t:\n    runs-on: x\n"
     "    steps:\n      - run: pip install torch==2.5.1 --index-url ${{ env.TORCH_INDEX }}\n",
     "on: push\nenv:\n  TORCH_INDEX: https://download.pytorch.org/whl/rocm6.2\njobs:\n  t:\n    runs-on: x\n"
     "    steps:\n      - run: pip install torch==2.5.1 --index-url ${{ env.TORCH_INDEX }}\n"),
])
def test_an_index_given_through_a_variable_is_rewritten_where_it_is_set(path: str, kind: str, before: str,
                                                                       after: str) -> None:
    result = fix_text(before, path, kind, PACKAGING, unsafe=True)
    assert result.error is None and result.fixed == after and len(result.applied) == 1
    assert not [f for f in scan_source(after, path, PACKAGING) if f.rule == "PS802"]
    assert fix_text(after, path, kind, PACKAGING, unsafe=True).fixed == after


def test_an_index_variable_set_twice_is_left_with_the_reason() -> None:
    text = ("a:\n  variables:\n    IDX: https://download.pytorch.org/whl/cu121\n  script:\n"
            "    - pip install torch --index-url $IDX\nb:\n  variables:\n"
            "    IDX: https://download.pytorch.org/whl/cu118\n  script:\n    - pip install torch --index-url $IDX\n")
    result = fix_text(text, ".gitlab-ci.yml", "ci", PACKAGING, unsafe=True)
    assert result.fixed == text
    assert any("set more than once" in n.reason for n in result.not_fixed)


def test_a_nightly_index_takes_the_newest_release_label_for_review_unless_a_dated_nightly_is_pinned() -> None:
    text = "pip install --pre torch torchvision --index-url https://download.pytorch.org/whl/nightly/cu128\n"
    result = fix_text(text, "install.sh", "shell", PACKAGING, unsafe=True)
    assert result.fixed == text.replace("nightly/cu128", "nightly/rocm7.1")
    assert "torch 2.10.0, the newest release portscan knows" in (result.applied[0].note or "")
    dated = "--pre\n--index-url https://download.pytorch.org/whl/nightly/cu126\ntorch==2.7.0.dev20250201\n"
    left = fix_text(dated, "requirements.txt", "requirements", PACKAGING, unsafe=True)
    assert left.fixed == dated and "dated nightly (==2.7.0.dev20250201)" in reasons(left)[0]
