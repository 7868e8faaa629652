"""The Python matching engine: name resolution, shadowing, reporting and positions.

Rules here are built inline so the engine is tested apart from the rule pack.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest
from conftest import inline_rule
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, QualifiedNameSource

from portscan.match.python import _Collector, _Index
from portscan.ruleset.loader import RuleSet
from portscan.scan import scan_source
from portscan.match.syntax import Walker

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cuda-trainer"


def rule(code: str, match: dict, supersedes: tuple[str, ...] = (), message: str = "`${matched}`"):
    return inline_rule(code, match, message, supersedes)


def run(source: str, *rules, first_party: frozenset[str] = frozenset()):
    findings = scan_source(textwrap.dedent(source), "t.py", RuleSet(rules), first_party)
    return [(f.rule, f.span.line, f.message.strip("`")) for f in findings]


CUDA_VERSION = rule("XX401", {"kind": "name", "names": ["torch.version.cuda"]})
RMSNORM = rule("XX211", {"kind": "name", "names": ["apex.normalization.fused_layer_norm.FusedRMSNorm"]})


# ------------------------------------------------------------------ qualified names


@pytest.mark.parametrize("source, matched", [
    ("import torch\ntorch.version.cuda", "torch.version.cuda"),
    ("import torch as T\nT.version.cuda", "T.version.cuda"),
    ("import torch.version as tv\ntv.cuda", "tv.cuda"),
    ("from torch import version\nversion.cuda", "version.cuda"),
    ("from torch.version import cuda as cv\ncv", "cv"),
    ("import torch.cuda\ntorch.version.cuda", "torch.version.cuda"),
    ("def f():\n    return torch.version.cuda\nimport torch", "torch.version.cuda"),
    ("try:\n    import torch\nexcept ImportError:\n    torch = None\ntorch.version.cuda",
     "torch.version.cuda"),
    ("import torch\ndef f():\n    global torch\n    torch = None\n    return torch.version.cuda",
     "torch.version.cuda"),
    ("def f():\n    import torch as t\n    return t.version.cuda", "t.version.cuda"),
])
def test_names_resolve_through_aliases(source: str, matched: str) -> None:
    assert [m for _, _, m in run(source, CUDA_VERSION)] == [matched]


def test_module_alias_resolves_to_the_apex_class() -> None:
    source = "import apex.normalization.fused_layer_norm as fln\nnorm = fln.FusedRMSNorm(64)\n"
    assert run(source, RMSNORM) == [("XX211", 2, "fln.FusedRMSNorm")]


@pytest.mark.parametrize("source", [
    "torch.version.cuda",  # never imported
    "import torch\ndef f(torch):\n    return torch.version.cuda",
    "import torch\nf = lambda torch: torch.version.cuda",
    "import torch\nxs = [torch.version.cuda for torch in range(3)]",
    "import torch\ndef f():\n    torch = load()\n    return torch.version.cuda",
    "class A:\n    import torch\n    def f(self):\n        return torch.version.cuda",
    "from .torch import version\nversion.cuda",
    "from . import torch\ntorch.version.cuda",
    "from mypkg.torch import version\nversion.cuda",
    "from torch.version import *\ncuda",
    "import torch\nx = torch.version.hip",
    "import torch\nx = torch.cuda.version",
])
def test_shadowed_local_and_relative_names_do_not_match(source: str) -> None:
    assert run(source, CUDA_VERSION) == []


def test_first_party_modules_are_never_third_party() -> None:
    apex = rule("XX201", {"kind": "import", "modules": ["apex"]})
    name = rule("XX202", {"kind": "name", "names": ["apex.thing"]})
    source = "import apex\nfrom apex import thing\napex.thing\n"
    assert run(source, apex, name, first_party=frozenset({"apex"})) == []
    assert [(c, line) for c, line, _ in run(source, apex, name)] == [("XX201", 1), ("XX202", 3)]
    [first, _] = scan_source(source, "t.py", RuleSet([apex, name]))
    assert first.uses == ((2, 6),)  # imported again: one finding, the second import in its uses


def test_a_module_imported_again_is_one_finding_unless_a_guard_lowers_it() -> None:
    apex = rule("XX201", {"kind": "import", "modules": ["apex"]})
    again = "import apex\n\ndef f():\n    import apex\n    from apex import amp\n    return amp\n"
    [finding] = scan_source(again, "t.py", RuleSet([apex]))
    assert (finding.span.line, finding.uses) == (1, ((4, 12), (5, 10)))
    guarded = ("try:\n    import apex\nexcept ImportError:\n    apex = None\n"
               "try:\n    from apex import amp\nexcept ImportError:\n    amp = None\n")
    assert [(f.span.line, f.guard, f.uses) for f in scan_source(guarded, "t.py", RuleSet([apex]))] == [
        (2, "fallback", ()), (6, "fallback", ())]  # each try has its own fallback


# ------------------------------------------------------------------ outermost match


def test_exact_name_is_reported_once_at_its_own_node() -> None:
    source = 'import torch\nmajor = torch.version.cuda.split(".")[0]\n'
    findings = scan_source(source, "t.py", RuleSet([CUDA_VERSION]))
    assert [(f.span.line, f.span.column, f.span.end_column) for f in findings] == [(2, 9, 27)]


def test_wildcard_name_is_reported_once_for_the_whole_chain() -> None:
    wildcard = rule("XX210", {"kind": "name", "names": ["apex.amp.*"]})
    source = "import apex\nwith apex.amp.handle.scale_loss(loss, opt) as s:\n    pass\n"
    assert run(source, wildcard) == [("XX210", 2, "apex.amp.handle.scale_loss")]


# ------------------------------------------------------------------ imports


APEX = rule("XX201", {"kind": "import", "modules": ["apex"]})
AMP = rule("XX202", {"kind": "import", "modules": ["apex.amp"]}, supersedes=("XX201",),
           message="${module}")
OPT = rule("XX203", {"kind": "import", "modules": ["apex.optimizers"]}, supersedes=("XX201",),
           message="${module}")


@pytest.mark.parametrize("source, expected", [
    ("import apex", [("XX201", 1, "apex")]),
    ("import apex.amp", [("XX202", 1, "apex.amp")]),
    # several rules on one import statement: the most specific one (issue 17, item 6)
    ("import apex.amp as amp_mod, apex", [("XX202", 1, "apex.amp")]),
    ("from apex import amp, optimizers", [("XX202", 1, "apex.amp"), ("XX203", 1, "apex.optimizers")]),
    ("from apex import amp, pyprof", [("XX202", 1, "apex.amp")]),
    ("from apex.optimizers import FusedAdam, FusedLAMB", [("XX203", 1, "apex.optimizers")]),
    ("from apex.amp import *", [("XX202", 1, "apex.amp")]),
    ("from apex import (\n    amp,\n)", [("XX202", 2, "apex.amp")]),
    ("import apex_utils\nfrom .apex import x\nfrom mypkg.apex import y\nfrom . import apex", []),
])
def test_import_rules(source: str, expected) -> None:
    assert run(source, APEX, AMP, OPT) == expected


# ------------------------------------------------------------------ calls


def call_rule(**condition):
    return rule("XX104", {"kind": "call", "callees": ["torch.compile"], "args": [condition]})


@pytest.mark.parametrize("condition, source, hits", [
    ({"keyword": "backend", "equals": ["tensorrt"]}, 'torch.compile(m, backend="tensorrt")', 1),
    ({"keyword": "backend", "equals": ["tensorrt"]}, 'torch.compile(m, backend="inductor")', 0),
    ({"keyword": "backend", "position": 1, "equals": ["tensorrt"]}, 'torch.compile(m, "tensorrt")', 1),
    ({"keyword": "backend", "position": 1, "equals": ["tensorrt"]}, 'torch.compile(*a, "tensorrt")', 0),
    ({"keyword": "backend", "present": True}, "torch.compile(m, backend=b)", 1),
    ({"keyword": "backend", "present": False}, "torch.compile(m)", 1),
    ({"keyword": "backend", "present": False}, "torch.compile(m, **options)", 0),
    ({"keyword": "backend", "regex": "^tensor"}, 'torch.compile(m, backend="tensorrt")', 1),
    ({"keyword": "backend", "regex": "^tensor"}, "torch.compile(m, backend=name)", 0),
])
def test_call_argument_conditions(condition, source: str, hits: int) -> None:
    assert len(run("import torch\n" + source, call_rule(**condition))) == hits


def test_contains_condition_reads_list_literals_and_provider_tuples() -> None:
    ort = rule("XX105", {"kind": "call", "callees": ["onnxruntime.InferenceSession"],
                         "args": [{"keyword": "providers", "contains": ["TensorrtExecutionProvider"]}]})
    source = """\
    import onnxruntime as ort
    a = ort.InferenceSession(p, providers=["TensorrtExecutionProvider", "CPUExecutionProvider"])
    b = ort.InferenceSession(p, providers=[("TensorrtExecutionProvider", {"device_id": 0})])
    c = ort.InferenceSession(p, providers=["MIGraphXExecutionProvider"])
    """
    assert [line for _, line, _ in run(source, ort)] == [2, 3]


# ------------------------------------------------------------------ assignments


BENCH = rule("XX301", {"kind": "assign", "targets": ["torch.backends.cudnn.benchmark"],
                       "values": [True]})


def test_assignment_to_a_qualified_attribute() -> None:
    source = """\
    import torch
    from torch.backends import cudnn
    import torch.backends.cudnn as cdn
    torch.backends.cudnn.benchmark = True
    cudnn.benchmark = True
    cdn.benchmark: bool = True
    a = cudnn.benchmark = True
    cudnn.benchmark = False
    flag = cudnn.benchmark
    if cudnn.benchmark:
        pass
    """
    assert [line for _, line, _ in run(source, BENCH)] == [4, 5, 6, 7]


def test_truthy_non_literal_values_do_not_match_a_value_constraint() -> None:
    assert run("import torch\ntorch.backends.cudnn.benchmark = args.bench\n", BENCH) == []


# ------------------------------------------------------------------ comparisons


CAP = rule("XX501", {"kind": "compare", "callees": ["torch.cuda.get_device_capability"]})
HOPPER = rule("XX502", {"kind": "compare", "callees": ["torch.cuda.get_device_capability"],
                        "values": [[9, 0], 9], "indices": [0]}, supersedes=("XX501",))
NAME = rule("XX504", {"kind": "compare", "callees": ["torch.cuda.get_device_name"],
                      "operators": ["contains", "=="], "values": ["A100", "H100"]})
PROPS = rule("XX505", {"kind": "compare", "callees": ["torch.cuda.get_device_properties"],
                       "attributes": ["major"], "values": [9]})


@pytest.mark.parametrize("line, expected", [
    ("torch.cuda.get_device_capability() >= (8, 0)", ["XX501"]),
    ("torch.cuda.get_device_capability() >= (9, 0)", ["XX502"]),
    ("(9, 0) <= torch.cuda.get_device_capability(0)", ["XX502"]),
    ("torch.cuda.get_device_capability()[0] >= 9", ["XX502"]),
    ("torch.cuda.get_device_capability()[1] >= 9", ["XX501"]),
    ("torch.cuda.get_device_capability() in [(8, 0), (9, 0)]", ["XX502"]),
    ('"A100" in torch.cuda.get_device_name()', ["XX504"]),
    ('torch.cuda.get_device_name(0) == "H100"', ["XX504"]),
    ('torch.cuda.get_device_name(0) != "H100"', []),
    ('torch.cuda.get_device_name(0) in ("A100", "H100")', []),
    ('torch.cuda.get_device_name().startswith("A100")', ["XX504"]),
    ('torch.cuda.get_device_name(0).lower().endswith(("l4", "H100"))', ["XX504"]),
    ('torch.cuda.get_device_name().startswith("L4")', []),
    ('print(torch.cuda.get_device_name().startswith("A100"))', []),
    ('"A100-SXM4".startswith("A100")', []),
    ("torch.cuda.get_device_properties(0).major >= 9", ["XX505"]),
    ("torch.cuda.get_device_properties(0).minor >= 9", []),
    ("torch.cuda.device_count() >= 9", []),
    ("len(torch.cuda.get_device_capability()) == 2", []),
])
def test_comparison_forms(line: str, expected: list[str]) -> None:
    assert [c for c, _, _ in run("import torch\nx = " + line, CAP, HOPPER, NAME, PROPS)] == expected


def test_prefix_tests_count_only_where_substring_tests_do() -> None:
    """`name.startswith(x)` is `x in name` at one end: a rule without "contains" (an exact
    match of `gcnArchName`, say) leaves it alone, as the rewrite it suggests uses it."""
    arch = rule("XX510", {"kind": "compare", "callees": ["torch.cuda.get_device_properties"],
                          "attributes": ["gcnArchName"], "operators": ["=="]})
    source = """\
    import torch
    props = torch.cuda.get_device_properties(0)
    a = props.gcnArchName.startswith("gfx94")
    b = props.gcnArchName == "gfx942"
    """
    assert run(source, arch) == [("XX510", 4, 'props.gcnArchName == "gfx942"')]


def test_comparison_through_local_names() -> None:
    source = """\
    import torch
    major, minor = torch.cuda.get_device_capability()
    cap = torch.cuda.get_device_capability()
    props = torch.cuda.get_device_properties(0)
    def gate():
        return major >= 9
    a = cap >= (8, 0)
    b = props.major == 9
    c = minor >= 9
    """
    assert run(source, CAP, HOPPER, PROPS) == [
        ("XX502", 6, "major >= 9"), ("XX501", 7, "cap >= (8, 0)"),
        ("XX505", 8, "props.major == 9"), ("XX501", 9, "minor >= 9"),
    ]


@pytest.mark.parametrize("source, expected", [
    # old-GPU tests are False on every AMD GPU (major >= 9): info, in place of PS501
    ("if torch.cuda.get_device_capability()[0] < 8:\n    dtype = 'float16'\n", [("PS513", "info")]),
    ("major, minor = torch.cuda.get_device_capability()\nif major < 7:\n    fast = False\n",
     [("PS513", "info")]),
    ("if (7, 5) > torch.cuda.get_device_capability():\n    pass\n", [("PS513", "info")]),
    ("if torch.cuda.get_device_properties(0).major <= 7:\n    pass\n", [("PS514", "info")]),
    # new-enough tests stay PS501, Ada's FP8 threshold PS502, minors PS501
    ("if torch.cuda.get_device_capability() >= (8, 0):\n    pass\n", [("PS501", "warning")]),
    ("if torch.cuda.get_device_capability() < (8, 9):\n    pass\n", [("PS502", "error")]),
    ("if torch.cuda.get_device_capability()[1] < 5:\n    pass\n", [("PS501", "warning")]),
    # a helper's `<` is its callers' threshold: PS501 there and at the call, not PS513
    ("def atleast(major, minor):\n    def check(q):\n"
     "        if torch.cuda.get_device_capability(q.device) < (major, minor):\n            raise ValueError\n"
     "    return check\nCHECK = atleast(8, 0)\n", [("PS501", "warning"), ("PS501", "warning")]),
])
def test_old_gpu_checks_are_info(scan, source: str, expected) -> None:
    found = scan("import torch\n" + source, ["PS501", "PS502", "PS506", "PS513", "PS514"])
    assert [(f.rule, f.severity.value) for f in found] == expected


@pytest.mark.parametrize("source, expected", [
    # an equality with an NVIDIA generation is False on AMD GPUs: its `and` chain decides nothing
    ("props = torch.cuda.get_device_properties(0)\nif props.major == 8 and props.minor == 0:\n    cfg = 1\n",
     [("PS516", "info", 3)]),
    ("major, minor = torch.cuda.get_device_capability()\nif major == 8 and minor >= 6:\n    cfg = 1\n",
     [("PS515", "info", 3)]),
    ("cap = torch.cuda.get_device_capability()\nOK = cap[0] < 8 and cap[1] >= 5\n", [("PS513", "info", 3)]),
    # an inequality is True on AMD GPUs: the rest of the chain decides, and is reported
    ("props = torch.cuda.get_device_properties(0)\nif props.major != 7 and props.minor >= 5:\n    cfg = 1\n",
     [("PS516", "info", 3), ("PS506", "warning", 3)]),
    # an `or` chain is decided by its other tests
    ("props = torch.cuda.get_device_properties(0)\nif props.major == 8 or props.minor >= 5:\n    cfg = 1\n",
     [("PS516", "info", 3), ("PS506", "warning", 3)]),
])
def test_chains_with_a_test_false_on_amd(scan, source: str, expected) -> None:
    found = scan("import torch\n" + source, ["PS501", "PS506", "PS513", "PS514", "PS515", "PS516"])
    assert [(f.rule, f.severity.value, f.span.line) for f in found] == expected


# ------------------------------------------------------------------ subprocess strings


SMI = rule("XX601", {"kind": "subprocess", "programs": ["nvidia-smi"]}, message="${program}")


@pytest.mark.parametrize("call, hits", [
    ('subprocess.run(["nvidia-smi", "-L"])', 1),
    ('subprocess.run(("nvidia-smi",))', 1),
    ('subprocess.Popen(args=["nvidia-smi"])', 1),
    ('subprocess.check_output("nvidia-smi -L", shell=True)', 1),
    ('subprocess.getoutput("nvidia-smi | grep MiB")', 1),
    ('os.system("echo start; nvidia-smi && echo done")', 1),
    ('os.system("CUDA_VISIBLE_DEVICES=0 sudo /usr/bin/nvidia-smi -q")', 1),
    ('os.popen("timeout 5 nvidia-smi").read()', 1),
    ('subprocess.run(["bash", "-c", "nvidia-smi -L"])', 1),
    ('subprocess.run(shlex.split("nvidia-smi -q"))', 1),
    ('subprocess.run(f"nvidia-smi -i {gpu}", shell=True)', 1),
    ('subprocess.run(["nvidia-smi-exporter"])', 0),
    ('subprocess.run(["echo", "nvidia-smi"])', 0),
    ('print("nvidia-smi")', 0),
    ('subprocess.run(["amd-smi", "list"])', 0),
])
def test_subprocess_commands(call: str, hits: int) -> None:
    source = "import os\nimport shlex\nimport subprocess\n" + call + "\n"
    assert len(run(source, SMI)) == hits


def test_subprocess_command_through_a_name_is_reported_at_the_call() -> None:
    source = 'import subprocess\ncmd = ["nvidia-smi", "-q"]\nsubprocess.run(cmd)\n'
    assert run(source, SMI) == [("XX601", 3, "nvidia-smi")]


# ------------------------------------------------------------------ usage


USAGE_RULES = [rule(f"XX40{i}", {"kind": "name", "names": ["torch.version.cuda"], "usage": usage},
                    message=usage)
               for i, usage in enumerate(("truth", "operand", "other"))]


@pytest.mark.parametrize("line, usage", [
    ("if torch.version.cuda:\n    pass", "truth"),
    ("x = torch.version.cuda is None", "truth"),
    ("x = not torch.version.cuda", "truth"),
    ("x = bool(torch.version.cuda)", "truth"),
    ('x = torch.version.cuda == "12.1"', "truth"),
    ('x = torch.version.cuda in ("11.8", "12.1")', "truth"),
    ("x = 1 if torch.version.cuda and y else 2", "truth"),
    ("x = torch.version.cuda or torch.version.hip", "truth"),
    ("assert torch.version.cuda", "truth"),
    ('x = torch.version.cuda >= "11.8"', "operand"),
    ('x = "11" in torch.version.cuda', "operand"),
    ("x = float(torch.version.cuda)", "operand"),
    ("x = version.parse(torch.version.cuda)", "operand"),
    ("x = torch.version.cuda.split('.')", "operand"),
    ("x = torch.version.cuda[0]", "operand"),
    ('x = "cu" + torch.version.cuda', "operand"),
    ("major, minor = torch.version.cuda", "operand"),
    ("for part in torch.version.cuda:\n    pass", "operand"),
    ('x = f"cuda {torch.version.cuda}"', "other"),
    ('x = "cuda %s" % torch.version.cuda', "other"),
    ("print(torch.version.cuda)", "other"),
    ("x = torch.version.cuda", "other"),
    ("x = {'cuda': torch.version.cuda}", "other"),
])
def test_usage_classification(line: str, usage: str) -> None:
    found = run("import torch\nfrom packaging import version\n" + line + "\n", *USAGE_RULES)
    assert [message for _, _, message in found] == [usage]


# ------------------------------------------------------------------ positions


@pytest.mark.parametrize("source, span", [
    ("import torch\nx = (torch.version.cuda)\n", (2, 6, 2, 24)),
    ("import torch\nx = [\n    1,\n    torch.version.cuda,\n]\n", (4, 5, 4, 23)),
    ("import torch\r\nx = 1\r\ny = torch.version.cuda\r\n", (3, 5, 3, 23)),
    ("import torch\nif True:\n\tz = torch.version.cuda\n", (3, 6, 3, 24)),
    ("import torch\nnom = 'été'; v = torch.version.cuda\n", (2, 18, 2, 36)),
    ("import torch\nx = torch.version.cuda", (2, 5, 2, 23)),
])
def test_spans_are_one_based_with_exclusive_end(source: str, span) -> None:
    (finding,) = scan_source(source, "t.py", RuleSet([CUDA_VERSION]))
    s = finding.span
    assert (s.line, s.column, s.end_line, s.end_column) == span


def test_multiline_span() -> None:
    source = 'import torch\nc = torch.compile(\n    m,\n    backend="tensorrt",\n)\n'
    (finding,) = scan_source(source, "t.py", RuleSet([call_rule(keyword="backend", equals=["tensorrt"])]))
    s = finding.span
    assert (s.line, s.column, s.end_line, s.end_column) == (2, 5, 5, 2)


# ------------------------------------------------------------------ parity with libcst


def _libcst_import_names(module: cst.Module) -> dict[int, set[str]]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    names = wrapper.resolve(QualifiedNameProvider)
    resolved = {}
    for node, value in names.items():
        qualified = value() if callable(value) else value  # libcst >= 1.2 resolves lazily
        resolved[id(node)] = {q.name for q in qualified if q.source is QualifiedNameSource.IMPORT}
    return resolved


PARITY_SOURCES = [
    "import torch as T\nimport numpy\nfrom a.b import c as d\nT.x.y\nnumpy.array\nd.e\n",
    "import torch\ndef f(torch):\n    return torch.cuda\nclass K:\n    import os\n    def m(self):\n"
    "        return os.path\n",
    "try:\n    import pynvml as nv\nexcept ImportError:\n    nv = None\nnv.nvmlInit()\n",
    "from torch.backends import cudnn\ncudnn.benchmark\n[cudnn for cudnn in x]\nlambda cudnn: cudnn.y\n",
]


FIXTURE_MODULES = [p for p in sorted(FIXTURE.rglob("*.py")) if p.name != "__init__.py"]


@pytest.mark.parametrize("source", PARITY_SOURCES + [p.read_text() for p in FIXTURE_MODULES],
                         ids=[f"snippet-{i}" for i in range(len(PARITY_SOURCES))]
                         + [p.relative_to(FIXTURE).as_posix() for p in FIXTURE_MODULES])
def test_resolution_agrees_with_libcst_qualified_name_provider(source: str) -> None:
    """Our single-pass resolver gives the import-sourced names libcst's provider gives."""
    module = cst.parse_module(source)
    expected = _libcst_import_names(module)
    collector = _Collector(_Index([]), frozenset())
    collector.walk(module)
    checked = 0
    for chain in collector.chains:
        for node, j in zip(chain.nodes, range(1, len(chain.parts) + 1), strict=False):
            ours = set(chain.scope.qualified(chain.parts[:j]))
            assert ours == expected.get(id(node), set()), module.code_for_node(node)
            checked += 1
    assert checked > 0


# ------------------------------------------------------------------ prefilter


def test_prefilter_needs_every_segment_of_a_name() -> None:
    rules = RuleSet([CUDA_VERSION])
    assert rules.candidates("import torch.version as tv\nprint(tv.cuda)\n")
    assert rules.candidates("from torch import version as v\nv.cuda\n")
    assert not rules.candidates("import torch\ntorch.cuda.synchronize()\n")  # no `version`
    assert not rules.candidates("import torchvision\nx.versions.cudas\n")  # whole words only


def test_prefilter_needs_an_import_of_the_package_a_name_is_in() -> None:
    """Names resolve through imports only, so a file that never imports ``torch`` (a
    generated table of ``torch.version.cuda`` lines) is not parsed at all, and the
    matcher agrees that it holds nothing."""
    rules = RuleSet([CUDA_VERSION])
    generated = "".join(f"v{i} = torch.version.cuda\n" for i in range(200))
    assert not rules.candidates(generated)
    assert not rules.candidates("# adapted from torch docs\n" + generated)  # no import statement
    assert not scan_source(generated, "gen.py", rules, kind="python")
    assert rules.candidates("import torch\n" + generated)
    assert rules.candidates("import os, \\\n    torch\n" + generated)  # continued import line
    assert rules.candidates("from torch import version\nprint(version.cuda)\n")


def test_import_lines_read_a_parenthesised_import_whole() -> None:
    """Anchors search import lines; the names of ``from m import (`` ... ``)`` are on
    the lines below, and a relative import of a library's own module is seen there."""
    from portscan.ruleset.prefilter import import_lines, relative_import_anchor

    text = "from . import (\n    attn_bias,\n    cutlass,\n)\nOPS = [cutlass.FwOp]\n"
    assert "cutlass" in import_lines(text)
    anchor = relative_import_anchor(["fmha", "cutlass"])
    assert anchor.occurs(import_lines(text))
    assert anchor.occurs(import_lines("from .cutlass import FwOp\n"))
    assert not anchor.occurs(import_lines("from .cutlass.scheduling import CUTLASSScheduling\n"))
    assert not anchor.occurs(import_lines("from .common import (\n    Op,\n)\n# cutlass\n"))


def test_prefilter_returns_candidates_in_rule_order() -> None:
    """The matcher gets the candidates in the rule set's order, whatever word picked them."""
    first = call_rule(keyword="backend", equals=["tensorrt"])
    rules = RuleSet([first, CUDA_VERSION])
    text = 'import torch\ntorch.compile(m, backend="tensorrt")\nprint(torch.version.cuda)\n'
    assert [r.code for r in rules.candidates(text)] == [r.code for r in rules.rules]


def test_ascii_words_hold_every_word_a_token_can_be() -> None:
    from portscan.ruleset.prefilter import ascii_words

    text = "x = torch.cuda\u2192version; é_cuda = 1 # nvidia-smi\n"
    assert {"torch", "cuda", "version", "x", "nvidia", "smi"} <= set(ascii_words(text))
    assert set(ascii_words(text)) >= {w for w in __import__("re").findall(r"\w+", text) if w.isascii()}


def test_prefilter_needs_the_literal_argument_of_a_call_rule() -> None:
    rules = RuleSet([call_rule(keyword="backend", equals=["tensorrt", "torch_tensorrt"])])
    assert not rules.candidates("import torch\ntorch.compile(model)\n")
    assert rules.candidates('import torch\ntorch.compile(model, backend="torch_tensorrt")\n')


def test_code_only_drops_comments_and_strings_but_keeps_f_strings() -> None:
    """Read left to right as the tokenizer reads them: a ``#`` in a string is text, a
    quote in a comment is text; an f-string's braces hold code and it stays whole."""
    from portscan.ruleset.prefilter import code_only

    text = ('a = "x # y"  # it\'s b\n'
            "c = '''doc\nwith \"quotes\" and ''' + rb'\\d' + u\"e\\\"f\"\n"
            "g = f\"+cu{torch.version.cuda}\" + fR'{h}'\n"
            'i = """unterminated\n')
    kept = code_only(text).split()
    # a prefix's letters stay (a superset of the code's words is safe), an f-string is whole
    assert kept[:8] == ["a", "=", "c", "=", "+", "rb", "+", "u"]
    assert kept[8:13] == ["g", "=", 'f"+cu{torch.version.cuda}"', "+", "fR'{h}'"]
    assert kept[13:] == ["i", "=", '"unterminated']  # a string that never closes stays code


def test_prefilter_wants_a_name_used_in_code_not_in_text() -> None:
    """A qualified name is used in code: in a docstring, a comment or a string (a
    generated table of names) it sends no file to the parser; in an f-string's braces,
    it does. A two-part name ``a.b`` needs ``a.b`` spelled, an alias of ``a``, or an
    import naming ``b``: ``import torch`` and another module's ``aten._scaled_mm`` do not."""
    rules = RuleSet([CUDA_VERSION, rule("PS099", {"kind": "call", "callees": ["torch._scaled_mm"]})])
    docstring = 'import torch\ndef f():\n    """>>> torch.version.cuda"""\n'
    assert not rules.candidates(docstring)
    assert not rules.candidates("import torch\n# torch.version.cuda is None on ROCm\n")
    assert not rules.candidates("import torch\nNAMES = ['torch.version.cuda']\n")
    assert rules.candidates('import torch\ntag = f"+cu{torch.version.cuda}"\n')
    assert not rules.candidates('"""\nimport torch\n"""\nx = torch.version.cuda\n')  # an import in text
    assert not rules.candidates("import torch\nx = aten._scaled_mm(a, b)\n")
    for code in ("import torch as th\nth._scaled_mm(a, b)\n", "from torch import _scaled_mm\n_scaled_mm(a, b)\n",
                 "import torch\ntorch._scaled_mm(a, b)\n"):
        assert [r.code for r in rules.candidates(code)] == ["PS099"], code
        assert scan_source(code, "m.py", rules, kind="python"), code


def test_prefilter_wants_the_process_call_of_a_pip_install_in_code() -> None:
    """``pip install torch`` run from Python needs the spawning call in code; the words in
    a comment or a docstring do not make a candidate."""
    from portscan.ruleset.loader import load_rules

    rules = load_rules().select(["PS801"])
    assert not rules.candidates('"""Run `pip install torch` (see subprocess)."""\nimport os\n')
    assert rules.candidates('import subprocess\nsubprocess.run("pip install torch", shell=True)\n')


# ------------------------------------------------------------------ guards


def severity_rule(code: str, match: dict, severity: str):
    built = rule(code, match)
    return type(built)(**{**{f: getattr(built, f) for f in built.__dataclass_fields__},
                          "severity": type(built.severity)(severity)})


PYNVML = severity_rule("XX602", {"kind": "import", "modules": ["pynvml", "tensorrt"]}, "error")
CUDA_PARSE = severity_rule("XX401", {"kind": "name", "names": ["torch.version.cuda"],
                                     "usage": "operand"}, "error")
CUDA_TRUTH = severity_rule("XX402", {"kind": "name", "names": ["torch.version.cuda"],
                                     "usage": "truth"}, "warning")
HOPPER_GATE = severity_rule("XX502", {"kind": "compare", "callees": ["torch.cuda.get_device_capability"]},
                            "error")


def guarded(source: str):
    rules = RuleSet([PYNVML, CUDA_PARSE, CUDA_TRUTH, HOPPER_GATE])
    return [(f.span.line, f.rule, f.severity.value, f.guard)
            for f in scan_source(textwrap.dedent(source), "t.py", rules)]


@pytest.mark.parametrize("source, expected", [
    ("try:\n    import pynvml\nexcept ImportError:\n    pynvml = None\n",
     [(2, "XX602", "warning", "fallback")]),
    ("try:\n    import pynvml\nexcept (ImportError, OSError):\n    pass\n",
     [(2, "XX602", "warning", "fallback")]),
    ("try:\n    import pynvml\nexcept:\n    log('no nvml')\n", [(2, "XX602", "warning", "fallback")]),
    ("import torch\ntry:\n    v = float(torch.version.cuda)\nexcept TypeError:\n    v = 0.0\n",
     [(3, "XX401", "warning", "fallback")]),
    ("import torch\ndef v():\n    if torch.version.hip:\n        return 0\n    return float(torch.version.cuda)\n",
     [(5, "XX401", "info", "vendor-branch")]),
    ("import torch\ndef v():\n    if torch.version.hip:\n        x = 0\n    return float(torch.version.cuda)\n",
     [(5, "XX401", "error", None)]),
    ("import torch\nok = torch.version.cuda is not None and float(torch.version.cuda) >= 11.8\n",
     [(2, "XX402", "info", "vendor-branch"), (2, "XX401", "info", "vendor-branch")]),
    ("try:\n    import pynvml\nexcept ImportError:\n    raise SystemExit('install nvml')\n",
     [(2, "XX602", "error", None)]),
    ("try:\n    import pynvml\nexcept KeyError:\n    pass\n", [(2, "XX602", "error", None)]),
    ("try:\n    import pynvml\nexcept ImportError as e:\n    if strict:\n        raise\n    pynvml = None\n",
     [(2, "XX602", "warning", "fallback")]),
    ("try:\n    import pynvml\nexcept ImportError:\n    raise\n", [(2, "XX602", "error", None)]),
    ("try:\n    pass\nexcept ImportError:\n    import pynvml\n", [(4, "XX602", "error", None)]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tensorrt\n",
     [(3, "XX602", "info", "type-checking")]),
    ("import typing\nif typing.TYPE_CHECKING:\n    try:\n        import tensorrt\n    except ImportError:\n"
     "        pass\n", [(4, "XX602", "info", "type-checking")]),
    ("import torch\nif torch.version.hip:\n    v = torch.version.hip.split('.')\nelse:\n"
     "    v = torch.version.cuda.split('.')\n", [(5, "XX401", "info", "vendor-branch")]),
    ("import torch\nif torch.version.hip:\n    pass\nelif torch.version.cuda:\n    pass\n",
     [(4, "XX402", "info", "vendor-branch")]),
    ("import torch\nIS_ROCM = torch.version.hip is not None\nif not IS_ROCM:\n    import pynvml\n",
     [(4, "XX602", "info", "vendor-branch")]),
    ("import torch\nif 'rocm' in torch.__version__:\n    pass\nelse:\n    import pynvml\n",
     [(5, "XX602", "info", "vendor-branch")]),
    ("import torch\nhopper = torch.version.cuda is not None and torch.cuda.get_device_capability() >= (9, 0)\n",
     [(2, "XX402", "info", "vendor-branch"), (2, "XX502", "info", "vendor-branch")]),
    ("import torch\nx = 'hip' if torch.version.hip else torch.version.cuda[:2]\n",
     [(2, "XX401", "info", "vendor-branch")]),
    ("import torch\nif torch.cuda.is_available():\n    v = float(torch.version.cuda)\n",
     [(3, "XX401", "error", None)]),
    ("import torch\nname = torch.cuda.get_device_name().lower()\nif 'nvidia' in name:\n"
     "    import pynvml\nelif 'amd' in name:\n    pass\n", [(4, "XX602", "info", "vendor-branch")]),
    ("import torch\nif 'A100' in torch.cuda.get_device_name():\n    import pynvml\n",
     [(3, "XX602", "error", None)]),
    # a cuda flag assigned beside a hip flag (diffusers' testing_utils) tells the builds apart
    ("import torch\nIS_ROCM = torch.version.hip is not None\nIS_CUDA = torch.version.cuda is not None\n",
     [(3, "XX402", "info", "vendor-branch")]),
    ("import torch\ndef kind():\n    cuda: bool = torch.version.cuda is not None\n"
     "    hip = bool(torch.version.hip)\n    return cuda, hip\n", [(3, "XX402", "info", "vendor-branch")]),
    # ... but not a lone flag after a blank line, nor one beside other assignments
    ("import torch\nIS_ROCM = torch.version.hip is not None\n\nIS_CUDA = torch.version.cuda is not None\n",
     [(4, "XX402", "warning", None)]),
    ("import torch\nGPU = torch.cuda.is_available()\nIS_CUDA = torch.version.cuda is not None\n",
     [(3, "XX402", "warning", None)]),
    # a version read beside the hip one is no flag pair: parsing it still raises
    ("import torch\ncuda = float(torch.version.cuda)\nhip = torch.version.hip\n",
     [(2, "XX401", "error", None)]),
])
def test_guards_lower_the_severity(source: str, expected) -> None:
    assert guarded(source) == expected


@pytest.mark.parametrize("source, expected", [
    # mentioned only in a vendor branch: the helper's body is one too
    ("def _nvidia_gpus():\n    import pynvml\n\ndef count(name):\n    if 'nvidia' in name:\n"
     "        return _nvidia_gpus()\n", [(2, "XX602", "info", "vendor-branch")]),
    # also called outside one
    ("def _nvidia_gpus():\n    import pynvml\n\ndef count(name):\n    if 'nvidia' in name:\n"
     "        return _nvidia_gpus()\n\ndef total():\n    return _nvidia_gpus()\n", [(2, "XX602", "error", None)]),
    # a public function may be called from other modules
    ("def nvidia_gpus():\n    import pynvml\n\ndef count(name):\n    if 'nvidia' in name:\n"
     "        return nvidia_gpus()\n", [(2, "XX602", "error", None)]),
    # never mentioned: nothing tells where it runs
    ("import torch\ndef _nvidia_gpus():\n    import pynvml\n\nif torch.version.hip:\n    pass\n",
     [(3, "XX602", "error", None)]),
])
def test_a_private_helper_mentioned_only_in_vendor_branches_is_one(source: str, expected) -> None:
    assert guarded(source) == expected


# ------------------------------------------------------------------ env, string, plain names


ENV = rule("XX701", {"kind": "env", "names": ["NCCL_P2P_LEVEL"], "values": ["NVL"]},
           message="${name}=${value}")
ARCH = rule("XX702", {"kind": "env", "names": ["TORCH_CUDA_ARCH_LIST"]}, message="${name}")


@pytest.mark.parametrize("line, hits", [
    ('os.environ["NCCL_P2P_LEVEL"] = "NVL"', ["NCCL_P2P_LEVEL=\"NVL\""]),
    ('os.environ["NCCL_P2P_LEVEL"] = "SYS"', []),
    ('os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0")', ["TORCH_CUDA_ARCH_LIST"]),
    ('os.putenv("TORCH_CUDA_ARCH_LIST", "8.0")', ["TORCH_CUDA_ARCH_LIST"]),
    ('os.environ.update(TORCH_CUDA_ARCH_LIST="8.0", NCCL_P2P_LEVEL="NVL")',
     ["TORCH_CUDA_ARCH_LIST", "NCCL_P2P_LEVEL=\"NVL\""]),
    ('os.environ.update({"NCCL_P2P_LEVEL": "NVL"})', ["NCCL_P2P_LEVEL=\"NVL\""]),
    ('environ["TORCH_CUDA_ARCH_LIST"] = "8.0"', ["TORCH_CUDA_ARCH_LIST"]),
    ('x = os.environ.get("TORCH_CUDA_ARCH_LIST")', []),
    ('settings["TORCH_CUDA_ARCH_LIST"] = "8.0"', []),
])
def test_environment_variables_set_from_python(line: str, hits: list[str]) -> None:
    source = "import os\nfrom os import environ\n" + line + "\n"
    assert [message for _, _, message in run(source, ENV, ARCH)] == hits


def test_string_literals_outside_docstrings() -> None:
    providers = rule("XX103", {"kind": "string", "values": ["CUDAExecutionProvider"]},
                     message="${value}")
    source = '''\
    """Runs on CUDAExecutionProvider."""
    def f():
        "CUDAExecutionProvider"
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    name = "CUDA" "ExecutionProvider"
    '''
    assert run(source, providers) == [("XX103", 4, "CUDAExecutionProvider"),
                                      ("XX103", 5, "CUDAExecutionProvider")]


def test_strings_used_as_lookup_keys_are_not_requests() -> None:
    providers = rule("XX103", {"kind": "string", "values": ["CUDAExecutionProvider"]})
    source = '''\
    opts = options.get("CUDAExecutionProvider", {})
    cfg = options["CUDAExecutionProvider"]
    options.pop("CUDAExecutionProvider", None)
    session_providers = ["CUDAExecutionProvider"]
    '''
    assert [line for _, line, _ in run(source, providers)] == [4]


def test_assignment_to_a_plain_name() -> None:
    warp = rule("XX510", {"kind": "assign", "names": ["WARP_SIZE", "warp_size"], "values": [32]})
    source = "WARP_SIZE = 32\nself.warp_size = 32\nwarp_size = 64\nWARP_SIZES = 32\n"
    assert [line for _, line, _ in run(source, warp)] == [1, 2]


def test_string_unless_a_sibling_in_the_same_literal() -> None:
    cuda_ep = rule("XX108", {"kind": "string", "values": ["CUDAExecutionProvider"],
                             "unless": ["MIGraphXExecutionProvider"]})
    source = '''\
    a = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    b = ["MIGraphXExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    c = [("MIGraphXExecutionProvider", {}), ("CUDAExecutionProvider", {"device_id": 0})]
    d = ("CUDAExecutionProvider",)
    '''
    assert [line for _, line, _ in run(source, cuda_ep)] == [1, 4]


def test_env_value_regex() -> None:
    conf = rule("XX318", {"kind": "env", "names": ["PYTORCH_CUDA_ALLOC_CONF"],
                          "regex": "expandable_segments:\\s*True"})
    source = ('import os\nos.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128,expandable_segments:True"\n'
              'os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128"\n')
    assert [line for _, line, _ in run(source, conf)] == [2]


@pytest.mark.parametrize("regex, fragments", [
    ("^(?i:rocm|hip)(:[0-9]+)?$", [("rocm", True), ("hip", True)]),
    ("expandable_segments\\s*:", [("expandable_segments", False)]),
    ("(?i)^tensor", [("tensor", True)]),
    ("^(sm_90|sm_100)", [("sm_", False)]),  # the parser factors the common prefix out
    ("[abc]+", []),
    ("(x|[yz])", []),
])
def test_regex_fragments(regex: str, fragments) -> None:
    import re

    from portscan.ruleset.prefilter import regex_fragments

    assert [(f.text, f.ignore_case) for f in regex_fragments(re.compile(regex))] == fragments


def test_prefilter_uses_regex_fragments_case_insensitively() -> None:
    device = rule("XX405", {"kind": "call", "callees": ["torch.device"],
                            "args": [{"position": 0, "regex": "^(?i:rocm|hip)(:[0-9]+)?$"}]})
    rules = RuleSet([device])
    assert not rules.candidates("import torch\nd = torch.device('cuda')\n")
    assert rules.candidates("import torch\nd = torch.device('ROCm:1')\n")
    assert run("import torch\nd = torch.device('ROCm:1')\n", device) == [
        ("XX405", 2, "torch.device('ROCm:1')")]


def test_the_fast_walker_sees_what_libcst_visits() -> None:
    """The matcher's read-only walk reaches every node LibCST's visitor reaches, except
    whitespace, comments and punctuation, in the same order."""
    trivia = (cst.BaseParenthesizableWhitespace, cst.TrailingWhitespace, cst.EmptyLine, cst.Newline,
              cst.Comment, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
              cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon,
              cst.AssignEqual)

    class Libcst(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            if not isinstance(node, trivia):
                self.seen.append(node)
            return True

    class Fast(Walker):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[cst.CSTNode] = []

        def walk(self, node: cst.CSTNode) -> None:
            self.seen.append(node)
            super().walk(node)

    checked = 0
    for path in sorted(FIXTURE.parent.rglob("*.py")):
        module = cst.parse_module(path.read_text())
        reference, fast = Libcst(), Fast()
        module.visit(reference)
        fast.walk(module)
        assert [id(n) for n in fast.seen if not isinstance(n, trivia)] == [id(n) for n in reference.seen], path
        checked += len(fast.seen)
    assert checked > 5000


def test_code_under_a_cuda_home_test_is_a_vendor_branch(rules) -> None:
    """torch's CUDA_HOME is None on ROCm: the branches under `CUDA_HOME is (not) None` are
    vendor branches, the test itself stays the gate PS404 reports, and neither an and/or
    chain nor the code after `if CUDA_HOME is None: raise` is lowered."""
    source = textwrap.dedent('''\
        import os, subprocess
        from torch.utils.cpp_extension import CUDA_HOME

        def nvcc_version():
            if CUDA_HOME is None:
                return None
            else:
                return subprocess.check_output([CUDA_HOME + "/bin/nvcc", "-V"], text=True)

        ok = CUDA_HOME is not None and os.path.isdir(os.path.join(CUDA_HOME, "bin"))
        if CUDA_HOME is None:
            raise RuntimeError("install the CUDA toolkit")
        NVCC = os.path.join(CUDA_HOME, "bin", "nvcc")
        ''')
    found = [(f.span.line, f.rule, f.severity.value, f.guard) for f in scan_source(source, "setup.py", rules)
             if f.rule in ("PS404", "PS407")]
    assert found == [(5, "PS404", "error", None), (8, "PS404", "info", "vendor-branch"),
                     (8, "PS407", "info", "vendor-branch"), (10, "PS404", "error", None),
                     (10, "PS404", "error", None), (11, "PS404", "error", None), (13, "PS404", "error", None)]


def test_a_table_of_device_names_over_one_local_is_one_finding_with_its_uses(rules) -> None:
    """Each `elif "a100" in chip:` of a peak-FLOPs table is the same problem: one PS504
    finding at the first test, the others listed in `uses`; a test of another local or of
    the call itself stays a finding of its own."""
    source = textwrap.dedent('''\
        import torch

        def peak_flops(device):
            chip = torch.cuda.get_device_name(device).lower()
            if "h100" in chip:
                return 989e12
            elif "a100" in chip:
                return 312e12
            elif "v100" in chip.lower():
                return 125e12
            other = torch.cuda.get_device_name(1)
            if "t4" in other:
                return 65e12
            if torch.cuda.get_device_name() == "NVIDIA L4":
                return 121e12
            return None
        ''')
    found = [(f.span.line, [u[0] for u in f.uses]) for f in scan_source(source, "mfu.py", rules)
             if f.rule == "PS504"]
    assert found == [(5, [7, 9]), (12, []), (14, [])]


# ------------------------------------------------------------------ texts beside a type test

OOM_TEXT = rule("XX323", {"kind": "string", "tested": True, "values": ["CUDA out of memory"],
                          "unless_type_tested": ["torch.cuda.OutOfMemoryError", "torch.OutOfMemoryError"]})


@pytest.mark.parametrize("test, reported", [
    ('"CUDA out of memory" in str(e) or isinstance(e, torch.cuda.OutOfMemoryError)', False),
    ('isinstance(e, torch.OutOfMemoryError) or str(e).startswith("CUDA out of memory")', False),
    ('ok and ("CUDA out of memory" in str(e) or isinstance(e, (ValueError, OOM)))', False),  # an alias, in a tuple
    ('a or b or "CUDA out of memory" in str(e) or isinstance(e, OOM)', False),
    ('"CUDA out of memory" in str(e) or isinstance(e, RuntimeError)', True),  # another type
    ('isinstance(e, torch.cuda.OutOfMemoryError) and "CUDA out of memory" in str(e)', True),  # `and`: both needed
    ('"CUDA out of memory" in str(e) or isinstance(e, OutOfMemoryError)', True),  # the project's own class
    ('"CUDA out of memory" in str(e) or issubclass(e, torch.OutOfMemoryError)', True),  # not a test of e's type
])
def test_a_text_test_beside_the_oom_type_in_an_or_is_no_match(test: str, reported: bool) -> None:
    """ROCm raises `torch.OutOfMemoryError` too, so an `or` that also tests for it still
    catches the error there, whatever the text says."""
    source = ("import torch\nfrom torch.cuda import OutOfMemoryError as OOM\n"
              "class OutOfMemoryError(Exception):\n    pass\n"
              f"def f(e, ok, a, b):\n    if {test}:\n        return 1\n")
    assert [line for _, line, _ in run(source, OOM_TEXT)] == ([6] if reported else [])
