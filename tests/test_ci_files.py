"""CI definitions (GitHub Actions, GitLab CI, Azure Pipelines, Jenkinsfiles) and
``.gitmodules``: what is read from them, where each finding lands (line and column in
the file as written, inside ``run: |`` blocks too), and what is left alone."""

from __future__ import annotations

import textwrap
from pathlib import Path, PurePosixPath

import pytest

from portscan.filekinds import file_kind
from portscan.match.ci import embedded_text, expansions
from portscan.match.gitmodules import repository, submodules
from portscan.match.yamlfiles import compose_yaml
from portscan.scan import scan_paths, scan_source

from conftest import REPO

FIXTURE = REPO / "fixtures" / "ci-pipelines"

#: (path, line, column, rule, severity) of every finding in the fixture
EXPECTED = [
    (".github/actions/setup-cuda/action.yml", 10, 13, "PS850", "warning"),  # N-Storm/cuda-toolkit
    (".github/actions/setup-cuda/action.yml", 16, 21, "PS803", "warning"),  # nvidia-cudnn-cu12 wheel
    (".github/actions/setup-cuda/action.yml", 16, 49, "PS806", "error"),    # cupy-cuda12x
    (".github/workflows/docker.yml", 9, 16, "PS831", "error"),     # services: tritonserver NGC image
    (".github/workflows/docker.yml", 12, 24, "PS830", "error"),    # uses: docker://nvidia/cuda
    (".github/workflows/docker.yml", 18, 27, "PS834", "warning"),  # docker run --gpus in run: |
    (".github/workflows/test.yml", 8, 3, "PS610", "warning"),      # env: TORCH_CUDA_ARCH_LIST
    (".github/workflows/test.yml", 14, 14, "PS830", "error"),      # container.image nvidia/cuda
    (".github/workflows/test.yml", 15, 16, "PS834", "warning"),    # container.options --gpus all
    (".github/workflows/test.yml", 26, 58, "PS824", "warning"),    # apt-get cuda-toolkit in run: |
    (".github/workflows/test.yml", 28, 44, "PS802", "error"),      # .../whl/${{ matrix.torch-cuda }}
    (".github/workflows/test.yml", 32, 29, "PS802", "error"),      # run: > folded onto two lines
    (".github/workflows/test.yml", 54, 44, "PS802", "info"),       # matrix also has the ROCm index
    (".github/workflows/test.yml", 57, 33, "PS824", "info"),       # step skipped on the ROCm runner
    (".github/workflows/wheels.yml", 14, 15, "PS850", "warning"),  # Jimver/cuda-toolkit
    (".github/workflows/wheels.yml", 25, 22, "PS851", "warning"),  # gpu-arch-type: cuda
    (".github/workflows/wheels.yml", 29, 55, "PS802", "error"),    # with: script: | of a linux_job
    (".gitlab-ci.yml", 8, 10, "PS830", "error"),        # image with ${CUDA_VERSION} from variables
    (".gitlab-ci.yml", 13, 43, "PS802", "error"),       # $TORCH_INDEX from variables
    (".gitlab-ci.yml", 16, 7, "PS611", "warning"),      # NVIDIA_VISIBLE_DEVICES=0 in a script line
    (".gitlab-ci.yml", 21, 11, "PS831", "error"),       # image: {name: nvcr.io/...}
    (".gitlab-ci.yml", 25, 26, "PS824", "warning"),     # apt-get install tensorrt
    (".gitlab-ci.yml", 26, 18, "PS835", "error"),       # docker run --runtime=nvidia
    (".gitmodules", 3, 8, "PS852", "info"),             # NVIDIA/cutlass
    (".gitmodules", 6, 8, "PS853", "info"),             # NVIDIA/cub
    (".gitmodules", 9, 8, "PS854", "info"),             # Dao-AILab/flash-attention
    (".gitmodules", 12, 8, "PS855", "warning"),         # git@github.com:NVIDIA/TransformerEngine
    ("Jenkinsfile", 4, 20, "PS831", "error"),           # docker { image 'nvcr.io/...' }
    ("Jenkinsfile", 5, 19, "PS834", "warning"),         # docker { args '--gpus all' }
    ("Jenkinsfile", 9, 9, "PS611", "warning"),          # environment { NVIDIA_VISIBLE_DEVICES }
    ("Jenkinsfile", 14, 33, "PS801", "error"),          # sh '... torch==2.3.1+cu121 ...'
    ("Jenkinsfile", 18, 40, "PS824", "warning"),        # sh \"\"\" ... libnccl2 \"\"\"
    ("azure-pipelines.yml", 10, 12, "PS832", "error"),  # container: pytorch/pytorch:...-cuda11.8
    ("azure-pipelines.yml", 14, 37, "PS802", "error"),  # $(torchIndex) from variables
]


def test_fixture_findings_at_exact_lines_and_columns(rules) -> None:
    result = scan_paths([FIXTURE], rules)
    assert not result.errors
    found = sorted((f.path, f.span.line, f.span.column, f.rule, f.severity.value) for f in result.findings)
    assert found == sorted(EXPECTED)


def test_fixture_python_and_requirements_are_clean(rules) -> None:
    """The project itself is ROCm-neutral: every finding sits in a CI file or .gitmodules."""
    result = scan_paths([FIXTURE], rules)
    assert {f.path for f in result.findings}.isdisjoint({"train.py", "requirements.txt"})


@pytest.mark.parametrize(("path", "kind"), [
    (".github/workflows/test.yml", "ci"),
    (".github/workflows/conda.yaml", "ci"),  # not a conda environment
    (".github/workflows/docker-compose.yml", "ci"),
    (".github/actions/setup-cuda/action.yml", "ci"),
    (".gitlab-ci.yml", "ci"),
    ("ci/gpu.gitlab-ci.yml", "ci"),
    ("azure-pipelines.yml", "ci"),
    ("azure-pipelines-gpu.yaml", "ci"),
    (".azure-pipelines/templates/build.yml", "ci"),
    ("Jenkinsfile", "jenkinsfile"),
    ("ci/gpu.Jenkinsfile", "jenkinsfile"),
    (".gitmodules", "gitmodules"),
    ("workflows/test.yml", None),
    ("docs/action.yml", None),
    ("environment.yml", "conda"),
])
def test_file_kinds(path: str, kind: str | None) -> None:
    assert file_kind(PurePosixPath(path)) == kind


def run(path: str, source: str, rules, *codes: str) -> list[tuple[int, int, str, str]]:
    findings = scan_source(textwrap.dedent(source), path, rules.select(list(codes)) if codes else rules)
    return [(f.span.line, f.span.column, f.rule, f.severity.value) for f in findings]


def test_block_scalar_keeps_file_positions(rules) -> None:
    source = """\
    jobs:
      build:
        steps:
          - run: |
              echo start   # a comment
                pip install torch==2.1.0+cu118
              apt-get install -y cuda-nvcc-12-1
      # a comment after the block, less indented
          - run: "pip install cupy-cuda11x"
    """
    assert run(".github/workflows/ci.yml", source, rules, "PS801", "PS824", "PS806") == [
        (6, 25, "PS801", "error"), (7, 30, "PS824", "warning"), (9, 27, "PS806", "error")]


def test_folded_and_plain_multiline_scripts_are_one_command(rules) -> None:
    source = """\
    jobs:
      build:
        steps:
          - run: >
              pip install torch
              --index-url https://download.pytorch.org/whl/cu124
          - run: pip install torch
              --index-url https://download.pytorch.org/whl/cu121
    """
    assert run(".github/workflows/ci.yml", source, rules, "PS802") == [
        (6, 23, "PS802", "error"), (8, 23, "PS802", "error")]


def test_literal_block_lines_are_separate_commands(rules) -> None:
    """In a ``|`` block each line is its own command: the URL after a line break is not
    an argument of the pip line above it."""
    source = """\
    jobs:
      build:
        steps:
          - run: |
              pip install torch
              echo --index-url https://download.pytorch.org/whl/cu124
    """
    assert run(".github/workflows/ci.yml", source, rules, "PS802") == []


def test_matrix_values_feed_the_use_site_once(rules) -> None:
    source = """\
    jobs:
      build:
        strategy:
          matrix:
            cu: [cu118, cu121]
            python: ["3.10", "3.11", "3.12"]
        container: pytorch/pytorch:2.3.0-${{ matrix.cu }}-cudnn8-runtime
        steps:
          - run: pip install torch --index-url https://download.pytorch.org/whl/${{ matrix.cu }}
    """
    findings = scan_source(textwrap.dedent(source), ".github/workflows/ci.yml", rules.select(["PS802", "PS832"]))
    assert [(f.span.line, f.span.column, f.span.end_column, f.rule) for f in findings] == [
        (7, 16, 69, "PS832"), (9, 44, 93, "PS802")]
    assert "https://download.pytorch.org/whl/cu118" in findings[1].message


def test_matrix_entry_alone_is_not_reported(rules) -> None:
    """A CUDA version list that feeds nothing CUDA-specific (here only a cache key) is data."""
    source = """\
    jobs:
      build:
        strategy:
          matrix:
            cuda: ["11.8", "12.1"]
        steps:
          - run: echo "cache key ${{ matrix.cuda }}"
    """
    assert run(".github/workflows/ci.yml", source, rules) == []


def test_rocm_entries_and_conditions_are_vendor_branches(rules) -> None:
    source = """\
    jobs:
      test:
        strategy:
          matrix:
            include:
              - {gpu: cuda, index: "https://download.pytorch.org/whl/cu126"}
              - {gpu: rocm, index: "https://download.pytorch.org/whl/rocm6.4"}
        steps:
          - run: pip install torch --index-url ${{ matrix.index }}
          - if: ${{ matrix.gpu != 'rocm' }}
            uses: Jimver/cuda-toolkit@v0.2.16
      cuda-only:
        if: matrix.gpu != 'rocm'
        container: nvidia/cuda:12.4.1-devel-ubuntu22.04
    """
    assert run(".github/workflows/ci.yml", source, rules) == [
        (9, 44, "PS802", "info"), (11, 15, "PS850", "info"), (14, 16, "PS830", "info")]


def test_scripts_in_other_languages_are_not_read_as_shell(rules) -> None:
    source = """\
    jobs:
      win:
        runs-on: windows-latest
        steps:
          - shell: pwsh
            run: pip install torch --index-url https://download.pytorch.org/whl/cu121
          - shell: python
            run: print("pip install torch==2.1.0+cu118")
          - uses: actions/github-script@v7
            with:
              script: console.log("apt-get install -y cuda-toolkit-12-1")
    """
    assert run(".github/workflows/ci.yml", source, rules) == []
    azure = """\
    steps:
      - task: PowerShell@2
        inputs:
          script: pip install torch --index-url https://download.pytorch.org/whl/cu121
      - task: Bash@3
        inputs:
          targetType: inline
          script: pip install torch --index-url https://download.pytorch.org/whl/cu121
    """
    assert run("azure-pipelines.yml", azure, rules, "PS802") == [(8, 45, "PS802", "error")]


def test_gitlab_parallel_matrix_and_nested_script_lists(rules) -> None:
    source = """\
    .install: &install
      - pip install torch --index-url https://download.pytorch.org/whl/${TORCH_FLAVOUR}
    test:
      parallel:
        matrix:
          - TORCH_FLAVOUR: [cpu, cu121]
      script:
        - *install
        - - python -m pytest
    """
    assert run(".gitlab-ci.yml", source, rules, "PS802") == [(2, 35, "PS802", "error")]


@pytest.mark.parametrize("source", [
    "- just\n- a list\n",
    "plain scalar\n",
    "",
    "# only a comment\n",
    "jobs:\n  a:\n    steps:\n      - run: {not: a script}\n      - run: [1, 2]\n      - run: null\n",
    "jobs:\n  a:\n    strategy: {matrix: [1, 2]}\n    env: [x]\n    variables: 3\n    services: {a: 1}\n",
    "variables: {X: !reference [.base, variables]}\nx:\n  script: [!reference [.setup, script]]\n",
    "? [complex, key]\n: value\nenv: {? [a]: b}\n",
])
def test_odd_yaml_never_crashes(rules, source: str) -> None:
    assert run(".github/workflows/ci.yml", source, rules) == []
    assert run(".gitlab-ci.yml", source, rules) == []


@pytest.mark.parametrize("source", ["jobs: [unclosed\n", "run: |\n\t- tab\n: :\n", "a: b\n- c\n"])
def test_invalid_yaml_is_a_per_file_error(tmp_path: Path, rules, source: str) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "bad.yml").write_text(source)
    (tmp_path / "requirements.txt").write_text("torch==2.1.0+cu118\n")
    result = scan_paths([tmp_path], rules)
    assert [(e.path, e.kind) for e in result.errors] == [(".github/workflows/bad.yml", "parse")]
    assert "invalid YAML" in result.errors[0].message
    assert [(f.path, f.rule) for f in result.findings] == [("requirements.txt", "PS801")]


def test_malformed_files_in_a_tree_do_not_stop_the_scan(tmp_path: Path, rules) -> None:
    (tmp_path / ".gitmodules").write_bytes(b"[submodule \"x\"\n\x01\xff url = \n")
    (tmp_path / "Jenkinsfile").write_text("sh '''never closed\n apt-get install -y libcudnn8")
    (tmp_path / "requirements.txt").write_text("torch==2.1.0+cu118\n")
    result = scan_paths([tmp_path], rules)
    assert [(f.path, f.rule) for f in result.findings] == [
        ("Jenkinsfile", "PS824"), ("requirements.txt", "PS801")]
    assert result.errors == ()  # undecodable bytes are replaced, the file read best-effort


def test_jenkins_comments_are_not_steps(rules) -> None:
    source = """\
    node {
        // sh 'apt-get install -y cuda-toolkit-12-1'
        /* sh "pip install torch==2.1.0+cu118" */
        sh "pip install --index-url https://download.pytorch.org/whl/cu118 torch"
    }
    """
    assert run("Jenkinsfile", source, rules) == [(4, 33, "PS802", "error")]


def test_embedded_text_is_as_long_as_the_source_it_covers() -> None:
    text = "a:\n  run: |\n    one\n      two\n  b: 'x y'\n  c: >-\n    p\n    q\n"
    root = compose_yaml(text)
    for _, value in root.value[0][1].value:
        body, at = embedded_text(text, value)
        assert text[at:at + len(body)].replace("\n", " ") == body.replace("\n", " ")


def test_expansions_map_offsets_back() -> None:
    [first, second] = expansions("url/${{ matrix.cu }}/x", {"matrix.cu": ("cu118", "rocm6.2")})
    assert (first.text, second.text) == ("url/cu118/x", "url/rocm6.2/x")
    assert first.offsets is not None and first.offsets[4] == 4 and first.offsets[len("url/cu118")] == 20
    assert first.vendor == ((4, 20),)
    assert expansions("echo $HOME", {}) == expansions("echo $HOME", {"PATH": ("x",)})


@pytest.mark.parametrize(("url", "repo"), [
    ("https://github.com/NVIDIA/cutlass.git", "github.com/nvidia/cutlass"),
    ("https://github.com/NVIDIA/cutlass/", "github.com/nvidia/cutlass"),
    ("git@github.com:NVIDIA/cutlass.git", "github.com/nvidia/cutlass"),
    ("ssh://git@github.com/NVIDIA/cutlass", "github.com/nvidia/cutlass"),
    ("../cutlass.git", "../cutlass"),
])
def test_submodule_repository(url: str, repo: str) -> None:
    assert repository(url) == repo


def test_gitmodules_reading() -> None:
    text = ('; a comment\n[core]\n\turl = https://github.com/NVIDIA/ignored\n'
            '[submodule "a"]\n\tpath = third_party/a\n\turl = "https://github.com/NVIDIA/cub.git"  # pinned\n'
            '[submodule "no-url"]\n\tpath = x\n'
            '[submodule "b"]\n  url=https://github.com/NVIDIA/cccl ; trailing\n  path = b\n')
    found = list(submodules(text))
    assert [(s.name, s.path, s.url) for s in found] == [
        ("a", "third_party/a", "https://github.com/NVIDIA/cub.git"), ("b", "b", "https://github.com/NVIDIA/cccl")]
    assert [text[s.start:s.end] for s in found] == [s.url for s in found]


def test_counterpart_submodule_silences_the_rule(rules) -> None:
    source = """\
    [submodule "third_party/cutlass"]
    \tpath = third_party/cutlass
    \turl = https://github.com/NVIDIA/cutlass.git
    [submodule "third_party/flash-attention"]
    \tpath = third_party/flash-attention
    \turl = https://github.com/Dao-AILab/flash-attention.git
    [submodule "third_party/composable_kernel_tiled"]
    \tpath = third_party/composable_kernel_tiled
    \turl = https://github.com/ROCm/composable_kernel.git
    """
    assert run(".gitmodules", source, rules) == []


def test_suppression_comments_in_ci_files(tmp_path: Path, rules) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text(
        "jobs:\n  a:\n    container: nvidia/cuda:12.1.0-base-ubuntu22.04  # portscan: ignore[PS830]\n")
    (tmp_path / "Jenkinsfile").write_text(
        "node {\n  sh 'pip install torch==2.1.0+cu118'  // portscan: ignore[PS801]\n}\n")
    assert scan_paths([tmp_path], rules).findings == ()


def test_env_set_from_the_matrix_carries_its_values(rules) -> None:
    source = """\
    jobs:
      build:
        strategy:
          matrix:
            cuda-version: ["118", "121"]
        env:
          TORCH_INDEX: https://download.pytorch.org/whl/cu${{ matrix.cuda-version }}
        steps:
          - run: pip install torch --index-url "$TORCH_INDEX"
    """
    assert run(".github/workflows/ci.yml", source, rules, "PS802") == [(9, 44, "PS802", "error")]


def test_input_defaults_feed_the_use_site(rules) -> None:
    action = """\
    name: setup
    inputs:
      torch-index:
        default: https://download.pytorch.org/whl/cu121
    runs:
      using: composite
      steps:
        - shell: bash
          run: pip install torch --index-url ${{ inputs.torch-index }}
    """
    assert run(".github/actions/setup/action.yml", action, rules, "PS802") == [(9, 42, "PS802", "error")]
    workflow = """\
    on:
      workflow_dispatch:
        inputs:
          image: {default: "nvidia/cuda:12.4.1-runtime-ubuntu22.04"}
    jobs:
      a:
        container: ${{ inputs.image }}
    """
    assert run(".github/workflows/ci.yml", workflow, rules, "PS830") == [(7, 16, "PS830", "error")]


def test_jenkins_sh_step_forms(rules) -> None:
    source = """\
    node {
        sh label: 'deps', script: 'apt-get install -y libcudnn8'
        def out = sh(returnStdout: true, script: "pip install torch==2.1.0+cu118")
        sh '''
            pip install cupy-cuda12x
        '''
        sh label: 'not a script: apt-get install -y libnccl2', script: 'echo ok'
    }
    """
    assert run("Jenkinsfile", source, rules, "PS824", "PS801", "PS806") == [
        (2, 51, "PS824", "warning"), (3, 59, "PS801", "error"), (5, 21, "PS806", "error")]


def test_a_cuda_fixed_job_lists_the_keys_a_rocm_entry_replaces(rules) -> None:
    """PS851's ``also``: the job's runner, CUDA version and image are listed with the
    finding (``uses``), at their own lines, where the job sets them."""
    source = textwrap.dedent("""\
        jobs:
          build-test:
            uses: pytorch/test-infra/.github/workflows/linux_job_v2.yml@main
            with:
              runner: linux.g5.48xlarge.nvidia.gpu
              gpu-arch-type: cuda
              gpu-arch-version: "12.6"
              # faster to clone than the default
              docker-image: torchtitan-ubuntu-20.04-clang12
          bare:
            uses: pytorch/test-infra/.github/workflows/linux_job_v2.yml@main
            with:
              gpu-arch-type: cuda
        """)
    found = [(f.span.line, f.uses) for f in scan_source(source, ".github/workflows/gpu.yaml", rules.select(["PS851"]))]
    assert found == [(6, ((5, 15), (7, 25), (9, 21))), (13, ())]
