"""The runtime ``portscan verify`` injects into the training command, as ``sitecustomize``.

Standard library only, and it never imports portscan: the command may run in another
interpreter or virtual environment. The parent copies this file into a temporary
directory as ``sitecustomize.py``, puts that directory first on ``PYTHONPATH`` and names
a JSON configuration in ``$PORTSCAN_VERIFY_CONFIG``; without that variable, importing
this module does nothing. Every Python process of the run (torchrun workers, spawned
DataLoader workers, subprocesses) loads it, because the environment is inherited.

What it does in each process:

* under emulation, a meta-path finder refuses the modules the rule pack says a PyTorch
  ROCm build does not have, before any user code runs; ``shutil.which`` stops finding
  the NVIDIA programs the parent shadowed on ``PATH``;
* when ``torch`` has been imported: the emulation patches (``torch.version``, device
  queries), a global optimizer step post-hook that counts steps and stops the run after
  N, a wrapper on backward that captures each step's scalar loss (AMP-unscaled), and
  ``init_process_group("nccl")`` falling back to gloo where there is no GPU;
* one JSON trace per process (see docs/verify.md), rewritten after every step, on an
  uncaught exception and at exit, so a killed run still leaves what it did.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import math
from typing import Any
import os
import sys
import threading
import time
import traceback
import weakref

CONFIG_ENV = "PORTSCAN_VERIFY_CONFIG"
OWNER_ENV = "PORTSCAN_VERIFY_OWNER_"  #: + the rank key; set by the first process of a rank
TRACE_FORMAT = 1
TRACE_NAME = "trace-{pid}.json"  #: the trace each process writes (replaced atomically)
STEPS_NAME = "steps-{pid}.jsonl"  #: the steps it appends
EMULATED_HIP = "6.4.43482-emulated"
MI300X = {
    "name": "AMD Instinct MI300X",
    "major": 9,
    "minor": 4,
    "gcnArchName": "gfx942:sramecc+:xnack-",
    "warp_size": 64,
    "total_memory": 192 * 1024**3,
    "multi_processor_count": 304,
}



#: seconds between appends to the steps file: a step that comes this long after the last
#: append is appended with the steps queued since (all of them, in any real training,
#: where a step takes longer); a hard crash (SIGSEGV, SIGKILL) loses the queued ones
APPEND_INTERVAL = 0.01
#: the first steps are written at once, with the trace, so a run that stalls early shows them
EARLY_STEPS = 2

class StepCapReached(SystemExit):
    """Raised by the step hook after the N-th step. A ``SystemExit`` with status 0, so
    ``except Exception`` handlers let it through and the interpreter exits cleanly
    (``finally`` blocks, atexit handlers and DataLoader shutdown all run)."""

    def __init__(self, steps: int) -> None:
        super().__init__(0)
        self.steps = steps


def blocking_rule(name: str, blocked: dict[str, str]) -> tuple[str, str] | None:
    """The blocked module ``name`` is at or below, with its rule code (most specific first)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in blocked:
            return prefix, blocked[prefix]
    return None


class ImportBlocker(importlib.abc.MetaPathFinder):
    """Makes modules without a ROCm build fail to import, as they would on ROCm."""

    def __init__(self, blocked: dict[str, str]) -> None:
        self.blocked = blocked

    def find_spec(self, name, path=None, target=None):
        hit = blocking_rule(name, self.blocked)
        if hit is None:
            return None
        module, code = hit
        raise ModuleNotFoundError(
            f"No module named {name!r} (portscan --emulate rocm: {module} has no build for a "
            f"PyTorch ROCm install; see {code})", name=name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callback(module)`` once ``name`` has been imported, before the importer
    gets it back: the only way to patch torch before user code first sees it."""

    def __init__(self, name: str, callback) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, callback = spec.loader, self.callback

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                module.__loader__ = loader
                if module.__spec__ is not None:
                    module.__spec__.loader = loader
                loader.exec_module(module)
                callback(module)

        spec.loader = Loader()
        return spec


class EmulatedProperties:
    """What ``torch.cuda.get_device_properties`` returns under emulation: an MI300X,
    forwarding anything else to the real device's properties when there is one."""

    def __init__(self, real: object | None) -> None:
        self._real = real
        for key, value in MI300X.items():
            setattr(self, key, value)

    def __getattr__(self, key: str):
        real = self.__dict__.get("_real")
        if real is None:
            raise AttributeError(key)
        return getattr(real, key)

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, gcnArchName='{self.gcnArchName}', "
                f"total_memory={self.total_memory // 1024**2}MB, "
                f"multi_processor_count={self.multi_processor_count}, warp_size={self.warp_size})")


def _as_float(tensor) -> float:
    try:
        return float(tensor.detach().float().item())
    except Exception:  # noqa: BLE001 - a loss we cannot read is recorded as missing
        return math.nan


class Recorder:
    """This process's observations, and the hooks that make them."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.cap = int(config.get("steps") or 0)
        self.trace_path = os.path.join(config["trace_dir"], TRACE_NAME.format(pid=os.getpid()))
        #: one JSON line per step, appended as it happens: survives a crash between the
        #: (throttled) rewrites of the whole trace
        self.steps_path = os.path.join(config["trace_dir"], STEPS_NAME.format(pid=os.getpid()))
        self.steps_fd: int | None = None
        self.unwritten: list[tuple[dict, list]] = []  #: steps not appended yet, with their loss tensors
        self.last_append = 0.0
        self.start = time.monotonic()
        self.rank = _env_int("RANK")
        key = OWNER_ENV + (str(self.rank) if self.rank is not None else "main")
        self.owner = key not in os.environ
        os.environ[key] = str(os.getpid())
        self.steps: list[dict] = []
        self.pending: list = []  # detached scalar losses since the previous step
        self.primary: Any = None  # weak reference to the optimizer whose steps count
        self.devices: list[str] = []
        self.backend: dict | None = None
        self.emulated: dict | None = None
        self.failure: dict | None = None
        self.notes: list[str] = []
        self.stopped: str | None = None
        self.torch = None
        self.local = threading.local()
        #: the trace is written at the first steps, on a cap, a failure and at exit; losses
        #: are read (a device sync) only on the thread that steps or exits, never in the
        #: background, which could break a CUDA graph being captured
        self.write_lock = threading.Lock()

    # -- start-up -------------------------------------------------------------------

    def install(self) -> None:
        emulate = self.config.get("emulate")
        if emulate:
            blocked = dict(self.config.get("blocked", {}))
            sys.meta_path.insert(0, ImportBlocker(blocked))
            _hide_from_find_spec(blocked)
            _hide_programs(set(self.config.get("programs", {})))
        if "torch" in sys.modules:
            self.on_torch(sys.modules["torch"])
        else:
            sys.meta_path.insert(1 if emulate else 0, _AfterImport("torch", self.on_torch))
        self.previous_excepthook = sys.excepthook
        sys.excepthook = self.excepthook
        atexit.register(self.finish)

    def on_torch(self, torch) -> None:
        if self.torch is not None:
            return
        self.torch = torch
        # the real answers, kept before emulation replaces them
        self.real = {"cuda": torch.version.cuda, "hip": torch.version.hip,
                     "properties": torch.cuda.get_device_properties}
        try:
            if self.config.get("emulate"):
                self.emulate(torch)
            self.hook(torch)
        except Exception as exc:  # noqa: BLE001 - never break the user's program
            self.notes.append(f"portscan runtime could not hook torch: {type(exc).__name__}: {exc}")

    def emulate(self, torch) -> None:
        torch.version.cuda = None
        torch.version.hip = EMULATED_HIP
        real_properties = self.real["properties"]

        def get_device_capability(device=None):
            return (MI300X["major"], MI300X["minor"])

        def get_device_name(device=None):
            return MI300X["name"]

        def get_device_properties(device=None):
            try:
                real = real_properties(device if device is not None else 0) \
                    if torch.cuda.is_available() else None
            except Exception:  # noqa: BLE001
                real = None
            return EmulatedProperties(real)

        def get_arch_list():
            return ["gfx90a", "gfx942", "gfx950"]

        torch.cuda.get_device_capability = get_device_capability
        torch.cuda.get_device_name = get_device_name
        torch.cuda.get_device_properties = get_device_properties
        torch.cuda.get_arch_list = get_arch_list
        self.emulated = {"target": "gfx942", "device_name": MI300X["name"],
                         "arch": MI300X["gcnArchName"], "capability": [MI300X["major"], MI300X["minor"]],
                         "warp_size": MI300X["warp_size"], "hip": EMULATED_HIP, "cuda": None}

    def hook(self, torch) -> None:
        importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(self.on_step)
        recorder = self
        tensor_backward = torch.Tensor.backward
        autograd_backward = torch.autograd.backward

        def backward(self, gradient=None, *args, **kwargs):
            recorder.note_loss(self, gradient)
            recorder.local.inside = True
            try:
                return tensor_backward(self, gradient, *args, **kwargs)
            finally:
                recorder.local.inside = False

        def autograd(tensors, grad_tensors=None, *args, **kwargs):
            if not getattr(recorder.local, "inside", False):
                single = tensors[0] if isinstance(tensors, (list, tuple)) and len(tensors) == 1 else tensors
                if isinstance(single, torch.Tensor):
                    recorder.note_loss(single, grad_tensors)
            return autograd_backward(tensors, grad_tensors, *args, **kwargs)

        backward.__doc__, autograd.__doc__ = tensor_backward.__doc__, autograd_backward.__doc__
        torch.Tensor.backward = backward
        torch.autograd.backward = autograd

        scaler = importlib.import_module("torch.amp.grad_scaler").GradScaler
        scale = scaler.scale

        def scaled(self, outputs):
            result = scale(self, outputs)
            if isinstance(result, torch.Tensor) and result is not outputs and result.numel() == 1:
                with contextlib.suppress(Exception):  # then the scaled loss is recorded
                    result._portscan_unscaled = outputs.detach()
            return result

        scaled.__doc__ = scale.__doc__
        scaler.scale = scaled
        self.hook_distributed(torch)

    def hook_distributed(self, torch) -> None:
        if not torch.distributed.is_available():
            return
        c10d = importlib.import_module("torch.distributed.distributed_c10d")
        init = c10d.init_process_group
        recorder = self

        def init_process_group(backend=None, *args, **kwargs):
            if isinstance(backend, str) and backend.lower() == "nccl" and not torch.cuda.is_available():
                recorder.notes.append('init_process_group(backend="nccl") ran with gloo: no GPU here')
                backend = "gloo"
            return init(backend, *args, **kwargs)

        init_process_group.__doc__ = init.__doc__
        c10d.init_process_group = init_process_group  # type: ignore[attr-defined,unused-ignore]
        torch.distributed.init_process_group = init_process_group  # type: ignore[attr-defined,unused-ignore]

    # -- observations ---------------------------------------------------------------

    def note_loss(self, tensor, gradient) -> None:
        try:
            if gradient is None and tensor.numel() == 1 and tensor.requires_grad:
                self.pending.append(getattr(tensor, "_portscan_unscaled", tensor).detach())
        except Exception:  # noqa: BLE001 - observation must never break training
            pass

    def on_step(self, optimizer, args, kwargs) -> None:
        if self.primary is None:
            self.primary = weakref.ref(optimizer)
        if self.primary() is not optimizer:
            return
        losses, self.pending = self.pending, []
        step = {"step": len(self.steps) + 1, "loss": None, "backward_calls": len(losses),
                "seconds": round(time.monotonic() - self.start, 4)}
        self.steps.append(step)
        self.append_step(step, losses)
        if len(self.steps) == 1:
            self.devices = sorted({p.device.type for group in optimizer.param_groups
                                   for p in group["params"]})
            self.record_backend()
            self.rank = _distributed_rank(self.torch, self.rank)
        if self.cap and len(self.steps) >= self.cap:
            self.stopped = "step-cap"
            self.write()
            raise StepCapReached(len(self.steps))
        if len(self.steps) <= EARLY_STEPS:
            self.write()

    def append_step(self, step: dict, losses: list) -> None:
        """Queue the step with its loss tensors; once APPEND_INTERVAL has passed since the
        last append (every step of any real training, batches of fast toy steps), read the
        losses (one device sync per batch) and append the lines."""
        with self.write_lock:
            self.unwritten.append((step, losses))
            if time.monotonic() - self.last_append >= APPEND_INTERVAL:
                self._append_unwritten()

    def _append_unwritten(self) -> None:
        self.last_append = time.monotonic()
        queued, self.unwritten = self.unwritten, []
        if not queued:
            return
        lines = []
        for step, losses in queued:
            values = [_as_float(t) for t in losses]
            step["loss"] = math.fsum(values) / len(values) if values else None
            lines.append(json.dumps(step))
        try:
            if self.steps_fd is None:
                self.steps_fd = os.open(self.steps_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.write(self.steps_fd, ("\n".join(lines) + "\n").encode())
        except (OSError, ValueError):
            pass

    def record_backend(self) -> None:
        torch = self.torch
        if torch is None or self.backend is not None:
            return
        backend = {"torch": torch.__version__, "cuda": self.real["cuda"], "hip": self.real["hip"],
                   "gpu": False, "device_count": 0, "device_name": None, "arch": None,
                   "capability": None, "warp_size": None}
        try:
            if torch.cuda.is_available():
                props = self.real["properties"](torch.cuda.current_device())
                backend.update(gpu=True, device_count=torch.cuda.device_count(), device_name=props.name,
                               arch=getattr(props, "gcnArchName", None) or None,
                               capability=[props.major, props.minor],
                               warp_size=getattr(props, "warp_size", None))
        except Exception as exc:  # noqa: BLE001
            self.notes.append(f"could not query the GPU: {type(exc).__name__}: {exc}")
        self.backend = backend

    def excepthook(self, etype, value, tb) -> None:
        try:
            frames = traceback.extract_tb(tb)
            self.failure = {
                "type": etype.__name__,
                "message": str(value)[:2000],
                "module": value.name if isinstance(value, ImportError) else None,
                "frames": [{"file": f.filename, "line": f.lineno, "function": f.name}
                           for f in frames][-40:],
                "traceback": "".join(traceback.format_exception(etype, value, tb))[-6000:],
            }
            self.write()
        finally:
            self.previous_excepthook(etype, value, tb)

    def finish(self) -> None:
        if self.stopped is None:
            self.stopped = "exit"
        if self.owner or self.steps:
            self.record_backend()
        self.write()

    def write(self) -> None:
        with self.write_lock:
            self._write()

    def _write(self) -> None:
        self._append_unwritten()
        if not (self.owner or self.steps or self.failure):
            return
        trace = {
            "format": TRACE_FORMAT, "pid": os.getpid(), "ppid": os.getppid(), "rank": self.rank,
            "owner": self.owner, "argv": sys.argv[:20], "python": sys.executable,
            "torch_imported": self.torch is not None,
            # while training runs the steps live in the appended steps file alone; the
            # last write has them
            "steps": list(self.steps) if self.stopped or self.failure else [],
            "pending_backward_calls": len(self.pending), "param_devices": self.devices,
            "backend": self.backend, "emulated": self.emulated, "failure": self.failure,
            "notes": self.notes, "stopped": self.stopped,
        }
        temporary = self.trace_path + ".tmp"
        try:
            with open(temporary, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(trace))  # dumps, not dump: the C encoder
            os.replace(temporary, self.trace_path)
        except OSError:
            pass


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _distributed_rank(torch, fallback):
    try:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank()
    except Exception:  # noqa: BLE001
        pass
    return fallback


def _hide_from_find_spec(blocked: dict[str, str]) -> None:
    """``importlib.util.find_spec`` answers None for blocked modules (availability probes)."""
    find_spec = importlib.util.find_spec

    def hidden(name, package=None):
        absolute = importlib.util.resolve_name(name, package) if name.startswith(".") else name
        if blocking_rule(absolute, blocked) is not None:
            return None
        return find_spec(name, package)

    hidden.__doc__ = find_spec.__doc__
    importlib.util.find_spec = hidden


def _hide_programs(programs: set[str]) -> None:
    """``shutil.which`` does not find the NVIDIA programs a ROCm machine lacks."""
    import shutil

    which = shutil.which

    def hidden(cmd, mode=os.F_OK | os.X_OK, path=None):
        if os.path.basename(os.fspath(cmd)) in programs:
            return None
        return which(cmd, mode, path)

    hidden.__doc__ = which.__doc__
    shutil.which = hidden


def _chain_original_sitecustomize(runtime_dir: str) -> None:
    """Run the ``sitecustomize`` this one shadows (a distribution's or a venv's), if any."""
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != runtime_dir]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - site.py reports these the same way and goes on
        traceback.print_exc()


def activate() -> Recorder | None:
    """Read the configuration named in the environment and install everything."""
    path = os.environ.get(CONFIG_ENV)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError):
        return None
    runtime_dir = os.path.abspath(os.path.dirname(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != runtime_dir]
    recorder = Recorder(config)
    recorder.install()
    _chain_original_sitecustomize(runtime_dir)
    return recorder


if __name__ == "sitecustomize":
    _recorder = activate()
