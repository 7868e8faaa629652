"""The bundled CUDA-era repository: every expected finding, line by line, and silence
on the code that already works on ROCm."""

from __future__ import annotations

import pytest

from portscan.model import Severity
from portscan.scan import scan_paths

from conftest import FIXTURE

EXPECTED = [
    ("models/vit.py", 7, "PS204"),     # import apex.normalization.fused_layer_norm as fln
    ("models/vit.py", 8, "PS204"),     # from apex.normalization import FusedLayerNorm
    ("models/vit.py", 16, "PS502"),    # get_device_capability()[0] >= 9 -> FlashAttention-3
    ("models/vit.py", 17, "PS702"),    # from flash_attn_interface import ... (Hopper-only FA3)
    ("models/vit.py", 20, "PS501"),    # get_device_capability() >= (8, 0)
    ("models/vit.py", 21, "PS503"),    # torch.float8_e4m3fn
    ("models/vit.py", 59, "PS210"),    # FusedLayerNorm(dim, eps=1e-6)
    ("models/vit.py", 61, "PS211"),    # fln.FusedRMSNorm(dim), through the module alias
    ("scripts/export_tensorrt.py", 4, "PS101"),   # import tensorrt as trt
    ("scripts/export_tensorrt.py", 6, "PS102"),   # import torch_tensorrt
    ("scripts/export_tensorrt.py", 16, "PS104"),  # torch.compile(model, backend="tensorrt")
    ("setup.py", 8, "PS404"),          # if CUDA_HOME is None: raise
    ("setup.py", 11, "PS401"),         # torch.version.cuda.split(".")
    ("setup.py", 22, "PS610"),         # os.environ.setdefault("TORCH_CUDA_ARCH_LIST", ...)
    ("setup.py", 29, "PS901"),         # CUDAExtension(...) (info: hipified on ROCm)
    ("train.py", 13, "PS202"),         # from apex import amp
    ("train.py", 14, "PS203"),         # from apex.optimizers import FusedAdam
    ("train.py", 15, "PS205"),         # from apex.parallel import DistributedDataParallel ...
    ("train.py", 23, "PS301"),         # cudnn.benchmark = True
    ("train.py", 25, "PS303"),         # cuda.matmul.allow_tf32 = True
    ("train.py", 26, "PS304"),         # cudnn.allow_tf32 = True (info)
    ("train.py", 27, "PS305"),         # set_float32_matmul_precision("high")
    ("train.py", 68, "PS223"),         # convert_syncbn_model(model)
    ("train.py", 69, "PS209"),         # FusedAdam(...)
    ("train.py", 71, "PS216"),         # amp.initialize(model, optimizer, opt_level=...)
    ("train.py", 73, "PS222"),         # ApexDDP(model, delay_allreduce=True)
    ("train.py", 86, "PS218"),         # with amp.scale_loss(loss, optimizer) as scaled_loss
    ("utils/gpu.py", 6, "PS602"),      # import pynvml
    ("utils/gpu.py", 14, "PS401"),     # torch.version.cuda.split(".")
    ("utils/gpu.py", 18, "PS402"),     # if torch.version.cuda:
    ("utils/gpu.py", 20, "PS403"),     # f"... {torch.version.cuda}" (info, inside the cuda check)
    ("utils/gpu.py", 28, "PS601"),     # ["nvidia-smi", ...]
]

#: Code that works unchanged on ROCm; none of it may be reported as warning or error.
ROCM_SAFE = [
    ("train.py", 'dist.init_process_group(backend="nccl")'),
    ("train.py", "torch.cuda.set_device(local_rank)"),
    ("train.py", "model = vit_b16().cuda()"),
    ("train.py", "labels.cuda(non_blocking=True)"),
    ("train.py", 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'),
    ("train.py", "torch.cuda.synchronize()"),
    ("train.py", "os.environ.get('CUDA_VISIBLE_DEVICES', 'all')"),
    ("train.py", "torch.backends.cudnn.deterministic = False"),
    ("train.py", "from utils.amp import autocast_ctx"),
    ("utils/__init__.py", "from .amp import autocast_ctx"),
    ("utils/amp.py", 'torch.autocast(device_type="cuda", dtype=dtype)'),
    ("utils/gpu.py", "torch.cuda.mem_get_info()"),
    ("utils/gpu.py", 'os.environ.get("CUDA_VISIBLE_DEVICES", "")'),
    ("utils/gpu.py", '(CUDA {torch.version.cuda})"'),  # formatting None does not raise
    ("models/vit.py", "x.is_cuda"),
    ("models/vit.py", "F.scaled_dot_product_attention("),
    ("scripts/export_tensorrt.py", "model.eval().cuda().half()"),
    ("scripts/export_tensorrt.py", "from models import vit_b16"),
]


@pytest.fixture(scope="module")
def result(rules):
    return scan_paths([FIXTURE], rules)


def test_expected_findings_line_by_line(result) -> None:
    assert [(f.path, f.span.line, f.rule) for f in result.findings] == EXPECTED


def test_every_python_file_was_scanned_without_errors(result) -> None:
    python_files = sorted(p.relative_to(FIXTURE).as_posix() for p in FIXTURE.rglob("*.py"))
    assert result.files_scanned == len(python_files) == 8
    assert result.errors == ()


@pytest.mark.parametrize("path, snippet", ROCM_SAFE, ids=[s for _, s in ROCM_SAFE])
def test_rocm_safe_lines_are_not_reported(result, path: str, snippet: str) -> None:
    lines = (FIXTURE / path).read_text().splitlines()
    numbers = [i for i, line in enumerate(lines, start=1) if snippet in line]
    assert numbers, f"{snippet!r} is not in {path}"
    flagged = [f for f in result.findings if f.path == path and f.span.line in numbers
               and f.severity is not Severity.INFO]
    assert flagged == []


def test_fixture_has_the_non_python_surfaces_later_scanners_need() -> None:
    for name in ("requirements.txt", "Dockerfile", "scripts/launch.sh", "csrc/fused_bias_gelu.cu",
                 "setup.py", "train.py"):
        assert (FIXTURE / name).is_file(), name


ROCM_PORTED = FIXTURE.parent / "rocm-ported"


def test_the_ported_repository_is_clean_on_every_surface(rules) -> None:
    """The same project after the port: ROCm wheels and images, /dev/kfd passthrough,
    amd-smi, portable kernels. Nothing may be reported above info, on any surface."""
    result = scan_paths([ROCM_PORTED], rules)
    kinds = {p.name for p in ROCM_PORTED.rglob("*") if p.is_file()}
    assert {"requirements.txt", "pyproject.toml", "environment.yml", "Dockerfile",
            "docker-compose.yml", "launch.sh", "fused_bias_gelu.cu", "setup.py"} <= kinds
    assert result.errors == ()
    loud = [(f.path, f.span.line, f.rule) for f in result.findings if f.severity is not Severity.INFO]
    assert loud == []
    (extension,) = result.extensions
    assert extension.sources == ("csrc/fused_bias_gelu.cpp", "csrc/fused_bias_gelu.cu")
