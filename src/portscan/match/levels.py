"""Guard names and what they do to a finding's severity (see :mod:`portscan.match.guards`
for how the Python matcher finds guarded code). No libcst here: the scan needs these
without parsing anything."""

from __future__ import annotations

import re

from portscan.model import Severity

#: what a vendor check is written with (``portscan.match.guards.is_vendor_check`` reads
#: LibCST trees with them, ``portscan.gated`` CPython's): a name part ``is_rocm``/``IS_HIP``/
#: ``is_nvidia``, a call of a predicate named ``is_cuda`` (``current_platform.is_cuda()``,
#: ``_is_cuda()``: a tensor's ``.is_cuda`` is an attribute, never called) and a string
#: tested in a condition (``"nvidia" in gpu_name``)
#: (``nvidia_smi_path`` names a tool, not the platform: a test that it is there is PS601's business)
VENDOR_WORD = re.compile(r"(?i)(^|_)(rocm|hip|amd|nvidia(?!_smi))(_|$)|^gcnArchName$")
ROCM_WORD = re.compile(r"(?i)(^|_)(rocm|hip|amd)(_|$)|^gcnArchName$")
VENDOR_CALL = re.compile(r"^_?is_cuda$")
#: a vendor named in a string the condition tests (``"nvidia" in gpu_name``, ``backend == "rocm"``,
#: ``provider == "TensorrtExecutionProvider"``: ONNX Runtime's NVIDIA-only providers name it too)
VENDOR_TEXT = re.compile(r"(?i)\b(rocm|hip)|\b(nvidia|amd|radeon|instinct|advanced micro devices)\b"
                          r"|^(cuda|tensorrt)executionprovider$")

#: an extra or dependency group named for one vendor's builds: NVIDIA's (``cu118-torch211``,
#: ``cu121onlytorch211``, ``cuda12``, ``nvidia``; not ``nocuda``), whose requirements an AMD user
#: does not install, or AMD's (``rocm``, ``rocm6``, ``hip``, ``amd``), which the project put
#: together for AMD GPUs (InvokeAI's ``rocm`` extra pins AMD's own ``triton==3.8.0+...rocm10.0.0``)
VENDOR_EXTRA = re.compile(r"(?i)cu1\d{1,2}|(?<![a-z])(?:cuda|nvidia)|(?<![a-z])(?:rocm|hip|amd)(?![a-z])")

TYPE_CHECKING = "type-checking"
VENDOR_BRANCH = "vendor-branch"
VENDORED = "vendored"
FALLBACK = "fallback"
FALLBACK_EQUIVALENT = "fallback-equivalent"
HANDLED = "handled"
TUNING = "tuning"
MESSAGE_ONLY = "message-only"
NO_CONSUMER = "no-consumer"
FORMAT_DEFINED = "format-defined"
INTEGRATION = "integration"
ROCM_BUILD = "rocm-build"
UNREFERENCED = "unreferenced"

#: A guard's effect on severity; ``None`` means "one step lower".
_GUARD_SEVERITY: dict[str, Severity | None] = {
    TYPE_CHECKING: Severity.INFO,
    VENDOR_BRANCH: Severity.INFO,
    VENDORED: Severity.INFO,
    FALLBACK: None,
    FALLBACK_EQUIVALENT: Severity.INFO,
    HANDLED: Severity.INFO,
    TUNING: Severity.INFO,
    MESSAGE_ONLY: Severity.INFO,
    NO_CONSUMER: Severity.INFO,
    FORMAT_DEFINED: Severity.INFO,
    INTEGRATION: Severity.INFO,
    ROCM_BUILD: Severity.INFO,
    UNREFERENCED: Severity.INFO,
}
_ONE_STEP_DOWN = {Severity.ERROR: Severity.WARNING, Severity.WARNING: Severity.INFO,
                  Severity.INFO: Severity.INFO}
#: When regions nest, the strongest guard wins.
GUARD_ORDER = (TYPE_CHECKING, VENDOR_BRANCH, VENDORED, UNREFERENCED, INTEGRATION, ROCM_BUILD, HANDLED, TUNING,
               MESSAGE_ONLY, FORMAT_DEFINED, NO_CONSUMER, FALLBACK_EQUIVALENT, FALLBACK)


def guarded_severity(severity: Severity, guard: str | None, guarded: Severity | None = None) -> Severity:
    """Guarded code is one step lower, or ``info`` where the guard says it never runs on
    ROCm or nothing is lost there. For an import in a ``try`` whose handler falls back the
    step is what the rule's severity means: an ``error`` import is CUDA-only (``pynvml``,
    ``tensorrt``), so its feature is silently lost on ROCm -- a warning; a ``warning``
    import is a library with a ROCm build (flash-attn, ROCm/apex, xformers, CuPy), so a
    guarded one keeps the feature where that build is installed and otherwise runs the
    fallback, as on an NVIDIA machine without the package -- ``info``. ``guarded``: the
    rule's own severity for such an import where one step says too much (its
    ``guarded_severity``: FlashAttention-3, which most NVIDIA GPUs lack as well)."""
    if guard is None:
        return severity
    if guard == FALLBACK and guarded is not None:
        return guarded
    target = _GUARD_SEVERITY[guard]
    return _ONE_STEP_DOWN[severity] if target is None else target
