"""Container definitions and manifests by any name (issue 16, parts 5-7): the
llm-serving fixture finding by finding, ARG-resolved base images, Apptainer files,
compose commands, command substitutions in shell, the ROCm wheel table and the
Markdown report's install recipe."""

from __future__ import annotations

import textwrap
from pathlib import Path, PurePath

import pytest

from portscan.filekinds import file_kind
from portscan.kinds.rocm_wheels import rocm_wheels
from portscan.match.commands import commands
from portscan.report.markdown import install_recipe, render_markdown
from portscan.ruleset.loader import load_rules
from portscan.scan import scan_paths, scan_source

from conftest import REPO

LLM_SERVING = REPO / "fixtures" / "llm-serving"

EXPECTED = [
    ("Singularity.def", 2, 7, "PS830"),                      # From: nvidia/cuda:12.4.1-cudnn-devel
    ("Singularity.def", 8, 12, "PS841"),                     # %environment: LD_LIBRARY_PATH=/usr/local/cuda/lib64
    ("Singularity.def", 12, 17, "PS881"),                    # %post: pip install torch==2.4.0 in a CUDA image
    ("Singularity.def", 12, 30, "PS883"),                    # %post: transformer-engine[pytorch]
    ("Singularity.def", 15, 19, "PS601"),                    # %runscript: "$(nvidia-smi -L | wc -l)"
    ("constraints.txt", 2, 1, "PS801"),                      # torch==2.4.0+cu121
    ("docker-compose.yml", 3, 12, "PS831"),                  # ${SERVER_IMAGE:-nvcr.io/nvidia/pytorch:24.05-py3}
    ("docker-compose.yml", 4, 30, "PS601"),                  # command: ["bash", "-c", "nvidia-smi && ..."]
    ("docker-compose.yml", 6, 22, "PS601"),                  # healthcheck test: ["CMD", "nvidia-smi"]
    ("docker/Dockerfile.cuda", 3, 16, "PS830"),              # ARG BASE_IMAGE=nvidia/cuda:${CUDA_VERSION}-devel
    ("docker/Dockerfile.cuda", 7, 10, "PS880"),              # wget .../compute/cuda/repos/.../cuda-keyring
    ("docker/Dockerfile.cuda", 8, 13, "PS880"),              # dpkg -i cuda-keyring_1.1-1_all.deb
    ("docker/Dockerfile.cuda", 9, 42, "PS824"),              # apt-get install libnccl2
    ("docker/Dockerfile.cuda", 13, 17, "PS881"),             # pip install torch==2.4.0 (no index) on a CUDA base
    ("docker/Dockerfile.cuda", 16, 6, "PS832"),              # FROM pytorch/pytorch:${TORCH_VERSION}-cuda${CUDA}-...
    ("docker/Dockerfile.cuda", 18, 5, "PS612"),              # ENV NCCL_NVLS_ENABLE=0
    ("docker/serve.Dockerfile", 1, 6, "PS831"),              # FROM nvcr.io/nvidia/pytorch
    ("docker/serve.Dockerfile", 3, 32, "PS811"),             # pip install tensorflow-gpu
    ("docker/serve.Dockerfile", 4, 48, "PS802"),             # --index-url .../cu121 (not xformers)
    ("docker/serve.Dockerfile", 5, 17, "PS601"),             # HEALTHCHECK CMD nvidia-smi
    ("llm_serving/__init__.py", 12, 8, "PS410"),             # "+cu" not in torch.__version__
    ("llm_serving/batching.py", 11, 12, "PS323"),            # "CUDA out of memory" in str(err) (not the log lines)
    ("pyproject.toml", 14, 12, "PS882"),                     # legacy = ["torch>=1.6,<1.8"]: no ROCm wheel
    ("pyproject.toml", 15, 9, "PS883"),                      # fp8 = ["transformer-engine[pytorch]>=1.9"]
    ("requirements/cuda-requirements.txt", 2, 1, "PS884"),   # xformers==0.0.27
    ("requirements/cuda-requirements.txt", 3, 1, "PS885"),   # nvidia-cudnn-frontend
    ("requirements/cuda-requirements.txt", 4, 1, "PS803"),   # nvidia-nccl-cu12
    ("requirements/cuda-requirements.txt", 5, 1, "PS807"),   # onnxruntime-gpu
    ("requirements/cuda-requirements.txt", 6, 1, "PS812"),   # jax[cuda12]
    ("requirements/cuda-requirements.txt", 7, 1, "PS816"),   # git+https://github.com/Dao-AILab/flash-attention.git@v2.6.3
    ("scripts/install.sh", 5, 13, "PS885"),                  # pip install nvidia-cudnn-frontend
    ("scripts/install.sh", 5, 35, "PS806"),                  # pip install cupy-cuda12x
    ("scripts/launch.sh", 5, 12, "PS601"),                   # NUM_GPUS=$(nvidia-smi -L | wc -l)
    ("scripts/launch.sh", 7, 8, "PS612"),                    # export NCCL_NVLS_ENABLE=0
    ("scripts/launch.sh", 8, 12, "PS601"),                   # GPU_NAME="`nvidia-smi --query-gpu=name ...`"
]


@pytest.fixture(scope="module")
def result():
    return scan_paths([LLM_SERVING], load_rules())


def test_every_finding_of_the_llm_serving_fixture_at_its_line_and_column(result) -> None:
    found = [(f.path, f.span.line, f.span.column, f.rule) for f in result.findings]
    assert found == EXPECTED
    assert result.errors == ()


def test_the_portable_parts_stay_silent(result) -> None:
    """The ROCm Dockerfile, the ROCm compose service, CUDA_VISIBLE_DEVICES (HIP honours
    it), torch>=2.1 (met by ROCm wheels) and torch.cuda calls are not reported."""
    paths = {f.path for f in result.findings}
    assert "docker/Dockerfile.rocm" not in paths and "requirements/base.txt" not in paths
    assert "llm_serving/serve.py" not in paths
    assert not [f for f in result.findings if "CUDA_VISIBLE_DEVICES" in f.message]
    assert not [f for f in result.findings if f.path == "docker-compose.yml" and f.span.line > 9]


def test_the_markdown_report_says_how_to_install_on_a_rocm_machine(result) -> None:
    report = render_markdown(result)
    section = report.split("## Installing on a ROCm machine", 1)[1].split("\n## ", 1)[0]
    version, index = rocm_wheels("torch").newest()
    assert f"pip install torch=={version} --index-url https://download.pytorch.org/whl/{index}" in section
    assert "pip install -c rocm-constraints.txt -r requirements.txt" in section
    assert "--no-deps" in section and "--no-build-isolation" in section
    # the requirements that stand in the way, from the manifests only, by line
    assert "`pyproject.toml:14` PS882" in section
    assert "`requirements/cuda-requirements.txt:2` PS884" in section
    assert "`constraints.txt:2` PS801" in section
    assert "Dockerfile" not in section.split("stand in the way", 1)[1]


def test_no_install_section_without_packaging_findings() -> None:
    findings = list(scan_source("import pynvml\n", "train.py", load_rules()))
    assert findings and install_recipe(findings) == []


@pytest.mark.parametrize(("name", "kind"), [
    ("Dockerfile_2014", "dockerfile"), ("Qwen2VL_Dockerfile", "dockerfile"),
    ("Dockerfile-cuda", "dockerfile"), ("serve.dockerfile", "dockerfile"),
    ("Dockerfile-old", None), ("Dockerfile.md", None), ("dockerfile_utils.py", "python"),
    ("Singularity", "apptainer"), ("Singularity.def", "apptainer"), ("gpu.def", "apptainer"),
    ("requirements-dev.in", "requirements"), ("requirements/gpu.in", "requirements"),
    ("cuda-constraints.txt", "requirements"), ("setup.in", None), ("MANIFEST.in", None),
])
def test_container_definitions_by_any_name(name: str, kind: str | None) -> None:
    assert file_kind(PurePath(name)) == kind


def _codes(path: str, source: str) -> list[tuple[int, int, str]]:
    return [(f.span.line, f.span.column, f.rule)
            for f in scan_source(textwrap.dedent(source), path, load_rules())]


def test_from_an_arg_is_reported_at_the_default_and_resolved_through_earlier_args() -> None:
    source = """\
    ARG REGISTRY=nvcr.io/nvidia
    ARG BASE=${REGISTRY}/pytorch:24.05-py3
    ARG UNSET
    FROM ${BASE}
    FROM ${UNSET}
    FROM ${OTHER:-nvidia/cuda:12.1.0-base-ubuntu22.04}
    """
    assert _codes("Dockerfile", source) == [(2, 10, "PS831"), (6, 6, "PS830")]


def test_an_arg_after_the_first_from_does_not_feed_from() -> None:
    """Docker lets FROM use only the ARGs declared before the first FROM."""
    source = """\
    FROM ubuntu:22.04
    ARG BASE=nvidia/cuda:12.1.0-base-ubuntu22.04
    FROM ${BASE}
    """
    assert _codes("Dockerfile", source) == []


def test_a_def_file_without_a_bootstrap_header_is_not_read() -> None:
    source = "LIBRARY mylib\nEXPORTS\n    nvidia_smi_wrapper\n%post\nnvidia-smi\n"
    assert _codes("exports.def", source) == []


def test_apptainer_sections_other_than_shell_are_not_commands() -> None:
    source = """\
    Bootstrap: docker
    From: rocm/pytorch:latest

    %help
        Run nvidia-smi to check the GPUs.
    %files
        nvidia-smi /opt/bin/nvidia-smi
    %post
        nvidia-smi
    """
    assert _codes("Singularity", source) == [(9, 5, "PS601")]


def test_compose_block_scalar_commands_land_on_their_lines() -> None:
    source = """\
    services:
      app:
        command: |
          python serve.py &
          nvidia-smi -l 5
        entrypoint: nvidia-smi
    """
    assert _codes("docker-compose.yml", source) == [(5, 7, "PS601"), (6, 17, "PS601")]


@pytest.mark.parametrize(("text", "programs"), [
    ("NUM_GPUS=$(nvidia-smi -L | wc -l)", ["", "nvidia-smi", "wc"]),
    ('echo "gpus: $(nvidia-smi -L)"', ["nvidia-smi", "echo"]),
    ("X=`nvidia-smi -L`", ["nvidia-smi", ""]),
    ("echo '$(nvidia-smi)' '`nvidia-smi`'", ["echo"]),
    ('echo "$(dirname "$(which nvidia-smi)")"', ["which", "dirname", "echo"]),
])
def test_command_substitutions_are_commands(text: str, programs: list[str]) -> None:
    assert [c.program for c in commands(text)] == programs


def test_a_substituted_command_has_the_offset_of_its_text() -> None:
    text = 'GPU="`nvidia-smi --query-gpu=name`"'
    (inner, _) = list(commands(text))
    assert text[inner.words[0].start:inner.words[0].end] == "nvidia-smi"


@pytest.mark.parametrize(("specifier", "none"), [
    ("==1.7.1", True), ("<1.8", True), ("==1.8.2", True), ("~=1.7.0", True),
    (">=1.4", False), (">=2.1,<2.5", False), ("==2.4.0", False), ("==2.1.0+cu121", False),
    (">=99", False), ("==2.10.1", False), ("", False), ("not a specifier", False),
])
def test_which_torch_specifiers_no_rocm_wheel_meets(specifier: str, none: bool) -> None:
    table = rocm_wheels("torch")
    assert table is not None and table.none_meets(specifier) is none


def test_requirements_files_are_read_under_a_broad_gitignore(tmp_path: Path) -> None:
    """git ignores only untracked files; lmdeploy commits requirements/*.txt under `*.txt`."""
    (tmp_path / ".gitignore").write_text("*.txt\n*.py\n")
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "runtime_cuda.txt").write_text("pynvml\n")
    (tmp_path / "gen.py").write_text("import pynvml\n")
    result = scan_paths([tmp_path], load_rules())
    assert [(f.path, f.rule) for f in result.findings] == [("requirements/runtime_cuda.txt", "PS809")]


@pytest.mark.parametrize(("path", "source"), [
    ("docker-compose.yml", "services:\n  a:\n    command: [unclosed\n"),
    ("docker-compose.yml", "services:\n  a:\n    command: {x: 1}\n    healthcheck: [1, 2]\n"),
    ("Singularity.def", "Bootstrap: docker\nFrom:\n%post\n  echo \"$(unterminated\n"),
    ("Dockerfile", "ARG =x\nARG B='\nFROM ${B\nHEALTHCHECK CMD\nRUN echo `x\n"),
])
def test_malformed_container_files_do_not_crash(path: str, source: str) -> None:
    list(scan_source(source, path, load_rules()))


def test_requirements_whose_markers_exclude_linux_are_not_reported() -> None:
    """ROCm machines run Linux: a Windows- or macOS-only requirement never installs there."""
    source = """\
    xformers>=0.0.22.post7 ; platform_system == 'Windows'
    pynvml ; sys_platform == "darwin"
    triton>=2.0.0 ; platform_machine == "x86_64" and sys_platform == "linux"
    xformers ; python_version >= "3.9"
    """
    assert _codes("requirements.txt", source) == [(3, 1, "PS819"), (4, 1, "PS884")]


def test_extras_named_for_nvidia_builds_are_vendor_branches() -> None:
    """An AMD user installs another extra than ``cu118-torch211``: its CUDA pins are
    reported as info (vendor-branch); the same pin in a neutral extra is not lowered."""
    text = textwrap.dedent('''\
        [project]
        name = "demo"
        dependencies = ["torch>=2.1"]

        [project.optional-dependencies]
        cu118-torch211 = ["bitsandbytes==0.45.5", "flash-attn>=2.6.3"]
        cu121onlytorch211 = ["xformers==0.0.23"]
        train = ["flash-attn>=2.6.3"]
        nocuda = ["flash-attn>=2.6.3"]
        ''')
    found = [(f.span.line, f.rule, f.severity.value, f.guard)
             for f in scan_source(text, "pyproject.toml", load_rules())]
    assert found == [(6, "PS856", "info", "vendor-branch"), (6, "PS816", "info", "vendor-branch"),
                     (7, "PS884", "info", "vendor-branch"), (8, "PS816", "warning", None),
                     (9, "PS816", "warning", None)]


def test_extras_named_for_amd_builds_are_vendor_branches() -> None:
    """An extra the project put together for AMD GPUs (InvokeAI's ``rocm`` extra, pinning
    AMD's own triton build that its ROCm torch wheel requires) is not a CUDA requirement;
    a word that only contains those letters (``champion``, ``shipping``) names no vendor."""
    text = textwrap.dedent('''\
        [project]
        name = "demo"

        [project.optional-dependencies]
        rocm = ["triton==3.8.0+git4cff872c.rocm10.0.0; sys_platform == 'linux'"]
        rocm6 = ["triton>=3.0"]
        shipping = ["triton>=3.0"]
        ''')
    found = [(f.span.line, f.rule, f.severity.value, f.guard)
             for f in scan_source(text, "pyproject.toml", load_rules())]
    assert found == [(5, "PS819", "info", "vendor-branch"), (6, "PS819", "info", "vendor-branch"),
                     (7, "PS819", "warning", None)]


def test_an_explicit_index_uv_uses_only_for_an_nvidia_extra_is_a_vendor_branch() -> None:
    """InvokeAI's ``torch-cuda`` index serves only its ``cuda`` extra (``{ index =
    "torch-cuda", extra = "cuda" }``, a ``rocm`` extra beside it): only an NVIDIA user
    installs from it. An index a plain source uses still reaches everybody (LeRobot's cu128)."""
    text = textwrap.dedent('''\
        [project]
        name = "demo"

        [[tool.uv.index]]
        name = "torch-cuda"
        url = "https://download.pytorch.org/whl/cu130"
        explicit = true

        [[tool.uv.index]]
        name = "pytorch-cu128"
        url = "https://download.pytorch.org/whl/cu128"
        explicit = true

        [tool.uv.sources]
        torch = [
          { index = "torch-cuda", extra = "cuda" },
          { index = "torch-rocm", extra = "rocm" },
        ]
        torchvision = [{ index = "pytorch-cu128", marker = "sys_platform == 'linux'" }]
        ''')
    found = [(f.span.line, f.rule, f.severity.value, f.guard)
             for f in scan_source(text, "pyproject.toml", load_rules())]
    assert found == [(6, "PS802", "info", "vendor-branch"), (11, "PS802", "error", None)]


def test_setup_cfg_extras_named_for_nvidia_builds_are_vendor_branches() -> None:
    """The same for ``setup.cfg``'s ``[options.extras_require]`` (thinc's ``cuda80`` ...
    ``cuda12x`` extras, one per CUDA wheel of CuPy)."""
    text = textwrap.dedent('''\
        [metadata]
        name = demo

        [options.extras_require]
        cuda12x = cupy-cuda12x>=11.5.0
        gpu = cupy-cuda12x>=11.5.0
        ''')
    found = [(f.span.line, f.rule, f.severity.value, f.guard)
             for f in scan_source(text, "setup.cfg", load_rules())]
    assert found == [(5, "PS806", "info", "vendor-branch"), (6, "PS806", "error", None)]


def test_setup_py_extras_named_for_nvidia_builds_are_vendor_branches() -> None:
    """And for ``setup(extras_require=...)``, a dict literal or one filled key by key
    (ctransformers' ``"cuda"`` extra holds the NVIDIA runtime wheels of its prebuilt CUDA
    binary; a ROCm user builds from source and never installs it)."""
    text = textwrap.dedent('''\
        from setuptools import setup

        extras = {
            "cuda": ["cupy-cuda12x>=11.5.0"],
            "tests": ["cupy-cuda12x>=11.5.0"],
        }
        extras["cu121"] = ["cupy-cuda12x>=11.5.0"]
        extras["gpu"] = ["cupy-cuda12x>=11.5.0"]
        setup(name="demo", install_requires=["cupy-cuda12x>=11.5.0"], extras_require=extras)
        ''')
    found = [(f.span.line, f.rule, f.severity.value, f.guard)
             for f in scan_source(text, "setup.py", load_rules())]
    assert found == [(4, "PS806", "info", "vendor-branch"), (5, "PS806", "error", None),
                     (7, "PS806", "info", "vendor-branch"), (8, "PS806", "error", None),
                     (9, "PS806", "error", None)]
