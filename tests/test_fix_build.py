"""`portscan fix` on extension builds (issue 20, item 4): nvcc-only flags get a ROCm
twin of their list (`[...] if torch.version.hip else [the list as written]`) and a
`CUDA_HOME` toolkit check reads the toolkit of the build. Both branches are run: the
CUDA one must give exactly what the original gave."""

from __future__ import annotations

import os
import textwrap
import types

import pytest

from portscan.fix.engine import fix_source
from portscan.ruleset.loader import RuleSet, load_rules
from portscan.scan import scan_source

RULES = load_rules()
BUILD = RuleSet(r for r in RULES.rules if r.code in ("PS404", "PS902", "PS903", "PS904", "PS905", "PS906"))
FLAGS = ("PS902", "PS903", "PS904", "PS905", "PS906")

SETUP = textwrap.dedent('''\
    import torch
    from torch.utils.cpp_extension import CUDA_HOME, CUDAExtension

    if CUDA_HOME is None:
        raise RuntimeError("CUDA toolkit not found")

    nvcc_flags = [
        "-O3",
        "--use_fast_math",
        "-gencode", "arch=compute_80,code=sm_80",
        "-Xptxas", "-v",
        "--expt-relaxed-constexpr",
        "-lineinfo",
    ]
    if ARCH >= 90:
        nvcc_flags += ["-gencode", "arch=compute_90,code=sm_90"]
    ext = CUDAExtension("fused", ["fused.cu"], extra_compile_args={"cxx": ["-O3"], "nvcc": nvcc_flags,
                                                                   "nvcc_dlink": ["-dlink"]})
    ''')


def run(source: str, hip: str | None, cuda_home: str | None, rocm_home: str | None, arch: int = 90) -> dict:
    """Execute a fixed setup.py with a stand-in torch: what it leaves in its namespace."""
    torch = types.SimpleNamespace(version=types.SimpleNamespace(hip=hip, cuda=None if hip else "12.1"))
    cpp = types.SimpleNamespace(CUDA_HOME=cuda_home, ROCM_HOME=rocm_home, IS_HIP_EXTENSION=hip is not None,
                                CUDAExtension=lambda name, sources, extra_compile_args: extra_compile_args)
    modules = {"torch": torch, "torch.utils.cpp_extension": cpp, "os": os}

    def load(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - __import__'s signature
        return modules[name]

    namespace: dict = {"__builtins__": {**__builtins__, "__import__": load} if isinstance(__builtins__, dict)
                       else {**vars(__builtins__), "__import__": load}, "ARCH": arch}
    exec(compile(source, "setup.py", "exec"), namespace)  # noqa: S102 - our own fixture text
    return namespace


@pytest.fixture(scope="module")
def fixed() -> str:
    result = fix_source(SETUP, "setup.py", BUILD, unsafe=True)
    assert result.error is None
    return result.fixed


def test_the_cuda_build_gets_exactly_the_flags_it_had(fixed: str) -> None:
    for arch in (80, 90):
        before = run(SETUP, None, "/usr/local/cuda", None, arch)
        after = run(fixed, None, "/usr/local/cuda", None, arch)
        assert after["nvcc_flags"] == before["nvcc_flags"] and after["ext"] == before["ext"]
    with pytest.raises(RuntimeError, match="CUDA toolkit not found"):
        run(fixed, None, None, None)  # no CUDA toolkit: the check still stops the CUDA build


def test_the_rocm_build_gets_the_flags_clang_knows_and_its_toolkit(fixed: str) -> None:
    with pytest.raises(RuntimeError):
        run(SETUP, "6.2.41133", None, "/opt/rocm")  # before: CUDA_HOME is None on ROCm
    after = run(fixed, "6.2.41133", None, "/opt/rocm")
    assert after["nvcc_flags"] == ["-O3", "-lineinfo"]  # -gencode and -Xptxas left with their values
    with pytest.raises(RuntimeError):
        run(fixed, "6.2.41133", None, None)  # no ROCm toolkit either


def test_the_cuda_lists_are_kept_as_written_and_a_second_run_changes_nothing(fixed: str) -> None:
    assert '"-gencode", "arch=compute_80,code=sm_80",\n    "-Xptxas", "-v",' in fixed
    assert 'nvcc_flags += [] if IS_HIP_EXTENSION else ["-gencode", "arch=compute_90,code=sm_90"]' in fixed
    assert "if (ROCM_HOME if IS_HIP_EXTENSION else CUDA_HOME) is None:" in fixed
    assert fix_source(fixed, "setup.py", BUILD, unsafe=True).fixed == fixed
    left = [f for f in scan_source(fixed, "setup.py", RULES) if f.rule in FLAGS + ("PS404",)]
    assert left and all(f.guard == "vendor-branch" and f.severity.value == "info" for f in left)


def test_the_code_after_the_rewritten_toolkit_check_is_still_reported(fixed: str) -> None:
    """The check picks the toolkit by vendor; what follows it is not a vendor branch."""
    source = fixed + "major = int(torch.version.cuda.split('.')[0])\n"
    [found] = [f for f in scan_source(source, "setup.py", RULES) if f.rule == "PS401"]
    assert found.guard is None and found.severity.value == "error"


def test_without_unsafe_fixes_only_the_toolkit_check_is_ported() -> None:
    """The flags' ROCm list drops what clang does not know (fast math among them): unsafe."""
    result = fix_source(SETUP, "setup.py", BUILD, unsafe=False)
    assert "if (ROCM_HOME if IS_HIP_EXTENSION else CUDA_HOME) is None:" in result.fixed  # PS404 is safe
    assert "nvcc_flags = [\n" in result.fixed and 'nvcc_flags += ["-gencode"' in result.fixed
    assert {n.rule for n in result.not_fixed if "unsafe" in n.reason} == {"PS902", "PS903", "PS904", "PS905"}


@pytest.mark.parametrize(("source", "why"), [
    ('flags = []\nflags.append("-gencode")\nARCH = "arch=compute_80,code=sm_80"\nflags.append(ARCH)\n',
     "from a statement that does not follow it"),
    ('flags = []\nflags.append("-gencode"); flags.append("arch=compute_80,code=sm_80")\n',
     "a `.append(...)` statement"),
    ('flags = ("-O3", "--use_fast_math")\n', "not an element of a list"),
    ('flags = ["-O3", "-gencode"]\nflags.append("arch=compute_80,code=sm_80")\n', "takes its value from outside"),
    ('flags = ["-O3"] + (["--use_fast_math"] if FAST else [])\n', "not assigned, returned, passed or added to"),
])
def test_flags_outside_a_list_standing_alone_are_declined_with_the_reason(source: str, why: str) -> None:
    text = ("import torch\nfrom torch.utils.cpp_extension import CUDAExtension\n" + source
            + 'CUDAExtension("x", ["x.cu"], extra_compile_args={"nvcc": flags})\n')
    flagged = [f for f in scan_source(text, "setup.py", RULES) if f.rule in FLAGS]
    assert flagged and all(f.fix is None for f in flagged)  # the scan does not promise a fix
    result = fix_source(text, "setup.py", BUILD, unsafe=True)
    assert result.fixed == text and result.not_fixed and all(why in n.reason for n in result.not_fixed)


def test_torch_version_hip_is_the_test_where_is_hip_extension_is_not_imported() -> None:
    text = ('from torch.utils.cpp_extension import load\n'
            'mod = load("x", ["x.cu"], extra_cuda_cflags=["-O3", "--expt-relaxed-constexpr"])\n')
    result = fix_source(text, "build.py", BUILD, unsafe=True)
    assert result.fixed == ('from torch.utils.cpp_extension import load\nimport torch\n\n'
                            'mod = load("x", ["x.cu"], extra_cuda_cflags=["-O3"] if torch.version.hip '
                            'else ["-O3", "--expt-relaxed-constexpr"])\n')


@pytest.mark.parametrize(("before", "after"), [
    ("if not CUDA_HOME:\n    sys.exit(1)\n",
     "if not (ROCM_HOME if IS_HIP_EXTENSION else CUDA_HOME):\n    sys.exit(1)\n"),
    ("BUILD = CUDA_HOME is not None and os.environ.get('BUILD', '1') == '1'\n",
     "BUILD = (ROCM_HOME if IS_HIP_EXTENSION else CUDA_HOME) is not None and os.environ.get('BUILD', '1') == '1'\n"),
])
def test_toolkit_checks_read_the_toolkit_of_the_build(before: str, after: str) -> None:
    head = "import os\nimport sys\nfrom torch.utils.cpp_extension import CUDA_HOME\n"
    result = fix_source(head + before, "setup.py", BUILD, unsafe=False)
    assert result.fixed == head.replace("import CUDA_HOME", "import IS_HIP_EXTENSION, ROCM_HOME, CUDA_HOME") + after


def test_a_path_under_cuda_home_is_declined() -> None:
    text = "import os\nfrom torch.utils.cpp_extension import CUDA_HOME\nNVCC = os.path.join(CUDA_HOME, 'bin', 'nvcc')\n"
    result = fix_source(text, "setup.py", BUILD, unsafe=True)
    assert result.fixed == text and "names a CUDA tool" in result.not_fixed[0].reason


def test_a_list_added_to_other_flags_gets_its_twin_in_parentheses() -> None:
    text = ('import torch\nfrom torch.utils.cpp_extension import CUDAExtension\ncc_flag = ["-DX"]\n'
            'CUDAExtension("x", ["x.cu"], extra_compile_args={"nvcc": ["-O3", "--use_fast_math"] + cc_flag})\n')
    result = fix_source(text, "setup.py", BUILD, unsafe=True)
    assert '"nvcc": (["-O3"] if torch.version.hip else ["-O3", "--use_fast_math"]) + cc_flag' in result.fixed
    for hip, flags in ((None, ["-O3", "--use_fast_math", "-DX"]), ("6.2", ["-O3", "-DX"])):
        namespace = run(result.fixed.replace("CUDAExtension(", "EXT = CUDAExtension("), hip, "/cuda", "/opt/rocm")
        assert namespace["EXT"]["nvcc"] == flags


def test_flags_appended_one_by_one_go_under_one_rocm_test_with_their_values() -> None:
    text = textwrap.dedent('''\
        import torch
        from torch.utils.cpp_extension import CUDAExtension
        cc_flag = []
        # one -gencode per architecture
        cc_flag.append("-gencode")
        cc_flag.append("arch=compute_80,code=sm_80")
        cc_flag.append("-DNDEBUG")
        if ARCH >= 90:
            cc_flag.append("-gencode")
            cc_flag.append("arch=compute_90,code=sm_90")
        EXT = CUDAExtension("x", ["x.cu"], extra_compile_args={"nvcc": ["-O3"] + cc_flag})
        ''')
    result = fix_source(text, "setup.py", BUILD, unsafe=True)
    assert ("# one -gencode per architecture\nif not torch.version.hip:\n    cc_flag.append(\"-gencode\")\n"
            "    cc_flag.append(\"arch=compute_80,code=sm_80\")\ncc_flag.append(\"-DNDEBUG\")\n") in result.fixed
    assert "    if not torch.version.hip:\n        cc_flag.append(\"-gencode\")\n" in result.fixed
    for arch in (80, 90):
        assert run(result.fixed, None, "/cuda", None, arch)["EXT"] == run(text, None, "/cuda", None, arch)["EXT"]
    assert run(result.fixed, "6.2", None, "/opt/rocm", 90)["EXT"]["nvcc"] == ["-O3", "-DNDEBUG"]
    assert fix_source(result.fixed, "setup.py", BUILD, unsafe=True).fixed == result.fixed


def test_an_option_written_apart_from_its_value_leaves_with_it() -> None:
    text = ('import torch\nfrom torch.utils.cpp_extension import CUDAExtension\nflags = ["-O2"]\n'
            'flags += ["-diag-suppress", "20012", "--threads", "4", "-DX"]\n'
            'EXT = CUDAExtension("x", ["x.cu"], extra_compile_args={"nvcc": flags})\n')
    result = fix_source(text, "setup.py", BUILD, unsafe=True)
    assert run(result.fixed, "6.2", None, "/opt/rocm")["EXT"]["nvcc"] == ["-O2", "-DX"]
    assert run(result.fixed, None, "/cuda", None)["EXT"] == run(text, None, "/cuda", None)["EXT"]


def test_a_flag_a_helper_adds_is_kept_from_hipcc_in_the_helper() -> None:
    """`append_nvcc_threads(flags)` is reported where it is called; its list is rewritten."""
    text = textwrap.dedent('''\
        import os
        import torch
        from torch.utils.cpp_extension import CUDAExtension


        def append_nvcc_threads(nvcc_extra_args):
            if os.environ.get("VERBOSE"):
                print("adding --threads")
            return nvcc_extra_args + ["--threads", "4"]


        EXT = CUDAExtension("x", ["x.cu"], extra_compile_args={"nvcc": append_nvcc_threads(["-O3"])})
        ''')
    [call] = [f for f in scan_source(text, "setup.py", RULES) if f.rule == "PS906"]
    assert call.span.line == 12 and call.fix == "unsafe"
    result = fix_source(text, "setup.py", BUILD, unsafe=True)
    assert 'return nvcc_extra_args + ([] if torch.version.hip else ["--threads", "4"])' in result.fixed
    assert [a.line for a in result.applied] == [12] and not result.not_fixed
    assert run(result.fixed, None, "/cuda", None)["EXT"] == {"nvcc": ["-O3", "--threads", "4"]}
    assert run(result.fixed, "6.2", None, "/opt/rocm")["EXT"] == {"nvcc": ["-O3"]}
    # the call's finding now sits under the helper's vendor test: info, and nothing more to do
    [after] = [f for f in scan_source(result.fixed, "setup.py", RULES) if f.rule == "PS906"]
    assert after.guard == "vendor-branch" and after.fix is None
    assert fix_source(result.fixed, "setup.py", BUILD, unsafe=True).fixed == result.fixed
