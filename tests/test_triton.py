"""Triton kernels (issue 16, part 9): launch and autotune ``num_warps`` above 16, FP8
bounds tied to OCP e4m3, PTX and ``tl.extra.cuda``; guarded code stays info."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from portscan.config import Target
from portscan.kinds import read_pattern
from portscan.ruleset.loader import RuleSet
from portscan.ruleset.table import PatternError
from portscan.scan import scan_paths, scan_source

REPO = Path(__file__).resolve().parents[1]
KERNEL_LIB = REPO / "fixtures" / "kernel-lib"

EXPECTED_TRITON = [
    ("fastops/triton/cross_entropy.py", 4, "PS707", "error"),     # from triton.language.extra.cuda import libdevice
    ("fastops/triton/cross_entropy.py", 37, "PS970", "error"),    # kernel[grid](..., num_warps=32)
    ("fastops/triton/quant.py", 5, "PS973", "warning"),           # FP8_MAX = 448.0
    ("fastops/triton/quant.py", 11, "PS708", "error"),            # inline_asm_elementwise("cvt.rn.f16x2.f32 ...")
    ("fastops/triton/quant.py", 28, "PS970", "info"),             # under `if IS_HIP:` ... else: num_warps=32
    ("fastops/triton/softmax.py", 10, "PS970", "error"),          # triton.Config({}, num_warps=32)
]


@pytest.fixture(scope="module")
def result(rules):
    return scan_paths([KERNEL_LIB], rules)


def test_triton_findings_at_exact_lines(result) -> None:
    found = [(f.path, f.span.line, f.rule, f.severity.value) for f in result.findings
             if f.path.startswith("fastops/")]
    assert found == EXPECTED_TRITON


def test_num_warps_is_reported_at_the_number(result) -> None:
    (launch,) = [f for f in result.findings if f.rule == "PS970" and f.path.endswith("cross_entropy.py")]
    line = (KERNEL_LIB / launch.path).read_text().splitlines()[launch.span.line - 1]
    assert line[launch.span.column - 1:launch.span.end_column - 1] == "32"
    assert launch.message.startswith("`num_warps=32` asks for 32 warps")


def one(code: str):
    from portscan.ruleset.loader import load_rules
    return RuleSet([load_rules().by_code[code]])


def lines(source: str, code: str, target: Target | None = None) -> list[tuple[int, str]]:
    found = scan_source(textwrap.dedent(source), "pkg/k.py", one(code), target=target)
    return [(f.span.line, f.severity.value) for f in found]


def test_loop_and_comprehension_variables_and_locals() -> None:
    source = """\
        import triton
        configs = [triton.Config({"B": b}, num_warps=w) for b in [32, 64] for w in [4, 8, 32]]
        for warps in (8, 64):
            triton.Config({}, num_warps=warps)
        n = 32
        triton.Config({}, num_warps=n)
        triton.Config({}, num_warps=32 if big else 8)
        """
    assert lines(source, "PS970") == [(2, "error"), (3, "error"), (5, "error"), (7, "error")]


def test_small_or_computed_warp_counts_are_not_reported() -> None:
    source = """\
        import triton
        for block in [32, 64, 128]:
            triton.Config({"BLOCK": block}, num_warps=4)
        kernel[grid](x, BLOCK=1024, num_warps=16, num_stages=32)
        kernel[grid](x, num_warps=min(32, 1024 // warp_size))
        kernel[grid](x, num_warps=w)
        """
    assert lines(source, "PS970") == []


def test_vendor_branches_lower_it_to_info() -> None:
    source = """\
        import torch
        import triton
        if torch.version.hip:
            NUM_WARPS = 16
        else:
            NUM_WARPS = 32
        kernel[grid](x, num_warps=NUM_WARPS)
        backend = triton.runtime.driver.active.get_current_target().backend
        kernel[grid](x, num_warps=16 if backend == "hip" else 32)
        """
    assert lines(source, "PS970") == [(6, "info"), (9, "info")]


def test_rdna_targets_take_32_warps() -> None:
    source = "kernel[grid](x, num_warps=32)\n"
    assert lines(source, "PS970", Target(arch="gfx1100")) == [(1, "info")]
    assert lines(source, "PS970", Target(arch="gfx942")) == [(1, "error")]


def test_fp8_bound_is_off_where_e4m3_is_ocp() -> None:
    source = "import triton\nFP8_MAX = 448.0\nE4M3_MAX = 448\nFP8_MAX = 240.0\nquantize = triton.jit(quantize_fn)\n"
    assert lines(source, "PS973") == [(2, "warning"), (3, "warning")]
    assert lines(source, "PS973", Target(arch="gfx950")) == []


def test_extra_cuda_attribute_path() -> None:
    source = """\
        import triton.language as tl
        @triton.jit
        def f(x):
            return tl.extra.cuda.libdevice.tanh(x) + tl.extra.hip.libdevice.tanh(x)
        """
    assert lines(source, "PS972") == [(4, "error")]


@pytest.mark.parametrize(("table", "error"), [
    ({"kind": "keyword", "keywords": ["num_warps"]}, "match.above: missing required key"),
    ({"kind": "keyword", "keywords": ["num_warps"], "above": "16"}, "match.above: expected a number"),
    ({"kind": "keyword", "keywords": ["num warps"], "above": 16}, "match.keywords"),
])
def test_keyword_kind_is_read_strictly(table: dict, error: str) -> None:
    with pytest.raises(PatternError, match=error.replace(".", r"\.")):
        read_pattern(table)
