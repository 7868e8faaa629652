"""Precision: code that works on ROCm must not be reported as a warning or an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from portscan.model import Severity
from portscan.ruleset.schema import RuleFileError, parse_rule
from portscan.scan import scan_source

IDIOMS = Path(__file__).parent / "data" / "rocm_safe_idioms.py"


def test_rocm_safe_idioms_stay_at_info_or_below(rules) -> None:
    findings = scan_source(IDIOMS.read_text(), "rocm_safe_idioms.py", rules)
    loud = [f"{f.span.line}: {f.rule} {f.severity.value} {f.message}" for f in findings
            if f.severity is not Severity.INFO]
    assert loud == []


def test_the_idioms_file_exercises_the_guards(rules) -> None:
    """Guarded code in the file is still found (at info), so the test above is not vacuous."""
    findings = scan_source(IDIOMS.read_text(), "rocm_safe_idioms.py", rules)
    guards = {f.guard for f in findings}
    assert {"type-checking", "fallback-equivalent", "vendor-branch", "handled", "tuning", "message-only",
            "no-consumer", "format-defined"} <= guards


FP8_CAST = '''
import torch
{extra}
def quantize(w):
    scale = torch.finfo(torch.float8_e4m3fn).max / w.abs().amax()
    return (w * scale).to(torch.float8_e4m3fn), scale
'''


def test_fp8_dtype_is_a_warning_only_where_the_module_computes_with_it(rules) -> None:
    """PS503's `consumers`: the same cast is info in a module that only stores or converts
    FP8 (guard `no-consumer`) and a warning where a scaled GEMM or an FP8 library uses it."""
    def fp8(extra: str) -> set[tuple[str, str | None]]:
        text = FP8_CAST.format(extra=extra)
        return {(f.severity.value, f.guard) for f in scan_source(text, "quant.py", rules) if f.rule == "PS503"}

    assert fp8("") == {("info", "no-consumer")}
    assert fp8("mm = torch._scaled_mm") == {("warning", None)}
    assert fp8("from torchao.float8 import convert_to_float8_training as c\nc") == {("warning", None)}
    assert fp8("import triton\n@triton.jit\ndef k(): pass") == {("warning", None)}
    assert fp8("import transformer_engine.pytorch as te") == {("warning", None)}  # imported counts too


def test_an_e4m3_bound_is_a_warning_only_where_the_module_computes_in_fp8(rules) -> None:
    """PS973's `consumers`, PS503's list: InvokeAI's and DiffSynth's `FP8_E4M3_MAX = 448.0`
    scale weights stored as e4m3fn, the right bound for that checkpoint dtype (info); in a
    module with a Triton kernel or a scaled GEMM it bounds FP8 maths, 240 on MI300."""
    def bound(extra: str) -> set[tuple[str, str | None]]:
        text = f"import torch\n{extra}\nFP8_E4M3_MAX = 448.0\nq = (w / s).to(torch.float8_e4m3fn)\n"
        return {(f.severity.value, f.guard) for f in scan_source(text, "quant.py", rules) if f.rule == "PS973"}

    assert bound("") == {("info", "no-consumer")}
    assert bound("import triton\nquantize = triton.jit(quantize_fn)") == {("warning", None)}
    assert bound("y = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb)") == {("warning", None)}


def test_a_cuda_index_in_setuptools_dependency_links_is_no_finding(rules) -> None:
    """PS857's `unless_passed_as`: pip ignores `dependency_links` (since 19.0), so a CUDA
    wheel index there installs nothing; the same URL in a pip command still counts."""
    source = '''
import subprocess
from setuptools import setup

links = []
links.append("https://download.pytorch.org/whl/cu126")
subprocess.check_call(["pip", "install", "torch", "--index-url", "https://download.pytorch.org/whl/cu121"])
setup(name="pkg", dependency_links=links + ["https://download.pytorch.org/whl/cu118"])
'''
    found = [(f.span.line, f.rule) for f in scan_source(source, "setup.py", rules.select(["PS857"]))]
    assert found == [(7, "PS857")]
    helper = '''
from setuptools import setup

def parse_requirements():
    requires, links = [], []
    links.append("https://download.pytorch.org/whl/cu126")
    return requires, links

INDEX = "https://download.pytorch.org/whl/cu121"
install_requires, dependency_links = parse_requirements()
setup(name="pkg", install_requires=install_requires, dependency_links=dependency_links)
'''  # the list a helper returns, unpacked; INDEX goes elsewhere
    assert [f.span.line for f in scan_source(helper, "setup.py", rules.select(["PS857"]))] == [9]


def test_unless_passed_as_takes_keyword_names_only() -> None:
    import pytest

    from conftest import inline_rule
    from portscan.ruleset.schema import RuleFileError

    with pytest.raises(RuleFileError, match="match.unless_passed_as: 'not a name' is not a valid identifier"):
        inline_rule("XX001", {"kind": "string", "regex": "abc", "unless_passed_as": ["not a name"]})


NVFP4 = """
import torch
import triton
{header}
    scales = (blocks.abs().amax(dim=1) / 6.0).to(torch.float8_e4m3fn)
    FP8_MAX = 448.0
    return scales, FP8_MAX
"""


@pytest.mark.parametrize(("header", "guard"), [
    ("def scale_activations_nvfp4_triton(blocks):", "format-defined"),
    ("class MXFP8Quantizer:\n  def scale(self, blocks):", "format-defined"),
    ("def scale(blocks, dtype):\n  if dtype == DType.NVFP4:", "format-defined"),
    ("def scale(blocks, fmt):\n  if fmt == 'nv_fp4':", "format-defined"),
    ("def scale(blocks, dtype):\n  if dtype != DType.NVFP4:\n    pass\n  else:", None),  # `else`: not named
    ("def scale_activations_fp8(blocks):", None),  # an FP8 type of its own choosing
    # any FP4 code runs only where FP8 is OCP: MI300, the one fnuz GPU, has no FP4
    ("def scale_mxfp4(blocks):", "format-defined"),
    ("def scale_and_quant_fp4(x):", "format-defined"),
])
def test_code_named_for_a_format_that_defines_e4m3_keeps_it(rules, header: str, guard: str | None) -> None:
    """PS503 and PS973's ``formats``: NVFP4's block scales and MXFP8's elements are OCP
    E4M3 by definition, so code named for them (a def, a class, a branch testing the
    format) writes the OCP type on purpose: info (gemlite's quantizers, judged false). Any
    FP4 code is read the same way: it runs only on GPUs whose FP8 is OCP (MI300, gfx942,
    the one GPU with fnuz FP8, has no FP4), so its FP8 choices never meet fnuz (fastvideo's
    NVFP4 attention quantizers, judged false)."""
    text = NVFP4.format(header=header)
    found = {(f.rule, f.guard) for f in scan_source(text, "quant.py", rules) if f.rule in ("PS503", "PS973")}
    assert found == {("PS503", guard), ("PS973", guard)}


def test_formats_are_for_python_rules_and_lower_case_words() -> None:
    base = {"code": "XX101", "name": "x", "category": "test", "severity": "warning", "confidence": "high",
            "message": "m", "rocm": "r", "rewrite": "w", "references": ["https://example.org"],
            "bad": [{"source": "x"}], "good": [{"source": "x"}]}
    rule = parse_rule({**base, "match": {"kind": "name", "names": ["a.b"]}, "formats": ["nvfp4"]}, "t")
    assert rule.formats == ("nvfp4",)
    with pytest.raises(RuleFileError, match="only Python rules"):
        parse_rule({**base, "match": {"kind": "kernel", "regex": "x"}, "formats": ["nvfp4"]}, "t")
    with pytest.raises(RuleFileError, match="format name"):
        parse_rule({**base, "match": {"kind": "name", "names": ["a.b"]}, "formats": ["NV_FP4"]}, "t")
