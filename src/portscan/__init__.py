"""portscan: find and fix what keeps a CUDA-era PyTorch repository from running on ROCm."""

__version__ = "0.1.0"
