"""Precision guards from the accuracy corpus's trap labels: a handled ``None``, a
capability test that only picks tile sizes, an accepted-dtype list, an op's metadata
read. Each case next to one that must stay loud, so neither can pass vacuously."""

from __future__ import annotations

import textwrap

import pytest

from portscan.scan import scan_source


def found(rules, source: str, path: str = "mod.py") -> list[tuple[int, str, str, str | None]]:
    findings = scan_source(textwrap.dedent(source), path, rules)
    return sorted((f.span.line, f.rule, f.severity.value, f.guard) for f in findings)


@pytest.mark.parametrize("handler, expected", [
    ("except:\n    v = None", ("info", "handled")),
    ("except AttributeError:\n    v = None", ("info", "handled")),
    ("except (TypeError, AttributeError) as exc:\n    v = None", ("info", "handled")),
    ("except Exception:\n    v = None", ("info", "handled")),
    # catching something else: the None failure escapes (a fallback, one step lower)
    ("except ImportError:\n    v = None", ("warning", "fallback")),
    # re-raising: nothing copes with ROCm
    ("except AttributeError:\n    raise ValueError('no CUDA version')", ("error", None)),
])
def test_a_handler_that_catches_the_none_failure_makes_it_info(rules, handler, expected) -> None:
    source = "import torch\ntry:\n    v = torch.version.cuda.split('.')\n" + handler + "\n"
    assert [(s, g) for _, rule, s, g in found(rules, source) if rule == "PS401"] == [expected]


def test_handled_needs_the_rule_to_declare_what_it_raises(rules) -> None:
    """A bare ``except`` around an apex import is a fallback (the feature is lost), not handled."""
    source = """
        try:
            from apex.optimizers import FusedAdam
        except:
            FusedAdam = None
        """
    assert {g for *_, g in found(rules, source)} == {"fallback"}


TILES = """
    import torch
    CAP = torch.cuda.get_device_capability()

    def tiles(head_dim):
        if CAP[0] >= 9:
            if head_dim <= 256:
                BLOCK_M, BLOCK_N = (128, 64)
            else:
                BLOCK_M, BLOCK_N = (32, 64)
        elif CAP[0] >= 8:
            BLOCK_M, BLOCK_N = (128, 128)
        else:
            BLOCK_M, BLOCK_N = (64, 64) if head_dim <= 128 else (32, 32)
        num_warps = 8 if CAP >= (8, 0) else 4
        return BLOCK_M, BLOCK_N, num_warps
    """


def test_capability_tests_that_only_pick_numbers_are_tuning(rules) -> None:
    assert found(rules, TILES) == [(6, "PS502", "info", "tuning"), (11, "PS501", "info", "tuning"),
                                   (15, "PS501", "info", "tuning")]


@pytest.mark.parametrize("branch", [
    ["from flash_attn_interface import flash_attn_func", "BLOCK = 128"],  # a code path
    ["BLOCK = pick_block(head_dim)"],  # a value from elsewhere
    ["BLOCK = 128", "USE_TMA = True"],  # a switch, not a number
])
def test_a_branch_doing_more_than_numbers_keeps_the_gate_loud(rules, branch) -> None:
    source = "\n".join(["import torch", "def tiles(head_dim):",
                        "    if torch.cuda.get_device_capability()[0] >= 9:",
                        *("        " + line for line in branch),
                        "    else:", "        BLOCK = 64", "    return BLOCK", ""])
    gate = [(s, g) for line, rule, s, g in found(rules, source) if rule == "PS502"]
    assert gate == [("error", None)]


def test_a_compute_dtype_choice_is_tuning_but_an_fp8_one_is_not(rules) -> None:
    """bf16/fp16/fp32 run on every GPU ROCm supports: choosing among them by capability
    picks speed (xinference's cogvlm2); choosing an OCP FP8 dtype picks a format MI300
    lacks."""
    source = """
        import torch
        DTYPE = torch.bfloat16 if torch.cuda.get_device_capability()[0] >= 8 else torch.float16
        if torch.cuda.get_device_capability()[0] >= 8:
            compute = torch.bfloat16
        else:
            compute = torch.float32
        FP8 = torch.float8_e4m3fn if torch.cuda.get_device_capability()[0] >= 9 else torch.bfloat16
        """
    gates = [(line, s, g) for line, rule, s, g in found(rules, source) if rule in ("PS501", "PS502")]
    assert gates == [(3, "info", "tuning"), (4, "info", "tuning"), (8, "error", None)]


def test_the_dtypes_a_test_runs_are_a_tuning_choice(rules) -> None:
    """``dtypes += [torch.float16, torch.bfloat16]`` under ``major >= 8`` only widens the
    dtypes a test tries, all of which ROCm GPUs run (cuequivariance's tests); adding an
    FP8 dtype, or anything else, keeps the gate loud."""
    source = """
        import torch
        data_types = [torch.float32, torch.float64]
        if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:
            data_types += [torch.float16, torch.bfloat16]
        if torch.cuda.get_device_capability()[0] >= 8:
            data_types += [torch.float8_e4m3fn]
        if torch.cuda.get_device_capability()[0] >= 8:
            data_types += [ops.fused_float16]
        """
    gates = [(line, s, g) for line, rule, s, g in found(rules, source) if rule == "PS501"]
    assert gates == [(4, "info", "tuning"), (6, "warning", None), (8, "warning", None)]


def test_only_ones_and_zeros_are_a_switch_not_a_tuning_choice(rules) -> None:
    source = """
        import torch
        USE_TMA = 1 if torch.cuda.get_device_capability()[0] >= 9 else 0
        STAGES = 1 if torch.cuda.get_device_capability()[0] >= 9 else 3
        """
    assert [(line, s, g) for line, rule, s, g in found(rules, source) if rule == "PS502"] == [
        (3, "error", None), (4, "info", "tuning")]


def test_a_capability_test_that_only_logs_is_message_only(rules) -> None:
    """Issue 17: no warning for capability values used only in log messages; a branch that
    also returns or assigns something decides what runs and stays loud."""
    source = """
        import logging
        import torch
        major, _ = torch.cuda.get_device_capability()
        if major >= 8:
            logging.info("bf16 is supported")
        if major >= 9:
            print("Hopper")
        else:
            pass
        if major >= 8:
            logging.info("using bf16")
            dtype = torch.bfloat16
        if major >= 9:
            parser.error("Hopper is not supported yet")
        """
    gates = [(line, rule, s, g) for line, rule, s, g in found(rules, source) if rule in ("PS501", "PS502")]
    assert gates == [(5, "PS501", "info", "message-only"), (7, "PS502", "info", "message-only"),
                     (11, "PS501", "warning", None), (14, "PS502", "error", None)]


@pytest.mark.parametrize("branch, expected", [
    ('v = "ROCm " + torch.version.hip', ("info", "vendor-branch")),
    ('raise RuntimeError("not supported on AMD GPUs")', ("info", "vendor-branch")),
    ('v = f"HIP {torch.version.hip}"', ("info", "vendor-branch")),
    ('use_bf16 = False', ("warning", None)),
])
def test_a_cuda_test_whose_branch_names_rocm_is_a_dispatch(rules, branch, expected) -> None:
    source = "import torch\nif torch.version.cuda is None:\n    " + branch + "\n"
    (check,) = [(s, g) for line, rule, s, g in found(rules, source) if rule == "PS402"]
    assert check == expected


def test_a_device_name_table_of_numbers_is_no_tuning_choice(rules) -> None:
    """Peak FLOPs keyed on NVIDIA names: AMD falls through to the default, a wrong number."""
    source = """
        import torch
        name = torch.cuda.get_device_name()
        flops = float("inf")
        if "H100" in name:
            flops = 989e12
        elif "A100" in name:
            flops = 312e12
        """
    assert {(s, g) for _, rule, s, g in found(rules, source) if rule == "PS504"} == {("warning", None)}


def test_an_accepted_dtype_list_only_tested_against_is_no_choice(rules) -> None:
    source = """
        import torch
        SUPPORTED = (torch.int8, torch.float8_e4m3fn)
        CHOSEN = (torch.float8_e4m3fn, torch.bfloat16)

        def check(dtype):
            if isinstance(dtype, SUPPORTED) or dtype in SUPPORTED:
                return CHOSEN[0]
            raise ValueError(f"{dtype} not in {SUPPORTED}")
        """
    assert [(line, rule) for line, rule, *_ in found(rules, source)] == [(4, "PS503")]


def test_reading_an_xformers_ops_metadata_forces_nothing(rules) -> None:
    source = """
        from xformers.ops.fmha import MemoryEfficientAttentionCutlassOp, memory_efficient_attention
        ok = all(bias in op.SUPPORTED_ATTN_BIAS_TYPES for op in MemoryEfficientAttentionCutlassOp)
        out = memory_efficient_attention(q, k, v, op=MemoryEfficientAttentionCutlassOp)
        """
    assert [line for line, rule, *_ in found(rules, source) if rule == "PS705"] == [4]


def test_a_typed_kernel_passed_to_func_set_attribute(rules) -> None:
    source = """
        void launch(int smem) {
          cudaFuncSetAttribute(kernel<Traits>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
          cudaFuncSetAttribute((const void*)kernel<Traits>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        }
        """
    assert [(line, s) for line, rule, s, _ in found(rules, source, "csrc/k.cu") if rule == "PS934"] == [(3, "error")]


def test_a_capability_cached_in_a_global_is_followed_and_its_none_check_is_not_a_gate(rules) -> None:
    """``global CAP; CAP = get_device_capability()`` in a helper stores the module's CAP:
    its tests elsewhere are capability gates; ``CAP is None`` (the cache check) is none."""
    source = """
        import torch
        _CAP = None

        def _capability():
            global _CAP
            if _CAP is None:
                _CAP = torch.cuda.get_device_capability()
            return _CAP

        def kernel_meta(head_dim):
            _capability()
            if _CAP[0] < 9:
                return meta_sm8x(head_dim)
            return meta_sm9x(head_dim)
        """
    assert [(line, rule, s) for line, rule, s, _ in found(rules, source)] == [(13, "PS502", "error")]


@pytest.mark.parametrize("test, reported", [
    # every AMD GPU answers as an NVIDIA GPU older than Blackwell: the older path
    ("cap != (10, 0)", False),
    ("torch.cuda.get_device_capability() != (10, 0)", False),
    ("cap[0] == 8", False),
    ("major * 10 + minor != 100", False),
    ("props.major == 7", False),
    # some AMD GPU answers otherwise: MI250 (9, 0), RDNA2 (10, 3), RDNA3 (11, 0), RDNA4 (12, 0)
    ("cap == (9, 0)", True),
    ("cap < (10, 0)", True),
    ("cap >= (8, 0)", True),
    ("cap in [(10, 0), (10, 3)]", True),
    ("cap[0] != 10", True),
    ("cap[0] == 12", True),
    ("major * 10 + minor >= 90", True),
    ("props.major >= 8", True),
    # a minor, or a value that is no literal, is not evaluated
    ("cap[1] == 0", True),
    ("cap != SM100", True),
])
def test_a_capability_test_that_answers_amd_gpus_like_older_nvidia_ones_is_no_gate(rules, test, reported) -> None:
    source = f"""
        import torch

        SM100 = (10, 0)
        cap = torch.cuda.get_device_capability()
        major, minor = cap
        props = torch.cuda.get_device_properties(0)
        if {test}:
            ATTENTION = "flash"
        """
    rules_there = {rule for line, rule, s, _ in found(rules, source) if line == 8 and s != "info"}
    assert bool(rules_there & {"PS501", "PS502", "PS506"}) is reported, rules_there


def test_a_try_around_a_text_test_copes_with_nothing(rules) -> None:
    """``"CUDA out of memory" not in str(e)`` is false on ROCm whatever handler surrounds
    it (nothing raises), so no ``fallback`` guard lowers it; a call that raises on ROCm in
    the same ``try`` is still lowered."""
    source = """
        import torch

        def measure(bench, results):
            try:
                results.append(torch.version.cuda.split("."))
                try:
                    results.append(bench.run())
                except RuntimeError as e:
                    if "CUDA out of memory" not in str(e):
                        raise
                    results.append(None)
            except RuntimeError:
                results.append("failed")
        """
    got = {rule: (s, g) for _, rule, s, g in found(rules, source)}
    assert got["PS323"] == ("warning", None)
    assert got["PS401"][1] == "fallback"


def test_onnx_runtime_provider_names_compared_or_branched_on(rules) -> None:
    """A provider name compared for equality reads which provider is in use (no finding);
    code under `provider == "TensorrtExecutionProvider"` runs only where the user asked for
    NVIDIA's provider (a vendor branch); an availability check and a request stay loud."""
    source = """
        import onnxruntime as ort

        def providers_for(provider):
            if provider == "TensorrtExecutionProvider":
                return ["TensorrtExecutionProvider", "CUDAExecutionProvider"]
            return [provider]

        def io_binding(session):
            return session.get_providers()[0] not in ["CUDAExecutionProvider", "TensorrtExecutionProvider"]

        HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()
        session = ort.InferenceSession("model.onnx", providers=["CUDAExecutionProvider"])
    """
    assert found(rules, source) == [
        (6, "PS108", "info", "vendor-branch"),
        (6, "PS109", "info", "vendor-branch"),
        (12, "PS108", "error", None),
        (13, "PS108", "error", None),
    ]


@pytest.mark.parametrize("dispatch, expected", [
    ("if torch.version.cuda:\n    EXT = 'cuda'\nelif torch.version.hip:\n    EXT = 'hip'\n", ("info", "vendor-branch")),
    ("if torch.version.cuda:\n    EXT = 'cuda'\nif torch.version.hip:\n    EXT = 'hip'\n", ("info", "vendor-branch")),
    # alone, the test reads as "is there a GPU", which is False on AMD
    ("if torch.version.cuda:\n    EXT = 'cuda'\n", ("warning", None)),
])
def test_a_cuda_test_beside_a_hip_test_dispatches_by_vendor(rules, dispatch, expected) -> None:
    [finding] = [(s, g) for _, rule, s, g in found(rules, "import torch\n" + dispatch) if rule == "PS402"]
    assert finding == expected


@pytest.mark.parametrize("leave, expected", [
    ("pytest.skip('CUDA only')", ("info", "vendor-branch")),
    ("sys.exit(0)", ("info", "vendor-branch")),
    # builds a decorator and goes on: the CUDA version is still read on ROCm
    ("unittest.skip('CUDA only')", ("error", None)),
])
def test_a_skip_under_a_vendor_check_ends_the_block_only_if_it_leaves(rules, leave, expected) -> None:
    source = (f"import sys, unittest\nimport pytest\nimport torch\n\ndef test_version():\n"
              f"    if torch.version.hip:\n        {leave}\n    major = int(torch.version.cuda.split('.')[0])\n")
    assert [(s, g) for _, rule, s, g in found(rules, source) if rule == "PS401"] == [expected]


@pytest.mark.parametrize("other_branch, expected", [
    # the ROCm branch binds the name too: the CUDA import's value reaches the use on CUDA only
    ("from torch.utils.cpp_extension import ROCM_HOME\n        CUDA_HOME = ROCM_HOME", ("info", "vendor-branch")),
    # nothing binds it on ROCm: the use is not under the vendor check, and it stays loud
    ("pass", ("error", None)),
])
def test_a_use_of_a_name_imported_in_one_vendor_branch(rules, other_branch, expected) -> None:
    """mmengine's ``_get_cuda_home``: ``if is_rocm_pytorch(): CUDA_HOME = ROCM_HOME`` /
    ``else: from torch.utils.cpp_extension import CUDA_HOME``, then ``return CUDA_HOME``."""
    source = (f"def toolkit_home(is_rocm_pytorch):\n    if is_rocm_pytorch():\n        {other_branch}\n"
              f"    else:\n        from torch.utils.cpp_extension import CUDA_HOME\n    return CUDA_HOME\n")
    last = source.count("\n")  # the return
    assert [(s, g) for line, rule, s, g in found(rules, source) if rule == "PS404" and line == last] == [expected]


@pytest.mark.parametrize("test, expected", [
    # a platform predicate named is_cuda, imported from the project or a framework
    ("_is_cuda() and torch.cuda.get_device_capability()[0] >= 10", ("info", "vendor-branch")),
    ("current_platform.is_cuda() and torch.cuda.get_device_capability() >= (9, 0)", ("info", "vendor-branch")),
    ("is_nvidia() and torch.cuda.get_device_capability() >= (9, 0)", ("info", "vendor-branch")),
    # a tensor's .is_cuda asks where the tensor lives: True on ROCm, no vendor check
    ("x.is_cuda and torch.cuda.get_device_capability() >= (9, 0)", ("error", None)),
])
def test_named_vendor_predicates_are_vendor_checks(rules, test, expected) -> None:
    source = (f"import torch\nfrom pkg.envs import _is_cuda, is_nvidia, current_platform\n\n"
              f"def kernel(x):\n    if {test}:\n        return 1\n    return 0\n")
    assert [(s, g) for _, rule, s, g in found(rules, source) if rule == "PS502"] == [expected]


DEVICE_TYPE_MODULE = '''
import torch
from .device_type import DEVICE_TYPE

def use_fused_kernels():
    if DEVICE_TYPE == "cuda":
        return torch.cuda.get_device_capability() >= (8, 0)
    {hip_branch}

def tune_vllm(is_fp8):
    if is_fp8 and DEVICE_TYPE == "cuda":
        if torch.cuda.get_device_capability()[0] == 10:
            return "triton"
    return None

def on_device(t):
    if t.device.type == "cuda":
        return torch.cuda.get_device_capability()[0] >= 9
'''


@pytest.mark.parametrize(("hip_branch", "guarded"), [
    ('elif DEVICE_TYPE == "hip":\n        return True', True),
    ('elif DEVICE_TYPE in ("xpu", "npu"):\n        return True', False),
])
def test_a_device_type_variable_the_module_tests_for_hip_is_a_vendor_check(rules, hip_branch: str,
                                                                            guarded: bool) -> None:
    """unsloth-zoo's ``DEVICE_TYPE`` is ``"hip"`` on ROCm: where the module compares it with
    ``"hip"`` too, ``DEVICE_TYPE == "cuda"`` asks for NVIDIA and its branches (and ``and``
    chains) are vendor-branch; a tensor's ``device.type == "cuda"``, True on ROCm, is not."""
    text = DEVICE_TYPE_MODULE.replace("{hip_branch}", hip_branch)
    found = {(f.span.line, f.guard) for f in scan_source(text, "pkg/patches.py", rules)
             if f.rule.startswith("PS50")}
    vendor = "vendor-branch" if guarded else None
    assert found == {(7, vendor), (13, vendor), (19, None)}
