"""A package the project imports only inside vendor branches is vendor-branch code, its
extension's kernels included (optimum-quanto's shape: ``if torch.version.cuda: from
.cuda import *`` / ``elif torch.version.hip: from .hip import *``); one unguarded import
anywhere else keeps it loud."""

from __future__ import annotations

import textwrap
from pathlib import Path

from portscan.scan import scan_paths

FILES = {
    "pkg/__init__.py": "from .extensions import *\n",
    "pkg/extensions/__init__.py": """
        import torch

        if torch.cuda.is_available():
            if torch.version.cuda:
                from .cuda import *
            elif torch.version.hip:
                from .hip import *
    """,
    "pkg/extensions/cuda/__init__.py": """
        import os
        from torch.utils.cpp_extension import load

        HERE = os.path.dirname(__file__)
        ext = load(
            name="pkg_cuda",
            sources=[os.path.join(HERE, "unpack.cu")],
            extra_cuda_cflags=["--use_fast_math", "--expt-extended-lambda"],
        )
    """,
    "pkg/extensions/cuda/unpack.cu": """
        #define WARP_SIZE 32

        __device__ float warp_sum(float v) {
            for (int offset = 16; offset > 0; offset /= 2)
                v += __shfl_xor_sync(0xffffffff, v, offset);
            return v;
        }
    """,
    "pkg/extensions/hip/__init__.py": "ext = None\n",
    "setup.py": """
        from setuptools import setup
        setup(name="pkg", packages=["pkg"])
    """,
    "tests/test_ops.py": """
        import pytest
        import torch

        def test_version():
            if torch.version.hip:
                pytest.skip("CUDA only")
            major = int(torch.version.cuda.split(".")[0])
            assert major >= 11
    """,
}


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def loud(root: Path, rules) -> list[tuple[str, str]]:
    result = scan_paths([root], rules)
    return sorted((f.path, f.rule) for f in result.findings if f.severity.value != "info")


def test_a_package_imported_only_under_a_vendor_check_is_vendor_branch_code(tmp_path: Path, rules) -> None:
    write(tmp_path, FILES)
    result = scan_paths([tmp_path], rules)
    gated = [f for f in result.findings if f.path.startswith("pkg/extensions/cuda/")]
    # the kernel and the nvcc flags are found, as info: the package runs on NVIDIA only
    assert {f.path for f in gated} == {"pkg/extensions/cuda/__init__.py", "pkg/extensions/cuda/unpack.cu"}
    assert {(f.severity.value, f.guard, f.fix) for f in gated} == {("info", "vendor-branch", None)}
    # the dispatch itself and a test that skips on ROCm before reading the CUDA version
    assert loud(tmp_path, rules) == []


def test_one_unguarded_import_keeps_the_package_loud(tmp_path: Path, rules) -> None:
    write(tmp_path, {**FILES, "tests/test_unpack.py": "from pkg.extensions.cuda import ext\n"})
    found = loud(tmp_path, rules)
    assert ("pkg/extensions/cuda/unpack.cu", "PS912") in found
    assert ("pkg/extensions/cuda/__init__.py", "PS903") in found


def test_a_guard_that_is_no_vendor_check_gates_nothing(tmp_path: Path, rules) -> None:
    dispatch = FILES["pkg/extensions/__init__.py"].replace("torch.version.cuda", "torch.cuda.device_count() > 1")
    dispatch = dispatch.replace("torch.version.hip", "torch.cuda.device_count() == 1")
    write(tmp_path, {**FILES, "pkg/extensions/__init__.py": dispatch})
    assert ("pkg/extensions/cuda/unpack.cu", "PS912") in loud(tmp_path, rules)


def test_fix_leaves_a_package_loaded_on_one_vendor_alone(tmp_path: Path, rules) -> None:
    from portscan.fix.apply import fix_paths

    write(tmp_path, FILES)
    gated = fix_paths([tmp_path], rules, unsafe=True, write=False)
    assert not [f for f in gated.files if f.path.startswith("pkg/extensions/cuda/") and f.applied]
    write(tmp_path, {"tests/test_unpack.py": "from pkg.extensions.cuda import ext\n"})
    loud = fix_paths([tmp_path], rules, unsafe=True, write=False)
    assert [f.path for f in loud.files if f.applied] == ["pkg/extensions/cuda/__init__.py"]


def test_the_gated_packages_are_cached_with_the_tree_they_were_read_from(tmp_path: Path, rules) -> None:
    project, cache = tmp_path / "project", tmp_path / "cache"
    write(project, FILES)
    cold = scan_paths([project], rules, cache=cache)
    warm = scan_paths([project], rules, cache=cache)
    assert warm.findings == cold.findings
    assert not [f for f in warm.findings if f.path.startswith("pkg/extensions/cuda/") and f.guard != "vendor-branch"]
    write(project, {"tests/test_unpack.py": "from pkg.extensions.cuda import ext\n"})  # the tree changed
    after = scan_paths([project], rules, cache=cache)
    assert ("pkg/extensions/cuda/unpack.cu", "PS912") in {(f.path, f.rule) for f in after.findings
                                                         if f.severity.value != "info"}
