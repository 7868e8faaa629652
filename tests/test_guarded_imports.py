"""Guarded imports (issue 17, items 1 and 6): a ``try``/``except ImportError`` whose
handler falls back is one step lower -- a CUDA-only import (an error) loses its feature
on ROCm and is a warning; an import of a library with a ROCm build (a warning) is info,
guard ``fallback`` -- and a handler that substitutes an equivalent is info (guard
``fallback-equivalent``) whatever the rule; the uses of a guarded import are listed under
its finding, and one import is one finding."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
from conftest import inline_rule

from portscan.model import ScanResult
from portscan.report.json import render_json
from portscan.report.sarif import render_sarif
from portscan.report.concise import finding_line
from portscan.ruleset.loader import RuleSet
from portscan.ruleset.schema import RuleFileError, parse_rule
from portscan.scan import scan_paths, scan_source
from portscan.suppress import apply, suppressions

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "guarded-features"

#: (path, line, rule, severity, guard, lines of the uses it lists)
EXPECTED = [
    ("guarded_features/layers.py", 10, "PS719", "info", "type-checking", ()),
    # `LayerNorm = nn.LayerNorm` in the handler: an equivalent; its uses are not findings
    ("guarded_features/layers.py", 15, "PS204", "info", "fallback-equivalent", (52, 53)),
    ("guarded_features/layers.py", 20, "PS204", "info", "fallback-equivalent", (54,)),  # from torch.nn import RMSNorm
    ("guarded_features/layers.py", 25, "PS204", "info", "fallback", ()),  # has_apex = False
    ("guarded_features/layers.py", 31, "PS206", "info", "fallback", ()),  # a class of its own
    ("guarded_features/layers.py", 37, "PS719", "info", "fallback", ()),  # logs, te = None
    ("guarded_features/optim.py", 5, "PS203", "info", "fallback-equivalent", (17,)),  # torch.optim.AdamW
    ("guarded_features/optim.py", 10, "PS203", "info", "fallback", (19, 21, 23)),  # FusedLAMB = None
    ("guarded_features/telemetry.py", 5, "PS602", "warning", "fallback", (14, 15, 16)),  # an error, one step down
    ("guarded_features/telemetry.py", 24, "PS719", "info", "fallback-equivalent", ()),  # only its __version__
]


def test_the_fixture_finding_by_finding(rules) -> None:
    result = scan_paths([FIXTURE], rules)
    assert result.errors == ()
    got = [(f.path, f.span.line, f.rule, f.severity.value, f.guard, tuple(line for line, _ in f.uses))
           for f in result.findings]
    assert got == EXPECTED


def _scan(source: str, rules, *codes: str):
    return scan_source(textwrap.dedent(source), "m.py", rules.select(list(codes)) if codes else rules)


@pytest.mark.parametrize("handler, severity, guard", [
    ("pynvml = None", "warning", "fallback"),
    ("pass", "warning", "fallback"),
    ("log.warning('no NVML: no GPU telemetry')", "warning", "fallback"),
    ("HAVE_NVML = False", "warning", "fallback"),
    ("def pynvml():\n        return None", "warning", "fallback"),
    ("raise RuntimeError('install pynvml')", "error", None),
])
def test_a_guarded_error_import_is_one_step_lower(rules, handler: str, severity: str, guard: str | None) -> None:
    source = f"import logging\nlog = logging.getLogger()\ntry:\n    import pynvml\nexcept ImportError:\n    {handler}\n"
    [finding] = _scan(source, rules, "PS602")
    assert (finding.severity.value, finding.guard) == (severity, guard)


@pytest.mark.parametrize("handler, severity, guard", [
    ("LayerNorm = torch.nn.LayerNorm", "info", "fallback-equivalent"),
    ("LayerNorm = nn.LayerNorm", "info", "fallback-equivalent"),
    ("from torch.nn import LayerNorm", "info", "fallback-equivalent"),
    ("import torch.nn.LayerNorm as LayerNorm", "info", "fallback-equivalent"),
    ("if OLD:\n        LayerNorm = None\n    else:\n        LayerNorm = nn.LayerNorm", "info", "fallback-equivalent"),
    # not an equivalent: the fast path is lost where ROCm/apex is not installed (one step lower)
    ("LayerNorm = None", "info", "fallback"),
    ("LayerNorm = functools.partial(nn.LayerNorm, eps=1e-6)", "info", "fallback"),
    ("class LayerNorm(nn.Module):\n        pass", "info", "fallback"),
    ("LayerNorm = nn.BatchNorm1d", "info", "fallback"),
    ("HAVE_APEX = False", "info", "fallback"),
])
def test_only_an_equivalent_substitute_makes_the_import_info(rules, handler: str, severity: str, guard: str) -> None:
    source = (f"import functools\nimport torch\nimport torch.nn as nn\ntry:\n"
              f"    from apex.normalization import FusedLayerNorm as LayerNorm\nexcept ImportError:\n    {handler}\n")
    [finding] = [f for f in _scan(source, rules) if f.rule == "PS204"]
    assert (finding.severity.value, finding.guard) == (severity, guard)


@pytest.mark.parametrize(("module", "rule", "severity"), [
    ("apex.normalization.fused_layer_norm", "PS204", "info"),  # ROCm/apex builds it: a warning unguarded
    ("flash_attn.ops.layer_norm", "PS733", "warning"),  # no ROCm build has it: an error unguarded
])
def test_a_guarded_import_is_one_step_below_what_the_rule_means(rules, module: str, rule: str, severity: str) -> None:
    """A warning import is a library with a ROCm build: guarded, it keeps the feature where
    that build is installed and runs the fallback elsewhere, as an NVIDIA machine without
    the package does (judged false on 44 guarded flash-attn/apex/xformers imports in the
    accuracy corpus). An error import is CUDA-only: guarded, its feature is lost on ROCm."""
    source = f"""
    try:
        from {module} import fused_layer_norm_affine
        has_apex = True
    except ImportError:
        has_apex = False
    """
    [finding] = _scan(source, rules)
    assert (finding.rule, finding.severity.value, finding.guard) == (rule, severity, "fallback")


@pytest.mark.parametrize(("otherwise", "severity", "guard"), [
    ("from mmcv.ops import SparseConvTensor, SparseSequential", "info", "fallback-equivalent"),
    ("from mmcv.ops import SparseConvTensor", "warning", "fallback"),  # SparseSequential is lost
    ("SparseConvTensor = SparseSequential = None", "warning", "fallback"),
    ("from .mine import SparseConvTensor, SparseSequential", "warning", "fallback"),  # not a listed equivalent
])
def test_an_availability_flag_whose_else_imports_an_equivalent(rules, otherwise: str, severity: str,
                                                               guard: str) -> None:
    """``if IS_SPCONV2_AVAILABLE: from spconv.pytorch import X else: from mmcv.ops import X``
    (mmdet3d and the projects built on it): the ``else`` binds the names as a handler
    would, so an equivalent there makes the import info, like ``except ImportError:``."""
    source = f"""
    from .layers import IS_SPCONV2_AVAILABLE
    if IS_SPCONV2_AVAILABLE:
        from spconv.pytorch import SparseConvTensor, SparseSequential
    else:
        {otherwise}
    """
    [finding] = [f for f in _scan(source, rules) if f.rule == "PS725"]
    assert (finding.severity.value, finding.guard) == (severity, guard)


@pytest.mark.parametrize(("test", "guard"), [
    ("hasattr(spconv, '__version__') and spconv.__version__ >= '2.0.0'", "fallback-equivalent"),
    ("spconv.__version__ >= '2.0.0'", "fallback-equivalent"),
    ("hasattr(spconv, 'pytorch') and spconv.pytorch.SparseConvTensor", "fallback"),  # uses it
])
def test_hasattr_on_an_optional_import_only_probes_it(rules, test: str, guard: str) -> None:
    """``try: import spconv / except ImportError: FLAG = False / else: if hasattr(spconv,
    '__version__') and spconv.__version__ >= '2.0.0': ...``: asking for an attribute, like
    reading the version, uses no feature of the module."""
    source = f"""
    try:
        import spconv
    except ImportError:
        IS_SPCONV2_AVAILABLE = False
    else:
        if {test}:
            IS_SPCONV2_AVAILABLE = True
        else:
            IS_SPCONV2_AVAILABLE = False
    """
    [finding] = [f for f in _scan(source, rules) if f.rule == "PS725"]
    assert finding.guard == guard


@pytest.mark.parametrize(("use", "severity", "guard"), [
    ("if te is not None and isinstance(module, te.LayerNormMLP):\n            return 1", "info", "fallback-equivalent"),
    ("if isinstance(module, (te.Linear, te.LayerNorm)):\n            return 1", "info", "fallback-equivalent"),
    ("if te is not None:\n            return te.Linear(8, 8)", "info", "fallback"),  # builds with it: one step lower
    ("return isinstance(module, te.Linear) and te.fp8_autocast()", "info", "fallback"),
])
def test_an_import_only_tested_against_loses_nothing(rules, use: str, severity: str, guard: str) -> None:
    """No object of a type from a missing module exists: an optional import used only as
    the type of ``isinstance``/``issubclass`` (and tested for None) is a probe, like one
    read only for ``__version__`` (llm-foundry's param_init_fns)."""
    source = f"""
    try:
        import transformer_engine.pytorch as te
    except ImportError:
        te = None


    def init(module):
        {use}
    """
    [finding] = [f for f in _scan(source, rules) if f.rule == "PS719"]
    assert (finding.severity.value, finding.guard) == (severity, guard)


@pytest.mark.parametrize(("after", "severity", "guard"), [
    ("del flash_attn_func, flash_attn_varlen_func", "info", "fallback-equivalent"),
    ("del flash_attn_func", "info", "fallback"),  # flash_attn_varlen_func stays bound, maybe used later
    ("out = flash_attn_func(q, k, v)", "info", "fallback"),  # calls it: one step lower
])
def test_an_import_deleted_at_once_is_a_probe(rules, after: str, severity: str, guard: str) -> None:
    """``from flash_attn import flash_attn_func`` then ``del flash_attn_func`` only checks that
    the package imports (llm-foundry's ``__init__``): nothing is lost when it does not."""
    source = f"""
    try:
        from flash_attn import flash_attn_func, flash_attn_varlen_func
        {after}
    except ImportError:
        pass
    """
    found = {(f.severity.value, f.guard) for f in _scan(source, rules) if f.rule == "PS701"}
    assert found == {(severity, guard)}


@pytest.mark.parametrize(("handler", "guard"), [
    ("LN = torch.nn.LayerNorm", "fallback-equivalent"),
    ("LN = None", "fallback"),  # not substituted: one step lower
])
def test_a_local_the_try_picks_the_fused_class_into(rules, handler: str, guard: str) -> None:
    """``LN = apex.normalization.FusedLayerNorm`` in the ``try``, ``LN = torch.nn.LayerNorm``
    in the handler: the imports' only use picks a class that has an equivalent, so both
    imports (the general apex rule's too) lose nothing (modelscope's vldoc)."""
    source = f"""
    import torch
    try:
        import apex
        import apex.normalization
        LN = apex.normalization.FusedLayerNorm
    except ImportError:
        {handler}
    norm = LN(8)
    """
    found = {f.rule: f.guard for f in _scan(source, rules) if f.rule in ("PS201", "PS204")}
    assert found == {"PS201": guard, "PS204": guard}


def test_another_use_of_the_module_keeps_the_alias_import_loud(rules) -> None:
    source = """
    import torch
    try:
        import apex
        import apex.normalization
        LN = apex.normalization.FusedLayerNorm
    except ImportError:
        LN = torch.nn.LayerNorm
    def step(model, opt):
        return apex.amp.initialize(model, opt)
    """
    found = {f.rule: f.guard for f in _scan(source, rules) if f.rule in ("PS201", "PS204")}
    assert found == {"PS201": "fallback", "PS204": "fallback"}  # not fallback-equivalent


def test_type_checking_and_vendor_branches_stay_info(rules) -> None:
    source = """
    from typing import TYPE_CHECKING
    import torch
    if TYPE_CHECKING:
        import pynvml
    if torch.version.hip is None:
        try:
            import pynvml
        except ImportError:
            pynvml = None
    """
    assert [(f.span.line, f.severity.value, f.guard) for f in _scan(source, rules, "PS602")] == [
        (5, "info", "type-checking"), (8, "info", "vendor-branch")]


def test_uses_of_a_name_the_handler_rebinds_are_not_findings(rules) -> None:
    source = """
    import torch
    try:
        from apex.optimizers import FusedAdam
    except ImportError:
        FusedAdam = None

    def build(params):
        return FusedAdam(params, lr=1e-3)

    def build_again(params):
        return FusedAdam(params, lr=1e-4)
    """
    findings = _scan(source, rules)
    assert [(f.rule, f.span.line, f.severity.value, f.uses) for f in findings] == [
        ("PS203", 4, "info", ((9, 12), (12, 12)))]


def test_a_use_without_an_import_finding_is_lowered(rules) -> None:
    """With only the name rule selected, the use of a name the handler rebinds is a
    use of a fallback: one step lower, and not rewritten by a fix."""
    source = ("try:\n    from apex.optimizers import FusedAdam\nexcept ImportError:\n    FusedAdam = None\n"
              "opt = FusedAdam(p)\n")
    [finding] = _scan(source, rules, "PS209")
    assert (finding.span.line, finding.severity.value, finding.guard, finding.fix) == (5, "info", "fallback", None)


def test_without_a_fallback_the_uses_stay_findings(rules) -> None:
    source = ("from apex.optimizers import FusedAdam\n"
              "a = FusedAdam(p)\n"
              "b = FusedAdam(q)\n")
    findings = _scan(source, rules)
    assert [(f.rule, f.span.line) for f in findings] == [("PS203", 1), ("PS209", 2), ("PS209", 3)]
    assert all(f.fix == "unsafe" for f in findings if f.rule == "PS209")  # each fix keeps its marker


def test_repeated_uses_of_one_import_are_one_finding() -> None:
    """A rule without a fix on many uses of one CUDA-only import: one finding, at the
    first use, listing the others."""
    module = inline_rule("XX719", {"kind": "import", "modules": ["transformer_engine"]})
    linear = inline_rule("XX720", {"kind": "name", "names": ["transformer_engine.pytorch.Linear"]})
    source = ("import transformer_engine.pytorch as te\nimport torch\n"
              "a = te.Linear(1, 2)\nb = te.Linear(2, 3)\nc = torch.nn.Linear(3, 4)\nd = te.Linear(4, 5)\n")
    findings = scan_source(source, "m.py", RuleSet([module, linear]))
    assert [(f.rule, f.span.line, f.uses) for f in findings] == [
        ("XX719", 1, ()), ("XX720", 3, ((4, 5), (6, 5)))]


def test_several_rules_on_one_import_collapse_into_the_most_specific(rules) -> None:
    """Without ``supersedes`` between them, the rule naming the longer module wins."""
    loose = RuleSet(dataclasses.replace(r, supersedes=()) for r in rules.select(["PS201", "PS202", "PS204"]).rules)
    source = ("from apex import amp\nfrom apex.normalization import FusedLayerNorm\nimport apex\n"
              "import pynvml, apex.amp\n")
    got = [(f.span.line, f.rule, f.uses) for f in scan_source(source, "m.py", loose)]
    # line 4 imports apex.amp again: a use of line 1's finding
    assert got == [(1, "PS202", ((4, 16),)), (2, "PS204", ()), (3, "PS201", ())]
    both = RuleSet([*loose.rules, rules.by_code["PS602"]])
    assert [(f.span.line, f.rule) for f in scan_source("import pynvml, apex.amp\n", "m.py", both)] == [
        (1, "PS602"), (1, "PS202")]  # different modules on one line are both kept


GUARDED_NVML = """
try:
    import pynvml
except ImportError:
    pynvml = None

def used(i):
    pynvml.nvmlInit()
    return pynvml.nvmlDeviceGetHandleByIndex(i)  # noqa: PS602
"""


def test_a_comment_on_a_use_silences_that_use(rules) -> None:
    source = textwrap.dedent(GUARDED_NVML)
    [finding] = scan_source(source, "m.py", rules.select(["PS602"]))
    assert finding.uses == ((8, 5), (9, 12))
    kept, unused = apply([finding], suppressions(source, "m.py", "python"))
    assert [f.uses for f in kept] == [((8, 5),)] and unused == []
    silenced = source.replace("import pynvml\n", "import pynvml  # portscan: ignore[PS602]\n")
    kept, _ = apply(scan_source(silenced, "m.py", rules.select(["PS602"])), suppressions(silenced, "m.py", "python"))
    assert kept == ()  # the import's comment silences the finding, uses and all


def test_the_uses_in_every_format(rules) -> None:
    source = textwrap.dedent(GUARDED_NVML).replace("  # noqa: PS602", "")
    findings = scan_source(source, "m.py", rules.select(["PS602"]))
    result = ScanResult(root="/r", files_scanned=1, findings=findings, scanned=("m.py",))
    [item] = json.loads(render_json(result))["findings"]
    assert item["uses"] == [{"line": 8, "column": 5}, {"line": 9, "column": 12}]
    assert item["guard"] == "fallback" and item["severity"] == "warning"
    [sarif] = json.loads(render_sarif(result, rules, "0"))["runs"][0]["results"]
    assert [r["physicalLocation"]["region"] for r in sarif["relatedLocations"]] == [
        {"startLine": 8, "startColumn": 5}, {"startLine": 9, "startColumn": 12}]
    assert finding_line(findings[0]).endswith("(guarded: fallback) (+2 uses: lines 8, 9)")


def test_equivalents_are_for_import_rules_and_dotted_names() -> None:
    base = {"code": "XX101", "name": "x", "category": "test", "severity": "warning", "confidence": "high",
            "message": "m", "rocm": "r", "rewrite": "w", "references": ["https://example.org"],
            "bad": [{"source": "x"}], "good": [{"source": "x"}]}
    rule = parse_rule({**base, "match": {"kind": "import", "modules": ["apex"]},
                       "equivalents": ["torch.nn.LayerNorm"]}, "t")
    assert rule.equivalents == ("torch.nn.LayerNorm",)
    with pytest.raises(RuleFileError, match="only import rules"):
        parse_rule({**base, "match": {"kind": "name", "names": ["a.b"]}, "equivalents": ["torch.nn.LayerNorm"]}, "t")
    with pytest.raises(RuleFileError, match="dotted"):
        parse_rule({**base, "match": {"kind": "import", "modules": ["apex"]}, "equivalents": ["not a name"]}, "t")


def test_a_guarded_star_import_lists_the_free_names_it_binds(rules) -> None:
    """`from pynvml import *` in a try: the names the module uses but never binds
    (`nvmlInit()`) come from it and are listed as its uses; builtins and names the
    module binds are not; with two star imports nothing says which one binds a name."""
    source = textwrap.dedent('''\
        import time
        try:
            from pynvml import *
        except ImportError:
            pass

        def gpu_names(count):
            nvmlInit()
            handle = nvmlDeviceGetHandleByIndex(0)
            print(len(str(handle)), time.time(), count)
            return nvmlDeviceGetName(handle)
        ''')
    (finding,) = [f for f in scan_source(source, "solver.py", rules) if f.rule == "PS602"]
    assert (finding.span.line, finding.severity.value, finding.guard) == (3, "warning", "fallback")
    assert [u[0] for u in finding.uses] == [8, 9, 11]
    two = source.replace("import time\n", "import time\nfrom os.path import *\n")
    (finding,) = [f for f in scan_source(two, "solver.py", rules) if f.rule == "PS602"]
    assert finding.uses == ()


@pytest.mark.parametrize(("module", "rule"), [
    ("flash_attn_interface", "PS702"), ("flash_attn.cute", "PS703"), ("deep_gemm", "PS724")])
def test_a_guarded_import_of_a_library_for_the_newest_nvidia_gpus_is_info(rules, module: str, rule: str) -> None:
    """FlashAttention-3 (Hopper), FA4 and DeepGEMM are absent on most NVIDIA GPUs too: a
    project that guards them runs without them on every other GPU (the rule's
    ``guarded_severity``); unguarded they stay errors."""
    guarded = f"try:\n    import {module}\n    HAS = True\nexcept ImportError:\n    HAS = False\n"
    [finding] = [f for f in _scan(guarded, rules) if f.rule == rule]
    assert (finding.severity.value, finding.guard) == ("info", "fallback")
    [finding] = [f for f in _scan(f"import {module}\n", rules) if f.rule == rule]
    assert (finding.severity.value, finding.guard) == ("error", None)


def test_guarded_severity_is_for_import_rules_and_below_their_own() -> None:
    base = {"code": "XX101", "name": "x", "category": "test", "severity": "error", "confidence": "high",
            "message": "m", "rocm": "r", "rewrite": "w", "references": ["https://example.org"],
            "bad": [{"source": "x"}], "good": [{"source": "x"}]}
    rule = parse_rule({**base, "match": {"kind": "import", "modules": ["fa3"]}, "guarded_severity": "info"}, "t")
    assert rule.guarded_severity is not None and rule.guarded_severity.value == "info"
    with pytest.raises(RuleFileError, match="only import rules"):
        parse_rule({**base, "match": {"kind": "name", "names": ["a.b"]}, "guarded_severity": "info"}, "t")
    with pytest.raises(RuleFileError, match="below"):
        parse_rule({**base, "severity": "warning", "match": {"kind": "import", "modules": ["fa3"]},
                    "guarded_severity": "warning"}, "t")


def test_an_import_under_a_rocm_aware_availability_probe_is_guarded(rules) -> None:
    """transformers' ``is_flash_attn_2_available()`` accepts ROCm builds of flash-attn:
    under it the import is only tried where it works, like one in a ``try``."""
    source = """
    from transformers.utils import is_flash_attn_2_available, is_torch_available
    from . import utils

    if is_flash_attn_2_available():
        from flash_attn import flash_attn_func
    if is_torch_available() and utils.is_flash_attn_greater_or_equal_2_10():
        from flash_attn.bert_padding import pad_input
    if is_torch_available():
        from flash_attn import flash_attn_varlen_func
    """
    assert [(f.span.line, f.severity.value, f.guard) for f in _scan(source, rules, "PS701")] == [
        (6, "info", "fallback"), (8, "info", "fallback"), (10, "warning", None)]


def test_an_import_under_a_presence_flag_for_its_package_is_guarded(rules) -> None:
    """``HAS_FLASH_ATTN`` is what a probe's ``try: import flash_attn`` sets: the import
    under it is only tried where the package imported."""
    source = """
    from .globals import HAS_FLASH_ATTN, USE_FLASH_ATTN, env_info
    from lightning_utilities.core.imports import package_available

    transformer_engine_available = package_available("transformer_engine")
    if HAS_FLASH_ATTN:
        from flash_attn import flash_attn_func
    if env_info["has_flash_attn"] and world_size > 1:
        from flash_attn.bert_padding import pad_input
    if transformer_engine_available:
        import transformer_engine.pytorch as te
    if not HAS_FLASH_ATTN:
        from flash_attn import flash_attn_varlen_func
    if USE_FLASH_ATTN:
        from flash_attn.layers.rotary import apply_rotary_emb
    if HAS_FLASH_ATTN:
        import pynvml
    """
    found = [(f.span.line, f.rule, f.severity.value, f.guard) for f in _scan(source, rules)
             if f.rule in ("PS701", "PS719", "PS316", "PS602")]
    assert found == [
        (7, "PS701", "info", "fallback"), (9, "PS701", "info", "fallback"), (11, "PS719", "info", "fallback"),
        # negated, a choice, another package's flag: as loud as ever
        (13, "PS701", "warning", None), (15, "PS701", "warning", None), (17, "PS602", "error", None)]


def test_an_unguarded_cuda_only_import_lists_its_uses(rules) -> None:
    """One finding per import, with the places its names are used (issue 17, item 6):
    attribute uses, and the names a ``from`` import binds."""
    source = """
    import pynvml
    from pynvml import nvmlDeviceGetCount, nvmlInit
    from numba import cuda

    def count():
        nvmlInit()
        return nvmlDeviceGetCount()

    def memory(i):
        return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i))

    @cuda.jit
    def add(a, b):
        i = cuda.grid(1)
        a[i] += b[i]
    """
    found = {(f.span.line, f.rule): [u[0] for u in f.uses] for f in _scan(source, rules)
             if f.rule in ("PS602", "PS712")}
    assert found == {(2, "PS602"): [11, 11], (3, "PS602"): [7, 8], (4, "PS712"): [13, 15]}


def test_a_read_of_the_modules_metadata_is_no_use(rules) -> None:
    """``trt.__version__`` works wherever ``import tensorrt`` did (ultralytics checks it
    before building an engine): only ``trt.Builder`` is a use of the library."""
    source = """
    import tensorrt as trt

    def export(onnx):
        check_version(trt.__version__, ">=7.0.0")
        major = int(trt.__version__.split(".")[0])
        builder = trt.Builder(trt.Logger())
    """
    found = {(f.span.line, f.rule): [u[0] for u in f.uses] for f in _scan(source, rules) if f.rule == "PS101"}
    assert found == {(2, "PS101"): [7, 7]}


def test_an_exception_type_a_handler_catches_is_no_use(rules) -> None:
    """``except pynvml.NVMLError:`` is where a failure on ROCm is caught, not a failure."""
    source = """
    import pynvml
    from pynvml import NVMLError

    def used_memory():
        try:
            pynvml.nvmlInit()
        except (OSError, pynvml.NVMLError):
            return 0
        try:
            return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used
        except NVMLError:
            return 0
    """
    found = {(f.span.line, f.rule): [u[0] for u in f.uses] for f in _scan(source, rules) if f.rule == "PS602"}
    assert found == {(2, "PS602"): [7, 11, 11], (3, "PS602"): []}


@pytest.mark.parametrize(("path", "guard"), [
    ("lmcache/integration/tensorrt_llm/tensorrt_adapter.py", "integration"),
    ("pkg/sources/trt_llm/driver.py", None),  # not the module's name
    ("pkg/sources/TensorRT-LLM/driver.py", "integration"),  # case and dashes aside
    ("lmcache/integration/adapter.py", None),
    ("tensorrt_llm_adapter.py", None),  # a module's own name is not a folder
    ("fastops/tensorrt_llm/export.py", None),  # the project's own code that uses it, no adapters folder
])
def test_an_adapter_in_a_folder_named_for_its_library_is_info(rules, path: str, guard: str | None) -> None:
    """``integration/tensorrt_llm/adapter.py`` importing ``tensorrt_llm`` is the project's
    connector for that library, loaded by a TensorRT-LLM process: where TensorRT-LLM
    does not run, neither does it (LMCache's and transformer-lens's adapters, judged false)."""
    source = "import tensorrt_llm\nfrom tensorrt_llm.llmapi import LLM\n"
    found = {(f.rule, f.guard) for f in scan_source(source, path, rules) if f.rule == "PS107"}
    assert found == {("PS107", guard)}


def test_a_folder_named_for_the_platform_adapts_no_library(rules) -> None:
    """``devices/cuda/utils.py`` importing cuda-python's ``cuda`` is the project's CUDA
    platform code, which ROCm may share: it keeps its severity."""
    source = "from cuda import cudart\nerr, = cudart.cudaDeviceSynchronize()\n"
    [finding] = [f for f in scan_source(source, "lmcache/v1/platform/devices/cuda/utils.py", rules)
                 if f.rule == "PS714"]
    assert finding.guard is None


@pytest.mark.parametrize(("flag", "guard"), [
    ("HAS_FLASH_ATTN_HOPPER", "fallback"),
    ("has_flash_attn_3", "fallback"),
    ("FA3_AVAILABLE", "fallback"),
    ("USE_FA3", None),  # a choice, not a presence flag
    ("HAS_TRITON", None),  # another library's flag
])
def test_a_presence_flag_may_call_the_library_by_another_name(rules, flag: str, guard: str | None) -> None:
    """FlashAttention-3's module is ``flash_attn_interface``, but the flags its probes set
    say ``HAS_FLASH_ATTN_HOPPER`` or ``has_flash_attn_3`` (yunchang, xfuser): PS702's
    ``flag_names`` let them guard its import as ``if HAS_FLASH_ATTN:`` guards flash-attn's."""
    source = f"""
    from .probes import {flag}
    if {flag}:
        from flash_attn_interface import flash_attn_func as flash3_attn_func
    else:
        flash3_attn_func = None
    """
    [finding] = [f for f in _scan(source, rules) if f.rule == "PS702"]
    assert finding.guard == guard


def test_reading_a_constant_of_a_cuda_only_module_is_no_use_of_its_own(rules) -> None:
    """``trt.DataType.HALF`` and ``pynvml.NVML_CLOCK_SM`` read a constant: once the import
    worked they cannot fail, so they are not listed as uses (optimum-nvidia's dtype
    table); a call, and a lower-case attribute, are."""
    source = textwrap.dedent("""\
        import tensorrt as trt

        def to_trt(name):
            if name == "fp16":
                return trt.DataType.HALF
            return trt.float16

        logger = trt.Logger(trt.Logger.WARNING)
        """)
    found = [f for f in scan_source(source, "lang.py", rules) if f.rule == "PS101"]
    assert [(f.span.line, [line for line, _ in f.uses]) for f in found] == [(1, [6, 8])]


@pytest.mark.parametrize(("statement", "rule", "severity", "uses"), [
    # MONAI's helper: (module or stand-in, flag); a version positional, a name keyword
    ('trt, trt_ok = optional_import("tensorrt", "8.5.3")', "PS101", "warning", (8, 9)),
    ('torch_tensorrt, _ = optional_import("torch_tensorrt")', "PS102", "warning", (8, 9)),
    # mmengine's: the module or None
    ('trt = try_import("tensorrt")', "PS101", "warning", (8, 9)),
    ('trt = utils.try_import(module="tensorrt")', "PS101", "warning", (8, 9)),
    # a library with a ROCm build is info guarded, as behind a `try`
    ('xformers = try_import("xformers")', "PS704", "info", ()),
])
def test_an_optional_import_helper_is_a_guarded_import_with_its_uses(rules, statement: str, rule: str,
                                                                     severity: str, uses: tuple[int, ...]) -> None:
    """``optional_import("tensorrt")`` imports the module or binds a stand-in, as a
    ``try`` whose handler falls back does: one step lower, at the module's string, with
    the uses of the name it binds listed (MONAI's ``convert_to_trt`` compiles with
    Torch-TensorRT through such a binding)."""
    local = statement.split("=")[0].split(",")[0].strip()
    source = (f"from mmengine import utils\nfrom mmengine.utils import try_import\n"
              f"from monai.utils import optional_import\n{statement}\n\n\ndef build(model, logger):\n"
              f"    first = {local}.Builder(logger)\n    return {local}.compile(model, first)\n")
    [finding] = [f for f in _scan(source, rules) if f.rule == rule]
    assert (finding.span.line, finding.severity.value, finding.guard) == (4, severity, "fallback")
    assert tuple(line for line, _ in finding.uses) == uses


@pytest.mark.parametrize("statement", [
    '_, has_apex = optional_import("apex.normalization", name="FusedLayerNorm")',  # binds only a flag
    'trt = load_plugin("tensorrt")',  # not an import helper
    'trt = optional_import(plugin_name)',  # no module named
])
def test_what_an_optional_import_helper_call_is_not(rules, statement: str) -> None:
    source = f"from helpers import load_plugin, optional_import\nplugin_name = 'x'\n{statement}\n"
    found = [f for f in scan_source(source, "mypkg/build.py", rules) if f.rule in ("PS101", "PS204", "PS206")]
    assert found == []


def test_an_optional_import_helper_names_the_class_it_imports(rules) -> None:
    """``name=`` imports a name from the module, as ``from module import name`` does."""
    source = ('from monai.utils import optional_import\n'
              'norm, _ = optional_import("apex.normalization", name="FusedLayerNorm")\n')
    [finding] = [f for f in scan_source(source, "m.py", rules) if f.rule == "PS204"]
    assert (finding.span.line, finding.guard) == (2, "fallback")
    assert finding.message.startswith("`apex.normalization.FusedLayerNorm`")


def test_a_module_imported_again_lists_the_uses_of_both_imports(rules) -> None:
    """``import pynvml`` in ``__init__`` and again in another method: one finding at the
    first, the second import and what each one's name is used for in its ``uses``
    (Composer's system-metrics callback: the NVML reads of the second were lost)."""
    source = """
        import torch


        class Monitor:
            def __init__(self):
                if torch.cuda.is_available():
                    import pynvml
                    pynvml.nvmlInit()

            def read(self):
                import pynvml
                handle = pynvml.nvmlDeviceGetHandleByIndex(0)
                return pynvml.nvmlDeviceGetPowerUsage(handle)
        """
    [finding] = [f for f in _scan(source, rules) if f.rule == "PS602"]
    assert finding.span.line == 8
    assert [line for line, _ in finding.uses] == [9, 12, 13, 14]
