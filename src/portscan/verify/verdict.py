"""The verdict: pure checks over an :class:`Observation`, and the per-step comparison with
a reference run. The rules are stated in each check's detail and in docs/verify.md.

PASS needs every check to pass or not apply:

* ``run``: the command stopped at the step cap, or exited 0 on its own;
* ``steps``: at least N optimizer steps, or the command finished after fewer;
* ``finite``: every captured loss (every rank's) is finite;
* ``trend``: the least-squares line through the losses does not rise over the window by
  more than ``max_rise`` (default 2 %) of the mean absolute loss;
* ``gpu``: where a GPU is present, the model's parameters are on it;
* ``reference`` (``--against``): at most ``floor(outliers * compared)`` steps differ from
  the reference by more than ``rtol`` (default 5 %) relative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from portscan.verify.trace import Observation, Step

DEFAULT_STEPS = 20
DEFAULT_TIMEOUT = 600.0
DEFAULT_RTOL = 0.05
DEFAULT_OUTLIERS = 0.1
DEFAULT_MAX_RISE = 0.02

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True, slots=True)
class Criteria:
    steps: int = DEFAULT_STEPS
    timeout: float = DEFAULT_TIMEOUT
    rtol: float = DEFAULT_RTOL
    outliers: float = DEFAULT_OUTLIERS  #: fraction of compared steps allowed outside rtol
    max_rise: float = DEFAULT_MAX_RISE  #: of the mean absolute loss, over the window


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: str  #: PASS, FAIL or SKIP (does not apply)
    detail: str


@dataclass(frozen=True, slots=True)
class Row:
    """One step of the run next to the reference's."""

    step: int
    loss: float | None
    reference: float | None
    difference: float | None  #: relative, signed: (loss - reference) / |reference|
    within: bool | None  #: None when the step is not in both


@dataclass(frozen=True, slots=True)
class Comparison:
    rows: tuple[Row, ...]
    rtol: float
    allowed: int  #: steps that may differ by more than rtol
    missing: int  #: reference steps the run did not reach

    @property
    def compared(self) -> int:
        return sum(1 for row in self.rows if row.within is not None)

    @property
    def misses(self) -> tuple[Row, ...]:
        return tuple(row for row in self.rows if row.within is False)

    @property
    def first_divergence(self) -> Row | None:
        return next(iter(self.misses), None)

    @property
    def ok(self) -> bool:
        return self.compared > 0 and len(self.misses) <= self.allowed


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    checks: tuple[Check, ...]
    comparison: Comparison | None = None


def relative_difference(value: float, reference: float) -> float:
    """Signed ``(value - reference) / |reference|``; the absolute difference when reference is 0."""
    if not (math.isfinite(value) and math.isfinite(reference)):
        return 0.0 if value == reference else math.inf
    delta = value - reference
    return delta / abs(reference) if reference else delta


def compare(steps: Sequence[Step], reference: Sequence[Step], rtol: float = DEFAULT_RTOL,
            outliers: float = DEFAULT_OUTLIERS) -> Comparison:
    """Compare step by step; a step outside ``rtol`` (or non-finite) is a miss."""
    expected = {s.step: s.loss for s in reference}
    rows = []
    for step in steps:
        ref = expected.get(step.step)
        if ref is None or step.loss is None:
            rows.append(Row(step.step, step.loss, ref, None, None))
            continue
        difference = relative_difference(step.loss, ref)
        rows.append(Row(step.step, step.loss, ref, difference,
                        math.isfinite(difference) and abs(difference) <= rtol))
    reached = {s.step for s in steps}
    compared = sum(1 for row in rows if row.within is not None)
    return Comparison(rows=tuple(rows), rtol=rtol, allowed=math.floor(outliers * compared + 1e-9),
                      missing=sum(1 for s in reference if s.step not in reached))


def fitted_rise(steps: Sequence[Step]) -> float | None:
    """How much the least-squares line through the finite losses rises over the window."""
    points = [(s.step, s.loss) for s in steps if s.finite]
    if len(points) < 2:
        return None
    n = len(points)
    mean_x = math.fsum(x for x, _ in points) / n
    mean_y = math.fsum(y for _, y in points) / n  # type: ignore[misc]
    spread = math.fsum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return None
    slope = math.fsum((x - mean_x) * (y - mean_y) for x, y in points) / spread  # type: ignore[operator]
    return slope * (points[-1][0] - points[0][0])


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g} %"


def check_run(observation: Observation, criteria: Criteria) -> Check:
    if observation.timed_out and observation.stopped_at_cap:
        return Check("run", PASS, f"stopped at the step cap, but the process did not exit: "
                                  f"killed after the {criteria.timeout:g} s timeout")
    if observation.timed_out:
        return Check("run", FAIL, f"timed out after {criteria.timeout:g} s; the process group was killed")
    if observation.stopped_at_cap:
        return Check("run", PASS, f"stopped after {len(observation.steps)} steps (the step cap)")
    status = observation.exit_status
    if status == 0:
        return Check("run", PASS, "the command finished on its own (exit status 0)")
    if status is not None and status < 0:
        return Check("run", FAIL, f"killed by signal {-status}")
    return Check("run", FAIL, f"exited with status {status}")


def check_steps(observation: Observation, criteria: Criteria) -> Check:
    count = len(observation.steps)
    what = "logged losses" if observation.loss_source == "stdout" else "optimizer steps"
    if count >= criteria.steps:
        return Check("steps", PASS, f"{count} {what} (asked for {criteria.steps})")
    if count and observation.finished:
        return Check("steps", PASS, f"the command finished after {count} {what}, fewer than "
                                    f"the {criteria.steps} asked for")
    if count == 0:
        detail = "no optimizer step ran and no loss was printed"
        if not observation.runtime_loaded:
            detail += "; the portscan runtime did not load"
        return Check("steps", FAIL, detail)
    return Check("steps", FAIL, f"{count} of {criteria.steps} {what}")


def check_finite(observation: Observation) -> Check:
    losses = [s for s in observation.steps if s.loss is not None]
    bad = next((s for s in losses if not s.finite), None)
    if bad is not None:
        return Check("finite", FAIL, f"step {bad.step}: the loss is {bad.loss}")
    bad_rank = next((r for r in observation.ranks if not r.finite), None)
    if bad_rank is not None:
        return Check("finite", FAIL, f"rank {bad_rank.rank}: a loss is not finite")
    if not losses:
        return Check("finite", SKIP, "no loss was captured")
    unseen = len(observation.steps) - len(losses)
    extra = f"; {unseen} steps had no scalar backward to read a loss from" if unseen else ""
    return Check("finite", PASS, f"all {len(losses)} losses are finite{extra}")


def check_trend(observation: Observation, criteria: Criteria) -> Check:
    rule = f"rule: the least-squares line may not rise by more than {_percent(criteria.max_rise)} " \
           f"of the mean loss over the window"
    if any(s.loss is not None and not s.finite for s in observation.steps):
        return Check("trend", SKIP, f"not judged: some losses are not finite ({rule})")
    rise = fitted_rise(observation.steps)
    if rise is None:
        return Check("trend", SKIP, f"needs at least 2 finite losses ({rule})")
    finite = [s.loss for s in observation.steps if s.finite]
    scale = math.fsum(abs(v) for v in finite) / len(finite)  # type: ignore[arg-type]
    allowed = criteria.max_rise * scale
    status = PASS if rise <= allowed else FAIL
    direction = "falls" if rise < 0 else "rises"
    return Check("trend", status, f"the fitted line {direction} by {abs(rise):.4g} over the window "
                                  f"(mean loss {scale:.4g}; {rule})")


def check_gpu(observation: Observation) -> Check:
    backend = observation.backend
    if backend is None:
        return Check("gpu", SKIP, "the device is unknown: no optimizer step was seen")
    if not backend.gpu:
        return Check("gpu", SKIP, "no GPU on this machine")
    devices = set(observation.param_devices)
    if not devices:
        return Check("gpu", SKIP, f"{backend.device_name}: the optimizer's parameters were not seen")
    if devices == {"cpu"}:
        return Check("gpu", FAIL, f"{backend.device_name} is present but the model's parameters are "
                                  f"on the CPU: a silent CPU fallback")
    return Check("gpu", PASS, f"parameters on {', '.join(sorted(devices))} ({backend.device_name})")


def check_reference(comparison: Comparison, name: str) -> Check:
    allowed = "no step may differ" if comparison.allowed == 0 else \
        "1 step may differ" if comparison.allowed == 1 else f"up to {comparison.allowed} steps may differ"
    rule = f"tolerance {_percent(comparison.rtol)}, {allowed}"
    if comparison.compared == 0:
        return Check("reference", FAIL, f"no step in common with {name}")
    if comparison.ok:
        return Check("reference", PASS, f"{comparison.compared - len(comparison.misses)} of "
                                        f"{comparison.compared} steps match {name} ({rule})")
    first = comparison.first_divergence
    assert first is not None
    return Check("reference", FAIL,
                 f"{len(comparison.misses)} of {comparison.compared} steps differ from {name} ({rule}); "
                 f"first divergence at step {first.step}: {first.loss:.6g} vs {first.reference:.6g} "
                 f"({(first.difference or 0) * 100:+.2f} %)")


def judge(observation: Observation, criteria: Criteria, comparison: Comparison | None = None,
          reference_name: str = "the reference") -> Verdict:
    checks = [check_run(observation, criteria), check_steps(observation, criteria),
              check_finite(observation), check_trend(observation, criteria), check_gpu(observation)]
    if comparison is not None:
        checks.append(check_reference(comparison, reference_name))
    return Verdict(passed=all(c.status != FAIL for c in checks), checks=tuple(checks),
                   comparison=comparison)
