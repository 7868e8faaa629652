"""Idioms that PyTorch keeps working on ROCm, plus code that already handles ROCm.

tests/test_precision.py scans this file with the whole rule pack: nothing here may be
reported as a warning or an error. Every line is something real training code does.
"""
import contextlib
import logging
import os
import subprocess
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

if TYPE_CHECKING:
    import tensorrt  # only for type hints; never imported at run time

try:  # the fused kernel where apex is built, PyTorch's own LayerNorm elsewhere: nothing lost
    from apex.normalization import FusedLayerNorm as LayerNorm
except ImportError:
    from torch.nn import LayerNorm

try:
    from apex.normalization import FusedRMSNorm
except ImportError:
    FusedRMSNorm = torch.nn.RMSNorm

try:
    from apex.optimizers import FusedAdam as AdamW
except ImportError:
    AdamW = torch.optim.AdamW

try:  # a local picks the fused class; torch's LayerNorm where apex is missing (modelscope's vldoc)
    import apex
    import apex.normalization
    LN = apex.normalization.FusedLayerNorm
except ImportError:
    LN = torch.nn.LayerNorm

try:  # only tested against: an object is a TensorRT engine only where TensorRT imported
    import tensorrt as trt
except ImportError:
    trt = None

log = logging.getLogger(__name__)

IS_ROCM = torch.version.hip is not None
HAS_GPU = torch.cuda.is_available()
DEVICE = torch.device("cuda" if HAS_GPU else "cpu")
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", 0))
VISIBLE = os.environ.get("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("NCCL_DEBUG", "WARN")
os.environ["NCCL_SOCKET_IFNAME"] = "eth0"
os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"
os.environ["NCCL_P2P_LEVEL"] = "NVL"  # RCCL does not know the level name: ignored, nothing fails
os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
os.environ["PYTORCH_HIP_ALLOC_CONF"] = "garbage_collection_threshold:0.8"

torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.use_deterministic_algorithms(True, warn_only=True)
torch.manual_seed(0)
torch.cuda.manual_seed_all(0)


def set_determinism(full: bool) -> None:
    """cuDNN/MIOpen switches: the same cost on every vendor (performance notes, info)."""
    torch.backends.cudnn.benchmark = not full
    if full:
        torch.backends.cudnn.enabled = False
    else:
        torch.backends.cudnn.benchmark = True


def is_oom(err: Exception) -> bool:
    """Vendor-neutral: ROCm says "HIP out of memory"; a log line may still say CUDA."""
    if isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in str(err):
        log.warning("CUDA out of memory; retrying with a smaller batch")
        return True
    return False


def rocm_version():
    if torch.version.hip:
        return tuple(int(x) for x in torch.version.hip.split(".")[:2])
    return tuple(int(x) for x in torch.version.cuda.split(".")[:2])


def backend_name() -> str:
    if torch.version.hip is not None:
        return f"ROCm {torch.version.hip}"
    elif torch.version.cuda is not None:
        return f"CUDA {torch.version.cuda}"
    return "CPU"


def arch_name() -> str:
    props = torch.cuda.get_device_properties(0)
    if IS_ROCM:
        return props.gcnArchName.split(":")[0]
    return f"sm_{props.major}{props.minor}"


def use_hopper_kernels() -> bool:
    return torch.version.cuda is not None and torch.cuda.get_device_capability() >= (9, 0)


def init_distributed() -> None:
    if "RANK" in os.environ:
        dist.init_process_group(backend="nccl")
        torch.cuda.set_device(LOCAL_RANK)
        dist.barrier()


def gpu_memory_report() -> str:
    free, total = torch.cuda.mem_get_info()
    allocated = torch.cuda.memory_allocated()
    reserved = torch.cuda.memory_reserved()
    peak = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    return f"{free}/{total} free, {allocated} allocated, {reserved} reserved, peak {peak}"


def environment_report() -> dict[str, str]:
    """Versions of the optional packages that are installed: a missing one loses a line."""
    info = {"torch": torch.__version__}
    try:
        import pynvml

        info["pynvml"] = pynvml.__version__
    except ImportError:
        pass
    return info


def telemetry():
    try:
        out = subprocess.run(["amd-smi", "metric", "--json"], capture_output=True, text=True)
        return out.stdout
    except FileNotFoundError:
        return None


def run_quiet(cmd: str) -> str:
    """A project's own runner: what it is given is what runs."""
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout


def announce(message: str) -> None:
    log.info("[gpu] %s", message)


def tool_report() -> str:
    announce("nvidia-smi is not used here; see amd-smi")  # a message, not a command
    return run_quiet("amd-smi list")


def nvcc_compiler_options() -> list[str]:
    """Flags of a direct nvcc command line the module builds itself (never hipcc's)."""
    return ["-t=0", "--expt-relaxed-constexpr", "--use_fast_math"]


def nvcc_command(src: str) -> list[str]:
    return ["nvcc", *nvcc_compiler_options(), src] if not IS_ROCM else ["hipcc", src]


def gpu_arch_flags() -> list[str]:
    """``get_arch_list()`` holds gfx names on ROCm, so no sm_ flag is made there."""
    return [f"-gencode=arch=compute_{a[3:]},code={a}" for a in torch.cuda.get_arch_list() if a.startswith("sm_")]


HALF_FLAGS = {"cxx": ["-O3"], "nvcc": ["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__"]}


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5)
        self.pre_norm = LayerNorm(dim, eps=1e-5)  # apex's or torch's, see the imports
        self.post_norm = FusedRMSNorm(dim, eps=1e-5)
        self.rms = nn.RMSNorm(dim, eps=1e-5)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.scaled_dot_product_attention(x, x, x, is_causal=True)
        return x + checkpoint(self.fc, self.norm(h), use_reentrant=False)


def train(model: nn.Module, loader, steps: int = 10) -> float:
    model = model.cuda()
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    if dist.is_initialized():
        model = DDP(model, device_ids=[LOCAL_RANK])
    compiled = torch.compile(model)
    graphed = torch.compile(model, mode="reduce-overhead")
    optimizer = AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)  # apex FusedAdam or torch AdamW
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0, fused=True)
    scaler = torch.amp.GradScaler("cuda")
    loss = torch.zeros((), device=DEVICE)
    stream = torch.cuda.Stream()
    for step, (x, y) in enumerate(loader):
        x, y = x.to(DEVICE, non_blocking=True), y.cuda(non_blocking=True)
        with torch.cuda.stream(stream), torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(compiled(x), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        torch.cuda.synchronize()
        if step >= steps:
            break
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed(x)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        compiled(x)
    log.info(prof.key_averages().table(sort_by="cuda_time_total"))
    torch.cuda.nvtx.range_push("eval")
    torch.cuda.nvtx.range_pop()
    torch.cuda.empty_cache()
    log.info("device %s (%d GPUs)", torch.cuda.get_device_name(0), torch.cuda.device_count())
    return float(loss)


@contextlib.contextmanager
def maybe_fp8():
    if IS_ROCM and arch_name() == "gfx942":
        dtype = torch.float8_e4m3fnuz
    elif not IS_ROCM:
        dtype = torch.float8_e4m3fn
    else:
        dtype = torch.bfloat16
    yield dtype


def _nvidia_topology() -> str:
    """Reached only from the vendor dispatch below: never runs on AMD GPUs."""
    return subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout


def gpu_topology() -> str:
    name = torch.cuda.get_device_properties(0).name.lower()
    if "nvidia" in name:
        return _nvidia_topology()
    elif "amd" in name or "advanced micro devices" in name:
        return subprocess.run(["amd-smi", "topology"], capture_output=True, text=True).stdout
    return ""
def quantized_optimizer(model: nn.Module):
    # bitsandbytes ships ROCm binaries from 0.49.0: unpinned, the import is info only
    import bitsandbytes as bnb

    return bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)


def install_onnxruntime() -> None:
    import sys

    # the CUDA package only where the vendor check says NVIDIA
    package = "onnxruntime-migraphx" if torch.version.hip else "onnxruntime-gpu"
    subprocess.check_call([sys.executable, "-m", "pip", "install", package])
    subprocess.check_call([sys.executable, "-m", "pip", "install", "onnx", "faiss-cpu"])
    index = "https://download.pytorch.org/whl/rocm6.4" if IS_ROCM else "https://download.pytorch.org/whl/cpu"
    log.info("torch wheels from %s", index)
# -- values that travel within a module (issue 17, item 3) --------------------------------

CUDA_BUILD = torch.version.cuda  # kept for the banner and a vendor check only


def build_banner() -> str:
    if CUDA_BUILD is not None:
        major = int(CUDA_BUILD.split(".")[0])  # checked first: never None here
        return f"CUDA {major}"
    return f"ROCm {torch.version.hip}"


def has_cuda_toolkit() -> bool:
    return bool(CUDA_BUILD) and CUDA_BUILD >= "11.8"  # short-circuits on ROCm


def log_capability() -> None:
    cap = torch.cuda.get_device_capability()
    major, minor = cap
    sm = major * 10 + minor
    hopper = cap >= (9, 0)
    log.info("capability sm_%d, hopper-class: %s", sm, hopper)  # shown, decides nothing
    print("bf16 capable" if cap >= (8, 0) else "fp16 only")
    log.debug(f"compute capability {major}.{minor} (>= 8.0: {major * 10 + minor >= 80})")


OPTIMIZER_HELP = "apex.optimizers is optional: install ROCm/apex or use torch.optim"
APEX_LOADED = "apex.optimizers" in __import__("sys").modules


def state_dict_digest(state: dict) -> str:
    """FP8 dtypes only recognised (compared), never chosen: nothing FP8 runs here."""
    import hashlib

    h = hashlib.sha256()
    for tensor in state.values():
        tensor = tensor.cpu()
        if tensor.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
            tensor = tensor.to(torch.float32)
        h.update(tensor.numpy().tobytes())
    return h.hexdigest()


SUPPORTED_QUANT_DTYPES = (torch.int8, torch.float8_e4m3fn, torch.float8_e5m2)


def check_quant_dtype(target_dtype) -> None:
    """An accepted-dtype list, only tested against: it chooses no FP8 format."""
    if target_dtype not in SUPPORTED_QUANT_DTYPES:
        raise ValueError(f"unsupported {target_dtype}; supported: {SUPPORTED_QUANT_DTYPES}")


def torch_cuda_version():
    """The None of ROCm is exactly what the handler copes with (guard `handled`)."""
    try:
        major, minor = torch.version.cuda.split(".")[:2]
        return f"{major}.{minor}"
    except:  # noqa: E722 - as written in the wild
        return None


def attention_tiles(head_dim: int) -> tuple[int, int]:
    """Capability picks tile sizes only (guard `tuning`): MI300's (9, 4) takes the first branch and runs."""
    cap = torch.cuda.get_device_capability()
    if cap[0] >= 9:
        if head_dim <= 256:
            block_m, block_n = 128, 64
        else:
            block_m, block_n = 32, 64
    elif cap[0] >= 8:
        block_m, block_n = (128, 128) if head_dim <= 128 else (64, 64)
    else:
        block_m, block_n = 64, 64
    return block_m, block_n



FLOAT8_E4M3_MAX = torch.finfo(torch.float8_e4m3fn).max


def nvfp4_block_scales(x: torch.Tensor) -> torch.Tensor:
    """A reference emulation in plain PyTorch (guard `no-consumer`): FP8 is only the storage
    format of the scales, cast straight back; nothing in this module computes in FP8."""
    scale = (x.abs().amax(dim=-1) / 6.0).clamp(max=FLOAT8_E4M3_MAX)
    return scale.to(torch.float8_e4m3fn).to(torch.float32)


def offload(module: torch.nn.Module, storage_dtype: torch.dtype = torch.float8_e5m2) -> None:
    """An FP8 storage dtype for offloaded weights, cast back to the compute dtype on use."""
    for p in module.parameters():
        p.data = p.data.to(storage_dtype)



def describe(obj: object) -> str:
    """Type tests against an optional library's classes (llm-foundry's param_init_fns tests
    `te is not None and isinstance(module, te.LayerNormMLP)` the same way)."""
    if trt is not None and isinstance(obj, (trt.ICudaEngine, trt.IExecutionContext)):
        return "a TensorRT engine"
    return type(obj).__name__


def toolkit_home() -> str | None:
    """The toolkit of the build torch was made with (mmengine's _get_cuda_home): the CUDA
    import runs on the CUDA build only, and the name holds ROCM_HOME on ROCm."""
    if IS_ROCM:
        from torch.utils.cpp_extension import ROCM_HOME
        CUDA_HOME = ROCM_HOME
    else:
        from torch.utils.cpp_extension import CUDA_HOME
    return CUDA_HOME


def bf16_hint() -> None:
    """A capability test that only logs a hint (speechbrain's llama2 wrapper; guard
    `message-only`): nothing runs differently on an AMD GPU."""
    major, _ = torch.cuda.get_device_capability()
    if major >= 8:
        logging.getLogger(__name__).info("Your GPU supports bfloat16: train with bf16=True")


def toolkit_line() -> str:
    """A test of torch.version.cuda whose branch names the ROCm side (speechbrain's system
    description): the author dispatches by vendor, it is no "GPU present" check."""
    if torch.version.cuda is None:
        return "ROCm version: " + torch.version.hip
    return "CUDA version: " + torch.version.cuda


try:  # only checks that flash-attn imports (llm-foundry's __init__): the name is dropped at once
    from flash_attn import flash_attn_func
    del flash_attn_func
except ImportError as error:
    if "undefined symbol" in str(error):
        raise ImportError("flash_attn was built against another torch") from error


def attention_backends() -> tuple[bool, bool, bool]:
    """An A100 fast path written as an equality (TTS's perceiver encoder): no AMD GPU
    reports major 8, so ROCm takes the generic branch, and the minor test in the same
    chain decides nothing."""
    props = torch.cuda.get_device_properties(torch.device("cuda"))
    if props.major == 8 and props.minor == 0:
        return True, False, False
    return False, True, True


def fp8_kernel_preference(_is_cuda) -> str:
    """A Blackwell test ANDed with the project's own platform predicate (xfuser's
    `_is_cuda()`, imported from its envs module): AMD GPUs keep the default."""
    if torch.cuda.is_available() and _is_cuda() and torch.cuda.get_device_capability()[0] >= 10:
        return "torch"
    return "auto"


try:  # a probe sets a presence flag (yunchang's globals); the kernels import under it
    import flash_attn  # noqa: F401
    HAS_FLASH_ATTN = True
except ImportError:
    HAS_FLASH_ATTN = False
if HAS_FLASH_ATTN:  # only where the probe imported it: a ROCm build on AMD GPUs
    from flash_attn import flash_attn_varlen_func  # noqa: F401


try:  # mmdet3d's probe: only the version is asked for (hasattr, then __version__)
    import spconv
except ImportError:
    IS_SPCONV2_AVAILABLE = False
else:
    IS_SPCONV2_AVAILABLE = hasattr(spconv, "__version__") and spconv.__version__ >= "2.0.0"
if IS_SPCONV2_AVAILABLE:  # the else imports mmcv's hipified port of the same ops
    from spconv.pytorch import SparseConvTensor, SparseSequential  # noqa: F401
else:
    from mmcv.ops import SparseConvTensor, SparseSequential  # noqa: F401


def quantize_nvfp4(w: torch.Tensor, global_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4's block scales are OCP E4M3 by the format's definition (gemlite, ModelOpt
    checkpoints): a port keeps them, fnuz would corrupt the format."""
    fp8_max = 448.0
    blocks = w.reshape(-1, 16)
    scales = (blocks.abs().amax(dim=1) / 6.0 / global_scale).clamp(max=fp8_max)
    return blocks, scales.to(torch.float8_e4m3fn)


DEVICE_TYPE = "hip" if torch.version.hip else "cuda"  # a project's own device type (unsloth-zoo)


def supports_bf16_fused() -> bool:
    """On ROCm DEVICE_TYPE is "hip": the "cuda" branch is NVIDIA's, the "hip" one AMD's."""
    if DEVICE_TYPE == "cuda":
        return torch.cuda.get_device_capability() >= (8, 0)
    elif DEVICE_TYPE == "hip":
        return torch.cuda.is_bf16_supported()
    return False


def half_dtype() -> torch.dtype:
    """ZLUDA (CUDA programs on AMD GPUs) suffixes device names; ROCm never does (f5-tts)."""
    if torch.cuda.is_available() and not torch.cuda.get_device_name().endswith("[ZLUDA]"):
        return torch.float16
    return torch.float32


def sdpa_backends(**enabled: bool) -> list:
    """A name-to-backend table built with dict(): the caller picks among all (x-transformers)."""
    from torch.nn.attention import SDPBackend

    table = dict(flash=SDPBackend.FLASH_ATTENTION, math=SDPBackend.MATH, cudnn=SDPBackend.CUDNN_ATTENTION)
    return [table[name] for name, on in enabled.items() if on]


FP8_E4M3_MAX = 448.0  # the bound of weights stored as e4m3fn; nothing computes in FP8 here (InvokeAI)


def onnx_providers() -> list:
    """Taking TensorRT out of the provider list requests it no more than a test does (InvokeAI)."""
    from onnxruntime import get_available_providers

    providers = get_available_providers()
    if "TensorrtExecutionProvider" in providers:
        providers.remove("TensorrtExecutionProvider")
    return providers


TEST_DTYPES = [torch.float32]
if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:
    TEST_DTYPES += [torch.float16, torch.bfloat16]  # dtypes every ROCm GPU runs (cuequivariance's tests)


def halve_on_oom(run_batch, batch_size: int):
    """The NVIDIA text beside the exception type in one `or`: ROCm raises the type (Ludwig)."""
    try:
        return run_batch(batch_size)
    except RuntimeError as e:
        if "CUDA out of memory" in str(e) or isinstance(e, torch.cuda.OutOfMemoryError):
            return run_batch(batch_size // 2)
        raise
