"""The bundled CUDA-era repository: every expected finding, line by line, and silence
on the code that already works on ROCm."""

from __future__ import annotations

import pytest

from portscan.model import Severity
from portscan.scan import scan_paths

from conftest import FIXTURE

EXPECTED = [
    ("Dockerfile", 1, "PS831"),                   # nvcr.io/nvidia/pytorch:22.12-py3 is an NVIDIA NGC image built for NV
    ("Dockerfile", 3, "PS610"),                   # TORCH_CUDA_ARCH_LIST is ignored by ROCm builds of PyTorch
    ("Dockerfile", 4, "PS611"),                   # NVIDIA_VISIBLE_DEVICES is read only by the NVIDIA container runtime
    ("csrc/fused_bias_gelu.cu", 7, "PS910"),      # #define WARP_SIZE 32 hard-codes a 32-lane warp
    ("csrc/fused_bias_gelu.cu", 8, "PS912"),      # #define FULL_MASK 0xffffffff passes a 32-lane mask
    ("csrc/fused_bias_gelu.cu", 12, "PS926"),     # __shfl_xor_sync(FULL_MASK, ...: the 32-bit mask macro passed
    ("csrc/fused_bias_gelu.cu", 19, "PS914"),     # asm volatile( embeds inline assembly, which in CUDA sources is PTX
    ("csrc/fused_bias_gelu.cu", 26, "PS911"),     # lane = threadIdx.x & 31
    ("csrc/fused_bias_gelu.cu", 27, "PS911"),     # warp = threadIdx.x >> 5
    ("csrc/fused_bias_gelu.cu", 36, "PS913"),     # unsigned active = __ballot_sync( keeps a ballot/active mask in 32 bi
    ("csrc/fused_bias_gelu.cu", 36, "PS926"),     # __ballot_sync(FULL_MASK, ...
    ("docker-compose.yml", 5, "PS837"),           # services.train.runtime: nvidia needs the NVIDIA container runtime, w
    ("docker-compose.yml", 7, "PS611"),           # NVIDIA_VISIBLE_DEVICES is read only by the NVIDIA container runtime
    ("docker-compose.yml", 14, "PS838"),          # deploy.resources.reservations.devices[0].driver: nvidia
    ("environment.yml", 4, "PS823"),              # nvidia is an NVIDIA conda channel that only provides CUDA packages
    ("environment.yml", 9, "PS821"),              # pytorch-cuda=11.7 selects the CUDA build of PyTorch from conda
    ("environment.yml", 10, "PS821"),             # cudatoolkit=11.7 selects the CUDA build of PyTorch from conda
    ("environment.yml", 14, "PS806"),             # cupy-cuda11x is a CUDA build of CuPy
    ("models/vit.py", 7, "PS204"),                # import apex.normalization.fused_layer_norm as fln
    ("models/vit.py", 8, "PS204"),                # from apex.normalization import FusedLayerNorm
    ("models/vit.py", 16, "PS502"),               # get_device_capability()[0] >= 9 -> FlashAttention-3
    ("models/vit.py", 17, "PS702"),               # from flash_attn_interface import ... (Hopper-only FA3)
    ("models/vit.py", 20, "PS501"),               # get_device_capability() >= (8, 0)
    ("models/vit.py", 21, "PS503"),               # torch.float8_e4m3fn (a scaled GEMM computes with it)
    ("models/vit.py", 59, "PS210"),               # FusedLayerNorm(dim, eps=1e-6)
    ("models/vit.py", 61, "PS211"),               # fln.FusedRMSNorm(dim), through the module alias
    ("models/vit.py", 91, "PS509"),               # torch._scaled_mm(...) FP8 GEMM
    ("pyproject.toml", 2, "PS820"),               # torch==1.13.1 is a build requirement: an isolated build downloads th
    ("pyproject.toml", 10, "PS801"),              # torch==1.13.1+cu117 pins a CUDA build of torch
    ("pyproject.toml", 12, "PS809"),              # pynvml reads GPUs through NVIDIA's NVML or nvidia-smi and finds none
    ("pyproject.toml", 13, "PS803"),              # nvidia-cudnn-cu11 is an NVIDIA CUDA library wheel
    ("pyproject.toml", 17, "PS804"),              # tensorrt is NVIDIA TensorRT, which has no ROCm build
    ("pyproject.toml", 17, "PS807"),              # onnxruntime-gpu is a CUDA build of ONNX Runtime
    ("requirements.txt", 1, "PS802"),             # https://download.pytorch.org/whl/cu117 is PyTorch's CUDA wheel index
    ("requirements.txt", 2, "PS801"),             # torch==1.13.1+cu117 pins a CUDA build of torch
    ("requirements.txt", 3, "PS801"),             # torchvision==0.14.1+cu117 pins a CUDA build of torchvision
    ("requirements.txt", 6, "PS809"),             # pynvml reads GPUs through NVIDIA's NVML or nvidia-smi and finds none
    ("requirements.txt", 7, "PS804"),             # tensorrt is NVIDIA TensorRT, which has no ROCm build
    ("requirements.txt", 8, "PS808"),             # nvidia-dali-cuda110 is NVIDIA DALI, built only for CUDA
    ("requirements.txt", 9, "PS814"),             # apex @ git+https://github.com/NVIDIA/apex.git@22.04-dev installs NVI
    ("scripts/export_tensorrt.py", 4, "PS101"),   # import tensorrt as trt
    ("scripts/export_tensorrt.py", 6, "PS102"),   # import torch_tensorrt
    ("scripts/export_tensorrt.py", 16, "PS104"),  # torch.compile(model, backend="tensorrt")
    ("scripts/launch.sh", 8, "PS601"),            # nvidia-smi does not exist on AMD GPU hosts
    ("scripts/launch.sh", 10, "PS615"),           # NCCL_P2P_LEVEL=NVL: RCCL ignores the level name NVL (info)
    ("scripts/launch.sh", 11, "PS840"),           # CUDA_HOME points builds at a CUDA toolkit
    ("scripts/launch.sh", 16, "PS834"),           # --gpus asks docker for a GPU device driver
    ("setup.py", 8, "PS404"),                     # if CUDA_HOME is None: raise
    ("setup.py", 11, "PS401"),                    # torch.version.cuda.split(".")
    ("setup.py", 15, "PS903"),                    # nvcc math flag --use_fast_math reaches hipcc unchanged on ROCm, and
    ("setup.py", 16, "PS902"),                    # nvcc architecture flag -gencode reaches hipcc unchanged on ROCm, and
    ("setup.py", 17, "PS904"),                    # nvcc front-end flag --expt-relaxed-constexpr reaches hipcc unchanged
    ("setup.py", 20, "PS902"),                    # nvcc architecture flag -gencode reaches hipcc unchanged on ROCm, and
    ("setup.py", 22, "PS610"),                    # os.environ.setdefault("TORCH_CUDA_ARCH_LIST", ...)
    ("setup.py", 29, "PS901"),                    # CUDAExtension(...) (info: hipified on ROCm)
    ("setup.py", 33, "PS908"),                    # the extension links the CUDA library cublas, which does not exist on
    ("setup.py", 37, "PS809"),                    # pynvml reads GPUs through NVIDIA's NVML or nvidia-smi and finds none
    ("train.py", 13, "PS202"),                    # from apex import amp
    ("train.py", 14, "PS203"),                    # from apex.optimizers import FusedAdam
    ("train.py", 15, "PS205"),                    # from apex.parallel import DistributedDataParallel ...
    ("train.py", 23, "PS301"),                    # cudnn.benchmark = True
    ("train.py", 25, "PS303"),                    # cuda.matmul.allow_tf32 = True
    ("train.py", 26, "PS304"),                    # cudnn.allow_tf32 = True (info)
    ("train.py", 27, "PS305"),                    # set_float32_matmul_precision("high")
    ("train.py", 68, "PS223"),                    # convert_syncbn_model(model)
    ("train.py", 69, "PS209"),                    # FusedAdam(...)
    ("train.py", 71, "PS216"),                    # amp.initialize(model, optimizer, opt_level=...)
    ("train.py", 73, "PS222"),                    # ApexDDP(model, delay_allreduce=True)
    ("train.py", 86, "PS218"),                    # with amp.scale_loss(loss, optimizer) as scaled_loss
    ("utils/gpu.py", 6, "PS602"),                 # import pynvml
    ("utils/gpu.py", 14, "PS401"),                # torch.version.cuda.split(".")
    ("utils/gpu.py", 18, "PS402"),                # if torch.version.cuda:
    ("utils/gpu.py", 20, "PS403"),                # f"... {torch.version.cuda}" (info, inside the cuda check)
    ("utils/gpu.py", 28, "PS601"),                # ["nvidia-smi", ...]
    ("utils/gpu.py", 53, "PS401"),                # tuple(... torch.version.cuda.split(".")[:2]) >= (12, 4)
]

#: Code that works unchanged on ROCm; none of it may be reported as warning or error.
ROCM_SAFE = [
    ("train.py", 'dist.init_process_group(backend="nccl")'),
    ("train.py", "torch.cuda.set_device(local_rank)"),
    ("train.py", "model = build_model(cfg).to(device)"),
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


def test_every_surface_was_scanned_without_errors(result) -> None:
    files = sorted(p.relative_to(FIXTURE).as_posix() for p in FIXTURE.rglob("*")
                   if p.is_file() and p.suffix not in (".md", ".yaml"))
    assert len(files) == result.files_scanned == 16  # csrc/*.cpp is read because setup.py builds it
    assert {f.path.split("/")[-1] for f in result.findings} >= {
        "requirements.txt", "pyproject.toml", "environment.yml", "Dockerfile", "docker-compose.yml",
        "launch.sh", "setup.py", "fused_bias_gelu.cu", "train.py"}
    assert result.errors == ()


def test_the_extension_is_linked_to_its_kernel_sources(result) -> None:
    (extension,) = result.extensions
    assert (extension.name, extension.path, extension.line) == ("fused_bias_gelu", "setup.py", 29)
    assert extension.sources == ("csrc/fused_bias_gelu.cpp", "csrc/fused_bias_gelu.cu")
    assert extension.findings == 8


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
