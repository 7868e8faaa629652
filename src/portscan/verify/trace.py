"""What a run observed: the per-process traces the child runtime writes, merged into one
:class:`Observation`, and the stdout fallback for runs whose optimizer steps were not seen.

Everything here is a pure function of the trace dictionaries and the captured output.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

#: ``hooks``: optimizer steps; ``backward``: no optimizer stepped, each backward call is a
#: step; ``stdout``: parsed from the output; ``none``
LOSS_SOURCES = ("hooks", "backward", "stdout", "none")
BACKWARD = "backward"  #: the child's series name for backward calls (child.BACKWARD)


@dataclass(frozen=True, slots=True)
class Step:
    """One optimizer step of the judged process and its loss (None: no backward seen)."""

    step: int
    loss: float | None
    backward_calls: int = 1
    seconds: float | None = None  #: since the process started
    skipped: bool = False  #: GradScaler skipped the update (inf/NaN gradients)
    evaluations: int = 0  #: closure evaluations inside the step (LBFGS); the loss is the first

    @property
    def finite(self) -> bool:
        return self.loss is not None and math.isfinite(self.loss)


@dataclass(frozen=True, slots=True)
class Backend:
    """The real torch build and device of the run (never the emulated one)."""

    torch: str
    cuda: str | None
    hip: str | None
    gpu: bool
    device_count: int = 0
    device_name: str | None = None
    arch: str | None = None  #: ``gcnArchName`` on ROCm
    capability: tuple[int, int] | None = None
    warp_size: int | None = None

    @property
    def label(self) -> str:
        build = f"ROCm {self.hip}" if self.hip else f"CUDA {self.cuda}" if self.cuda else "CPU-only build"
        device = self.device_name or "no GPU"
        if self.arch:
            device += f" ({self.arch.split(':')[0]})"
        elif self.capability and self.gpu:
            device += f" (capability {self.capability[0]}.{self.capability[1]})"
        return f"torch {self.torch}, {build}, {device}"


@dataclass(frozen=True, slots=True)
class Failure:
    """An uncaught exception in the training process."""

    type: str
    message: str
    module: str | None = None  #: the module an ImportError names
    frames: tuple[tuple[str, int], ...] = ()  #: (file, line), outermost first
    traceback: str = ""

    @property
    def summary(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


@dataclass(frozen=True, slots=True)
class RankSummary:
    rank: int | None
    steps: int
    finite: bool
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class Series:
    """Another optimizer's steps (a GAN's generator), shown and selectable with --metric."""

    name: str  #: ``loss@2``
    label: str  #: ``optimizer 2 (Adam)``
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything the verdict needs to know about one run."""

    steps: tuple[Step, ...]  #: of rank 0 (or the only process)
    loss_source: str  #: one of LOSS_SOURCES
    stopped_at_cap: bool
    exit_status: int | None  #: None when killed by the timeout
    timed_out: bool
    seconds: float
    runtime_loaded: bool
    backend: Backend | None = None
    emulated: Mapping[str, Any] | None = None
    param_devices: tuple[str, ...] = ()
    failure: Failure | None = None
    ranks: tuple[RankSummary, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    series: tuple[Series, ...] = ()  #: the other optimizers' steps
    optimizer: str | None = None  #: the judged optimizer's class name
    interrupted: bool = False  #: Ctrl-C
    lingered: bool = False  #: the cap was reached but the run kept going: the group was stopped
    counted: int | None = None  #: the capped optimizer's steps, where another series is judged

    @property
    def step_count(self) -> int:
        return len(self.steps) if self.counted is None else self.counted

    @property
    def finished(self) -> bool:
        """The command exited 0 on its own, without being stopped at the step cap."""
        return self.exit_status == 0 and not self.stopped_at_cap and not self.timed_out \
            and not self.interrupted


def _backend(data: Mapping[str, Any] | None) -> Backend | None:
    if not data:
        return None
    capability = data.get("capability")
    return Backend(torch=str(data.get("torch", "?")), cuda=data.get("cuda"), hip=data.get("hip"),
                   gpu=bool(data.get("gpu")), device_count=int(data.get("device_count") or 0),
                   device_name=data.get("device_name"), arch=data.get("arch"),
                   capability=tuple(capability) if capability else None,  # type: ignore[arg-type]
                   warp_size=data.get("warp_size"))


def _failure(data: Mapping[str, Any] | None) -> Failure | None:
    if not data:
        return None
    frames = tuple((str(f.get("file", "")), int(f.get("line") or 0)) for f in data.get("frames", ()))
    return Failure(type=str(data.get("type", "Exception")), message=str(data.get("message", "")),
                   module=data.get("module"), frames=frames, traceback=str(data.get("traceback", "")))


def _steps(data: Iterable[Mapping[str, Any]], series: str | None = None) -> tuple[Step, ...]:
    """The steps of one series (``1``: the first optimizer; ``None``: the judged one)."""
    items = list(data)
    if series is None:
        series = judged_series(items)
    steps = []
    for item in items:
        if str(item.get("series", "1")) != series:
            continue
        loss = item.get("loss")
        steps.append(Step(step=int(item["step"]), loss=None if loss is None else float(loss),
                          backward_calls=int(item.get("backward_calls", 1)),
                          seconds=item.get("seconds"), skipped=bool(item.get("skipped")),
                          evaluations=int(item.get("evaluations") or 0)))
    return tuple(steps)


def judged_series(items: Iterable[Mapping[str, Any]]) -> str:
    """The first optimizer's series where one stepped, else the backward calls."""
    names = {str(item.get("series", "1")) for item in items}
    return "1" if "1" in names or not names else BACKWARD if BACKWARD in names else min(names)


_LAUNCHER_ERRORS = {"ChildFailedError", "SignalException"}


def _pick_primary(traces: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """Rank 0's trace (or the only process's): the one with the most steps."""
    ranked = [t for t in traces if t.get("rank") is not None]
    pool = [t for t in ranked if t.get("rank") == 0] or ranked or list(traces)
    if not pool:
        return None
    return max(pool, key=lambda t: (len(_steps(t.get("steps", ()))), bool(t.get("owner")),
                                    -int(t.get("pid", 0))))


def _pick_failure(traces: Sequence[Mapping[str, Any]]) -> Failure | None:
    """The most informative exception: a worker's over a launcher's report of it."""
    failing = [t for t in traces if t.get("failure")]
    failing.sort(key=lambda t: (t["failure"].get("type") in _LAUNCHER_ERRORS, t.get("rank") is None,
                                t.get("rank") or 0))
    return _failure(failing[0]["failure"]) if failing else None


def merge_traces(traces: Sequence[Mapping[str, Any]], *, exit_status: int | None, timed_out: bool,
                 seconds: float, output: str, interrupted: bool = False,
                 lingered: bool = False) -> Observation:
    """One observation from every process's trace plus what the parent saw."""
    primary = _pick_primary(traces)
    raw = list(primary.get("steps", ())) if primary else []
    judged = judged_series(raw)
    steps = _steps(raw, judged)
    names = list(primary.get("optimizers") or ()) if primary else []
    series = tuple(Series(f"loss@{key}", f"optimizer {key} ({_name(names, key)})", _steps(raw, key))
                   for key in sorted({str(i.get("series", "1")) for i in raw} - {"1", BACKWARD}, key=int))
    notes: list[str] = []
    if not traces:
        notes.append("the portscan runtime did not load: does the command start Python with -S "
                     "or -I, or not start Python at all?")
    for trace in traces:
        notes.extend(n for n in trace.get("notes", ()) if n not in notes)
    loss_source = ("backward" if judged == BACKWARD else "hooks") if steps else "none"
    if judged == BACKWARD and steps:
        notes.append(f"no optimizer step was seen: each of the {plural(len(steps), 'backward call')} "
                     f"is a step, with its loss")
    if series:
        notes.append(f"{len(series) + 1} optimizers stepped: optimizer 1 ({_name(names, '1')}) is "
                     f"judged; {', '.join(s.label for s in series)} shown apart "
                     f"(--metric {series[0].name} judges it)")
    if not steps:
        parsed = losses_from_output(output)
        if parsed:
            steps, loss_source = parsed, "stdout"
            notes.append("no optimizer step was seen: the losses were parsed from the output")
    ranks = tuple(
        RankSummary(rank=t.get("rank"), steps=len(_steps(t.get("steps", ()))),
                    finite=all(s.finite for s in _steps(t.get("steps", ()))),
                    failure=_failure_summary(t.get("failure")))
        for t in sorted((t for t in traces if t.get("rank") is not None),
                        key=lambda t: (t["rank"], -len(t.get("steps", ())))))
    backend = None
    for trace in ([primary] if primary else []) + list(traces):
        backend = _backend(trace.get("backend"))
        if backend is not None:
            break
    emulated = next((t["emulated"] for t in traces if t.get("emulated")), None)
    failure = _pick_failure(traces)
    if failure is None and exit_status not in (0, None):
        failure = failure_from_output(output)
    return Observation(
        steps=steps, loss_source=loss_source,
        stopped_at_cap=bool(primary and primary.get("stopped") == "step-cap"),
        exit_status=exit_status, timed_out=timed_out, seconds=seconds, interrupted=interrupted,
        lingered=lingered,
        runtime_loaded=bool(traces), backend=backend, emulated=emulated,
        param_devices=tuple(primary.get("param_devices", ())) if primary else (),
        failure=failure, ranks=_dedupe_ranks(ranks), notes=tuple(notes), series=series,
        optimizer=_name(names, "1") if judged == "1" and names else None)


def select_metric(observation: Observation, metric: str, output: str) -> Observation:
    """The observation judged on ``metric``: ``loss`` (the first optimizer's, or the backward
    calls'), ``loss@K`` (optimizer K's series), or a value the script prints (``reward``)."""
    if metric == "loss":
        return observation
    for series in observation.series:
        if series.name == metric:
            return replace(observation, steps=series.steps, counted=len(observation.steps),
                           notes=(*observation.notes, f"judged: {series.label} (--metric {metric})"))
    if metric.startswith("loss@"):
        return replace(observation, steps=(), notes=(*observation.notes,
                                                    f"--metric {metric}: no such optimizer series"))
    values = losses_from_output(output, metric)
    note = f"judged: `{metric}` as printed by the command ({plural(len(values), 'value')})"
    return replace(observation, steps=values, loss_source="stdout", notes=(*observation.notes, note),
                   counted=len(observation.steps) if observation.steps else None)


def _name(names: Sequence[str], key: str) -> str:
    index = int(key) - 1 if key.isdigit() else -1
    return names[index] if 0 <= index < len(names) else "?"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 step``, ``2 steps``; ``many`` for irregular plurals (``entry``/``entries``)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def _dedupe_ranks(ranks: Iterable[RankSummary]) -> tuple[RankSummary, ...]:
    seen: dict[int | None, RankSummary] = {}
    for summary in ranks:
        seen.setdefault(summary.rank, summary)
    return tuple(seen.values())


# -- the stdout fallback --------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|inf|-inf|Inf)"
#: ``loss 0.52``, ``loss: 0.52``, ``loss=0.52``, ``'loss': 0.52`` (HF), `` lm loss: 5.2E+00`` (Megatron)
_LOSS = re.compile(r"(?<![A-Za-z0-9_])(?:lm[ _])?loss['\"]?\s*[:=]?\s*" + _NUMBER, re.IGNORECASE)
_NOT_TRAIN = re.compile(r"(?i)(?<![A-Za-z0-9])(?:val|valid|validation|eval|test)[ _-]?loss")
_STEP = re.compile(r"(?i)(?<![A-Za-z0-9_])(?:step|iter|iteration|it)\s*[:=#]?\s*(\d+)")


def output_lines(output: str) -> list[str]:
    """Lines as a person saw them: escape codes removed, progress-bar ``\\r`` rewrites split."""
    return [line for line in re.split(r"\r\n|\r|\n", _ANSI.sub("", output))]


def _metric_pattern(name: str) -> re.Pattern[str]:
    """``NAME 0.5``, ``NAME: 0.5``, ``NAME=0.5``, ``'NAME': 0.5`` (any printed metric)."""
    return re.compile(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"['\"]?\s*[:=]?\s*" + _NUMBER,
                      re.IGNORECASE)


def losses_from_output(output: str, metric: str | None = None) -> tuple[Step, ...]:
    """Training losses printed by the command (or the values of ``metric``), one per line.

    Validation/eval/test losses are skipped. Steps are the printed step numbers when
    every loss line has one and they increase, else 1, 2, 3, ...
    """
    pattern = _LOSS if metric is None else _metric_pattern(metric)
    found: list[tuple[int | None, float]] = []
    for line in output_lines(output):
        if metric is None and _NOT_TRAIN.search(line):
            continue
        match = pattern.search(line)
        if match is None:
            continue
        step = _STEP.search(line)
        found.append((int(step.group(1)) if step else None, float(match.group(1))))
    numbers = [s for s, _ in found]
    explicit = all(n is not None for n in numbers) and all(
        a < b for a, b in zip(numbers, numbers[1:], strict=False))  # type: ignore[operator]
    return tuple(Step(step=s if explicit and s is not None else i, loss=loss)
                 for i, (s, loss) in enumerate(found, start=1))


_TB_FILE = re.compile(r'^\s*File "([^"]+)", line (\d+)')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s?(.*))?$")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def failure_from_output(output: str) -> Failure | None:
    """The last Python traceback in the output, when no trace recorded the exception."""
    lines = output_lines(output)
    start = max((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")),
                default=None)
    if start is None:
        return None
    frames: list[tuple[str, int]] = []
    kind = message = None
    for line in lines[start + 1:]:
        match = _TB_FILE.match(line)
        if match:
            frames.append((match.group(1), int(match.group(2))))
            continue
        exception = _EXCEPTION.match(line)
        if exception and not line.startswith(" "):
            kind, message = exception.group(1).rsplit(".", 1)[-1], exception.group(2) or ""
            break
    if kind is None:
        return None
    module = _NO_MODULE.search(message or "")
    return Failure(type=kind, message=message or "", module=module.group(1) if module else None,
                   frames=tuple(frames), traceback="\n".join(lines[start:])[-6000:])


def _failure_summary(data: Mapping[str, Any] | None) -> str | None:
    failure = _failure(data) if data else None
    return failure.summary if failure is not None else None
