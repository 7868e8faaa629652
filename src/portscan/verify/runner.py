"""Run the command with the child runtime injected, and collect what it observed.

The command runs as an argument list (never through a shell) in its own process group,
with stdin closed and stdout and stderr merged into a pipe the parent reads. Everything
portscan creates lives in one temporary directory that is removed afterwards: the
runtime (``sitecustomize.py``), its configuration, the traces, and the child's own
``TMPDIR``; with ``PYTHONDONTWRITEBYTECODE`` the child writes no ``__pycache__`` either,
so neither the project nor ``/tmp`` keeps anything from the run. A timeout, Ctrl-C, or a command that leaves
processes behind gets the whole process group killed.

That directory sits in the caller's temporary directory unless the child's ``TMPDIR``
there would be too long for a Unix socket path: multiprocessing binds its sockets at
``TMPDIR/pymp-*/listener-*``, DataLoader workers pass tensors through them, and a path past
the kernel's limit leaves the run hanging to its timeout. Then it goes to a short one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portscan.verify.child import CAP_NAME, CONFIG_ENV, STEPS_NAME, TRACE_NAME
from portscan.verify.emulation import prepend_path, write_program_stubs

RUNTIME = Path(__file__).with_name("child.py")
OUTPUT_LINES = 20_000  #: lines of output kept (the rest is dropped from the front)
KILL_GRACE = 3.0  #: seconds between SIGTERM and SIGKILL
#: seconds a run may go on after a process reached the step cap (torchrun and DataLoader
#: teardown take about one); then the process group is stopped (RPC workers, atexit joins)
CAP_GRACE = 5.0
POLL = 0.1  #: seconds between looks at the process and the cap markers
WORKDIR_PREFIX = "portscan-verify-"
#: bytes of a Unix socket path (``sun_path`` less its NUL): 103 on macOS and the BSDs
SOCKET_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
#: what lands below the base: the run's directory, its ``tmp``, and multiprocessing's socket
_BELOW_BASE = len(f"/{WORKDIR_PREFIX}xxxxxxxx/tmp/pymp-xxxxxxxx/listener-xxxxxxxx")
SHORT_BASES = ("/tmp", "/var/tmp", "/dev/shm")
_PYTHON = re.compile(r"python[0-9.]*")


class RunError(RuntimeError):
    """The command could not be started (not found, not executable, bad working directory)."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    argv: tuple[str, ...]
    cwd: Path
    steps: int
    timeout: float
    emulate: str | None = None
    blocked: Mapping[str, str] = field(default_factory=dict)  #: module -> rule code
    programs: Mapping[str, str] = field(default_factory=dict)  #: program -> rule code
    reasons: Mapping[str, str] = field(default_factory=dict)  #: module -> why it is blocked (the rule's words)


@dataclass(frozen=True, slots=True)
class RunOutput:
    traces: tuple[dict[str, Any], ...]
    output: str
    exit_status: int | None  #: None when killed by the timeout
    timed_out: bool
    seconds: float
    created: tuple[str, ...] = ()  #: new files and folders in the project (the command's own)
    interrupted: bool = False  #: Ctrl-C in portscan: the group was stopped
    lingered: bool = False  #: still running CAP_GRACE after the step cap: the group was stopped


def is_python(program: str) -> bool:
    return bool(_PYTHON.fullmatch(Path(program).name))


def resolve_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A bare ``python`` that is not on PATH becomes this interpreter (``python3``-only systems)."""
    if argv and is_python(argv[0]) and os.sep not in argv[0] and shutil.which(argv[0]) is None:
        return (sys.executable, *argv[1:])
    return tuple(argv)


def torchrun_argv(argv: Sequence[str], nproc: int) -> tuple[str, ...]:
    """Launch ``argv`` through ``torch.distributed.run`` on this node with ``nproc`` workers.

    ``python [-u] script.py ...`` and ``python -m module ...`` keep their interpreter;
    anything else (a console script) is started with ``--no-python``. Raises ValueError
    for a command that already launches torchrun, or Python options torchrun cannot pass.
    """
    words = list(argv)
    if not words:
        raise ValueError("no command")
    if Path(words[0]).name == "torchrun" or any(w in ("torch.distributed.run", "torch.distributed.launch")
                                                for w in words[:4]):
        raise ValueError("the command already starts torchrun: drop --nproc, or drop torchrun from it")
    launch = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    if not is_python(words[0]):
        return (sys.executable, *launch, "--no-python", *words)
    python, rest = words[0], [w for w in words[1:] if w != "-u"]
    if rest and rest[0] == "-m" and len(rest) > 1:
        return (python, *launch, "-m", *rest[1:])
    if not rest or rest[0].startswith("-"):
        raise ValueError(f"--nproc needs `python script.py ...` or `python -m module ...`, "
                         f"not Python option {rest[0] if rest else '(none)'}")
    return (python, *launch, *rest)


def work_base(default: str, short: Sequence[str] = SHORT_BASES) -> str:
    """The folder for the run's directory: ``default`` when the child's sockets fit below
    it, else the first writable short folder (``default`` again when none is)."""
    def fits(base: str) -> bool:
        return len(os.fsencode(base)) + _BELOW_BASE <= SOCKET_PATH_MAX
    if fits(default):
        return default
    usable = (b for b in short if fits(b) and os.path.isdir(b) and os.access(b, os.W_OK | os.X_OK))
    return next(usable, default)


def child_environment(base: Mapping[str, str], workdir: Path, runtime_dir: Path,
                      stubs: Path | None) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith("PORTSCAN_VERIFY_")}
    env["PYTHONPATH"] = prepend_path(runtime_dir, base.get("PYTHONPATH"))
    env[CONFIG_ENV] = str(workdir / "config.json")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # read caches, write none (a prefix would recompile torch)
    for name in ("TMPDIR", "TEMP", "TMP"):
        env[name] = str(workdir / "tmp")
    env.setdefault("PYTHONHASHSEED", "0")
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if stubs is not None:
        env["PATH"] = prepend_path(stubs, base.get("PATH"))
    return env


_SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__",
                        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox"})
SNAPSHOT_LIMIT = 20_000  #: past this many entries, the project is not compared


def project_entries(root: Path, limit: int = SNAPSHOT_LIMIT) -> frozenset[str] | None:
    """Relative paths of the project's files and folders (None for a very large tree)."""
    entries: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        rel = os.path.relpath(folder, root)
        for name in (*dirs, *files):
            entries.add(os.path.normpath(os.path.join(rel, name)).replace(os.sep, "/"))
        if len(entries) > limit:
            return None
    return frozenset(entries)


def new_entries(before: frozenset[str] | None, after: frozenset[str] | None) -> tuple[str, ...]:
    """Entries in ``after`` only, without those inside a new folder."""
    if before is None or after is None:
        return ()
    new = after - before
    return tuple(sorted(e for e in new if not any(e.startswith(d + "/") for d in new)))


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after a grace period."""
    _kill_group(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(KILL_GRACE)
    _kill_group(process.pid, signal.SIGKILL)
    process.wait()


def _read(stream: Any, lines: deque[str], echo: Callable[[str], None] | None) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        lines.append(line)
        if echo is not None:
            echo(line)
    stream.close()


def _read_traces(directory: Path) -> tuple[dict[str, Any], ...]:
    traces = []
    for path in sorted(directory.glob(TRACE_NAME.format(pid="*"))):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            pid = data.get("pid")
            appended = _appended_steps(directory / STEPS_NAME.format(pid=pid)) if isinstance(pid, int) else []
            if len(appended) > len(data.get("steps") or []):  # the process died before its last write
                data["steps"] = appended
            traces.append(data)
    return tuple(traces)


def _appended_steps(path: Path) -> list[dict[str, Any]]:
    """The steps a child appended one line at a time (a torn last line is dropped)."""
    steps = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            step = json.loads(line)
        except ValueError:
            break
        if isinstance(step, dict):
            steps.append(step)
    return steps


def _wait(process: subprocess.Popen[bytes], spec: RunSpec, traces: Path,
          stop: threading.Event | None) -> str | None:
    """Wait for the command; return why it was stopped (``timeout``, ``lingered``,
    ``interrupted``) or None when it exited by itself."""
    deadline = time.monotonic() + spec.timeout
    capped: float | None = None
    try:
        while True:
            try:
                process.wait(POLL)
                return None
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if capped is None and any(traces.glob(CAP_NAME.format(pid="*"))):
                capped = now
            if capped is not None and now - capped >= CAP_GRACE:
                _stop(process)
                return "lingered"
            if now >= deadline or (stop is not None and stop.is_set()):
                _stop(process)
                return "timeout"
    except KeyboardInterrupt:
        _stop(process)
        return "interrupted"
    except BaseException:
        _stop(process)
        raise


def run_command(spec: RunSpec, echo: Callable[[str], None] | None = None,
                environ: Mapping[str, str] | None = None,
                stop: threading.Event | None = None) -> RunOutput:
    """Run ``spec.argv`` to the step cap, completion or the timeout. Raises :class:`RunError`.

    ``stop``, when set, ends the run as the timeout would: a caller that watches the
    output (``echo``) can end it on what it sees, not on a guess of how long it takes.
    """
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=work_base(tempfile.gettempdir())))
    try:
        runtime_dir = workdir / "runtime"
        for sub in (runtime_dir, workdir / "traces", workdir / "tmp"):
            sub.mkdir()
        shutil.copyfile(RUNTIME, runtime_dir / "sitecustomize.py")
        stubs = None
        if spec.emulate:
            stubs = workdir / "bin"
            write_program_stubs(stubs, spec.programs)
        config = {"steps": spec.steps, "trace_dir": str(workdir / "traces"), "emulate": spec.emulate,
                  "blocked": dict(spec.blocked), "programs": dict(spec.programs),
                  "reasons": dict(spec.reasons)}
        (workdir / "config.json").write_text(json.dumps(config), encoding="utf-8")
        env = child_environment(os.environ if environ is None else environ, workdir, runtime_dir, stubs)
        lines: deque[str] = deque(maxlen=OUTPUT_LINES)
        before = project_entries(spec.cwd)
        start = time.monotonic()
        try:
            process = subprocess.Popen(resolve_argv(spec.argv), cwd=spec.cwd, env=env,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise RunError(f"cannot run {spec.argv[0]!r}: {exc.strerror or exc}") from None
        reader = threading.Thread(target=_read, args=(process.stdout, lines, echo), daemon=True)
        reader.start()
        why = _wait(process, spec, workdir / "traces", stop)
        timed_out = why == "timeout"
        seconds = time.monotonic() - start
        _kill_group(process.pid, signal.SIGKILL)  # stragglers: orphaned workers, background jobs
        reader.join(KILL_GRACE)
        return RunOutput(traces=_read_traces(workdir / "traces"), output="".join(lines),
                         exit_status=None if timed_out else process.returncode,
                         timed_out=timed_out, seconds=seconds,
                         created=new_entries(before, project_entries(spec.cwd)),
                         interrupted=why == "interrupted", lingered=why == "lingered")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
