"""Reference files: ``--record FILE`` writes one, ``--against FILE`` reads it back.

A reference is JSON: the steps and losses of a passing run plus what it ran on (see
docs/verify.md). Keep one per backend: CUDA and ROCm runs are not expected to match
bit for bit, which is why ``--against`` compares with a relative tolerance.
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
VERSION = 1


class ReferenceError(ValueError):
    """A reference file cannot be read; the message names the file and the problem."""


@dataclass(frozen=True, slots=True)
class Reference:
    steps: tuple[Step, ...]
    command: tuple[str, ...] = ()
    backend: dict[str, Any] | None = None
    emulate: str | None = None
    nproc: int = 1


def to_document(steps: Sequence[Step], command: Sequence[str], backend: Backend | None,
                emulate: str | None, nproc: int) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "portscan_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": list(command),
        "nproc": nproc,
        "emulate": emulate,
        "backend": asdict(backend) if backend else None,
        "steps": [{"step": s.step, "loss": s.loss} for s in steps],
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
    if data.get("version") != VERSION:
        raise ReferenceError(f"{path}: reference version {data.get('version')!r}; "
                             f"this portscan reads version {VERSION}")
    steps = []
    for i, item in enumerate(data.get("steps") or ()):
        try:
            step, loss = int(item["step"]), float(item["loss"])
        except (KeyError, TypeError, ValueError):
            raise ReferenceError(f"{path}: steps[{i}] needs an integer step and a number loss") from None
        if not math.isfinite(loss):
            raise ReferenceError(f"{path}: steps[{i}]: the loss is not finite")
        steps.append(Step(step=step, loss=loss))
    if not steps:
        raise ReferenceError(f"{path}: no steps")
    command = data.get("command") or ()
    return Reference(steps=tuple(steps), command=tuple(str(c) for c in command),
                     backend=data.get("backend") if isinstance(data.get("backend"), dict) else None,
                     emulate=data.get("emulate"), nproc=int(data.get("nproc") or 1))
