"""Vendored copies of CUDA-only libraries (``portscan.vendored``): CUTLASS checked out
under ``third_party/cutlass`` is replaced as a whole on ROCm, so its own sites are info
(guard ``vendored``) while the project's uses of it stay loud; a folder not named for the
library, or the library scanned as the project itself, is no vendored copy."""

from __future__ import annotations

import shutil
from pathlib import Path

from portscan.discover import Excludes, discover
from portscan.scan import scan_paths
from portscan.vendored import libraries, vendored_library, vendored_roots

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vendored-cutlass"
CUTLASS = "third_party/cutlass/"


def test_the_vendored_library_is_info_and_the_projects_uses_stay_loud(rules) -> None:
    findings = scan_paths([FIXTURE], rules).findings
    inside = [f for f in findings if f.path.startswith(CUTLASS)]
    assert {f.rule for f in inside} >= {"PS916", "PS912", "PS910", "PS919"}  # the copy's own sites are found
    assert {(f.severity.value, f.guard) for f in inside} == {("info", "vendored")}
    own = {(f.path, f.rule, f.severity.value) for f in findings if not f.path.startswith(CUTLASS)}
    assert {("csrc/grouped_gemm.cu", "PS916", "error"), ("csrc/grouped_gemm.cu", "PS912", "error"),
            ("setup.py", "PS902", "error")} <= own


def test_the_library_scanned_as_the_project_is_reported(rules) -> None:
    findings = scan_paths([FIXTURE / "third_party" / "cutlass"], rules).findings
    assert findings and not any(f.guard == "vendored" for f in findings)
    assert ("PS912", "error") in {(f.rule, f.severity.value) for f in findings}


def test_a_copy_is_found_by_its_marker_in_a_folder_named_for_it(tmp_path: Path) -> None:
    for rel in ("third_party/cutlass/include/cutlass/cutlass.h", "3rdparty/NVTX/c/include/nvtx3/nvToolsExt.h",
                "csrc/cub/cub.cuh", "include/thrust/version.h", "cutlass/include/cutlass/cutlass.h"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("#pragma once\n")
    roots = vendored_roots(discover([tmp_path], Excludes.of(None), False).files)
    # csrc/cub and include/thrust are the project's own folders; the top-level cutlass/ folder is one too
    assert {root: library.name for root, library in roots.items()} == {
        "third_party/cutlass": "cutlass", "3rdparty/NVTX": "nvtx", "cutlass": "cutlass"}
    assert vendored_library("third_party/cutlass/include/cutlass/gemm/gemm.h", roots).name == "cutlass"
    assert vendored_library("third_party/cutlass_ext/gemm.h", roots) is None
    assert vendored_library("csrc/cub/cub.cuh", roots) is None


def test_every_library_in_the_table_names_its_rocm_counterpart_and_a_source() -> None:
    assert {library.name for library in libraries()} >= {"cutlass", "cub", "thrust", "cccl", "nvtx", "eigen", "gloo",
                                                          "tvm", "composable_kernel", "cmake-cuda-modules", "jitify",
                                                          "cuda-toolkit-headers"}
    for library in libraries():
        assert library.rocm and library.reference.startswith("https://") and not library.marker.startswith("/")
        assert library.marker or library.files


def test_fix_leaves_a_vendored_library_alone(tmp_path: Path, rules) -> None:
    """CUTLASS's own Python tooling is the library's, not the project's to rewrite."""
    from portscan.fix.apply import fix_paths

    tree = tmp_path / "tree"
    shutil.copytree(FIXTURE, tree)
    (tree / CUTLASS / "python").mkdir()
    shutil.copy(tree / "setup.py", tree / CUTLASS / "python" / "setup.py")
    result = fix_paths([tree], rules, unsafe=True, write=False)
    assert [f.path for f in result.files if f.applied] == ["setup.py"]  # the project's nvcc flags only


def test_a_library_that_builds_for_rocm_itself_is_vendored_too(tmp_path: Path, rules) -> None:
    """Eigen's CUDA-only branches (``#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 530``) compile out under hipcc,
    which takes its HIP paths; the project's own ``__CUDA_ARCH__`` test is still its own
    (horovod vendors Eigen and gloo under ``third_party/``)."""
    guard = ("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 530 && !defined(EIGEN_NO_CUDA)\n"
             "#define EIGEN_HAS_CUDA_FP16\n#endif\n")
    for rel in ("third_party/eigen/Eigen/src/Core/util/Macros.h", "csrc/arch.h"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(guard)
    found = {(f.path, f.severity.value, f.guard) for f in scan_paths([tmp_path], rules).findings if f.rule == "PS920"}
    assert found == {("third_party/eigen/Eigen/src/Core/util/Macros.h", "info", "vendored"),
                     ("csrc/arch.h", "warning", None)}


def test_a_copy_of_cmakes_own_cuda_module_is_vendored(tmp_path: Path, rules) -> None:
    """Projects copy CMake's ``FindCUDA.cmake`` and its helpers for older CMake releases
    (PyTorch's ``Modules_CUDA_fix/upstream/``): the port replaces the project's own
    ``find_package(CUDA)``, which stays reported, not the module."""
    module = "cmake/Modules/FindCUDA/select_compute_arch.cmake"
    (tmp_path / module).parent.mkdir(parents=True)
    (tmp_path / module).write_text('set(CUDA_KNOWN_GPU_ARCHITECTURES "Kepler" "Maxwell")\n'
                                   'list(APPEND CUDA_COMMON_GPU_ARCHITECTURES "8.0" "9.0")\n'
                                   'list(APPEND nvcc_flags -gencode arch=compute_80,code=sm_80)\n')
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.10)\nproject(ops LANGUAGES CXX)\n"
        "list(APPEND CMAKE_MODULE_PATH ${CMAKE_SOURCE_DIR}/cmake/Modules)\nfind_package(CUDA REQUIRED)\n"
        "cuda_add_library(ops SHARED ops.cu)\n")
    findings = scan_paths([tmp_path], rules).findings
    assert {(f.severity.value, f.guard) for f in findings if f.path == module} == {("info", "vendored")}
    assert any(f.path == "CMakeLists.txt" and f.severity.value != "info" for f in findings)


def test_amds_own_library_and_a_compiler_with_a_rocm_backend_are_vendored(tmp_path: Path, rules) -> None:
    """TileLang ships Composable Kernel (ROCm's own library) and Apache TVM (which builds
    for ROCm itself) under ``3rdparty/``: 626 of its 1,119 warnings sat in them."""
    sync = "__device__ float f(float v) { return __shfl_xor_sync(0xffffffff, v, 1); }\n"
    for rel, text in (("3rdparty/composable_kernel/include/ck/ck.hpp", "#pragma once\n"),
                      ("3rdparty/composable_kernel/include/ck/utility/warp.hpp", sync),
                      ("3rdparty/tvm/include/tvm/runtime/device_api.h", "#pragma once\n"),
                      ("3rdparty/tvm/src/runtime/cuda/warp.cuh", sync),
                      ("src/tl_templates/warp.cuh", sync)):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = {(f.path, f.severity.value, f.guard) for f in scan_paths([tmp_path], rules).findings
             if f.rule == "PS912"}
    assert found == {("3rdparty/composable_kernel/include/ck/utility/warp.hpp", "info", "vendored"),
                     ("3rdparty/tvm/src/runtime/cuda/warp.cuh", "info", "vendored"),
                     ("src/tl_templates/warp.cuh", "error", None)}


def test_nvidia_single_file_copies_are_vendored_wherever_they_sit(tmp_path: Path, rules) -> None:
    """A project that ships NVRTC's own copy of the toolkit's ``cuda_fp16.h`` (CuPy's
    ``_cuda/cuda-12/``) or Jitify's header: NVIDIA's code, replaced on ROCm by ROCm's own
    headers and hiprtc; the same text in the project's own header stays reported."""
    text = "#pragma once\n__device__ float f(float x);\n#define warpSize    32\n"
    for rel in ("cupyx/include/_cuda/cuda-12/cuda_fp16.h", "include/_jitify/jitify.hpp", "csrc/warp.cuh"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = {(f.path, f.severity.value, f.guard) for f in scan_paths([tmp_path], rules).findings if f.rule == "PS910"}
    assert found == {("cupyx/include/_cuda/cuda-12/cuda_fp16.h", "info", "vendored"),
                     ("include/_jitify/jitify.hpp", "info", "vendored"),
                     ("csrc/warp.cuh", "warning", None)}
