"""C++ and CUDA sources everywhere (issue 16, part 8): headers and standalone C++ files
are read when they hold a CUDA token, extension summaries count the headers their
sources include, and declared sources resolve through ``os.path.join``/``glob``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from portscan.filekinds import file_kind
from portscan.headers import included_headers, quoted_includes
from portscan.kinds.needles import needles, present
from portscan.match.kernels import mentions_cuda, strip_code
from portscan.ruleset.loader import RuleSet
from portscan.scan import scan_paths, scan_source

REPO = Path(__file__).resolve().parents[1]
KERNEL_LIB = REPO / "fixtures" / "kernel-lib"

EXPECTED_KERNELS = [
    ("csrc/include/warp_reduce.h", 4, 1, "PS912"),    # const unsigned int WARP_REDUCE_MASK = 0xffffffff;
    # line 5, `WARP_REDUCE_SIZE = 32`, is no PS910: every shuffle passes it as the width (a logical warp)
    ("csrc/include/warp_reduce.h", 10, 12, "PS926"),  # __shfl_xor_sync(WARP_REDUCE_MASK, ...)
    ("csrc/include/warp_reduce.h", 17, 7, "PS911"),   # lane = threadIdx.x & 0x1f
    ("csrc/include/warp_reduce.h", 18, 13, "PS911"),  # threadIdx.x >> 5
    ("csrc/include/warp_reduce.h", 22, 25, "PS911"),  # blockDim.x >> 5
    ("csrc/layer_norm.cu", 6, 1, "PS912"),            # #define FULL_MASK 0xffffffff
    ("csrc/layer_norm.cu", 14, 16, "PS926"),          # __shfl_sync(FULL_MASK, ...)
    ("csrc/layer_norm.cu", 23, 1, "PS930"),           # #if __CUDA_ARCH__ >= 800 ... #else (info, not PS920)
    ("csrc/ops.cpp", 12, 1, "PS936"),                 # return CUDA_VERSION; (a HIP version or undefined)
    ("csrc/reduce.cuh", 3, 1, "PS927"),               # #include <cooperative_groups/reduce.h>
    ("csrc/reduce.cuh", 5, 1, "PS931"),               # #include <cub/warp/warp_reduce.cuh> (hipify keeps it)
    ("csrc/reduce.cuh", 13, 19, "PS923"),             # tiled_partition<32>
    ("csrc/reduce.cuh", 14, 10, "PS927"),             # cg::reduce(
    ("csrc/segment.cu", 8, 7, "PS911"),               # lane = threadIdx.x % 32
    ("tools/smem_probe.cpp", 11, 34, "PS929"),        # cudaDevAttrMaxSharedMemoryPerBlockOptin, in no extension
    ("tools/smem_probe.cpp", 12, 3, "PS919"),         # cudaFuncSetAttribute(..., MaxDynamicSharedMemorySize, ...)
    ("tools/smem_probe.cpp", 12, 3, "PS934"),         # ... with the kernel uncast: HIP takes const void*
]


@pytest.fixture(scope="module")
def result(rules):
    return scan_paths([KERNEL_LIB], rules)


def test_kernel_findings_at_exact_lines(result) -> None:
    found = [(f.path, f.span.line, f.span.column, f.rule) for f in result.findings
             if f.path.startswith(("csrc/", "tools/"))]
    assert found == EXPECTED_KERNELS


def test_version_test_is_info_and_replaces_the_generic_arch_guard(result) -> None:
    (arch,) = [f for f in result.findings if f.path == "csrc/layer_norm.cu" and f.span.line == 23]
    assert (arch.rule, arch.severity.value) == ("PS930", "info")


def test_headers_without_a_cuda_token_are_not_read(result) -> None:
    assert "csrc/include/version.h" in result.scanned  # listed as a file of the scan...
    assert not [f for f in result.findings if f.path == "csrc/include/version.h"]  # ...never lexed
    assert not mentions_cuda((KERNEL_LIB / "csrc/include/version.h").read_text())


def test_extension_summary_counts_included_headers(result) -> None:
    (extension,) = result.extensions
    assert extension.sources == ("csrc/ops.cpp", "csrc/layer_norm.cu", "csrc/segment.cu")
    assert extension.missing == ()
    assert extension.headers == ("csrc/reduce.cuh", "csrc/include/warp_reduce.h")
    in_extension = [f for f in result.findings if f.path in (*extension.sources, *extension.headers)]
    assert extension.findings == len(in_extension) == 14


def test_a_summary_is_not_zero_when_only_headers_hold_findings(tmp_path: Path, rules) -> None:
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "kernel.cu").write_text('#include "warp.cuh"\n__global__ void k() {}\n')
    (tmp_path / "csrc" / "warp.cuh").write_text('#include "lanes.h"\n')
    (tmp_path / "csrc" / "lanes.h").write_text("__device__ int lane() { return threadIdx.x & 31; }\n")
    (tmp_path / "setup.py").write_text(textwrap.dedent("""\
        from torch.utils.cpp_extension import CUDAExtension
        ext = CUDAExtension("k", ["csrc/kernel.cu"])
        """))
    (extension,) = scan_paths([tmp_path], rules).extensions
    assert extension.headers == ("csrc/warp.cuh", "csrc/lanes.h")
    assert extension.findings == 1


def test_a_header_a_cuda_source_includes_is_cuda_code_without_a_cuda_token(tmp_path: Path, rules) -> None:
    """A header holding only ``#define WARP_SIZE 32`` / ``#define FULL_MASK 0xffffffff``
    is compiled into every ``.cu`` that includes it (directly or through another header):
    read as CUDA, walk or extension first. The same header included only by plain C++ is
    not lexed."""
    defines = "#define MAX_THREADS 1024\n#define WARP_SIZE 32\n#define FULL_MASK 0xffffffff\n"
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "common_defs.h").write_text(defines)
    (tmp_path / "kernels" / "wrap.cuh").write_text('#include "common_defs.h"\n')
    (tmp_path / "kernels" / "lsh.cu").write_text('#include "wrap.cuh"\n__global__ void k() {}\n')
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "defs.h").write_text(defines)
    (tmp_path / "host" / "main.cpp").write_text('#include "defs.h"\nint main() { return 0; }\n')
    found = [(f.path, f.span.line, f.rule) for f in scan_paths([tmp_path], rules).findings]
    assert found == [("kernels/common_defs.h", 2, "PS910"), ("kernels/common_defs.h", 3, "PS912")]


@pytest.mark.parametrize("sources", [
    'glob.glob(os.path.join(csrc, "*.cu"))',
    '[p for p in glob.glob(osp.join("csrc", "*.cu")) if "hip" not in p]',
    'sorted(str(p) for p in Path(this_dir, "csrc").glob("*.cu"))',
    '[os.path.join(this_dir, "csrc", name) for name in ["a.cu", "b.cu"]]',
    'list(Path("csrc").rglob("*.cu"))',
])
def test_sources_that_exist_are_never_not_found(tmp_path: Path, rules, sources: str) -> None:
    (tmp_path / "csrc").mkdir()
    for name in ("a.cu", "b.cu"):
        (tmp_path / "csrc" / name).write_text("__global__ void k() {}\n")
    (tmp_path / "setup.py").write_text(textwrap.dedent(f"""\
        import glob
        import os
        import os.path as osp
        from pathlib import Path
        from torch.utils.cpp_extension import CUDAExtension
        this_dir = os.path.dirname(os.path.abspath(__file__))
        csrc = os.path.join(this_dir, "csrc")
        ext = CUDAExtension("k", sources={sources})
        """))
    (extension,) = scan_paths([tmp_path], rules).extensions
    assert extension.missing == ()
    assert extension.sources == ("csrc/a.cu", "csrc/b.cu")


def test_a_source_that_is_really_missing_is_still_reported(tmp_path: Path, rules) -> None:
    (tmp_path / "setup.py").write_text(
        'import os\nfrom torch.utils.cpp_extension import CUDAExtension\n'
        'ext = CUDAExtension("k", [os.path.join("csrc", "gone.cu")])\n')
    (extension,) = scan_paths([tmp_path], rules).extensions
    assert extension.missing == ("csrc/gone.cu",)


@pytest.mark.parametrize(("path", "kind"), [("a.cc", "cpp"), ("x/warp.hpp", "cpp"), ("ops.h", "cpp"),
                                            ("k.cu", "cuda"), ("k.cuh", "cuda"), ("a.c", None)])
def test_cpp_file_kind(path: str, kind: str | None) -> None:
    from pathlib import PurePosixPath
    assert file_kind(PurePosixPath(path)) == kind


@pytest.mark.parametrize("text", [
    "__device__ int f();", "int x = threadIdx.x;", '#include <cuda_runtime.h>', "cudaMalloc(&p, n);",
    "#if __CUDA_ARCH__ >= 800", "using namespace nvcuda;", "#include <cooperative_groups.h>",
    "#include <nvtx3/nvToolsExt.h>",  # a profiling helper with no other CUDA token (PS951)
])
def test_cuda_tokens(text: str) -> None:
    assert mentions_cuda(text)


@pytest.mark.parametrize("text", ["#include <vector>\nint cuda_count = 0;", "bool is_cuda();", "asm(\"nop\");"])
def test_plain_cpp_has_no_cuda_token(text: str) -> None:
    assert not mentions_cuda(text)


def test_a_plain_cpp_file_is_not_flagged_for_host_asm(rules) -> None:
    assert scan_source('void f() { asm volatile("pause"); }\n', "src/spin.cpp", rules) == ()


def test_strip_code_keeps_lines_and_include_paths() -> None:
    text = 'a = "x // y"; // c\n/* one\ntwo */ b = \'\\n\';\n#include "warp.h"\n"unterminated\nz'
    code = strip_code(text)
    assert len(code) == len(text) and code.count("\n") == text.count("\n")
    assert '#include "warp.h"' in code and "//" not in code and "two" not in code and "z" in code


def test_raw_strings_are_blanked() -> None:
    """Jiterator/NVRTC kernels kept as ``R"(...)"`` text are data, not this file's code."""
    text = 'auto src = R"ESC(\n  __shfl_down_sync(mask, v, 1);\n)ESC";\nint R2 = 1;\n'
    code = strip_code(text)
    assert "__shfl" not in code and "int R2 = 1;" in code and code.count("\n") == text.count("\n") == 4


def test_needles_are_what_every_match_contains() -> None:
    assert set(needles(r"\bcg::reduce\(|cooperative_groups/reduce\.h")) == {
        ("cg::reduce(", False), ("cooperative_groups/reduce.h", False)}
    assert needles(r"(?i:warp)_size") == (("_size", False),)
    assert needles(r"\w+|abc") == ()
    found = needles(r"(?i:warp_?size)\s*=\s*32")
    assert present(found, "WARP_SIZE = 32", "warp_size = 32")
    assert not present(found, "int x = 32;", "int x = 32;")


def test_included_headers_resolve_beside_the_file_then_in_search_dirs(tmp_path: Path) -> None:
    (tmp_path / "src" / "inc").mkdir(parents=True)
    (tmp_path / "src" / "k.cu").write_text('#include "a.cuh"\n#include "inc/b.h"\n#include <cuda.h>\n')
    (tmp_path / "src" / "a.cuh").write_text('#include "k.cu"\n')  # a cycle back to the source
    (tmp_path / "src" / "inc" / "b.h").write_text('#include "c.h"\n')
    (tmp_path / "c.h").write_text("")
    found = included_headers([tmp_path / "src" / "k.cu"], [tmp_path],
                             lambda p: p.read_text() if p.is_file() else None)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["src/a.cuh", "src/inc/b.h", "c.h"]
    assert quoted_includes('  #  include "x.h"\n#include <y.h>\n') == ("x.h",)


def test_supersedes_only_at_the_same_place() -> None:
    from portscan.ruleset.loader import load_rules
    pack = load_rules()
    rules = RuleSet([pack.by_code["PS920"], pack.by_code["PS930"]])
    text = "#if __CUDA_ARCH__ < 700\nint a;\n#endif\n#if __CUDA_ARCH__ >= 800\nint b;\n#else\nint c;\n#endif\n"
    found = [(f.rule, f.span.line) for f in scan_source(text, "k.cu", rules)]
    assert found == [("PS920", 1), ("PS930", 4)]


def test_unmapped_cublaslt_calls_in_a_cpp_file_but_not_header_paths(rules) -> None:
    text = ("#include <cublasLt.h>\n"
            "void tune(cublasLtHandle_t h, cublasLtMatmulAlgo_t* algo) {\n"
            "  cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F,\n"
            "                         CUDA_R_16F, CUDA_R_16F, 0, algo);\n"
            "}\n")
    from portscan.match.hipify import load_hipify_names
    found = [(f.rule, f.span.line, f.span.column)
             for f in scan_source(text, "csrc/gemm.cpp", rules, hipify=load_hipify_names()) if f.rule == "PS924"]
    assert found == [("PS924", 3, 3)]


def test_a_source_glob_that_would_take_hipifys_copies_is_reported(tmp_path: Path, rules) -> None:
    """kernel-lib's setup.py drops hipify's `*_hip.cpp`/`.hip` copies from its globbed
    sources (`"hip" not in path`), so PS935 stays quiet there; the same build without
    that filter is reported at its `*.cpp` glob."""
    import shutil

    assert not [f for f in scan_paths([KERNEL_LIB], rules).findings if f.rule == "PS935"]
    project = tmp_path / "kernel-lib"
    shutil.copytree(KERNEL_LIB, project)
    setup = project / "setup.py"
    setup.write_text(setup.read_text().replace('[path for path in sources if "hip" not in path]', "sources"))
    found = [(f.path, f.span.line) for f in scan_paths([project], rules).findings if f.rule == "PS935"]
    assert found == [("setup.py", 9)]  # the *.cpp glob; copies of .cu sources end in .hip


def test_a_cuda_looking_name_the_project_declares_is_its_own_not_cudas(tmp_path: Path, rules) -> None:
    """gloo's ``int cudaNumDevices();`` and ``template <typename T> void cudaSum(...)``,
    pytorch3d's ``cudaDevToDev``: declared in one file and used in another, they are the
    project's names; an unmapped CUDA API name beside them is still reported."""
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "helpers.h").write_text(
        "#include <cuda_runtime.h>\n"
        "int cudaNumDevices();\n"
        "template <typename T>\n"
        "void cudaSum(T* x, const T* y, size_t n, cudaStream_t stream);\n")
    (tmp_path / "csrc" / "ops.cu").write_text(
        '#include "helpers.h"\n'
        "__global__ void k(float* x) {}\n"
        "void run(float* x, const float* y, cudaStream_t s) {\n"
        "  for (int d = 0; d < cudaNumDevices(); ++d) cudaSum(x, y, 8, s);\n"
        "  cudaStreamBeginCaptureToGraph(s, nullptr, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal);\n"
        "}\n")
    found = [(f.path, f.span.line) for f in scan_paths([tmp_path], rules).findings if f.rule == "PS924"]
    assert found == [("csrc/ops.cu", 5)]


def test_a_local_or_a_helper_named_like_a_cuda_library_call_is_the_projects(tmp_path: Path, rules) -> None:
    """MinkowskiEngine's ``const char *cublasGetErrorString(cublasStatus_t)`` (its own, in its
    namespace) and the locals ``cublasOperation_t cuTransA = ...``: names the project
    declares, whatever family of CUDA names they look like; an unmapped driver API call
    beside them is still reported."""
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "gpu.cu").write_text(
        "#include <cublas_v2.h>\n"
        "namespace minkowski {\n"
        "const char *cublasGetErrorString(cublasStatus_t error) { return \"\"; }\n"
        "}\n"
        "__global__ void k(float* x) {}\n"
        "void gemm(cublasHandle_t handle, bool ta) {\n"
        "  cublasOperation_t cuTransA =\n"
        "      ta ? CUBLAS_OP_T : CUBLAS_OP_N;\n"
        "  cublasSgemm(handle, cuTransA, cuTransA, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1);\n"
        "  minkowski::cublasGetErrorString(CUBLAS_STATUS_SUCCESS);\n"
        "  cuTensorMapEncodeTiled(nullptr, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, nullptr, nullptr, nullptr);\n"
        "}\n")
    found = [(f.span.line, f.message.split("`")[1]) for f in scan_paths([tmp_path], rules).findings
             if f.rule == "PS924"]
    assert found == [(11, "cuTensorMapEncodeTiled")]


@pytest.mark.parametrize("call, expected", [
    ("f(k, attr, 16 * (256 * 8 + 32 * 9));", 37376),
    ("f(k, attr, 48 * 1024u);", 49152),
    ("f(k, attr, kSmem << 10);", 98304),  # kSmem = 96 below
    ("f(k, attr, size / 2 + 1);", 32785),  # size = kSmem * 683 + 1, integer division
    ("f(k, attr, sizeof(Smem));", None),
    ("f(k, attr, get_size(n));", None),
    ("f(k, attr, unknown);", None),
    ("f(k, attr, 1 << 99);", None),  # a shift no GPU size needs
    ("f(k, attr, 8 / 0);", None),
])
def test_a_size_argument_is_read_when_it_is_constant(call: str, expected) -> None:
    from portscan.kinds.kernel import constant_argument
    code = "constexpr int kSmem = 96;\nconst size_t size = kSmem * 683 + 1;\nint x = 1;\n" + call
    end = code.index("attr") + len("attr")
    assert constant_argument(code, end) == expected


GGML_SHIM = """\
#if defined(GGML_USE_HIPBLAS)
#include <hip/hip_runtime.h>
#define __shfl_xor_sync(mask, var, laneMask, width) __shfl_xor(var, laneMask, width)
#define cudaMalloc hipMalloc
#define __CUDA_ARCH__ 1300
#else
#include <cuda_runtime.h>
#endif

static __device__ float warp_reduce_sum(float x) {
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) {
        x += __shfl_xor_sync(0xffffffff, x, mask, 32);
    }
    return x;
}

static __global__ void dot(const int * x, int * y) {
#if __CUDA_ARCH__ >= 610
    y[threadIdx.x] = __dp4a(x[0], x[1], 0);
#endif
}

static __device__ int vote(bool p) {
    return __ballot_sync(0xffffffff, p);
}
"""


def test_a_name_the_files_own_hip_shim_defines_is_handled_there(rules) -> None:
    """ggml's ggml-cuda.cu (vendored by many projects) maps CUDA names to HIP in one
    ``#if defined(GGML_USE_HIPBLAS)`` block: the shuffle and the arch test use names the
    shim defines, so they are ``info``; the ballot is not in the shim and stays an error."""
    found = {(f.rule, f.span.line): (f.severity.value, f.guard) for f in scan_source(GGML_SHIM, "ggml-cuda.cu", rules)}
    assert found[("PS912", 13)] == ("info", "vendor-branch")
    assert found[("PS920", 19)] == ("info", "vendor-branch")
    assert found[("PS912", 25)] == ("error", None)
    shuffle = "#define __shfl_xor_sync(mask, var, laneMask, width) __shfl_xor(var, laneMask, width)\n"
    unshimmed = GGML_SHIM.replace(shuffle, "")
    found = {(f.rule, f.span.line): f.severity.value for f in scan_source(unshimmed, "ggml-cuda.cu", rules)}
    assert found[("PS912", 12)] == "error"  # a shim that maps other names leaves this one loud


TOOLKIT_GATES = """\
#if (__CUDACC_VER_MAJOR__ >= 11)
#if (!defined(__CUDA_ARCH__) || (__CUDA_ARCH__ >= 800))
#define KERNELS_CP_ASYNC_ENABLED
#endif
#endif

__device__ __forceinline__ void commit_group() {
#ifdef KERNELS_CP_ASYNC_ENABLED
  asm volatile("cp.async.commit_group;\\n" ::);
#endif
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
"""


def test_a_branch_only_nvidias_toolkit_compiles_is_vendor_branch(rules) -> None:
    """hipcc defines no ``__CUDACC_VER_MAJOR__``, so a macro defined only under such a test
    is never defined there and the PTX it enables is never compiled (CUTLASS-style gates,
    flashinfer's ``cp_async.cuh``); the gate is reported (PS922), unguarded PTX is not."""
    found = {(f.rule, f.span.line): (f.severity.value, f.guard) for f in scan_source(TOOLKIT_GATES, "k.cuh", rules)}
    assert found[("PS914", 9)] == ("info", "vendor-branch")
    assert found[("PS914", 15)] == ("error", None)
    assert found[("PS922", 1)][0] != "info"
    # a macro defined outside the gate too is no toolkit-only macro
    also = TOOLKIT_GATES.replace("__device__ __forceinline__ void commit_group", "#define KERNELS_CP_ASYNC_ENABLED\n"
                                 "__device__ __forceinline__ void commit_group")
    found = {(f.rule, f.span.line): f.severity.value for f in scan_source(also, "k.cuh", rules)}
    assert found[("PS914", 10)] == "error"


CUBLAS_MODES = """\
#include <cublas_v2.h>
void set_mode(cublasHandle_t handle) {
#if CUDA_VERSION < 11000
  cublasSetMathMode(handle, CUBLAS_TENSOR_OP_MATH);
#else
  cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
#endif
#if CUDA_VERSION >= 6050
  const char* licence = cublas_name(CUBLAS_STATUS_LICENSE_ERROR);
#endif
}
"""


def test_a_cuda_release_test_is_false_after_hipify(rules) -> None:
    """hipify turns ``CUDA_VERSION`` into ``TORCH_HIP_VERSION`` (602 for ROCm 6.2), so
    ``CUDA_VERSION >= 6050`` and the ``#else`` of ``CUDA_VERSION < 11000`` are never
    compiled on ROCm, while ``CUDA_VERSION < 11000`` is (rwkv's cuBLAS math modes)."""
    from portscan.match.hipify import load_hipify_names
    found = {(f.rule, f.span.line): (f.severity.value, f.guard)
             for f in scan_source(CUBLAS_MODES, "blas.cu", rules, hipify=load_hipify_names()) if f.rule == "PS924"}
    assert found == {("PS924", 4): ("warning", None), ("PS924", 6): ("info", "vendor-branch"),
                     ("PS924", 9): ("info", "vendor-branch")}



@pytest.mark.parametrize(("gate", "compiled_out"), [
    ("#if defined(CUDA_VERSION) && CUDA_VERSION >= 11000 && !defined(_MSC_VER)", True),  # stable-fast's cublasLt
    ("#if (defined(CUDA_VERSION) && (CUDA_VERSION >= 11000)) && !defined(_WIN32)", True),
    ("#if !defined(_MSC_VER) && CUDA_VERSION < 11000", False),  # true on ROCm
    ("#if defined(_WIN32) || defined(CUDA_VERSION) && CUDA_VERSION >= 11000", False),  # Windows ROCm takes it
    ("#if !(defined(_MSC_VER) && CUDA_VERSION >= 11000)", False),  # a negated group holds on ROCm
])
def test_an_and_chain_with_a_cuda_release_test_is_false_after_hipify(rules, gate: str, compiled_out: bool) -> None:
    """An ``&&`` chain is false where one of its terms is: with ``CUDA_VERSION >= 11000``
    among them, hipcc never compiles the block, whatever the other terms say."""
    ptx = '__device__ void commit() { asm volatile("cp.async.commit_group;\\n" ::); }'
    source = f"#include <cuda.h>\n{gate}\n{ptx}\n#endif\n"
    found = [(f.severity.value, f.guard) for f in scan_source(source, "k.cu", rules) if f.rule == "PS914"]
    assert found and all(guard == ("vendor-branch" if compiled_out else None) for _, guard in found), found

LOGICAL_WARP = """\
#define WARP_SIZE (32)
__device__ float warp_sum(float v) {
  for (int i = WARP_SIZE / 2; i; i /= 2) v += __shfl_xor_sync(0xffffffff, v, i, WARP_SIZE);
  return v;
}
"""


@pytest.mark.parametrize(("extra", "reported"), [
    ("", False),  # every shuffle keeps to the 32-lane logical warp
    ("__device__ float first(float v) { return __shfl_sync(0xffffffff, v, 0); }\n", True),  # lane 0 of 64
    ("__device__ float down(float v) { return __shfl_down(v, 1, 16); }\n", True),  # another width
])
def test_a_warp_size_every_shuffle_passes_as_its_width_is_a_logical_warp(rules, extra: str, reported: bool) -> None:
    """torch-harmonics' ``#define WARP_SIZE (32)`` with ``__shfl_xor_sync(..., WARP_SIZE)``:
    on a 64-lane wavefront those shuffles stay inside each half, so the reduction is right
    (a trap of the corpus); a shuffle without that width reads across halves (YOSO)."""
    found = [f.rule for f in scan_source(LOGICAL_WARP + extra, "utils.cuh", rules) if f.rule == "PS910"]
    assert bool(found) == reported


SMEM_LAUNCH = """\
void launch(Params p, cudaStream_t stream) {{
{query}  const size_t smem = NUM_STAGES * TILE * HEAD_DIM * sizeof(half);
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  k<<<grid, block, smem, stream>>>(p);
}}
"""


@pytest.mark.parametrize(("prefix", "query", "reported"), [
    ("", "", True),  # an unknown size: it may exceed 64 KB of LDS
    ("", "  int m; cudaDeviceGetAttribute(&m, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);\n", False),
    ("", "  cudaDeviceProp prop; cudaGetDeviceProperties(&prop, 0); check(prop.sharedMemPerBlockOptin);\n", False),
    ("", "  int m; cudaDeviceGetAttribute(&m, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0);\n", False),
    ("int limit() {\n  int m;\n  cudaDeviceGetAttribute(&m, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);\n"
     "  return m;\n}\n", "", True),  # read in another function, which the launch does not consult here
    ("", "  // cudaDevAttrMaxSharedMemoryPerBlockOptin would tell\n", True),  # a comment reads nothing
])
def test_a_request_sized_from_the_device_limit_adapts_to_amd_lds(rules, prefix: str, query: str,
                                                                 reported: bool) -> None:
    """FlashInfer's prefill dispatch reads ``cudaDevAttrMaxSharedMemoryPerMultiprocessor``
    and picks its KV tiles from it, so its opt-in never asks an MI300 for more than its
    64 KB (judged false three times in the corpus); PS919 stays for requests nothing sizes."""
    found = [f.rule for f in scan_source(prefix + SMEM_LAUNCH.format(query=query), "prefill.cu", rules)
             if f.rule == "PS919"]
    assert bool(found) == reported


def test_a_library_included_again_and_again_is_one_finding_per_file(rules) -> None:
    """CUTLASS headers included five times are one dependency of the file: one PS916 at
    the first include, the others listed as its uses; an include in the file's ROCm
    branch stays a finding of its own (info), and another file has its own."""
    source = textwrap.dedent("""\
        #include <cutlass/cutlass.h>
        #include <cutlass/gemm/device/gemm.h>
        #include <cute/tensor.hpp>
        #include <cuda_runtime.h>
        #include "cutlass/numeric_types.h"
        #if !defined(USE_ROCM)
        #include <cutlass/array.h>
        #endif
        __global__ void k(float* x) { x[threadIdx.x] = 0.f; }
        """)
    found = [f for f in scan_source(source, "csrc/gemm.cu", rules) if f.rule == "PS916"]
    assert [(f.span.line, f.severity.value) for f in found] == [(1, "error"), (7, "info")]
    assert [line for line, _ in found[0].uses] == [2, 3, 5]
    other = scan_source(source, "csrc/other.cu", rules)
    assert [f.span.line for f in other if f.rule == "PS916"] == [1, 7]


def test_a_cuda_only_library_used_through_one_import_is_one_finding(rules) -> None:
    """NVIDIA Warp (``per_import``): its calls through ``import warp as wp`` are one finding
    at the first, the rest listed; a second import has its own."""
    source = textwrap.dedent("""\
        import warp as wp
        from warp.torch import to_torch

        def run(t):
            a = wp.from_torch(t)
            b = wp.from_torch(t * 2)
            wp.launch(kernel, dim=a.shape[0], inputs=[a, b])
            return to_torch(b)
        """)
    found = [f for f in scan_source(source, "ops.py", rules) if f.rule == "PS751"]
    assert [(f.span.line, [line for line, _ in f.uses]) for f in found] == [(5, [6, 7]), (8, [])]


def test_the_cudnn_calls_of_a_file_that_includes_cudnn_are_its_uses(rules) -> None:
    """cuDNN has no HIP mapping at all: a file that includes ``cudnn.h`` is one PS917
    finding listing its cuDNN calls (which PS924 would report one by one, CuPy's binding
    header holds 49), not one finding per call; other unmapped calls stay PS924's, and
    without the include the calls are PS924's."""
    from portscan.match.hipify import load_hipify_names
    source = textwrap.dedent("""\
        #include <cudnn.h>
        void f(cudnnHandle_t h, cudnnTensorDescriptor_t d) {
          cudnnCreate(&h);
          cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, 1);
          cudaCtxResetPersistingL2Cache();
        }
        """)
    hipify = load_hipify_names()
    found = {f.rule: f for f in scan_source(source, "cudnn_ops.cu", rules, hipify=hipify)}
    assert set(found) == {"PS917", "PS924"}
    assert found["PS924"].message.startswith("`cudaCtxResetPersistingL2Cache`")
    assert {line for line, _ in found["PS917"].uses} == {2, 4}  # cudnnCreate is in the hipify table
    alone = scan_source(source.replace("#include <cudnn.h>", "#include <cuda_runtime.h>"), "cudnn_ops.cu", rules,
                        hipify=hipify)
    assert sum(f.rule == "PS924" for f in alone) == 3
