"""Text fixes: named rewrites of a finding's own text, for files that are not Python.

A requirement pin or an index URL is the same few characters in a requirements file,
``pyproject.toml``, a conda environment, a Dockerfile ``RUN pip install``, a CI step or a
shell script, so one rewrite of the matched text serves every surface and keeps the
rest of the file byte for byte. Each rewrite reads the whole file only to choose
(the torch release a file pins picks the ROCm index), from data with sources
(``portscan/kinds/rocm-wheels.toml``), and declines with a reason where it cannot know.

The scan asks the same functions whether a site is fixable (so ``[fix]`` in a report
means ``portscan fix`` rewrites it); :mod:`portscan.fix.text` applies them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from portscan.kinds.rocm_wheels import RocmWheels, rocm_wheels
from portscan.match import Match


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What a text rewrite makes of a match: its new text, or why it leaves it."""

    new: str | None = None
    reason: str | None = None


#: ``name[extras]==version+local``, as pip and PEP 508 spell a pin
_PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*"
                  r"(?P<version>[0-9][0-9A-Za-z.!]*)\+(?P<local>[A-Za-z0-9._]+)")
#: every torch requirement a file states: ``torch==2.1.0+cu121``, ``torch>=2.1,<2.4``, ``"torch~=2.3"``
_TORCH = re.compile(r"(?<![\w.-])torch\s*(?P<spec>(?:(?:===?|~=|!=|>=|<=|>|<)\s*[0-9][\w.*+!]*\s*,?\s*)+)")
_INDEX = re.compile(r"^(?P<base>https?://download\.pytorch\.org/whl/)(?P<channel>nightly/|test/)?"
                    r"cu[0-9]+(?P<rest>.*)$")
#: packages whose ROCm builds sit on PyTorch's index with the same local label as torch's
_DOMAIN = frozenset({"torchvision", "torchaudio"})
#: packages PyTorch's CUDA indexes serve whose ROCm builds the table does not follow: a
#: file that pins one keeps its index (the ROCm index of torch's release may lack that version)
_UNFOLLOWED = re.compile(r"(?<![\w.-])(?P<name>xformers|fbgemm[-_]gpu|torchrec|torchtext|torchdata)\s*===?\s*[0-9]",
                         re.IGNORECASE)


def torch_specifiers(text: str) -> list[str]:
    """The version specifiers of every torch requirement in a file (a pin as ``==V``)."""
    return [" ".join(m["spec"].split()).rstrip(", ") for m in _TORCH.finditer(text)]


def _torch_release(text: str, table: RocmWheels) -> tuple[Version, str] | Rewritten:
    """The torch release a file installs, as the ROCm table knows it: the newest listed
    release every torch requirement in the file admits (none: the newest release)."""
    chosen = table.newest_meeting(torch_specifiers(text))
    if chosen is None:
        wanted = ", ".join(dict.fromkeys(torch_specifiers(text)))
        return Rewritten(reason=f"no torch release with ROCm wheels meets this file's torch requirement "
                                f"({wanted}); pick the torch version by hand")
    return chosen


def rocm_pin(text: str, match: Match) -> Rewritten:
    """``torch==2.1.0+cu121`` -> ``torch==2.1.0+rocm5.6``; ``torchvision``/``torchaudio``
    take the label of the torch release the file pins (one ROCm index serves all three)."""
    span = text[match.start:match.end]
    pin = _PIN.search(span)
    if pin is None:
        return Rewritten(reason="not a `==version+label` pin (a conda build string: PyTorch publishes no "
                                "ROCm conda packages; install its ROCm wheels with pip)")
    table = rocm_wheels("torch")
    assert table is not None
    name = canonicalize_name(pin["name"])
    if name == "torch":
        try:
            labels = table.indexes_of(Version(pin["version"]))
        except InvalidVersion:
            labels = ()
        if not labels:
            return Rewritten(reason=f"torch {pin['version']} has no ROCm wheels on download.pytorch.org; "
                                    "move to a release that has them")
        label = labels[0]
    elif name in _DOMAIN:
        pinned = {v for s in torch_specifiers(text) if (v := _pinned(s)) is not None}
        labels = table.indexes_of(next(iter(pinned))) if len(pinned) == 1 else ()
        if not labels:
            return Rewritten(reason=f"{name}'s ROCm build follows torch's: pin one torch release with ROCm "
                                    "wheels in the same file")
        label = labels[0]
    else:
        return Rewritten(reason=f"PyTorch's index has no ROCm build of {pin['name']} to pin; see the "
                                "rule's rewrite")
    start, end = pin.span("local")
    return Rewritten(new=span[:start] + label + span[end:])


def _pinned(specifier: str) -> Version | None:
    """``==2.1.0`` (``==2.1.0+cu121``) -> 2.1.0; anything else -> None."""
    clauses = [c.strip() for c in specifier.split(",") if c.strip()]
    if len(clauses) != 1 or not clauses[0].startswith("==") or "*" in clauses[0]:
        return None
    try:
        return Version(clauses[0].lstrip("=").strip().split("+", 1)[0])
    except InvalidVersion:
        return None


def rocm_index(text: str, match: Match) -> Rewritten:
    """``https://download.pytorch.org/whl/cu121`` -> ``.../whl/rocm5.6``: the ROCm index of
    the torch release the file installs (the newest release when it names none)."""
    span = text[match.start:match.end]
    url = _INDEX.match(span)
    if url is None and "$" in span:
        return Rewritten(reason="the index comes from a variable or matrix value: change it where that is set")
    if url is None:
        return Rewritten(reason="not a PyTorch CUDA index URL of the form https://download.pytorch.org/whl/cuXXX")
    if url["channel"]:
        return Rewritten(reason=f"the {url['channel'].rstrip('/')} indexes are named after the ROCm release "
                                "current at the time: pick one by hand")
    if url["rest"].strip("/"):
        return Rewritten(reason=f"a page of the CUDA index ({url['rest']}): point pip at "
                                "`--index-url https://download.pytorch.org/whl/rocmX.Y` instead")
    unfollowed = _UNFOLLOWED.search(text)
    if unfollowed is not None:
        return Rewritten(reason=f"the file pins {unfollowed['name']}, whose ROCm builds the torch table does not "
                                "follow: pick the ROCm index that has that version by hand")
    table = rocm_wheels("torch")
    assert table is not None
    chosen = _torch_release(text, table)
    if isinstance(chosen, Rewritten):
        return chosen
    return Rewritten(new=url["base"] + chosen[1] + url["rest"])


#: name (as ``[fix] rewrite`` gives it) -> the rewrite
TEXT_REWRITES: dict[str, Callable[[str, Match], Rewritten]] = {
    "rocm-pin": rocm_pin,
    "rocm-index": rocm_index,
}


def rewrite(text: str, match: Match) -> Rewritten:
    """The rule's text rewrite of one match."""
    assert match.rule.fix is not None and match.rule.fix.kind == "text"
    return TEXT_REWRITES[match.rule.fix.transform](text, match)


#: why a text fix leaves a match in Python code (the scan records it: see :mod:`portscan.match.fixsites`)
IN_PYTHON = "a text fix rewrites manifests, container definitions and scripts; in Python code, by hand"


def mark_text_fixes(text: str, matches: Sequence[Match]) -> list[Match]:
    """A non-Python file's matches, with ``declined`` set where their rule's text fix
    would not rewrite them."""
    marked = []
    for match in matches:
        spec = match.rule.fix
        if spec is not None and spec.kind == "text" and match.declined is None and match.guard is None:
            reason = rewrite(text, match).reason
            if reason is not None:
                match = dataclasses.replace(match, declined=reason)
        marked.append(match)
    return marked
