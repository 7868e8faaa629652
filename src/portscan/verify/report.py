"""Render a verify result: the rich text report and the ``--format json`` object.

Everything that comes from the command (its output, its traceback, loss values, file
names) is printed as ``rich.text.Text``, never as markup.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from portscan import __version__
from portscan.kinds.common import is_at_or_below
from portscan.report import clean
from portscan.ruleset.schema import Rule
from portscan.verify.emulation import SCOPE, TARGET_DEVICE
from portscan.verify.hints import Hint
from portscan.verify.trace import Observation, Step, output_lines, plural
from portscan.verify.verdict import FAIL, PASS, Criteria, Row, Verdict

SCHEMA_VERSION = 1
SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60
TABLE_ROWS = 40  #: longer runs show the first and last rows, and the first divergence
TAIL_LINES = 20
MARK = {PASS: ("✓", "green"), FAIL: ("✗", "bold red"), "skip": ("–", "dim")}


@dataclass(frozen=True, slots=True)
class Result:
    """Everything one ``portscan verify`` run produced, for rendering."""

    command: tuple[str, ...]
    origin: str  #: where the command came from
    argv: tuple[str, ...]  #: what actually ran (with torchrun when --nproc > 1)
    emulate: str | None
    nproc: int
    criteria: Criteria
    observation: Observation
    verdict: Verdict
    output: str
    hints: tuple[Hint, ...] = ()
    reference_file: str | None = None
    recorded: str | None = None
    notes: tuple[str, ...] = ()
    repeats: int = 1  #: runs recorded into ``recorded``


def sparkline(values: Sequence[float | None], width: int = SPARK_WIDTH) -> str:
    """One block character per value (bucket means past ``width``); ``!`` marks NaN/Inf."""
    if len(values) > width:
        size = len(values) / width
        buckets = [values[int(i * size):max(int((i + 1) * size), int(i * size) + 1)] for i in range(width)]
        values = [math.nan if any(v is None or not math.isfinite(v) for v in b)
                  else math.fsum(b) / len(b) for b in buckets]  # type: ignore[arg-type]
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return "!" * len(values)
    low, high = min(finite), max(finite)
    span = high - low
    chars = []
    for v in values:
        if v is None or not math.isfinite(v):
            chars.append("!")
        else:
            chars.append(SPARK[round((v - low) / span * (len(SPARK) - 1)) if span else len(SPARK) // 2])
    return "".join(chars)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _visible_rows(rows: Sequence[Row], divergence: int | None) -> list[Row | None]:
    """All rows, or the first and last ones plus the first divergence (None marks a gap)."""
    if len(rows) <= TABLE_ROWS:
        return list(rows)
    half = TABLE_ROWS // 2
    keep = set(range(half)) | set(range(len(rows) - half, len(rows)))
    keep |= {i for i, row in enumerate(rows) if row.step == divergence}
    shown: list[Row | None] = []
    for i, row in enumerate(rows):
        if i in keep:
            shown.append(row)
        elif shown and shown[-1] is not None:
            shown.append(None)
    return shown


def _rows(result: Result) -> list[Row]:
    comparison = result.verdict.comparison
    if comparison is not None:
        return list(comparison.rows)
    return [Row(s.step, s.loss, None, None, None) for s in result.observation.steps]


def _text(text: str, style: str = "") -> Text:
    """Untrusted text (command output, paths, messages): printable, never markup."""
    return Text(clean(text), style=style)


def _header(result: Result, console: Console) -> None:
    obs = result.observation
    head = Text("portscan verify -- ", style="bold")
    head.append(_text(" ".join(result.command)))
    console.print(head)
    console.print(_text(f"  command from {result.origin}", style="dim"))
    if result.nproc > 1:
        console.print(Text(f"  {result.nproc} processes through torch.distributed.run; rank 0 is judged",
                           style="dim"))
    if result.emulate:
        console.print(Text(f"  emulating ROCm: {TARGET_DEVICE}", style="magenta"))
        console.print(Text(f"  {SCOPE}", style="magenta"))
    backend = obs.backend.label if obs.backend else \
        "unknown (no optimizer step was seen)" if obs.runtime_loaded else "unknown"
    console.print(_text(f"  ran on: {backend}"))
    how = {"hooks": "losses from the optimizer step hooks", "stdout": "values parsed from the output",
           "backward": "losses of the backward calls (no optimizer step)",
           "none": "no losses captured"}[obs.loss_source]
    if obs.optimizer and obs.loss_source == "hooks":
        how += f" ({obs.optimizer})"
    ending = ("interrupted" if obs.interrupted else "stopped at the step cap" if obs.stopped_at_cap
              else "timed out" if obs.timed_out else f"exit status {obs.exit_status}")
    console.print(Text(f"  {plural(len(obs.steps), 'step')} in {obs.seconds:.1f} s, {ending}; {how}"))
    if len(obs.ranks) > 1:
        ranks = ", ".join(f"rank {r.rank}: {plural(r.steps, 'step')}" + (f" ({r.failure})" if r.failure else "")
                          for r in obs.ranks)
        console.print(_text(f"  {ranks}"))
    for note in (*obs.notes, *result.notes):
        console.print(_text(f"  note: {note}", style="yellow"))


def _table(result: Result, console: Console) -> None:
    """Step, loss (and reference, difference), then a sparkline of each curve."""
    rows = _rows(result)
    if not rows:
        return
    comparison = result.verdict.comparison
    table = Table(show_edge=False, box=None, padding=(0, 2), pad_edge=True)
    table.add_column("step", justify="right")
    table.add_column("loss", justify="right")
    if comparison is not None:
        table.add_column("reference", justify="right")
        table.add_column("difference", justify="right")
    divergence = comparison.first_divergence.step if comparison and comparison.first_divergence else None
    for row in _visible_rows(rows, divergence):
        if row is None:
            table.add_row("…", "", *(["", ""] if comparison else []))
            continue
        bad = row.loss is not None and not math.isfinite(row.loss)
        cells = [Text(str(row.step)), Text(_number(row.loss), style="bold red" if bad else "")]
        if comparison is not None:
            diff = "-" if row.difference is None else f"{row.difference * 100:+.2f} %"
            style = "bold red" if row.within is False else ""
            cells += [Text(_number(row.reference)), Text(diff, style=style)]
        table.add_row(*cells)
    console.print()
    console.print(table)
    losses = [s.loss for s in result.observation.steps]
    finite = [v for v in losses if v is not None and math.isfinite(v)]
    curve = Text("  loss  ")
    curve.append(sparkline(losses), style="cyan")
    if finite:
        curve.append(f"  {finite[0]:.4g} → {finite[-1]:.4g}")
    console.print(curve)
    if comparison is not None:
        ref = Text("  ref   ")
        ref.append(sparkline([r.reference for r in comparison.rows]), style="dim")
        console.print(ref)


def _failure(result: Result, console: Console) -> None:
    """The exception, the likely rules, and the last lines of the traceback or output."""
    obs = result.observation
    if obs.failure is not None:
        console.print()
        console.print(Text("  failure  ", style="bold red") + _text(obs.failure.summary))
    for i, hint in enumerate(result.hints):
        line = Text("  likely rule  " if i == 0 else "  also         ", style="bold")
        line.append(f"{hint.rule.code} {hint.rule.name}", style="bold yellow" if i == 0 else "yellow")
        if hint.where:
            line.append(_text(f"  at {hint.where}"))
            if hint.line_text:
                line.append(_text(f"  {hint.line_text}", style="dim"))
        console.print(line)
        if i == 0:
            console.print(_text(f"      {hint.message}"))
            console.print(_text(f"      rewrite: {hint.rule.rewrite}", style="dim"))
            console.print(Text(f"      more: portscan explain {hint.rule.code}", style="dim"))
    if not obs.steps:
        pass  # no step seen: the output is the only explanation, pass or fail
    elif result.verdict.passed or not (obs.failure is not None or obs.timed_out or obs.exit_status
                                       or obs.interrupted):
        return
    source = obs.failure.traceback if obs.failure and obs.failure.traceback else result.output
    tail = [line for line in output_lines(source) if line.strip()][-TAIL_LINES:]
    if tail:
        console.print(Text("  output (last lines):", style="dim"))
        for tail_line in tail:
            console.print(_text("    " + tail_line.rstrip(), style="dim"))


def render_text(result: Result, console: Console) -> None:
    _header(result, console)
    _table(result, console)
    console.print()
    for check in result.verdict.checks:
        mark, style = MARK[check.status]
        line = Text(f"  {mark} ", style=style)
        line.append(f"{check.name:<10}", style="bold")
        line.append(_text(check.detail))
        console.print(line)
    _failure(result, console)
    if result.recorded:
        runs = f" from {result.repeats} runs" if result.repeats > 1 else ""
        console.print(_text(f"  recorded {plural(len(result.observation.steps), 'step')}{runs} "
                            f"to {result.recorded}"))
    console.print()
    console.print(verdict_line(result))


def failure_headline(result: Result) -> str | None:
    """``ModuleNotFoundError: apex.amp (train.py:13) — see PS202 apex-amp``."""
    failure = result.observation.failure
    if failure is None:
        return None
    hint = result.hints[0] if result.hints else None
    subject = failure.message
    if failure.module:
        subject = related_module(hint.rule, failure.module) if hint else failure.module
    text = f"{failure.type}: {subject}"
    if hint is not None:
        if hint.where:
            text += f" ({hint.where})"
        text += f" — see {hint.rule.code} {hint.rule.name}"
    return text


def related_module(rule: Rule, module: str) -> str:
    """The module of an import rule closest to ``module`` (``apex.amp`` for ``apex``)."""
    names = [m for m in getattr(rule.pattern, "modules", ())
             if is_at_or_below(module, m) or is_at_or_below(m, module)]
    return max(names, key=len) if names else module


def verdict_line(result: Result) -> Text:
    if result.verdict.passed:
        return Text("PASS", style="bold green")
    line = Text("FAIL", style="bold red")
    headline = failure_headline(result)
    if headline is not None:
        return line.append(_text(f": {headline}"))
    why = next(c for c in result.verdict.checks if c.status == FAIL)
    return line.append(_text(f": {why.name}: {why.detail}"))


def _json_number(value: float | None) -> float | str | None:
    """JSON has no NaN or infinity: those become the strings ``nan``, ``inf``, ``-inf``."""
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"


def _step_dict(row: Row, step: Step | None) -> dict[str, Any]:
    return {"step": row.step, "loss": _json_number(row.loss),
            "reference": _json_number(row.reference), "difference": _json_number(row.difference),
            "backward_calls": step.backward_calls if step else None,
            "skipped": step.skipped if step else False,
            "evaluations": step.evaluations if step else 0,
            "tolerance": _json_number(row.tolerance)}


def to_json(result: Result) -> dict[str, Any]:
    obs = result.observation
    by_step = {s.step: s for s in obs.steps}
    comparison = result.verdict.comparison
    failure = obs.failure
    return {
        "schema_version": SCHEMA_VERSION,
        "portscan_version": __version__,
        "verdict": "pass" if result.verdict.passed else "fail",
        "headline": failure_headline(result),
        "command": list(result.command),
        "command_origin": result.origin,
        "argv": list(result.argv),
        "emulate": result.emulate,
        "emulation_scope": SCOPE if result.emulate else None,
        "nproc": result.nproc,
        "criteria": asdict(result.criteria),
        "run": {"exit_status": obs.exit_status, "timed_out": obs.timed_out,
                "stopped_at_cap": obs.stopped_at_cap, "seconds": round(obs.seconds, 3),
                "loss_source": obs.loss_source, "runtime_loaded": obs.runtime_loaded},
        "backend": asdict(obs.backend) if obs.backend else None,
        "emulated": dict(obs.emulated) if obs.emulated else None,
        "param_devices": list(obs.param_devices),
        "steps": [_step_dict(row, by_step.get(row.step)) for row in _rows(result)],
        "ranks": [asdict(r) for r in obs.ranks],
        "checks": [asdict(c) for c in result.verdict.checks],
        "failure": None if failure is None else {
            "type": failure.type, "message": failure.message, "module": failure.module,
            "traceback": failure.traceback},
        "likely_rules": [{"code": h.rule.code, "name": h.rule.name, "severity": h.rule.severity.value,
                          "message": h.message, "where": h.where, "line": h.line_text}
                         for h in result.hints],
        "reference": None if comparison is None else {
            "file": result.reference_file, "rtol": comparison.rtol, "compared": comparison.compared,
            "outside": len(comparison.misses), "allowed": comparison.allowed, "missing": comparison.missing,
            "first_divergence": comparison.first_divergence.step if comparison.first_divergence else None,
            "runs": comparison.runs,
            "descent": None if comparison.descent is None else {
                "run": _json_number(comparison.descent.run), "reference": comparison.descent.reference,
                "tolerance": comparison.descent.tolerance, "ok": comparison.descent.ok}},
        "recorded": result.recorded,
        "repeats": result.repeats,
        "series": [{"name": s.name, "label": s.label,
                    "steps": [{"step": x.step, "loss": _json_number(x.loss), "skipped": x.skipped}
                              for x in s.steps]} for s in obs.series],
        "notes": [*obs.notes, *result.notes],
        "output_tail": [line for line in output_lines(result.output) if line.strip()][-TAIL_LINES:],
    }


def render_json(result: Result) -> str:
    return json.dumps(to_json(result), indent=2, allow_nan=False) + "\n"

