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
  queries), global optimizer step pre- and post-hooks that keep one loss series per
  optimizer and stop the run after N steps of the first one, a wrapper on backward that
  captures each scalar loss (AMP-unscaled; with no optimizer, each backward is a step),
  ``GradScaler.step`` and ``DistributedOptimizer.step`` wrappers (skipped and non-Optimizer
  steps), and ``init_process_group("nccl")`` falling back to gloo where there is no GPU;
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
CAP_NAME = "cap-{pid}"  #: written when a process reaches the step cap: the parent then ends the run
BACKWARD = "backward"  #: the series of a script that never steps an optimizer
#: where an optimizer was built but has not stepped, backward calls are capped this many
#: times later (gradient accumulation may come before the first step)
BACKWARD_LIMIT = 8
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


def blocked_message(name: str, module: str, code: str, reasons: dict[str, str]) -> str:
    """The ImportError text: the rule's own explanation (so the hint agrees with the rule)."""
    reason = reasons.get(module) or f"{module} is not installed in the emulated ROCm environment"
    return f"No module named {name!r} (portscan --emulate rocm: {reason}; see {code})"


class ImportBlocker(importlib.abc.MetaPathFinder):
    """Makes modules the emulated ROCm environment lacks fail to import, as they would there."""

    def __init__(self, blocked: dict[str, str], reasons: dict[str, str] | None = None) -> None:
        self.blocked = blocked
        self.reasons = reasons or {}

    def find_spec(self, name, path=None, target=None):
        hit = blocking_rule(name, self.blocked)
        if hit is None:
            return None
        module, code = hit
        raise ModuleNotFoundError(blocked_message(name, module, code, self.reasons), name=name)


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
        return float(tensor.detach().item())  # float64 stays float64
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
        self.cap_path = os.path.join(config["trace_dir"], CAP_NAME.format(pid=os.getpid()))
        self.steps_fd: int | None = None
        self.unwritten: list[tuple[dict, list]] = []  #: steps not appended yet, with their loss tensors
        self.last_append = 0.0
        self.start = time.monotonic()
        self.rank = _env_int("RANK")
        key = OWNER_ENV + (str(self.rank) if self.rank is not None else "main")
        self.owner = key not in os.environ
        os.environ[key] = str(os.getpid())
        self.steps: list[dict] = []  #: every series' steps, in the order they happened
        self.counts: dict[str, int] = {}  #: steps per series
        self.pending: list = []  # detached scalar losses since the previous step of any optimizer
        self.optimizers: list = []  #: weak references, in the order of their first step
        self.names: list[str] = []  #: their class names
        self.step_calls: dict[int, int] = {}  #: post-hook calls per optimizer id
        self.step_start: dict[int, int] = {}  #: len(pending) when each optimizer's step began
        self.optimizer_built = False  #: a torch.optim.Optimizer was constructed in this process
        self.backward_calls = 0  #: eligible backward calls before any optimizer step
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
            sys.meta_path.insert(0, ImportBlocker(blocked, dict(self.config.get("reasons", {}))))
            _hide_from_find_spec(blocked)
            _hide_programs(set(self.config.get("programs", {})))
        if "torch" in sys.modules:
            self.on_torch(sys.modules["torch"])
        else:
            sys.meta_path.insert(1 if emulate else 0, _AfterImport("torch", self.on_torch))
        self.previous_excepthook = sys.excepthook
        sys.excepthook = self.excepthook
        atexit.register(self.finish)
        _on_sigterm(self.terminated)

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
        optim = importlib.import_module("torch.optim.optimizer")
        optim.register_optimizer_step_pre_hook(self.before_step)
        optim.register_optimizer_step_post_hook(self.on_step)
        recorder = self
        optimizer_init = optim.Optimizer.__init__

        def init(self, *args, **kwargs):
            recorder.optimizer_built = True
            return optimizer_init(self, *args, **kwargs)

        init.__doc__ = optimizer_init.__doc__
        optim.Optimizer.__init__ = init
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
        scaler_step = scaler.step

        def step(self, optimizer, *args, **kwargs):
            before = recorder.step_calls.get(id(optimizer), 0)
            result = scaler_step(self, optimizer, *args, **kwargs)
            if recorder.step_calls.get(id(optimizer), 0) == before:  # inf/NaN gradients: skipped
                recorder.record_step(optimizer, skipped=True)
            return result

        step.__doc__ = scaler_step.__doc__
        scaler.step = step
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
        autograd = sys.modules.get("torch.distributed.autograd")
        if autograd is not None and hasattr(autograd, "backward"):
            dist_backward = autograd.backward

            def backward(context_id, roots, *args, **kwargs):
                if isinstance(roots, (list, tuple)) and len(roots) == 1:
                    recorder.note_loss(roots[0], None)
                return dist_backward(context_id, roots, *args, **kwargs)

            backward.__doc__ = dist_backward.__doc__
            autograd.backward = backward  # type: ignore[attr-defined,unused-ignore]
        if "torch.distributed.optim" in sys.modules:
            self.on_distributed_optim(sys.modules["torch.distributed.optim"])
        else:
            sys.meta_path.insert(0, _AfterImport("torch.distributed.optim", self.on_distributed_optim))

    def on_distributed_optim(self, module) -> None:
        """``DistributedOptimizer`` is no ``torch.optim.Optimizer``: count its steps too."""
        kind = getattr(module, "DistributedOptimizer", None)
        if kind is None or getattr(kind.step, "_portscan", False):
            return
        recorder, original = self, kind.step

        def step(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            recorder.record_step(self)
            return result

        step.__doc__, step._portscan = original.__doc__, True  # type: ignore[attr-defined]
        kind.step = step

    # -- observations ---------------------------------------------------------------

    def note_loss(self, tensor, gradient) -> None:
        try:
            if not (gradient is None and tensor.numel() == 1 and tensor.requires_grad):
                return
            loss = getattr(tensor, "_portscan_unscaled", tensor).detach()
        except Exception:  # noqa: BLE001 - observation must never break training
            return
        if not self.optimizers:
            self.backward_step(loss)
        self.pending.append(loss)

    def backward_step(self, loss) -> None:
        """Before any optimizer step, each backward is a step of the ``backward`` series: the
        steps of a script that updates its weights by hand. Capped like optimizer steps
        (BACKWARD_LIMIT times later where an optimizer was built, as gradient accumulation
        may precede its first step); raised before the backward past the cap runs."""
        limit = self.cap * (BACKWARD_LIMIT if self.optimizer_built else 1)
        if self.cap and self.backward_calls >= limit:
            self.reach_cap()
        self.backward_calls += 1
        step = {"series": BACKWARD, "step": self.backward_calls, "loss": None, "backward_calls": 1,
                "seconds": round(time.monotonic() - self.start, 4)}
        self.steps.append(step)
        self.counts[BACKWARD] = self.backward_calls
        self.append_step(step, [loss])
        if self.backward_calls == 1:
            self.record_backend()
            self.rank = _distributed_rank(self.torch, self.rank)
        if self.backward_calls <= EARLY_STEPS:
            self.write()

    def before_step(self, optimizer, args, kwargs) -> None:
        self.step_start[id(optimizer)] = len(self.pending)

    def on_step(self, optimizer, args, kwargs) -> None:
        self.step_calls[id(optimizer)] = self.step_calls.get(id(optimizer), 0) + 1
        self.record_step(optimizer)

    def series_of(self, optimizer) -> str:
        """``1`` for the first optimizer to step (the one whose steps are capped), ``2``, ..."""
        for index, ref in enumerate(self.optimizers):
            if ref() is optimizer:
                return str(index + 1)
        try:
            self.optimizers.append(weakref.ref(optimizer))
        except TypeError:  # no weak references: keep it alive, as the script does anyway
            self.optimizers.append(lambda: optimizer)
        self.names.append(type(optimizer).__name__)
        return str(len(self.optimizers))

    def record_step(self, optimizer, skipped: bool = False) -> None:
        """One step of ``optimizer``: the losses since the previous step of any optimizer
        (their mean: gradient accumulation), or, when backward ran inside the step (a
        closure optimizer such as LBFGS), the first evaluation's loss, which ``step``
        returns. A step GradScaler skipped is marked."""
        series = self.series_of(optimizer)
        start = self.step_start.pop(id(optimizer), None)
        losses, self.pending = self.pending, []
        inside = losses[start:] if start is not None else []
        count = self.counts[series] = self.counts.get(series, 0) + 1
        step = {"series": series, "step": count, "loss": None, "backward_calls": len(losses),
                "seconds": round(time.monotonic() - self.start, 4)}
        if inside:
            step["evaluations"] = len(inside)
        if skipped:
            step["skipped"] = True
        self.steps.append(step)
        self.append_step(step, inside[:1] or losses)
        if series != "1":
            return
        if count == 1:
            self.devices = sorted({p.device.type for group in getattr(optimizer, "param_groups", ())
                                   for p in group["params"]})
            self.record_backend()
            self.rank = _distributed_rank(self.torch, self.rank)
        if self.cap and count >= self.cap:
            self.reach_cap()
        if count <= EARLY_STEPS:
            self.write()

    def reach_cap(self) -> None:
        """Write the trace, leave the marker the parent watches, and stop this process
        (from the main thread; a cap reached on another thread, an RPC handler's, leaves
        the stopping to the parent)."""
        self.stopped = "step-cap"
        self.write()
        with contextlib.suppress(OSError), open(self.cap_path, "w", encoding="utf-8") as fh:
            fh.write(str(self.counts.get("1") or self.backward_calls))
        if threading.current_thread() is threading.main_thread():
            raise StepCapReached(self.counts.get("1") or self.backward_calls)

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

    def terminated(self) -> None:
        """SIGTERM (the parent's timeout, Ctrl-C, or a run kept alive past the cap): write
        what we have, unless the interrupted thread holds the lock (then the appended
        steps file still has the steps)."""
        if self.stopped is None:
            self.stopped = "terminated"
        if self.write_lock.acquire(blocking=False):
            try:
                self._write()
            finally:
                self.write_lock.release()

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
            "optimizers": list(self.names),
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


def _on_sigterm(callback) -> None:
    """Run ``callback`` on SIGTERM, then die of it as before; only where SIGTERM still has
    its default action and this is the main thread (a program's own handler wins)."""
    import signal

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def handler(signum, frame):
        try:
            callback()
        finally:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGTERM, handler)


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
