"""Baselines: record today's findings, then report only new ones.

A finding is identified by its rule, its path and its fingerprint (a hash of its source
lines with whitespace collapsed, :func:`portscan.scan.fingerprint`), never by line
number, so code inserted or removed above it does not bring it back. Identical lines
are counted: a baseline that holds two copies of a finding lets two through, a third
copy is new. The file is JSON, sorted, one entry per identity, so it diffs well.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from portscan.model import Finding

FORMAT = "portscan-baseline"
VERSION = 1


class BaselineError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Filtered:
    new: tuple[Finding, ...]  #: findings the baseline does not cover
    known: int  #: findings it covers
    gone: int  #: baseline entries no longer found (fixed: the baseline can be tightened)


def _key(finding: Finding) -> tuple[str, str, str]:
    return finding.rule, finding.path, finding.fingerprint


def render(findings: Iterable[Finding]) -> str:
    counts = Counter(_key(f) for f in findings)
    entries = [{"rule": rule, "path": path, "fingerprint": fingerprint, "count": count}
               for (rule, path, fingerprint), count in sorted(counts.items())]
    return json.dumps({"format": FORMAT, "version": VERSION, "findings": entries}, indent=2) + "\n"


def write(path: Path, findings: Iterable[Finding]) -> int:
    """Write the baseline; returns how many findings it records."""
    findings = list(findings)
    path.write_text(render(findings), encoding="utf-8")
    return len(findings)


def read(path: Path) -> Counter[tuple[str, str, str]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: not a baseline (invalid JSON: {exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BaselineError(f"{path}: not a portscan baseline (write one with --write-baseline)")
    if document.get("version") != VERSION:
        raise BaselineError(f"{path}: baseline version {document.get('version')!r} is not supported")
    counts: Counter[tuple[str, str, str]] = Counter()
    for i, entry in enumerate(document.get("findings", [])):
        try:
            counts[(entry["rule"], entry["path"], entry["fingerprint"])] += int(entry.get("count", 1))
        except (KeyError, TypeError, ValueError):
            raise BaselineError(f"{path}: findings[{i}]: expected rule, path, fingerprint, count") from None
    return counts


def apply(findings: Iterable[Finding], baseline: Counter[tuple[str, str, str]],
          scanned: Iterable[str] | None = None) -> Filtered:
    """Split findings into new and known. ``gone`` counts entries of the ``scanned`` files
    (all when None) that no longer occur; a hook that sees a few files counts only theirs."""
    paths = None if scanned is None else set(scanned)
    left = Counter({k: n for k, n in baseline.items() if paths is None or k[1] in paths})
    new = []
    known = 0
    for finding in findings:
        key = _key(finding)
        if left[key] > 0:
            left[key] -= 1
            known += 1
        else:
            new.append(finding)
    return Filtered(tuple(new), known, sum(left.values()))
