"""The non-Python surfaces: manifests, containers, shell scripts, extension builds and
kernel sources. Rules are built inline, so the engine is tested apart from the pack."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import inline_rule as rule

from portscan.match.commands import commands, lex, pip_arguments
from portscan.match.kernels import strip_code
from portscan.ruleset.loader import RuleSet
from portscan.scan import scan_paths, scan_source




def run(path: str, source: str, *rules, hipify: frozenset[str] | None = None):
    findings = scan_source(textwrap.dedent(source), path, RuleSet(rules), hipify=hipify)
    return [(f.rule, f.span.line, f.message) for f in findings]


NV_WHEELS = rule("XX801", {"kind": "requirement", "names": ["nvidia-*-cu1?", "pynvml", "cupy-cuda*"]},
                 "${package}")
CU_TORCH = rule("XX802", {"kind": "requirement", "names": ["torch", "torchvision"],
                          "local_versions": ["cu*"]}, "${requirement}")
APEX_GIT = rule("XX803", {"kind": "requirement", "names": ["apex"], "url": "github\\.com/NVIDIA/apex"},
                "${package}")
CU_INDEX = rule("XX804", {"kind": "index", "urls": ["https://download.pytorch.org/whl/cu*"],
                          "channels": ["nvidia"]}, "${url}")
TF_CUDA = rule("XX805", {"kind": "requirement", "names": ["tensorflow", "jax"],
                         "extras": ["and-cuda", "cuda*"]}, "${requirement}")
BUILD_TORCH = rule("XX806", {"kind": "requirement", "names": ["torch"], "sections": ["build"]},
                   "${requirement}")
CONDA = rule("XX807", {"kind": "requirement", "names": ["cudatoolkit", "pytorch-cuda"]}, "${package}")
MANIFEST_RULES = (NV_WHEELS, CU_TORCH, APEX_GIT, CU_INDEX, TF_CUDA, BUILD_TORCH, CONDA)


# ------------------------------------------------------------------ requirements files


def test_requirements_file() -> None:
    source = """\
    # CUDA 11.7 wheels
    --extra-index-url https://download.pytorch.org/whl/cu117
    -i https://pypi.org/simple
    torch==1.13.1+cu117  # pinned
    torchvision==0.14.1+rocm5.2
    Nvidia_Cudnn_CU11==8.5.0.96 ; platform_system == "Linux"
    nvidia-ml-py
    tensorflow[and-cuda]>=2.15 \\
        --hash=sha256:abc
    -e git+https://github.com/NVIDIA/apex.git#egg=apex
    apex @ git+https://github.com/ROCm/apex.git
    numpy
    not a valid requirement !!
    """
    assert run("requirements.txt", source, *MANIFEST_RULES) == [
        ("XX804", 2, "https://download.pytorch.org/whl/cu117"),
        ("XX802", 4, "torch==1.13.1+cu117"),
        ("XX801", 6, "Nvidia_Cudnn_CU11"),
        ("XX805", 8, "tensorflow[and-cuda]>=2.15"),
        ("XX803", 10, "apex"),
    ]


def test_requirements_includes_are_followed(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("-r base.in\nnumpy\n")
    (tmp_path / "base.in").write_text("pynvml\n")
    result = scan_paths([tmp_path], RuleSet([NV_WHEELS]))
    assert [(f.path, f.span.line) for f in result.findings] == [("base.in", 1)]


# ------------------------------------------------------------------ pyproject, setup.cfg, setup.py


def test_pyproject() -> None:
    source = """\
    [build-system]
    requires = ["setuptools", "torch==2.1.0"]

    [project]
    dependencies = ["torch==2.1.0+cu121", "numpy"]

    [project.optional-dependencies]
    gpu = ["cupy-cuda12x"]

    [tool.poetry.dependencies]
    python = "^3.10"
    torchvision = {version = "0.16.0+cu121", source = "torch"}

    [[tool.poetry.source]]
    name = "torch"
    url = "https://download.pytorch.org/whl/cu121"
    """
    assert run("pyproject.toml", source, *MANIFEST_RULES) == [
        ("XX806", 2, "torch==2.1.0"),
        ("XX802", 5, "torch==2.1.0+cu121"),
        ("XX801", 8, "cupy-cuda12x"),
        ("XX802", 12, "torchvision==0.16.0+cu121"),
        ("XX804", 16, "https://download.pytorch.org/whl/cu121"),
    ]


def test_explicit_indexes_count_only_where_a_source_names_them() -> None:
    """uv's ``explicit = true`` and Poetry's ``priority = "explicit"``: nothing is looked
    up there unless a source pins a package to it."""
    source = """\
    [tool.poetry.dependencies]
    torch = {version = "2.5.1", source = "torch-cu124"}

    [[tool.poetry.source]]
    name = "torch-cu124"
    url = "https://download.pytorch.org/whl/cu124"
    priority = "explicit"

    [[tool.poetry.source]]
    name = "torch-cu118"
    url = "https://download.pytorch.org/whl/cu118"
    priority = "explicit"

    [[tool.uv.index]]
    name = "pytorch-cu126"
    url = "https://download.pytorch.org/whl/cu126"
    explicit = true

    [[tool.uv.index]]
    name = "pytorch-cu130"
    url = "https://download.pytorch.org/whl/cu130"
    explicit = true

    [[tool.uv.index]]
    url = "https://download.pytorch.org/whl/cu121"

    [tool.uv.sources]
    torch = [
      { index = "pytorch-cu126", marker = "sys_platform == 'linux'" },
      # { index = "pytorch-cu130", marker = "sys_platform == 'linux'" },
    ]
    """
    assert [(rule, line) for rule, line, _ in run("pyproject.toml", source, CU_INDEX)] == [
        ("XX804", 6), ("XX804", 16), ("XX804", 25)]


def test_setup_cfg() -> None:
    source = """\
    [metadata]
    name = demo

    [options]
    install_requires =
        numpy
        pynvml>=11
    setup_requires = torch

    [options.extras_require]
    gpu = cupy-cuda11x
    """
    assert run("setup.cfg", source, *MANIFEST_RULES) == [
        ("XX801", 7, "pynvml"), ("XX806", 8, "torch"), ("XX801", 11, "cupy-cuda11x")]


def test_setup_py_requirements_through_variables() -> None:
    source = """\
    from setuptools import setup
    base = ["numpy", "pynvml"]
    base += ["nvidia-cublas-cu12"]
    setup(
        name="demo",
        install_requires=base,
        extras_require={"gpu": ["cupy-cuda12x"]},
        setup_requires=["torch>=2"],
    )
    """
    assert run("setup.py", source, *MANIFEST_RULES) == [
        ("XX801", 2, "pynvml"), ("XX801", 3, "nvidia-cublas-cu12"), ("XX801", 7, "cupy-cuda12x"),
        ("XX806", 8, "torch>=2")]


def test_setup_py_extras_in_a_dict_bound_to_a_name_and_filled_item_by_item() -> None:
    """``extras_require=extra_deps`` with ``extra_deps = {...}`` and ``extra_deps["gpu"] =
    [...]`` (llm-foundry, composer, optimum); a copy or a comprehension over the other
    extras adds nothing new and is not read."""
    source = """\
    import copy
    from setuptools import setup
    extra_deps = {"monitor": ["pynvml>=11"]}
    extra_deps["dev"] = ["pytest"]
    extra_deps["gpu"] = [
        "cupy-cuda12x",
    ]
    extra_deps["gpu2"] = copy.deepcopy(extra_deps["gpu"])
    extra_deps["all"] = {d for deps in extra_deps.values() for d in deps}
    other = {}
    other["x"] = ["pynvml"]
    setup(name="demo", extras_require=extra_deps)
    """
    assert run("setup.py", source, *MANIFEST_RULES) == [("XX801", 3, "pynvml"), ("XX801", 6, "cupy-cuda12x")]


def test_conda_environment() -> None:
    source = """\
    name: demo
    channels:
      - pytorch
      - nvidia
    dependencies:
      - python=3.10
      - pytorch-cuda=11.8
      - nvidia::cudatoolkit=11.8
      - pip:
          - --extra-index-url https://download.pytorch.org/whl/cu118
          - cupy-cuda11x
    """
    assert run("environment.yml", source, *MANIFEST_RULES) == [
        ("XX804", 4, "nvidia"), ("XX807", 7, "pytorch-cuda"), ("XX807", 8, "cudatoolkit"),
        ("XX804", 10, "https://download.pytorch.org/whl/cu118"), ("XX801", 11, "cupy-cuda11x")]


# ------------------------------------------------------------------ containers


NV_IMAGE = rule("XX810", {"kind": "image", "images": ["nvidia/cuda", "nvcr.io/nvidia/*"]}, "${image}")
ARCH = rule("XX811", {"kind": "env", "names": ["TORCH_CUDA_ARCH_LIST", "NVIDIA_VISIBLE_DEVICES"]},
            "${name}=${value}")
SMI = rule("XX812", {"kind": "subprocess", "programs": ["nvidia-smi", "nvcc"]}, "${program}")
GPUS = rule("XX813", {"kind": "command", "programs": ["docker"], "subcommands": ["run"],
                      "args": ["--gpus", "--gpus=*", "--runtime=nvidia"]}, "${arg}")
RUNTIME = rule("XX814", {"kind": "yaml", "values": ["nvidia"],
                         "paths": ["services.*.runtime",
                                   "services.*.deploy.resources.reservations.devices.*.driver"]},
               "${path}")
CONTAINER_RULES = (NV_IMAGE, ARCH, SMI, GPUS, RUNTIME, NV_WHEELS, CU_INDEX)


def test_dockerfile() -> None:
    source = """\
    # syntax=docker/dockerfile:1
    ARG BASE=nvcr.io/nvidia/pytorch:23.10-py3
    FROM --platform=linux/amd64 nvidia/cuda:12.1.0-cudnn8-devel-ubuntu22.04 AS build
    ENV TORCH_CUDA_ARCH_LIST="8.0;9.0" \\
        NVIDIA_VISIBLE_DEVICES=all
    ENV NVIDIA_VISIBLE_DEVICES all
    RUN apt-get update && \\
        # install the GPU tools
        pip install --extra-index-url https://download.pytorch.org/whl/cu121 \\
            pynvml && nvidia-smi
    FROM ${BASE}
    FROM rocm/pytorch:latest
    CMD ["nvcc", "--version"]
    """
    assert run("Dockerfile", source, *CONTAINER_RULES) == [
        ("XX810", 2, "nvcr.io/nvidia/pytorch:23.10-py3"),  # FROM ${BASE}, at the ARG's default
        ("XX810", 3, "nvidia/cuda:12.1.0-cudnn8-devel-ubuntu22.04"),
        ("XX811", 4, "TORCH_CUDA_ARCH_LIST=8.0;9.0"),
        ("XX811", 5, "NVIDIA_VISIBLE_DEVICES=all"),
        ("XX811", 6, "NVIDIA_VISIBLE_DEVICES=all"),
        ("XX804", 9, "https://download.pytorch.org/whl/cu121"),
        ("XX801", 10, "pynvml"),
        ("XX812", 10, "nvidia-smi"),
        ("XX812", 13, "nvcc"),
    ]


def test_compose() -> None:
    source = """\
    services:
      train:
        image: nvcr.io/nvidia/pytorch:23.10-py3
        runtime: nvidia
        environment:
          - NVIDIA_VISIBLE_DEVICES=all
        deploy:
          resources:
            reservations:
              devices:
                - driver: nvidia
                  capabilities: [gpu]
      rocm:
        image: rocm/pytorch:latest
        devices: [/dev/kfd, /dev/dri]
        environment:
          TORCH_CUDA_ARCH_LIST: "8.0"
    """
    assert run("docker-compose.yml", source, *CONTAINER_RULES) == [
        ("XX810", 3, "nvcr.io/nvidia/pytorch:23.10-py3"),
        ("XX814", 4, "services.train.runtime"),
        ("XX811", 6, "NVIDIA_VISIBLE_DEVICES=all"),
        ("XX814", 11, "services.train.deploy.resources.reservations.devices.0.driver"),
        ("XX811", 17, "TORCH_CUDA_ARCH_LIST=8.0"),
    ]


def test_invalid_yaml_and_toml_produce_no_findings_and_no_crash() -> None:
    assert run("docker-compose.yml", "services: [unclosed\n", *CONTAINER_RULES) == []
    assert run("pyproject.toml", "[project\n", *MANIFEST_RULES) == []


# ------------------------------------------------------------------ shell


def test_shell_script() -> None:
    source = """\
    #!/usr/bin/env bash
    export TORCH_CUDA_ARCH_LIST="8.0;9.0" OTHER=1
    nvidia-smi -L || echo "no nvidia-smi"   # nvidia-smi in a comment
    NVIDIA_VISIBLE_DEVICES=0 sudo -E docker run --rm --gpus all img
    docker run --device=/dev/kfd --device=/dev/dri img
    bash -c "nvcc --version && echo ok"
    conda install -y -c nvidia cuda-toolkit
    python -m pip install -i https://download.pytorch.org/whl/cu118 "cupy-cuda11x>=12"
    echo 'nvidia-smi is not called here'
    """
    assert run("scripts/launch.sh", source, *CONTAINER_RULES) == [
        ("XX811", 2, 'TORCH_CUDA_ARCH_LIST=8.0;9.0'),
        ("XX812", 3, "nvidia-smi"),
        ("XX811", 4, "NVIDIA_VISIBLE_DEVICES=0"),
        ("XX813", 4, "--gpus"),
        ("XX812", 6, "nvcc"),
        ("XX804", 7, "nvidia"),
        ("XX804", 8, "https://download.pytorch.org/whl/cu118"),
        ("XX801", 8, "cupy-cuda11x"),
    ]


def test_lexer_positions_and_operators() -> None:
    text = 'A=1 sudo "nvidia-smi" -L; echo \\; done && x "a;b"'
    words = [(w.value, text[w.start:w.end], w.operator) for w in lex(text)]
    assert words[:5] == [("A=1", "A=1", False), ("sudo", "sudo", False),
                         ("nvidia-smi", '"nvidia-smi"', False), ("-L", "-L", False), (";", ";", True)]
    parsed = list(commands(text))
    assert [(c.program, [a.value for a in c.assignments]) for c in parsed] == [
        ("nvidia-smi", ["A=1"]), ("echo", []), ("x", [])]
    assert [w.value for w in parsed[1].args] == [";", "done"]


def test_pip_arguments() -> None:
    (command,) = commands("pip install -U --index-url=https://x/cu118 -r req.txt torch==2.1 -e . pynvml")
    requirements, indexes = pip_arguments(command)
    assert [w.value for w in requirements] == ["torch==2.1", "pynvml"]
    assert [w.value for w in indexes] == ["https://x/cu118"]
    assert pip_arguments(next(commands("pipx install black"))) is None


# ------------------------------------------------------------------ extension builds and kernels


NVCC = rule("XX901", {"kind": "build-arg", "argument": "nvcc",
                      "values": ["--use_fast_math", "-gencode", "-arch=sm_*", "--expt-*"]}, "${value}")
LIBS = rule("XX902", {"kind": "build-arg", "argument": "libraries", "values": ["cublas*", "cudnn"]},
            "${value}")
CXX = rule("XX903", {"kind": "build-arg", "argument": "cxx", "values": ["-fopenmp"]}, "${value}")


def test_build_args_through_variables_branches_and_helpers() -> None:
    source = """\
    from torch.utils.cpp_extension import CUDAExtension, load, IS_HIP_EXTENSION
    flags = ["-O3", "--use_fast_math"]
    flags += ["-gencode", "arch=compute_80,code=sm_80"]
    flags.append("--expt-relaxed-constexpr")
    def threads(args):
        return args + ["--threads", "4"]
    ext = CUDAExtension("a", ["a.cu"], extra_compile_args={"cxx": ["-O3", "-fopenmp"],
                                                           "nvcc": threads(flags)},
                        libraries=["cublas", "c10"])
    hip = ["-O3"] if IS_HIP_EXTENSION else ["-arch=sm_90"]
    mod = load(name="b", sources=["b.cu"], extra_cuda_cflags=hip)
    other = dict(nvcc=["--use_fast_math"])
    """
    found = scan_source(textwrap.dedent(source), "setup.py", RuleSet([NVCC, LIBS, CXX]))
    assert [(f.rule, f.span.line, f.message, f.guard) for f in found] == [
        ("XX901", 2, "--use_fast_math", None),
        ("XX901", 3, "-gencode", None),
        ("XX901", 4, "--expt-relaxed-constexpr", None),
        ("XX903", 7, "-fopenmp", None),
        ("XX902", 9, "cublas", None),
        ("XX901", 10, "-arch=sm_90", "vendor-branch"),
    ]


def test_strip_code_keeps_offsets_and_include_paths() -> None:
    text = '#include "cutlass/gemm.h"\nint a; // asm("x")\n/* asm(\n */ const char* s = "asm(";\n'
    stripped = strip_code(text)
    assert len(stripped) == len(text) and stripped.count("\n") == text.count("\n")
    assert '"cutlass/gemm.h"' in stripped and "asm" not in stripped


PTX = rule("XX904", {"kind": "kernel", "regex": "\\basm\\s*(volatile\\s*)?\\("})
MASK = rule("XX905", {"kind": "kernel", "regex": "__shfl\\w*_sync\\s*\\(\\s*0x[fF]{8}\\b"})
UNMAPPED = rule("XX906", {"kind": "cuda-api"})


def test_kernel_rules() -> None:
    source = """\
    // asm("mov.u32 %0, %%laneid;")  is only a comment
    #define cudaMyHelper(x) (x)
    __device__ unsigned lane() {
      unsigned id;
      asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
      return __shfl_xor_sync(0xffffffff, id, 1) + __shfl_xor_sync(0xffffffffffffffffULL, id, 2);
    }
    void host() { cudaMalloc(0, 0); cudaNewThing(); cudaNewThing(); cudaMyHelper(1); }
    """
    hipify = frozenset({"cudaMalloc"})
    assert run("csrc/k.cu", source, PTX, MASK, UNMAPPED, hipify=hipify) == [
        ("XX904", 5, 'asm volatile('), ("XX905", 6, "__shfl_xor_sync(0xffffffff"),
        ("XX906", 8, "cudaNewThing")]


def test_cuda_api_check_uses_the_shipped_table_without_torch(tmp_path: Path, monkeypatch) -> None:
    """The check never looks for torch: hiding it changes nothing and adds no note."""
    (tmp_path / "k.cu").write_text("void f() { cudaMalloc(0, 0); cudaNewThing(); }\n")
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    result = scan_paths([tmp_path], RuleSet([UNMAPPED]), cache=None)
    assert [f.message for f in result.findings] == ["cudaNewThing"] and result.notes == ()


def test_extensions_link_their_sources(tmp_path: Path) -> None:
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cpp").write_text('void f() { cudaDeviceSynchronize(); asm("nop"); }\n')
    (tmp_path / "csrc" / "ops_kernel.cu").write_text('__device__ void g() { asm("nop"); }\n')
    (tmp_path / "other.cpp").write_text('void h() { asm("nop"); }\n')  # no CUDA token: not read
    (tmp_path / "setup.py").write_text(textwrap.dedent("""\
        import glob
        from torch.utils.cpp_extension import CUDAExtension
        ext = CUDAExtension(
            name="ops",
            sources=["csrc/ops.cpp"] + glob.glob("csrc/*.cu") + ["csrc/gone.cu"],
        )
        """))
    result = scan_paths([tmp_path], RuleSet([PTX]))
    assert [(f.path, f.span.line) for f in result.findings] == [
        ("csrc/ops.cpp", 1), ("csrc/ops_kernel.cu", 1)]
    (extension,) = result.extensions
    assert (extension.name, extension.path, extension.line, extension.findings) == ("ops", "setup.py", 3, 2)
    assert extension.sources == ("csrc/ops.cpp", "csrc/ops_kernel.cu")
    assert extension.missing == ("csrc/gone.cu",)


APEX_IMPORT = rule("XX905", {"kind": "import", "modules": ["apex"]})


@pytest.mark.parametrize("parser", ["ast", "libcst"])
@pytest.mark.parametrize("mode", ["serial", "workers", "no rule applies"])
def test_a_file_that_declares_an_extension_is_parsed_once(tmp_path: Path, monkeypatch, mode: str,
                                                          parser: str) -> None:
    import libcst

    import portscan.scan as scan_module
    from portscan import leancst

    tree, log = tmp_path / "tree", tmp_path / "parses.log"
    (tree / "csrc").mkdir(parents=True)
    (tree / "csrc" / "ops.cu").write_text('__device__ void g() { asm("nop"); }\n')
    (tree / "setup.py").write_text(textwrap.dedent("""\
        import apex
        from torch.utils.cpp_extension import CUDAExtension
        ext = CUDAExtension(name="ops", sources=["csrc/ops.cu"])
        """))
    module = leancst if parser == "ast" else libcst
    name = "parse_module"
    parse = getattr(module, name)

    def counting(text: str, *args, **kwargs):
        if "CUDAExtension" in text:
            with log.open("a") as out:  # the workers are other processes: count in a file
                out.write("parse\n")
        return parse(text, *args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    if mode == "workers":
        monkeypatch.setattr(scan_module, "PARALLEL_MIN", 1)
    rules = RuleSet([PTX] if mode == "no rule applies" else [PTX, APEX_IMPORT])
    result = scan_paths([tree], rules, workers=2 if mode == "workers" else 1, parser=parser)
    assert log.read_text() == "parse\n"
    assert [(f.path, f.rule) for f in result.findings] == (
        [("csrc/ops.cu", "XX904")] + ([] if mode == "no rule applies" else [("setup.py", "XX905")]))
    (extension,) = result.extensions
    assert (extension.name, extension.line, extension.sources, extension.findings) == ("ops", 3, ("csrc/ops.cu",), 1)


def test_a_source_named_through_a_parent_folder_is_scanned_once(tmp_path: Path) -> None:
    # `load(sources=[str(here / "../src/k.cu")])`: the walk finds src/k.cu as well
    (tmp_path / "functions").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text('__global__ void k() { asm volatile("membar.gl;"); }\n')
    (tmp_path / "functions" / "ops.py").write_text(
        "from torch.utils.cpp_extension import load\nops = load('ops', sources=['../src/k.cu'])\n")
    result = scan_paths([tmp_path], RuleSet([PTX]), workers=1)
    assert [(f.path, f.rule) for f in result.findings] == [("src/k.cu", "XX904")]
    (extension,) = result.extensions
    assert (extension.sources, extension.findings) == (("src/k.cu",), 1)


def test_findings_and_extensions_are_cached_together(tmp_path: Path, monkeypatch) -> None:
    import libcst

    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "setup.py").write_text(
        "import apex\nfrom torch.utils.cpp_extension import load\nload('ops', ['ops.cu'])\n")
    first = scan_paths([tmp_path / "tree"], RuleSet([APEX_IMPORT]), cache=tmp_path / "cache", workers=1)

    def refuse(*args, **kwargs):
        raise AssertionError("a cached file was parsed")

    monkeypatch.setattr(libcst, "parse_module", refuse)
    again = scan_paths([tmp_path / "tree"], RuleSet([APEX_IMPORT]), cache=tmp_path / "cache", workers=1)
    assert again.findings == first.findings and len(first.findings) == 1
    assert again.extensions == first.extensions and first.extensions[0].missing == ("ops.cu",)


@pytest.mark.parametrize("path, kind_rule", [("Dockerfile", NV_IMAGE), ("scripts/run.sh", SMI)])
def test_non_python_files_are_never_python_parsed(path: str, kind_rule) -> None:
    assert run(path, "this is not python (((\n", kind_rule) == []


def test_shell_keywords_open_command_positions_and_probes_do_not_run() -> None:
    source = """\
    if nvidia-smi -L > /dev/null; then echo ok; fi
    for i in 0 1; do docker run --gpus all img; done
    if command -v nvidia-smi > /dev/null; then :; fi
    while ! nvidia-smi; do sleep 1; done
    docker run -e NVIDIA_VISIBLE_DEVICES=0 --env=TORCH_CUDA_ARCH_LIST=9.0 img
    """
    assert run("run.sh", source, *CONTAINER_RULES) == [
        ("XX812", 1, "nvidia-smi"), ("XX813", 2, "--gpus"), ("XX812", 4, "nvidia-smi"),
        ("XX811", 5, "NVIDIA_VISIBLE_DEVICES=0"), ("XX811", 5, "TORCH_CUDA_ARCH_LIST=9.0")]


def test_manifest_locations_with_repeated_strings_and_odd_specs() -> None:
    pyproject = """\
    [project]
    dependencies = ["torch"]

    [build-system]
    requires = ["torch"]
    """
    assert run("pyproject.toml", pyproject, BUILD_TORCH) == [("XX806", 5, "torch")]
    setup_cfg = """\
    [options]
    setup_requires =
        torch
    install_requires =
        torch
    """
    assert run("setup.cfg", setup_cfg, BUILD_TORCH) == [("XX806", 3, "torch")]
    conda = "dependencies:\n  - pytorch=*=*cuda*\n  - pytorch-cuda=*\n"
    cuda_build = rule("XX808", {"kind": "requirement", "names": ["pytorch"], "local_versions": ["*cuda*"]},
                      "${package}")
    assert run("environment.yml", conda, cuda_build, CONDA) == [
        ("XX808", 2, "pytorch"), ("XX807", 3, "pytorch-cuda")]
    requirements = """\
    --extra-index-url https://download.pytorch.org/whl/cu118; sys_platform == "linux"
    https://download.pytorch.org/whl/cu118/torch-2.0.0%2Bcu118-cp310-cp310-linux_x86_64.whl
    """
    assert run("requirements.txt", requirements, CU_INDEX, CU_TORCH) == [
        ("XX804", 1, "https://download.pytorch.org/whl/cu118"),
        ("XX802", 2, "https://download.pytorch.org/whl/cu118/torch-2.0.0%2Bcu118-cp310-cp310-linux_x86_64.whl")]


def test_preprocessor_vendor_groups_guard_kernel_findings() -> None:
    source = """\
    #ifdef USE_ROCM
    #define MASK 0xffffffffffffffffULL
    #else
    __device__ int f(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #endif
    #if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    __device__ int g(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #endif
    #if !defined(__HIP_PLATFORM_AMD__)
    __device__ void h() { asm volatile("membar.gl;"); }
    #endif
    """
    found = scan_source(textwrap.dedent(source), "k.cu", RuleSet([MASK, PTX]))
    assert [(f.rule, f.span.line, f.severity.value, f.guard) for f in found] == [
        ("XX905", 4, "info", "vendor-branch"), ("XX905", 7, "warning", None),
        ("XX904", 10, "info", "vendor-branch")]


def test_a_condition_continued_with_backslashes_is_read_whole() -> None:
    # Eigen's half-precision shuffles: the HIP platform is named on the continuation line
    source = """\
    #if (defined(__CUDACC__) && __CUDA_ARCH__ >= 300) \\
        || defined(__HIPCC__)
    __device__ int f(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #endif
    #if defined(__CUDACC__) \\
        && __CUDA_ARCH__ >= 800
    __device__ int g(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #endif
    """
    found = scan_source(textwrap.dedent(source), "k.cu", RuleSet([MASK]))
    assert [(f.rule, f.span.line, f.guard) for f in found] == [
        ("XX905", 3, "vendor-branch"), ("XX905", 7, None)]


def test_code_compiled_only_with_nvtx_is_fallback_equivalent() -> None:
    # NVTX ranges are profiling annotations: the build without them computes the same
    source = """\
    #ifdef USE_NVTX
    __device__ int f(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #elif defined(__CUDA_ARCH__)
    __device__ int g(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #endif
    #if HAVE_NVTX && !defined(USE_ROCM)
    __device__ int h(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #else
    __device__ int i(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #endif
    #if !defined(DISABLE_NVTX)
    __device__ int j(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #endif
    #ifdef DISABLE_NVTX
    __device__ int k(int v) { return __shfl_xor_sync(0xffffffff, v, 1); }
    #endif
    """
    found = scan_source(textwrap.dedent(source), "k.cu", RuleSet([MASK]))
    assert [(f.rule, f.span.line, f.severity.value, f.guard) for f in found] == [
        ("XX905", 2, "info", "fallback-equivalent"), ("XX905", 4, "warning", None),
        ("XX905", 7, "info", "vendor-branch"), ("XX905", 9, "info", "vendor-branch"),
        ("XX905", 12, "warning", None), ("XX905", 15, "warning", None)]


def test_build_args_written_through_dict_keys() -> None:
    source = """\
    from torch.utils.cpp_extension import CUDAExtension
    args = {"cxx": ["-O3"]}
    args["nvcc"] = ["-O3", "--use_fast_math"]
    args["nvcc"] += ["-gencode", "arch=compute_90,code=sm_90"]
    args["nvcc"].append("--expt-extended-lambda")
    ext = CUDAExtension("a", ["a.cu"], extra_compile_args=args)
    """
    assert run("setup.py", source, NVCC) == [
        ("XX901", 3, "--use_fast_math"), ("XX901", 4, "-gencode"), ("XX901", 5, "--expt-extended-lambda")]
