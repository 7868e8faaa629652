"""What a project already ports itself (``portscan.ported``): CUDA sources its own CMake
compiles for HIP (llama.cpp's ggml-hip shape), the headers they include and the CMake
file of the CUDA arm, and files named for CUDA beside the same name for ROCm, are
vendor-branch code; a torch extension hipified at build time is no port and stays loud."""

from __future__ import annotations

import textwrap
from pathlib import Path

from portscan.ported import _same_but_vendor, hip_built, rocm_siblings
from portscan.discover import Excludes, discover
from portscan.scan import scan_paths

KERNELS = {
    "src/backend-cuda/common.cuh": """
        #pragma once
        #define WARP_SIZE 32
        static __device__ float warp_sum(float v) {
            for (int offset = 16; offset > 0; offset >>= 1)
                v += __shfl_xor_sync(0xffffffff, v, offset, 32);
            return v;
        }
    """,
    "src/backend-cuda/norm.cu": """
        #include "common.cuh"
        __global__ void norm(float* x) { x[threadIdx.x] = warp_sum(x[threadIdx.x]); }
    """,
    "src/backend-cuda/CMakeLists.txt": """
        find_package(CUDAToolkit REQUIRED)
        file(GLOB BACKEND_SOURCES "*.cu")
        add_library(backend-cuda ${BACKEND_SOURCES})
        set_target_properties(backend-cuda PROPERTIES CUDA_ARCHITECTURES "80;90")
        target_link_libraries(backend-cuda PRIVATE CUDA::cublas)
    """,
}
HIP_BUILD = {
    "src/backend-hip/CMakeLists.txt": """
        enable_language(HIP)
        find_package(hip REQUIRED)
        file(GLOB BACKEND_SOURCES_ROCM "../backend-cuda/*.cu")
        add_library(backend-hip ${BACKEND_SOURCES_ROCM})
        set_source_files_properties(${BACKEND_SOURCES_ROCM} PROPERTIES LANGUAGE HIP)
        target_link_libraries(backend-hip PRIVATE hip::device)
    """,
}


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def severities(root: Path, rules) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for f in scan_paths([root], rules).findings:
        found.setdefault((f.path, f.rule), set()).add(f.severity.value)
    return found


def test_sources_a_hip_build_of_the_project_compiles_are_vendor_branch(tmp_path: Path, rules) -> None:
    write(tmp_path, {**KERNELS, **HIP_BUILD})
    found = severities(tmp_path, rules)
    kernel = {key for key in found if key[0].startswith("src/backend-cuda/")}
    assert {("src/backend-cuda/common.cuh", "PS910"), ("src/backend-cuda/common.cuh", "PS912"),
            ("src/backend-cuda/CMakeLists.txt", "PS943")} <= kernel
    assert all(found[key] == {"info"} for key in kernel)  # the sources, the header, the CUDA arm's CMake


def test_without_the_hip_build_the_same_sources_stay_loud(tmp_path: Path, rules) -> None:
    write(tmp_path, KERNELS)
    found = severities(tmp_path, rules)
    assert found[("src/backend-cuda/common.cuh", "PS912")] == {"error"}
    assert found[("src/backend-cuda/CMakeLists.txt", "PS943")] == {"warning"}


def test_what_the_hip_build_reads(tmp_path: Path) -> None:
    write(tmp_path, {**KERNELS, **HIP_BUILD, "src/other/k.cu": "__global__ void k() {}\n"})
    files = discover([tmp_path], Excludes.of(None), False).files

    assert hip_built(files, lambda path: path.read_text(), tmp_path) == {
        "src/backend-cuda/norm.cu", "src/backend-cuda/common.cuh", "src/backend-cuda/CMakeLists.txt"}


def test_a_file_named_for_cuda_beside_its_rocm_counterpart(tmp_path: Path, rules) -> None:
    cuda_image = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\nRUN pip install torch==2.4.0\n"
    write(tmp_path, {"docker/Dockerfile.cuda": cuda_image, "docker/Dockerfile.rocm": "FROM rocm/pytorch:latest\n",
                     "images/full-cuda.Dockerfile": cuda_image, "images/full.Dockerfile": "FROM python:3.11\n",
                     "requirements-cuda.txt": "onnxruntime-gpu\n", "requirements-rocm.txt": "onnxruntime-rocm\n",
                     # Horovod: a folder per vendor, the file named for it too
                     "ops/cuda/CMakeLists.txt": "", "ops/rocm/CMakeLists.txt": "",
                     "ops/cuda/cuda_kernels.cu": "", "ops/rocm/hip_kernels.cu": "", "ops/cuda/only_here.cu": ""})
    files = discover([tmp_path], Excludes.of(None), False).files
    assert rocm_siblings(files) == {"docker/Dockerfile.cuda", "requirements-cuda.txt", "ops/cuda/CMakeLists.txt",
                                    "ops/cuda/cuda_kernels.cu"}
    found = severities(tmp_path, rules)
    assert found[("docker/Dockerfile.cuda", "PS830")] == {"info"}
    assert found[("requirements-cuda.txt", "PS807")] == {"info"}
    assert found[("images/full-cuda.Dockerfile", "PS830")] == {"error"}  # no ROCm sibling: loud


def test_the_same_name_once_the_vendor_and_its_release_are_set_aside(tmp_path: Path, rules) -> None:
    """LMCache: ``requirements/cuda12_core.txt`` beside ``requirements/rocm_core.txt``, and
    ``docker/Dockerfile`` beside ``docker/Dockerfile.rocm`` (an image is built from one
    definition); not a plain requirements file (often the base the ROCm one includes), and
    not a plain definition where a CUDA-named one sits beside it too (the CPU image)."""
    cuda_image = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
    write(tmp_path, {"requirements/cuda12_core.txt": "cupy-cuda12x\n", "requirements/rocm_core.txt": "cupy-rocm-7-0\n",
                     "requirements/cuda.txt": "cupy-cuda12x\n",
                     "docker/Dockerfile": cuda_image, "docker/Dockerfile.rocm": "FROM rocm/pytorch:latest\n",
                     "docker/Dockerfile.lightweight": cuda_image,
                     "docker/Dockerfile.rocm-lightweight": "FROM rocm/dev\n",
                     "requirements.txt": "onnxruntime-gpu\n", "requirements-rocm.txt": "-r requirements.txt\n",
                     "devops/full.Dockerfile": cuda_image, "devops/full-cuda.Dockerfile": cuda_image,
                     "devops/full-rocm.Dockerfile": "FROM rocm/dev\n"})
    files = discover([tmp_path], Excludes.of(None), False).files
    assert _same_but_vendor(files) == {"requirements/cuda12_core.txt", "docker/Dockerfile",
                                       "docker/Dockerfile.lightweight", "devops/full-cuda.Dockerfile"}
    found = severities(tmp_path, rules)
    assert found[("docker/Dockerfile", "PS830")] == {"info"}
    assert found[("requirements/cuda12_core.txt", "PS806")] == {"info"}
    assert found[("requirements/cuda.txt", "PS806")] != {"info"}
    assert found[("requirements.txt", "PS807")] != {"info"}
    assert found[("devops/full.Dockerfile", "PS830")] != {"info"}


def test_fix_leaves_the_nvidia_side_of_a_ported_choice_alone(tmp_path: Path, rules) -> None:
    """Rewriting `Dockerfile.cuda` into a ROCm image would break the NVIDIA build the
    project keeps beside `Dockerfile.rocm`; a lone CUDA Dockerfile is still fixed."""
    from portscan.fix.apply import fix_paths

    cuda_image = "FROM nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
    write(tmp_path, {"docker/Dockerfile.cuda": cuda_image, "docker/Dockerfile.rocm": "FROM rocm/pytorch:latest\n",
                     "Dockerfile": cuda_image})
    result = fix_paths([tmp_path], rules, unsafe=True, write=False)
    assert [f.path for f in result.files if f.applied] == ["Dockerfile"]


def test_a_file_named_for_one_cuda_release_is_an_arm_of_a_cuda_matrix(tmp_path: Path, rules) -> None:
    """The PyG projects' per-release CI scripts (``.github/workflows/cuda/cu117-Linux.sh``),
    ``Dockerfile.cu121``: a port adds ROCm arms beside them and edits none; a script that
    names no release, and a Python module (its importers decide), keep their findings."""
    script = "#!/bin/bash\nexport TORCH_CUDA_ARCH_LIST=\"6.0+PTX;7.0;8.0\"\nsudo apt-get install -y cuda-nvcc-11-7\n"
    write(tmp_path, {".github/workflows/cuda/cu117-Linux.sh": script, ".github/workflows/cuda/cuda-12.1-env.sh": script,
                     "scripts/install.sh": script, "tools/cu118_env.py": "import pynvml\n"})
    found = severities(tmp_path, rules)
    arms = {key for key in found if key[0].startswith(".github/")}
    assert {(".github/workflows/cuda/cu117-Linux.sh", "PS610"),
            (".github/workflows/cuda/cuda-12.1-env.sh", "PS824")} <= arms
    assert all(found[key] == {"info"} for key in arms)
    assert found[("scripts/install.sh", "PS610")] == {"warning"}
    assert found[("tools/cu118_env.py", "PS602")] == {"error"}


def test_the_hip_build_is_cached_with_the_files_it_was_read_from(tmp_path: Path, rules) -> None:
    """A warm scan reads no CMake file again for the HIP-build fact; adding the HIP build
    (a changed tree) is seen."""
    project, cache = tmp_path / "project", tmp_path / "cache"
    write(project, KERNELS)
    cold = scan_paths([project], rules, cache=cache)
    warm = scan_paths([project], rules, cache=cache)
    assert warm.findings == cold.findings
    assert {f.severity.value for f in warm.findings if f.path == "src/backend-cuda/common.cuh"} >= {"error"}
    write(project, HIP_BUILD)
    after = scan_paths([project], rules, cache=cache)
    assert {f.severity.value for f in after.findings if f.path.startswith("src/backend-cuda/")} == {"info"}


#: llama.cpp's HIP build before CMake knew the HIP language (2023), which ctransformers,
#: llama-cpp-python and whisper.cpp kept: hip-clang compiles the .cu as C++
OLD_HIP_BUILD = """
    option(GGML_HIPBLAS "use hipBLAS" OFF)
    if (GGML_CUBLAS)
        find_package(CUDAToolkit)
        enable_language(CUDA)
        add_library(ggml-cuda OBJECT ggml-cuda.cu)
        target_link_libraries(ggml-cuda PRIVATE CUDA::cudart CUDA::cublas)
    endif()
    if (GGML_HIPBLAS)
        list(APPEND CMAKE_PREFIX_PATH /opt/rocm)
        find_package(hip)
        find_package(hipblas)
        file(GLOB GGML_SOURCES_ROCM "ggml-cuda/*.cu")
        add_library(ggml-rocm OBJECT ggml-cuda.cu ${GGML_SOURCES_ROCM})
        set_source_files_properties(ggml-cuda.cu ${GGML_SOURCES_ROCM} PROPERTIES LANGUAGE CXX)
        target_link_libraries(ggml-rocm PRIVATE hip::device PUBLIC hip::host roc::hipblas)
    endif()
"""


def test_sources_made_cxx_beside_find_package_hip_are_a_hip_build(tmp_path: Path) -> None:
    kernel = "__global__ void k(float* x) { x[0] = __shfl_xor_sync(0xffffffff, x[0], 1, 32); }\n"
    write(tmp_path, {"CMakeLists.txt": OLD_HIP_BUILD, "ggml-cuda.cu": kernel, "ggml-cuda/mmq.cu": kernel,
                     "other/k.cu": kernel})
    files = discover([tmp_path], Excludes.of(None), False).files
    assert hip_built(files, lambda path: path.read_text(), tmp_path) == {
        "ggml-cuda.cu", "ggml-cuda/mmq.cu", "CMakeLists.txt"}
    # without HIP's package, a source made C++ is just that: no port
    write(tmp_path, {"CMakeLists.txt": OLD_HIP_BUILD.replace("find_package(hip)", "").replace("hip::", "")})
    files = discover([tmp_path], Excludes.of(None), False).files
    assert hip_built(files, lambda path: path.read_text(), tmp_path) == set()


def test_the_nvidia_jobs_of_a_ci_that_has_amd_ones(tmp_path: Path, rules) -> None:
    """LMCache's Buildkite runs AMD jobs (``scripts/amd-vllm-bench.sh``) beside its NVIDIA
    ones (``scripts/multiprocessing-test/launch-containers.sh``, ``docker run --gpus all``
    on CUDA images): those stay NVIDIA's, as a CUDA-named file beside a ROCm one does. A CI
    folder without AMD jobs keeps its findings, and so does a project script outside it."""
    nvidia_job = "docker run --gpus all --runtime nvidia lmcache/vllm-openai:latest\nnvidia-smi\n"
    write(tmp_path, {".buildkite/scripts/multiprocessing-test/launch-containers.sh": nvidia_job,
                     ".buildkite/scripts/amd-vllm-bench.sh": "docker run --device /dev/kfd rocm/vllm\n",
                     ".github/workflows/test.yml": "jobs:\n  t:\n    runs-on: ubuntu-latest\n"
                                                  "    container: nvidia/cuda:12.4.1-devel-ubuntu22.04\n",
                     "examples/run.sh": nvidia_job})
    found = severities(tmp_path, rules)
    buildkite = [s for (path, _), s in found.items() if path.startswith(".buildkite/scripts/multi")]
    assert buildkite and all(s == {"info"} for s in buildkite)
    assert any(s - {"info"} for (path, _), s in found.items() if path == "examples/run.sh")
    assert any(s - {"info"} for (path, _), s in found.items() if path == ".github/workflows/test.yml")


def test_a_library_the_project_installs_in_a_rocm_build(tmp_path: Path, rules) -> None:
    """LMCache's ``requirements/rocm_core.txt`` lists ``cupy-rocm-7-0``: its ``import cupy``
    works on ROCm (PS711's ``rocm_builds``), so it is info, guard ``rocm-build``; without
    that line it stays a warning."""
    code = "import cupy\n\ndef stream(s):\n    return cupy.cuda.ExternalStream(s)\n"
    write(tmp_path, {"lmc/cache.py": code, "requirements/rocm_core.txt": "torch\ncupy-rocm-7-0\n",
                     "requirements/cuda.txt": "cupy-cuda12x\n"})
    [finding] = [f for f in scan_paths([tmp_path], rules).findings if f.rule == "PS711"]
    assert (finding.severity.value, finding.guard) == ("info", "rocm-build")
    (tmp_path / "requirements/rocm_core.txt").write_text("torch\n")
    [finding] = [f for f in scan_paths([tmp_path], rules).findings if f.rule == "PS711"]
    assert (finding.severity.value, finding.guard) == ("warning", None)


def test_rocm_builds_are_read_from_the_manifests_words() -> None:
    from portscan.ported import rocm_builds_listed
    texts = ["cupy_rocm_7_0>=13.0 ; platform_system == 'Linux'\n", '[project]\ndependencies = ["numpy"]\n']
    assert rocm_builds_listed(texts, ["cupy-rocm-*", "onnxruntime-rocm"]) == {"cupy-rocm-*"}
    assert rocm_builds_listed(["cupy-cuda12x\n"], ["cupy-rocm-*"]) == frozenset()
