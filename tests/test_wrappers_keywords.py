"""Wrappers and keywords (issue 17, item 2): build flags and commands that reach their
target one step removed from a literal call — flags given by keyword at any call, in
``{"nvcc": [...]}`` dicts and ``args["nvcc"] = ...`` stores, returned by op-builder
methods and by the module's own helpers; commands passed through the module's own
process-running helpers, programs written as path expressions, and gates on the CUDA
toolkit's environment variables."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from portscan.scan import scan_paths, scan_source

REPO = Path(__file__).resolve().parents[1]
OP_BUILDER = REPO / "fixtures" / "op-builder"

#: (path, line, column, rule, severity) of every finding in the fixture
EXPECTED = [
    ("fusedops/env_report.py", 15, 30, "PS601", "error"),    # run_cmd(" ".join(["nvidia-smi", ...])) in query()
    ("fusedops/env_report.py", 23, 25, "PS601", "error"),    # self._sh("nvidia-smi topo -m"): a method wrapper
    ("fusedops/env_report.py", 26, 15, "PS609", "warning"),  # shutil.which("nvidia-smi")
    ("fusedops/env_report.py", 29, 32, "PS601", "error"),    # [smi, ...] where smi = shutil.which("nvidia-smi")
    ("fusedops/env_report.py", 36, 19, "PS601", "error"),    # run_cmd("nvidia-smi -L")
    ("op_builder/builder.py", 39, 16, "PS901", "info"),      # CUDAExtension(...)
    ("op_builder/builder.py", 52, 16, "PS901", "info"),      # load(...)
    ("op_builder/builder.py", 58, 33, "PS952", "error"),     # extra_include_paths=<one path>, not a list
    ("op_builder/layernorm.py", 13, 18, "PS905", "error"),   # -maxrregcount=50, returned by nvcc_args()
    ("op_builder/layernorm.py", 15, 19, "PS907", "warning"),  # flags += ["-lineinfo"]
    ("op_builder/layernorm.py", 16, 17, "PS903", "error"),   # return ["--use_fast_math"] + ...
    ("op_builder/layernorm.py", 19, 17, "PS909", "error"),   # def extra_ldflags(self): return ["-lcurand"]
    ("op_builder/softmax.py", 18, 24, "PS903", "info"),      # after `if torch.version.hip: return ...`
    ("op_builder/softmax.py", 18, 43, "PS904", "info"),
    ("op_builder/utils.py", 11, 36, "PS407", "error"),       # [os.path.join(cuda_dir, "bin", "nvcc"), "-V"]
    ("op_builder/utils.py", 20, 8, "PS404", "error"),
    ("op_builder/utils.py", 22, 44, "PS404", "error"),
    ("op_builder/utils.py", 41, 12, "PS906", "error"),       # nvcc_threads(...): --threads, at the helper's call
    ("setup.py", 9, 13, "PS933", "warning"),                 # "CUDA_HOME" in os.environ gates the GPU build
    ("setup.py", 21, 24, "PS904", "error"),                  # nvcc_flags += [...]; extra_compile_args["nvcc"] = ...
    ("setup.py", 22, 24, "PS906", "error"),                  # -diag-suppress
    ("setup.py", 23, 38, "PS906", "error"),                  # append_nvcc_threads(nvcc_flags): at the call
    ("setup.py", 24, 17, "PS901", "info"),
    ("setup.py", 29, 20, "PS908", "error"),                  # libraries= of the Extension chosen at run time
]


@pytest.fixture(scope="module")
def result(rules):
    return scan_paths([OP_BUILDER], rules)


def test_the_op_builder_fixture_line_by_line(result) -> None:
    assert not result.errors
    found = sorted((f.path, f.span.line, f.span.column, f.rule, f.severity.value) for f in result.findings)
    assert found == sorted(EXPECTED)


def test_flags_torch_translates_and_rocm_safe_lines_are_not_reported(result) -> None:
    """``-U__CUDA_NO_HALF_OPERATORS__`` becomes ``-U__HIP_NO_HALF_OPERATORS__`` in torch's
    BuildExtension; ``-gencode`` built from ``sm_`` names of ``get_arch_list()`` (none on
    ROCm) and the ``amd-smi`` call are fine."""
    lines = {(f.path, f.span.line) for f in result.findings}
    assert not [f for f in result.findings if "__CUDA_NO_HALF" in f.message]
    assert ("op_builder/utils.py", 36) not in lines  # arch_flags(): not a flag method by name
    assert ("fusedops/env_report.py", 39) not in lines  # run_cmd("amd-smi list")


def _scan(rules, source: str, codes: list[str], path: str = "setup.py"):
    return [(f.rule, f.span.line, f.severity.value, f.guard)
            for f in scan_source(textwrap.dedent(source), path, rules.select(codes))]


def test_a_helper_is_reported_at_its_call_so_a_vendor_branch_there_counts(rules) -> None:
    source = """\
        import torch
        from torch.utils.cpp_extension import CUDAExtension

        def append_nvcc_threads(args):
            return args + ["--threads", "4"]

        nvcc = ["-O3"] if torch.version.hip else append_nvcc_threads(["-O3"])
        ext = CUDAExtension("ops", ["ops.cu"], extra_compile_args={"nvcc": nvcc})
        """
    assert _scan(rules, source, ["PS906"]) == [("PS906", 7, "info", "vendor-branch")]


def test_a_flag_method_the_module_calls_is_reported_once_at_the_call(rules) -> None:
    source = """\
        from torch.utils.cpp_extension import load

        class Builder:
            def nvcc_flags(self):
                return ["-O3", "--use_fast_math"]

            def load(self):
                return load("ops", ["ops.cu"], extra_cuda_cflags=self.nvcc_flags())
        """
    assert _scan(rules, source, ["PS903"]) == [("PS903", 8, "error", None)]


def test_a_flag_method_nothing_calls_is_reported_at_its_flags(rules) -> None:
    source = """\
        class LayerNormBuilder(CUDAOpBuilder):
            def nvcc_flags(self):
                flags = ["-O3"]
                flags.append("--use_fast_math")
                return flags
        """
    assert _scan(rules, source, ["PS903"], "op_builder/layernorm.py") == [("PS903", 4, "error", None)]


@pytest.mark.parametrize("call", [
    'make_cuda_ext("ops", ["ops.cu"], nvcc_flags=["--use_fast_math"])',
    'build(extra_compile_args={"cxx": [], "nvcc": ["--use_fast_math"]})',
    'setuptools.Extension("ops", ["ops.cu"], extra_compile_args={"nvcc": ["--use_fast_math"]})',
])
def test_nvcc_flags_by_keyword_or_key_at_any_call(rules, call: str) -> None:
    source = f"import setuptools\nfrom .build import make_cuda_ext, build\n{call}\n"
    assert _scan(rules, source, ["PS903"]) == [("PS903", 3, "error", None)]


def test_cxx_or_unrelated_keywords_are_not_nvcc_flags(rules) -> None:
    source = """\
        from torch.utils.cpp_extension import CppExtension
        ext = CppExtension("ops", ["ops.cpp"], extra_compile_args={"cxx": ["--use_fast_math"]})
        configure(flags=["--use_fast_math"], libraries=["cublas"])
        """
    assert _scan(rules, source, ["PS903", "PS908"]) == []


def test_compile_args_given_to_setup_itself_reach_no_compiler(rules) -> None:
    """``setup(extra_compile_args={...})`` (hqq's ``setup_cuda.py``): setuptools drops an
    option it does not know ("Unknown distribution option"); the same dict given to the
    extension, or named and shared with it, is the extension's."""
    source = """\
        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension

        args = {"nvcc": ["-O3", "--use_fast_math"]}
        setup(
            name="ops",
            ext_modules=[CUDAExtension("ops", ["ops.cu"])],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", "--use_fast_math"]},
            cmdclass={"build_ext": BuildExtension},
        )
        setup(name="ops2", ext_modules=[CUDAExtension("ops2", ["ops2.cu"], extra_compile_args=args)])
        """
    assert _scan(rules, source, ["PS903"], "setup.py") == [("PS903", 4, "error", None)]


def test_wrappers_of_wrappers_two_levels(rules) -> None:
    source = """\
        import subprocess

        def sh(cmd):
            return subprocess.check_output(cmd, shell=True)

        def gpu_query(command):
            return sh(command)

        def report(text):
            print(text)

        gpu_query("nvidia-smi -L")
        report("nvidia-smi -L")
        """
    assert _scan(rules, source, ["PS601"], "t.py") == [("PS601", 12, "error", None)]


@pytest.mark.parametrize("program", [
    'CUDA_HOME + "/bin/nvcc"',
    'os.path.join(CUDA_HOME, "bin", "nvcc")',
    'str(Path(CUDA_HOME) / "bin" / "nvcc")',
    'f"{CUDA_HOME}/bin/nvcc"',
    'shutil.which("nvcc")',
])
def test_a_program_written_as_a_path_expression(rules, program: str) -> None:
    source = ("import os, shutil, subprocess\nfrom pathlib import Path\n"
              "from torch.utils.cpp_extension import CUDA_HOME\n"
              f"nvcc = {program}\nout = subprocess.check_output([nvcc, '-V'])\n")
    assert _scan(rules, source, ["PS407"]) == [("PS407", 5, "error", None)]


def test_cuda_home_reads_unless_the_file_looks_for_rocm_too(rules) -> None:
    gate = """\
        import os
        if os.environ.get("CUDA_HOME") is not None or "CUDA_PATH" in os.environ:
            nvcc = os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc")
        """
    assert _scan(rules, gate, ["PS933"]) == [("PS933", 2, "warning", None), ("PS933", 2, "warning", None),
                                             ("PS933", 3, "warning", None)]
    aware = textwrap.dedent(gate) + "rocm = os.getenv('ROCM_PATH')\n"
    assert _scan(rules, aware, ["PS933"]) == []
    compile(aware, "setup.py", "exec")  # the silence is not a syntax error
