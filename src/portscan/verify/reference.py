"""Reference files: ``--record FILE`` writes one, ``--against FILE`` reads it back.

A reference is JSON: the steps and losses of one or more passing runs (``--repeats``)
plus how they were captured and what they ran on (see docs/verify.md). Their spread is
the band ``--against`` compares in. Version 1 files (one run, no capture) still read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from portscan import __version__
from portscan.verify.trace import Backend, Step

FORMAT = "portscan-verify-reference"
VERSION = 2
READABLE = (1, 2)


class ReferenceError(ValueError):
    """A reference file cannot be read; the message names the file and the problem."""


@dataclass(frozen=True, slots=True)
class Reference:
    steps: tuple[Step, ...]  #: the mean over the recorded runs
    command: tuple[str, ...] = ()
    backend: dict[str, Any] | None = None
    emulate: str | None = None
    nproc: int = 1
    runs: tuple[dict[int, float], ...] = ()  #: each recorded run's losses by step
    capture: str | None = None  #: the loss source: hooks, backward, stdout (None: version 1)
    metric: str = "loss"
    portscan_version: str | None = None
    commands: tuple[tuple[str, ...], ...] = ()  #: what each run ran (seeds differ)


def to_document(runs: Sequence[Sequence[Step]], command: Sequence[str], backend: Backend | None,
                emulate: str | None, nproc: int, capture: str = "hooks", metric: str = "loss",
                commands: Sequence[Sequence[str]] = ()) -> dict[str, Any]:
    """The reference for one or more runs: per step the mean, each run's value and the spread."""
    by_step: dict[int, list[float]] = {}
    for run in runs:
        for s in run:
            if s.loss is not None:
                by_step.setdefault(s.step, []).append(s.loss)
    shared = [step for step in sorted(by_step) if len(by_step[step]) == len(runs)]
    steps = []
    for step in shared:
        values = by_step[step]
        mean = math.fsum(values) / len(values)
        spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)) \
            if len(values) > 1 else 0.0
        steps.append({"step": step, "loss": mean, "runs": values, "spread": spread})
    return {
        "format": FORMAT,
        "version": VERSION,
        "portscan_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": list(command),
        "commands": [list(c) for c in commands] or [list(command)],
        "repeats": len(runs),
        "capture": capture,
        "metric": metric,
        "nproc": nproc,
        "emulate": emulate,
        "backend": asdict(backend) if backend else None,
        "steps": steps,
    }


def write_reference(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def read_reference(path: Path) -> Reference:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReferenceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ReferenceError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ReferenceError(f"{path}: not a portscan verify reference (written by --record)")
    if data.get("version") not in READABLE:
        raise ReferenceError(f"{path}: reference version {data.get('version')!r}; "
                             f"this portscan reads versions {', '.join(map(str, READABLE))}")
    steps = []
    runs: list[dict[int, float]] = []
    for i, item in enumerate(data.get("steps") or ()):
        try:
            step, loss = int(item["step"]), float(item["loss"])
            values = [float(v) for v in item.get("runs") or [loss]]
        except (KeyError, TypeError, ValueError):
            raise ReferenceError(f"{path}: steps[{i}] needs an integer step and a number loss") from None
        if not (math.isfinite(loss) and all(math.isfinite(v) for v in values)):
            raise ReferenceError(f"{path}: steps[{i}]: the loss is not finite")
        if i == 0:
            runs = [{} for _ in values]
        if len(values) != len(runs):
            raise ReferenceError(f"{path}: steps[{i}]: {len(values)} runs, not {len(runs)}")
        for run, value in zip(runs, values, strict=True):
            run[step] = value
        steps.append(Step(step=step, loss=loss))
    if not steps:
        raise ReferenceError(f"{path}: no steps")
    command = data.get("command") or ()
    return Reference(steps=tuple(steps), command=tuple(str(c) for c in command),
                     backend=data.get("backend") if isinstance(data.get("backend"), dict) else None,
                     emulate=data.get("emulate"), nproc=int(data.get("nproc") or 1), runs=tuple(runs),
                     capture=data.get("capture") if isinstance(data.get("capture"), str) else None,
                     metric=str(data.get("metric") or "loss"),
                     portscan_version=data.get("portscan_version"),
                     commands=tuple(tuple(str(w) for w in c) for c in data.get("commands") or ()
                                    if isinstance(c, list)))


def mismatches(reference: Reference, *, command: Sequence[str], nproc: int, capture: str,
               backend_kind: str | None, metric: str) -> list[str]:
    """Why this reference may not fit this run: each a sentence for a warning."""
    found = []
    if reference.capture is None:
        found.append("the reference does not say how its losses were captured (a version 1 file)")
    elif reference.capture != capture:
        found.append(f"the reference's losses come from {CAPTURE[reference.capture]}, this run's from "
                     f"{CAPTURE.get(capture, capture)}: they may not measure the same thing")
    if reference.command and tuple(reference.command) != tuple(command) and \
            tuple(command) not in reference.commands:
        found.append(f"the reference ran another command: `{' '.join(reference.command)}`")
    if reference.nproc != nproc:
        found.append(f"the reference ran with --nproc {reference.nproc}, this run with {nproc}")
    if reference.metric != metric:
        found.append(f"the reference judged {reference.metric}, this run {metric}")
    ref_kind = backend_kind_of(reference.backend)
    if ref_kind and backend_kind and ref_kind != backend_kind:
        found.append(f"the reference comes from another backend ({ref_kind}, this run: {backend_kind}): "
                     f"expect kernel-level differences, not equality")
    if reference.portscan_version and reference.portscan_version != __version__:
        found.append(f"the reference was recorded by portscan {reference.portscan_version}")
    return found


CAPTURE = {"hooks": "the optimizer step hooks", "backward": "backward calls (no optimizer step)",
           "stdout": "parsed output", "none": "nowhere"}


def backend_kind_of(backend: dict[str, Any] | None) -> str | None:
    """``rocm``, ``cuda`` or ``cpu``: what the work ran on."""
    if not backend:
        return None
    if not backend.get("gpu"):
        return "cpu"
    return "rocm" if backend.get("hip") else "cuda"
