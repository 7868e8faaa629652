"""Values that travel within a module (issue 17, item 3): ``torch.version.cuda`` through
locals, an environment default and a parameter default; capability tuples, SM numbers,
flags and a helper's parameters; dotted-path strings naming CUDA-only classes."""

from __future__ import annotations

import pytest

from portscan.fix.apply import fix_paths
from portscan.model import Severity
from portscan.scan import scan_paths, scan_source

from conftest import REPO

FUSED_ATTN = REPO / "fixtures" / "fused-attn"

EXPECTED = [
    ("fused_attn/dispatch.py", 11, "PS502"),  # IS_SM90 = CAPABILITY >= (9, 0), CAPABILITY from a ternary
    ("fused_attn/dispatch.py", 12, "PS503"),  # FP8_DTYPE = torch.float8_e4m3fn if IS_SM90 else ...: where chosen
    ("fused_attn/dispatch.py", 12, "PS511"),  # ... if IS_SM90 ...: the flag gates (info)
    ("fused_attn/dispatch.py", 19, "PS501"),  # capability >= (major, minor) in the helper
    ("fused_attn/dispatch.py", 24, "PS502"),  # requires_sm(9, 0): the helper's caller decides
    ("fused_attn/dispatch.py", 25, "PS501"),  # requires_sm(8, 0)
    ("fused_attn/dispatch.py", 30, "PS511"),  # if IS_SM90: (info)
    ("fused_attn/dispatch.py", 33, "PS506"),  # props.major * 10 + props.minor >= 80
    ("fused_attn/dispatch.py", 53, "PS403"),  # CUDA_BUILD = torch.version.cuda (info)
    ("fused_attn/dispatch.py", 54, "PS401"),  # int(CUDA_BUILD.split(".")[0]) >= 12: fixable through the local
    ("fused_attn/optim.py", 15, "PS203"),     # "apex.optimizers.FusedAdam" as opt_class
    ("fused_attn/optim.py", 16, "PS203"),     # opt_class="apex.optimizers.FusedLAMB"
    ("fused_attn/optim.py", 19, "PS203"),     # Hydra {"_target_": "apex.optimizers.FusedAdam"}
    ("setup.py", 14, "PS403"),                # os.environ.get("FUSED_ATTN_CUDA", torch.version.cuda) (info)
    ("setup.py", 15, "PS403"),                # TORCH_CUDA = torch.version.cuda (info)
    ("setup.py", 21, "PS409"),                # f"...+cu{CUDA_VERSION}..." through the environment default
    ("setup.py", 25, "PS401"),                # version.split(".") through the parameter default TORCH_CUDA
    ("setup.py", 44, "PS901"),                # CUDAExtension (info)
]


@pytest.fixture(scope="module")
def result(rules):
    return scan_paths([FUSED_ATTN], rules)


def test_every_finding_of_the_fixture_line_by_line(result) -> None:
    assert [(f.path, f.span.line, f.rule) for f in result.findings] == EXPECTED
    assert result.errors == ()


def test_a_travelled_value_names_where_it_came_from(result) -> None:
    (tag,) = [f for f in result.findings if f.rule == "PS409"]
    assert "`CUDA_VERSION = os.environ.get(\"FUSED_ATTN_CUDA\", torch.version.cuda)`" in tag.message
    parsed, split = [f for f in result.findings if f.rule == "PS401"]
    assert "`TORCH_CUDA = torch.version.cuda`" in split.message and split.fix is None
    assert parsed.fix == "safe"  # a comparison: `CUDA_BUILD is not None and ...`


def test_values_only_shown_or_checked_stay_quiet(result) -> None:
    """The SM number only logged (describe), prose naming apex.optimizers, the
    import_module of a computed name, and `if TORCH_CUDA is None` are not reported."""
    quiet = {("fused_attn/dispatch.py", n) for n in range(38, 44)} | {("setup.py", 28), ("setup.py", 29)}
    assert not [f for f in result.findings if (f.path, f.span.line) in quiet]
    assert not [f for f in result.findings if f.path == "fused_attn/optim.py" and f.span.line > 19]


def _loud(source: str, rules) -> list[tuple[int, str]]:
    return [(f.span.line, f.rule) for f in scan_source(source, "m.py", rules)
            if f.severity is not Severity.INFO]


def test_a_carried_cuda_version_is_reported_where_it_raises(rules) -> None:
    source = (
        "import torch\n"
        "V = torch.version.cuda\n"
        "W = V\n"
        "MAJOR = int(W.split('.')[0])\n"          # two locals away
        "if V is not None:\n"
        "    MINOR = int(V.split('.')[1])\n"       # checked first
        "OK = V and V >= '11.8'\n"                 # checked first, in the chain
        "INFO = {'cuda': torch.version.cuda}\n"
        "PARTS = INFO['cuda'].split('.')\n"        # a dict entry
        "NAME = INFO['name'].split('.')\n"         # another entry
    )
    assert _loud(source, rules) == [(4, "PS401"), (9, "PS401")]


def test_a_truth_check_through_a_local_is_not_followed(rules) -> None:
    source = "import torch\nV = torch.version.cuda\nif V:\n    pass\nIS_NV = V is not None\n"
    assert _loud(source, rules) == []


def test_sm_numbers_and_helper_parameters(rules) -> None:
    source = (
        "import torch\n"
        "major, minor = torch.cuda.get_device_capability()\n"
        "SM = major * 10 + minor\n"
        "HOPPER = SM >= 90\n"                      # through a local SM number
        "def at_least(major, minor):\n"
        "    return torch.cuda.get_device_capability() >= (major, minor)\n"
        "FA3 = at_least(9, 0)\n"
        "def show():\n"
        "    hopper = torch.cuda.get_device_capability() >= (9, 0)\n"
        "    print(f'hopper={hopper}')\n"           # a function's flag only printed
    )
    assert _loud(source, rules) == [(4, "PS502"), (6, "PS501"), (7, "PS502")]


def test_dotted_strings_are_lazy_imports_and_prose_is_not(rules) -> None:
    source = (
        "import importlib, sys\n"
        "OPT = 'apex.optimizers.FusedSGD'\n"
        "amp = importlib.import_module('apex')\n"
        "LOADED = 'apex.amp' in sys.modules\n"
        "MOD = sys.modules['apex.normalization']\n"
        "MSG = 'apex.optimizers is not installed'\n"
        "FILE = 'flash_attn.py'\n"
        "import logging\n"
        "logging.getLogger('vllm.config').setLevel(logging.WARN)\n"  # a logger name, not an import
        "RUNNER = ['python', '-m', 'vllm.entrypoints.openai.api_server']\n"
        "CUTE = {'float32': 'cutlass.Float32'}\n"  # a name one level down: generated code
        "def plan(op: 'cutlass_library.gemm_op.GemmOperation') -> 'cutlass_library.library.DataType':\n"
        "    best: 'cutlass_library.gemm_op.GemmOperation' = op\n"  # type hints, not imports
        "    return best\n"
    )
    assert _loud(source, rules) == [(2, "PS203"), (3, "PS201")]


def test_the_none_check_fix_applies_through_a_local(tmp_path, rules) -> None:
    (tmp_path / "setup.py").write_text(
        "import torch\nfrom packaging import version\nV = torch.version.cuda\n"
        "NEW = version.parse(V) >= version.parse('12.4')\n")
    fix_paths([tmp_path], rules)
    assert "NEW = V is not None and version.parse(V)" in (tmp_path / "setup.py").read_text()


def test_a_wheel_tag_worked_out_from_the_cuda_version(rules) -> None:
    source = (
        "import torch\n"
        "from packaging.version import parse\n"
        "def wheel():\n"
        "    cuda = parse(torch.version.cuda)\n"
        "    tag = f'{cuda.major}{cuda.minor}'\n"
        "    hip = torch.version.hip\n"
        "    return f'pkg+cu{tag}.whl', f'pkg+rocm{hip}.whl', f'cu{hip}'\n"
    )
    assert _loud(source, rules) == [(4, "PS401"), (7, "PS409")]
