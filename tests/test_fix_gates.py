"""`portscan fix --unsafe-fixes` on Python gates (issue 20, item 5): an NVIDIA SM test gets
`torch.version.cuda is not None and` in front, so NVIDIA GPUs take the path they took and
AMD GPUs (whose gfx numbers pass SM tests) the one for GPUs without the feature; a value
use of `torch.version.cuda` reads the HIP version on ROCm. Both branches are run with a
stand-in torch."""

from __future__ import annotations

import textwrap
import types

import pytest

from portscan.fix.engine import fix_source
from portscan.fix.transforms.cuda_version import HIP_VALUE
from portscan.ruleset.fixspec import NEEDS_UNSAFE
from portscan.ruleset.loader import RuleSet, load_rules
from portscan.scan import scan_source

RULES = load_rules()
GATES = RuleSet(r for r in RULES.rules if r.code in ("PS501", "PS502", "PS506", "PS507"))

SOURCE = textwrap.dedent('''\
    import torch

    USE_BF16 = torch.cuda.get_device_capability() >= (8, 0)
    major, minor = torch.cuda.get_device_capability()
    if major >= 9:
        attention = "fa3"
    else:
        attention = "sdpa"
    props = torch.cuda.get_device_properties(0)
    tf32 = props.major >= 8 and ALLOW_TF32
    BLOCK = 128 if major >= 8 else 64
    ''')


def run(source: str, cuda: str | None, hip: str | None, capability: tuple[int, int]) -> dict:
    props = types.SimpleNamespace(major=capability[0], minor=capability[1])
    torch = types.SimpleNamespace(
        version=types.SimpleNamespace(cuda=cuda, hip=hip),
        cuda=types.SimpleNamespace(get_device_capability=lambda *a: capability,
                                   get_device_properties=lambda *a: props))
    namespace: dict = {"ALLOW_TF32": True}
    exec(compile(source.replace("import torch\n", ""), "gates.py", "exec"), {**namespace, "torch": torch}, namespace)
    return {k: namespace[k] for k in ("USE_BF16", "attention", "tf32", "BLOCK")}


@pytest.fixture(scope="module")
def fixed() -> str:
    result = fix_source(SOURCE, "gates.py", GATES, unsafe=True)
    assert result.error is None and {a.rule for a in result.applied} == {"PS501", "PS502", "PS506"}
    return result.fixed


@pytest.mark.parametrize("capability", [(7, 0), (8, 0), (9, 0)])
def test_nvidia_gpus_take_the_path_they_took(fixed: str, capability: tuple[int, int]) -> None:
    assert run(fixed, "12.1", None, capability) == run(SOURCE, "12.1", None, capability)


@pytest.mark.parametrize("capability", [(9, 4), (9, 0), (11, 0)])  # MI300X, MI250, RX 7900
def test_amd_gpus_take_the_path_for_gpus_without_the_feature(fixed: str, capability: tuple[int, int]) -> None:
    assert run(SOURCE, None, "6.2", capability)["attention"] == "fa3"  # before: Hopper's kernels on ROCm
    after = run(fixed, None, "6.2", capability)
    assert after["attention"] == "sdpa" and after["USE_BF16"] is False and after["tf32"] is False
    assert after["BLOCK"] == run(SOURCE, None, "6.2", capability)["BLOCK"]  # a tile size is left as it was


def test_the_rewrite_is_exactly_a_guard_in_front_and_settles(fixed: str) -> None:
    assert "USE_BF16 = torch.version.cuda is not None and torch.cuda.get_device_capability() >= (8, 0)" in fixed
    assert "if torch.version.cuda is not None and major >= 9:" in fixed
    assert "tf32 = (torch.version.cuda is not None and props.major >= 8) and ALLOW_TF32" in fixed
    assert "BLOCK = 128 if major >= 8 else 64" in fixed
    assert fix_source(fixed, "gates.py", GATES, unsafe=True).fixed == fixed
    assert not [f for f in scan_source(fixed, "gates.py", RULES)
                if f.rule in ("PS501", "PS502", "PS506") and f.severity.value != "info"]


def test_without_unsafe_fixes_the_gates_are_left_with_the_reason() -> None:
    result = fix_source(SOURCE, "gates.py", GATES, unsafe=False)
    assert result.fixed == SOURCE and {n.rule for n in result.not_fixed} >= {"PS501", "PS502", "PS506"}


def test_the_guard_is_spelled_through_the_module_imports_or_declined() -> None:
    aliased = "import torch as th\nok = th.cuda.get_device_capability() >= (8, 0)\n"
    assert fix_source(aliased, "gates.py", GATES, unsafe=True).fixed == \
        "import torch as th\nok = th.version.cuda is not None and th.cuda.get_device_capability() >= (8, 0)\n"
    shadowed = "from torch.cuda import get_device_capability\ntorch = None\nok = get_device_capability() >= (8, 0)\n"
    result = fix_source(shadowed, "gates.py", GATES, unsafe=True)
    assert result.fixed == shadowed and "names something else" in result.not_fixed[0].reason


# -- OCP FP8 dtypes on a gfx942 target ----------------------------------------------------

FP8 = RuleSet(r for r in RULES.rules if r.code == "PS503")
FP8_SOURCE = textwrap.dedent('''\
    import torch

    E4M3 = torch.float8_e4m3fn
    E5M2 = torch.float8_e5m2
    MAX = torch.finfo(E4M3).max

    def gemm(x, w, sx, sw):
        return torch._scaled_mm(x.to(E4M3), w.to(E5M2).t(), scale_a=sx, scale_b=sw)
    ''')


def test_a_gfx942_target_gets_the_fnuz_dtypes_on_rocm_and_nvidia_keeps_ocp(tmp_path, capsys) -> None:
    from portscan.cli import main
    from portscan.config import Target

    result = fix_source(FP8_SOURCE, "fp8.py", FP8, unsafe=True, target=Target(arch="gfx942"))
    assert "E4M3 = (torch.float8_e4m3fnuz if torch.version.hip else torch.float8_e4m3fn)" in result.fixed
    assert "E5M2 = (torch.float8_e5m2fnuz if torch.version.hip else torch.float8_e5m2)" in result.fixed
    for hip, expected in ((None, ("e4m3fn", "e5m2")), ("6.2", ("e4m3fnuz", "e5m2fnuz"))):
        torch = types.SimpleNamespace(version=types.SimpleNamespace(hip=hip), finfo=lambda d: types.SimpleNamespace(
            max=240.0 if d.endswith("fnuz") else 448.0), **{f"float8_{n}": n for n in
                                                          ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz")})
        namespace: dict = {}
        exec(compile(result.fixed.replace("import torch\n", ""), "fp8.py", "exec"), {"torch": torch}, namespace)
        assert (namespace["E4M3"], namespace["E5M2"]) == expected
        assert namespace["MAX"] == (240.0 if hip else 448.0)  # a finfo-derived scale follows the dtype
    (tmp_path / "fp8.py").write_text(FP8_SOURCE)
    main(["fix", "--unsafe-fixes", "--no-cache", "--select", "PS503", "--target-arch", "gfx942", str(tmp_path)])
    assert (tmp_path / "fp8.py").read_text() == result.fixed
    capsys.readouterr()


@pytest.mark.parametrize("arch", [None, "gfx90a"])
def test_without_a_gfx942_target_the_dtype_is_left_and_the_scan_does_not_promise_a_fix(arch: str | None) -> None:
    from portscan.config import Target

    target = Target(arch=arch) if arch else None
    result = fix_source(FP8_SOURCE, "fp8.py", FP8, unsafe=True, target=target)
    assert result.fixed == FP8_SOURCE and all("gfx942" in n.reason and "target" in n.reason for n in result.not_fixed)
    assert {f.fix for f in scan_source(FP8_SOURCE, "fp8.py", RULES, target=target) if f.rule == "PS503"} == {None}
    assert {f.fix for f in scan_source(FP8_SOURCE, "fp8.py", RULES, target=Target(arch="gfx942"))
            if f.rule == "PS503"} == {"unsafe"}


def test_a_lacks_the_feature_test_is_true_on_rocm() -> None:
    """`major < 9` asks whether the GPU lacks an SM 9 feature: on ROCm it does."""
    source = textwrap.dedent('''\
        def check(model_format):
            import torch
            props = torch.cuda.get_device_properties(0)
            if props.major < 9:
                return "fp8 needs sm >= 9.0"
            return "ok"
        ''')
    result = fix_source(source, "check.py", GATES, unsafe=True)
    assert "    if torch.version.cuda is None or props.major < 9:\n" in result.fixed  # the local import is used
    for cuda, hip, capability, expected in (("12.1", None, (8, 0), "fp8 needs sm >= 9.0"), ("12.1", None, (9, 0), "ok"),
                                            (None, "6.2", (9, 4), "fp8 needs sm >= 9.0")):
        props = types.SimpleNamespace(major=capability[0], minor=capability[1])
        torch = types.SimpleNamespace(version=types.SimpleNamespace(cuda=cuda, hip=hip),
                                      cuda=types.SimpleNamespace(get_device_properties=lambda *a, p=props: p))
        namespace: dict = {}
        exec(compile(result.fixed.replace("    import torch\n", ""), "check.py", "exec"), {"torch": torch}, namespace)
        assert namespace["check"]("fp8") == expected


def test_a_gate_in_a_helper_is_guarded_there_and_its_callers_with_it() -> None:
    source = textwrap.dedent('''\
        import torch


        def requires_sm(major, minor):
            def check(query):
                return torch.cuda.get_device_capability(query.device) >= (major, minor)
            return check


        CONSTRAINTS = {"wgmma": requires_sm(9, 0), "mma": requires_sm(8, 0)}
        ''')
    before = {(f.rule, f.span.line): f.guard for f in scan_source(source, "dispatch.py", RULES)
              if f.rule in ("PS501", "PS502")}
    assert before == {("PS501", 6): None, ("PS502", 10): None, ("PS501", 10): None}
    result = fix_source(source, "dispatch.py", GATES, unsafe=True)
    assert "return torch.version.cuda is not None and torch.cuda.get_device_capability(query.device) >= " \
           "(major, minor)" in result.fixed
    after = {(f.rule, f.span.line): f.guard for f in scan_source(result.fixed, "dispatch.py", RULES)
             if f.rule in ("PS501", "PS502")}
    assert set(after.values()) == {"vendor-branch"}  # the callers' findings take the helper's guard


# -- torch.version.cuda used as a value: the HIP version on ROCm (unsafe) -----------------

VERSION = RuleSet(r for r in RULES.rules if r.code == "PS401")
VALUE_SOURCE = textwrap.dedent('''\
    import torch
    from packaging.version import Version

    MAJOR = int(torch.version.cuda.split(".")[0])
    T_MAJOR, T_MINOR = [int(x) for x in torch.version.cuda.split(".")]
    PARSED = Version(torch.version.cuda)
    NEW_ENOUGH = Version(torch.version.cuda) >= Version("11.8")
    ''')


def run_version(source: str, cuda: str | None, hip: str | None) -> dict:
    from packaging.version import Version

    torch = types.SimpleNamespace(version=types.SimpleNamespace(cuda=cuda, hip=hip))
    namespace: dict = {}
    code = source.replace("import torch\n", "").replace("from packaging.version import Version\n", "")
    exec(compile(code, "version.py", "exec"), {"torch": torch, "Version": Version}, namespace)
    return {k: namespace[k] for k in ("MAJOR", "T_MAJOR", "T_MINOR", "PARSED", "NEW_ENOUGH")}


@pytest.fixture(scope="module")
def version_fixed() -> str:
    result = fix_source(VALUE_SOURCE, "version.py", VERSION, unsafe=True)
    assert result.error is None and len(result.applied) == 4
    return result.fixed


@pytest.mark.parametrize("cuda", ["11.8", "12.4"])
def test_nvidia_builds_read_the_cuda_version_as_before(version_fixed: str, cuda: str) -> None:
    assert run_version(version_fixed, cuda, None) == run_version(VALUE_SOURCE, cuda, None)


def test_rocm_builds_read_the_hip_version_in_the_cuda_shape(version_fixed: str) -> None:
    from packaging.version import Version

    with pytest.raises(AttributeError):
        run_version(VALUE_SOURCE, None, "6.2.41133-dd7f95766")  # before: None.split
    after = run_version(version_fixed, None, "6.2.41133-dd7f95766")
    assert after == {"MAJOR": 6, "T_MAJOR": 6, "T_MINOR": 2, "PARSED": Version("6.2"), "NEW_ENOUGH": False}


def test_a_value_use_is_unsafe_and_says_what_to_review_while_a_comparison_stays_safe() -> None:
    tiers = {f.span.line: f.fix for f in scan_source(VALUE_SOURCE, "version.py", VERSION)}
    assert tiers == {4: "unsafe", 5: "unsafe", 6: "unsafe", 7: "safe"}
    safe = fix_source(VALUE_SOURCE, "version.py", VERSION, unsafe=False)
    assert [a.line for a in safe.applied] == [7]
    assert sorted((n.line, n.reason) for n in safe.not_fixed) == \
        [(4, NEEDS_UNSAFE), (5, NEEDS_UNSAFE), (6, NEEDS_UNSAFE)]
    unsafe = fix_source(VALUE_SOURCE, "version.py", VERSION, unsafe=True)
    notes = {a.line: a.note for a in unsafe.applied}
    assert notes[7] is None and all(notes[line] == HIP_VALUE for line in (4, 5, 6))


def test_a_carried_version_and_a_cu_tag_are_left_with_the_reason() -> None:
    carried = "import torch\nV = torch.version.cuda\nMAJOR = int(V.split('.')[0])\n"
    tagged = "import torch\nTAG = 'cu' + torch.version.cuda.replace('.', '')\n"
    for source, words in ((carried, "through `V`"), (tagged, "formats a CUDA tag ('cu')")):
        [finding] = scan_source(source, "version.py", VERSION)
        assert finding.fix is None
        result = fix_source(source, "version.py", VERSION, unsafe=True)
        assert result.fixed == source and words in result.not_fixed[0].reason
