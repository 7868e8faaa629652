"""The verdict: pure checks over an :class:`Observation`, and the per-step comparison with
a reference run. The rules are stated in each check's detail and in docs/verify.md.

PASS needs every check to pass or not apply:

* ``run``: the command stopped at the step cap, or exited 0 on its own;
* ``steps``: at least N optimizer steps, or the command finished after fewer;
* ``finite``: every captured loss (every rank's) is finite;
* ``trend``: the median of the last third of the window is not above the first third's
  by more than ``max_rise`` (default 2 %) of the mean absolute loss plus three standard
  errors of the loss's own step-to-step noise (zero-mean objectives do not fail);
* ``gpu``: where a GPU is present, the model's parameters are on it;
* ``reference`` (``--against``): at most ``floor(outliers * compared)`` steps lie outside
  the band (``BAND`` times the reference's run-to-run spread, at least ``rtol``, default
  1 %, relative), and the descent from the first step matches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from portscan.verify.trace import Observation, Step, plural

DEFAULT_STEPS = 20
DEFAULT_TIMEOUT = 600.0
#: the floor of the per-step band, relative: 10x the largest kernel-rounding effect measured
#: over 20 steps (bf16-level gradient noise: 7e-4; TF32/XF32-level: under 1e-4), below the
#: 4 % a 1.05x learning rate makes (docs/verify.md, "How the tolerance was chosen")
DEFAULT_RTOL = 0.01
DEFAULT_OUTLIERS = 0.1
DEFAULT_MAX_RISE = 0.02
BAND = 4.0  #: per-step band: this many (pooled, small-sample corrected) standard deviations
POOL = 2  #: steps either side pooled into a step's spread (two or three runs are few)
DESCENT_RTOL = 0.05  #: the descent from the first step may differ by this much of the reference's
TREND_SIGMAS = 3.0  #: noise allowance of the trend check, in standard errors

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True, slots=True)
class Criteria:
    steps: int = DEFAULT_STEPS
    timeout: float = DEFAULT_TIMEOUT
    rtol: float = DEFAULT_RTOL
    outliers: float = DEFAULT_OUTLIERS  #: fraction of compared steps allowed outside the band
    max_rise: float = DEFAULT_MAX_RISE  #: of the mean absolute loss, over the window
    trend: bool = True  #: False: --no-trend
    metric: str = "loss"  #: what is judged: loss, loss@2 (another optimizer), or a printed name
    maximize: bool = False  #: the metric should rise (a reward, an accuracy)


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
    tolerance: float | None = None  #: the absolute deviation allowed at this step


@dataclass(frozen=True, slots=True)
class Descent:
    """How far the loss fell from the first compared step to the last third's median."""

    run: float
    reference: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return math.isfinite(self.run) and abs(self.run - self.reference) <= self.tolerance


@dataclass(frozen=True, slots=True)
class Comparison:
    rows: tuple[Row, ...]
    rtol: float
    allowed: int  #: steps that may lie outside the band
    missing: int  #: reference steps the run did not reach
    runs: int = 1  #: recorded runs the band comes from
    descent: Descent | None = None

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
        return self.compared > 0 and len(self.misses) <= self.allowed and \
            (self.descent is None or self.descent.ok)


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


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _stdev(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def descent(values: Sequence[float]) -> float:
    """First value minus the median of the last third: robust to a noisy last step."""
    third = max(1, len(values) // 3)
    return values[0] - _median(values[-third:])


def noise_sigma(values: Sequence[float]) -> float:
    """The step-to-step noise of a curve, robustly (MAD of second differences, which a
    straight trend does not inflate); 0 for fewer than 3 values."""
    if len(values) < 3:
        return 0.0
    second = [values[i + 1] - 2 * values[i] + values[i - 1] for i in range(1, len(values) - 1)]
    return 1.4826 * _median([abs(d) for d in second]) / math.sqrt(6)


def compare(steps: Sequence[Step], reference: Sequence[Step], rtol: float = DEFAULT_RTOL,
            outliers: float = DEFAULT_OUTLIERS,
            runs: Sequence[Mapping[int, float]] = ()) -> Comparison:
    """Compare step by step with the reference's mean, inside a band: ``BAND`` times the
    spread of the recorded ``runs`` at that step (pooled over ``POOL`` steps either side,
    times sqrt(1 + 1/runs) for a new run against a mean), never narrower than ``rtol``
    relative. Then compare the descent from the first common step the same way."""
    expected = {s.step: s.loss for s in reference if s.loss is not None}
    finite_ref = [abs(v) for v in expected.values() if math.isfinite(v)]
    scale = math.fsum(finite_ref) / len(finite_ref) if finite_ref else 0.0
    common = [s.step for s in steps if s.step in expected and s.loss is not None]
    repeats = len(runs)
    correction = math.sqrt(1 + 1 / repeats) if repeats > 1 else 1.0
    spread = {step: _stdev([r[step] for r in runs if step in r]) for step in common} if repeats > 1 else {}

    def sigma(index: int) -> float:
        window = [spread.get(step, 0.0) for step in common[max(0, index - POOL):index + POOL + 1]]
        return math.sqrt(math.fsum(v * v for v in window) / len(window)) * correction if window else 0.0

    position = {step: i for i, step in enumerate(common)}
    rows = []
    for step in steps:
        ref = expected.get(step.step)
        if ref is None or step.loss is None:
            rows.append(Row(step.step, step.loss, ref, None, None))
            continue
        tolerance = max(rtol * max(abs(ref), 0.1 * scale), BAND * sigma(position[step.step]))
        difference = relative_difference(step.loss, ref)
        within = math.isfinite(step.loss) and abs(step.loss - ref) <= tolerance
        rows.append(Row(step.step, step.loss, ref, difference, within, tolerance))
    reached = {s.step for s in steps}
    compared = sum(1 for row in rows if row.within is not None)
    found = None
    losses = {s.step: s.loss for s in steps}
    if len(common) >= 3:
        ref_descent = descent([expected[step] for step in common])
        third = max(1, len(common) // 3)
        spread_estimate = math.sqrt(sigma(0) ** 2 + 1.5708 * sigma(len(common) - 1) ** 2 / third)
        direct = _stdev([descent([r[step] for step in common]) for r in runs
                         if all(step in r for step in common)]) * correction
        tolerance = max(DESCENT_RTOL * abs(ref_descent), rtol * 0.1 * scale,
                        BAND * max(spread_estimate, direct))
        found = Descent(descent([losses[step] for step in common]), ref_descent, tolerance)  # type: ignore[misc]
    return Comparison(rows=tuple(rows), rtol=rtol, allowed=math.floor(outliers * compared + 1e-9),
                      missing=sum(1 for s in reference if s.step not in reached),
                      runs=max(1, repeats), descent=found)


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


@dataclass(frozen=True, slots=True)
class Trend:
    """First third against last third of the window, with the curve's own noise."""

    first: float  #: median of the first third
    last: float  #: median of the last third
    noise: float  #: the allowance the noise buys: TREND_SIGMAS standard errors of the difference
    scale: float  #: mean absolute value

    @property
    def rise(self) -> float:
        return self.last - self.first


def trend(values: Sequence[float]) -> Trend | None:
    """None for fewer than 2 values."""
    if len(values) < 2:
        return None
    third = max(1, len(values) // 3)
    # the standard error of a median of `third` normal values is 1.2533 sigma / sqrt(third)
    noise = TREND_SIGMAS * 1.2533 * noise_sigma(values) * math.sqrt(2 / third)
    return Trend(_median(values[:third]), _median(values[-third:]), noise,
                 math.fsum(abs(v) for v in values) / len(values))


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g} %"


def check_run(observation: Observation, criteria: Criteria) -> Check:
    if observation.interrupted:
        return Check("run", FAIL, f"interrupted (Ctrl-C) after {plural(observation.step_count, 'step')}; "
                                  f"the process group was stopped")
    if observation.lingered:
        return Check("run", PASS, f"stopped after {plural(observation.step_count, 'step')} (the step cap); "
                                  f"processes kept the run alive, so the process group was stopped")
    if observation.timed_out and observation.stopped_at_cap:
        return Check("run", PASS, f"stopped at the step cap, but the process did not exit: "
                                  f"killed after the {criteria.timeout:g} s timeout")
    if observation.timed_out:
        return Check("run", FAIL, f"timed out after {criteria.timeout:g} s; the process group was killed")
    if observation.stopped_at_cap:
        return Check("run", PASS, f"stopped after {plural(observation.step_count, 'step')} (the step cap)")
    status = observation.exit_status
    if status == 0:
        return Check("run", PASS, "the command finished on its own (exit status 0)")
    if status is not None and status < 0:
        return Check("run", FAIL, f"killed by signal {-status}")
    return Check("run", FAIL, f"exited with status {status}")


def check_steps(observation: Observation, criteria: Criteria) -> Check:
    count = observation.step_count
    what = {"stdout": "logged value", "backward": "backward call"}.get(observation.loss_source,
                                                                         "optimizer step")
    if count >= criteria.steps:
        return Check("steps", PASS, f"{plural(count, what)} (asked for {criteria.steps})")
    if count and observation.finished:
        return Check("steps", PASS, f"the command finished after {plural(count, what)}, fewer than "
                                    f"the {criteria.steps} asked for")
    if count == 0:
        detail = "no optimizer step ran and no loss was printed"
        if not observation.runtime_loaded:
            detail += "; the portscan runtime did not load"
        return Check("steps", FAIL, detail)
    return Check("steps", FAIL, f"{count} of {plural(criteria.steps, what)}")


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
    extra = f"; {plural(unseen, 'step')} had no scalar backward to read a loss from" if unseen else ""
    what = "value is" if len(losses) == 1 else "values are"
    return Check("finite", PASS, f"{'the' if len(losses) == 1 else 'all'} {len(losses)} {what} finite{extra}")


def check_trend(observation: Observation, criteria: Criteria) -> Check:
    goal = "rise" if criteria.maximize else "fall"
    rule = (f"rule: the median of the last third may not be {'below' if criteria.maximize else 'above'} "
            f"the first third's by more than {_percent(criteria.max_rise)} of the mean "
            f"{criteria.metric} plus {TREND_SIGMAS:g} standard errors of its step-to-step noise")
    if not criteria.trend:
        return Check("trend", SKIP, "not judged (--no-trend)")
    if any(s.loss is not None and not s.finite for s in observation.steps):
        return Check("trend", SKIP, f"not judged: some values are not finite ({rule})")
    values = [s.loss for s in observation.steps if s.finite and s.loss is not None]  # finite has a loss
    found = trend([-v if criteria.maximize else v for v in values])
    if found is None:
        return Check("trend", SKIP, f"needs at least 2 finite values ({rule})")
    allowed = criteria.max_rise * found.scale + found.noise
    status = PASS if found.rise <= allowed else FAIL
    sign = -1 if criteria.maximize else 1
    moved = "falls" if sign * found.rise < 0 else "rises"
    return Check("trend", status,
                 f"{criteria.metric} {moved} from {sign * found.first:.4g} (first third, median) to "
                 f"{sign * found.last:.4g} (last third); should {goal}, allowed the other way: "
                 f"{allowed:.3g} ({rule})")


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
    band = f"band: {BAND:g} x the spread of {comparison.runs} recorded runs, at least " \
           f"{_percent(comparison.rtol)}" if comparison.runs > 1 else f"tolerance {_percent(comparison.rtol)}"
    rule = f"{band}, {allowed}"
    if comparison.compared == 0:
        return Check("reference", FAIL, f"no step in common with {name}")
    misses = len(comparison.misses)
    first = comparison.first_divergence
    found = comparison.descent
    descent = "" if found is None else \
        f"; descent {found.run:.4g} vs {found.reference:.4g} (allowed ±{found.tolerance:.3g})"
    if comparison.ok:
        return Check("reference", PASS, f"{comparison.compared - misses} of "
                                        f"{plural(comparison.compared, 'step')} match {name} ({rule}){descent}")
    if misses <= comparison.allowed and found is not None:
        return Check("reference", FAIL,
                     f"the descent from step {comparison.rows[0].step} differs from {name}: {found.run:.6g} "
                     f"vs {found.reference:.6g} (allowed ±{found.tolerance:.3g}); "
                     f"{comparison.compared - misses} of {plural(comparison.compared, 'step')} "
                     f"within the band ({rule})")
    assert first is not None and first.loss is not None and first.reference is not None
    return Check("reference", FAIL,
                 f"{misses} of {plural(comparison.compared, 'step')} differ from {name} ({rule}); "
                 f"first divergence at step {first.step}: {first.loss:.6g} vs {first.reference:.6g} "
                 f"({(first.difference or 0) * 100:+.2f} %, allowed ±{first.tolerance or 0:.3g}){descent}")


def judge(observation: Observation, criteria: Criteria, comparison: Comparison | None = None,
          reference_name: str = "the reference") -> Verdict:
    checks = [check_run(observation, criteria), check_steps(observation, criteria),
              check_finite(observation), check_trend(observation, criteria), check_gpu(observation)]
    if comparison is not None:
        checks.append(check_reference(comparison, reference_name))
    return Verdict(passed=all(c.status != FAIL for c in checks), checks=tuple(checks),
                   comparison=comparison)
