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
import functools
import itertools
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from portscan.config import Target
from portscan.kinds.rocm_images import ImageChoice, rocm_images, torch_of_pytorch_tag
from portscan.kinds.rocm_wheels import RocmWheels, rocm_wheels
from portscan.match import Match
from portscan.match.yamlfiles import mapping_get
from portscan.parse import lines_with_ends

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What a text rewrite makes of a match: the text that replaces it, or why it is left.
    ``start``/``end`` (offsets) move what ``new`` replaces off the match's own characters:
    past its value, or to an insertion on the next line. ``note``: what the reviewer of an
    applied rewrite should check (a nearest match, not an exact one)."""

    new: str | None = None
    reason: str | None = None
    start: int | None = None
    end: int | None = None
    note: str | None = None


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


def rocm_pin(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
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
        first = _first_label(table, pin["version"])
        if isinstance(first, Rewritten):
            return first
        label = first
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


def _first_label(table: RocmWheels, version: str) -> str | Rewritten:
    """The first ROCm label PyTorch lists for torch ``version`` (``rocm5.6``), or why none."""
    try:
        labels = table.indexes_of(Version(version))
    except InvalidVersion:
        labels = ()
    if not labels:
        return Rewritten(reason=f"torch {version} has no ROCm wheels on download.pytorch.org; "
                                "move to a release that has them")
    return labels[0]


def _pinned(specifier: str) -> Version | None:
    """``==2.1.0`` (``==2.1.0+cu121``) -> 2.1.0; anything else -> None."""
    clauses = [c.strip() for c in specifier.split(",") if c.strip()]
    if len(clauses) != 1 or not clauses[0].startswith("==") or "*" in clauses[0]:
        return None
    try:
        return Version(clauses[0].lstrip("=").strip().split("+", 1)[0])
    except InvalidVersion:
        return None


def rocm_index(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """``https://download.pytorch.org/whl/cu121`` -> ``.../whl/rocm5.6``: the ROCm index of
    the torch release the file installs (the newest release when it names none)."""
    span = text[match.start:match.end]
    url = _INDEX.match(span)
    if url is None and "$" in span:
        defined = _defined_once(text, span)
        if isinstance(defined, str):
            return Rewritten(reason=defined)
        start, end = defined
        moved = rocm_index(text, dataclasses.replace(match, start=start, end=end), kind, target)
        return dataclasses.replace(moved, start=start, end=end) if moved.new is not None else moved
    if url is None:
        return Rewritten(reason="not a PyTorch CUDA index URL of the form https://download.pytorch.org/whl/cuXXX")
    if url["channel"] == "test/":
        return Rewritten(reason="the test indexes (release candidates) are named after the ROCm release of the "
                                "coming release: pick one by hand")
    if url["rest"].strip("/"):
        return Rewritten(reason=f"a page of the CUDA index ({url['rest']}): point pip at "
                                "`--index-url https://download.pytorch.org/whl/rocmX.Y` instead")
    unfollowed = _UNFOLLOWED.search(text)
    if unfollowed is not None:
        return Rewritten(reason=f"the file pins {unfollowed['name']}, whose ROCm builds the torch table does not "
                                "follow: pick the ROCm index that has that version by hand")
    table = rocm_wheels("torch")
    assert table is not None
    if url["channel"]:
        return _nightly(text, url, table)
    chosen = _torch_release(text, table)
    if isinstance(chosen, Rewritten):
        return chosen
    return Rewritten(new=url["base"] + chosen[1] + url["rest"])


def _nightly(text: str, url: re.Match[str], table: RocmWheels) -> Rewritten:
    """``.../whl/nightly/cu126`` -> ``.../whl/nightly/rocm7.1``: the ROCm label of the newest
    release in the table, which the nightlies build for at least (torchtitan's ROCm CI moved
    from ``nightly/rocm7.0`` to ``nightly/rocm7.1`` with 2.10), noted for review since the
    nightly indexes follow the ROCm release current at the time. A dated nightly pin
    (``torch==2.7.0.dev20250201``) sits on the index of its own date: left to the user."""
    dated = [s for s in torch_specifiers(text) if ".dev" in s]
    if dated:
        return Rewritten(reason=f"the file pins a dated nightly ({dated[0]}), published on the nightly ROCm "
                                "index of its date: pick that index by hand")
    release, label = table.newest()
    return Rewritten(new=url["base"] + url["channel"] + label + url["rest"],
                     note=f"nightly indexes follow the ROCm release current at the time: {label} is that of torch "
                          f"{release}, the newest release portscan knows; check "
                          f"{url['base']}{url['channel']} for today's")


#: a value that is one variable and nothing else: ``$X``, ``${X}``, ``$(X)`` (Azure),
#: ``${{ env.X }}``/``${{ vars.X }}`` (GitHub)
_WHOLE_VARIABLE = re.compile(r"^(?:\$\{\{\s*(?:env|vars)\.(?P<gh>\w+)\s*\}\}|\$\{(?P<braced>\w+)\}|\$\((?P<azure>\w+)\)"
                             r"|\$(?P<bare>\w+))$")


def _defined_once(text: str, span: str) -> tuple[int, int] | str:
    """Where the index URL a variable use (``$TORCH_INDEX``) takes its value is written in
    the same file (``TORCH_INDEX: https://...`` in a ``variables:``/``env:`` mapping,
    ``ARG``/``ENV``/``export`` ``TORCH_INDEX=https://...``): its offsets, or why it is not
    rewritten there (a matrix value, a URL built around a variable, a name set twice or
    elsewhere)."""
    whole = _WHOLE_VARIABLE.match(span.strip("'\""))
    if whole is None:
        return "the index is built from a variable or matrix value: change it where that is set"
    name = next(v for v in whole.groupdict().values() if v)
    found = list(re.finditer(rf"(?m)^[ \t]*(?:-[ \t]*)?(?:(?:export|ARG|ENV)[ \t]+)?{re.escape(name)}[ \t]*[:=][ \t]*"
                             r"""["']?(?P<url>https?://[^\s"'#]+)""", text))
    if len(found) != 1:
        return (f"the index comes from `{name}`, set {'more than once' if found else 'outside this file'}: "
                "change it where that is set")
    return found[0].span("url")


#: the gfx targets ``rocm-arch`` writes when no ``target.arch`` is configured: MI200
#: (gfx90a), MI300 (gfx942) and RX 7900 (gfx1100), which every ROCm release since 6.0 builds for
DEFAULT_ROCM_ARCHS = ("gfx90a", "gfx942", "gfx1100")
ROCM_ARCH_VARIABLE = "PYTORCH_ROCM_ARCH"

#: a quoted or bare shell word: the value after ``NAME=``
_WORD = re.compile(r'"(?:[^"\\\n]|\\.)*"|'"'[^'\n]*'"r"|[^\s;&|()<>'\"]*")
#: ``NAME: value`` in YAML, to the end of the line (a comment kept after it)
_YAML_VALUE = re.compile(r"[ \t]*:(?P<value>[^\n]*)")
#: ``NAME := value`` and friends in a Makefile, to the end of the line
_MAKE_ASSIGN = re.compile(r"(?P<op>[ \t]*(?:::=|:=|\?=|\+=|!=|=)[ \t]*)(?P<value>[^\n]*)")


def rocm_arch(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """``TORCH_CUDA_ARCH_LIST="8.0;9.0"`` -> the same, then ``PYTORCH_ROCM_ARCH="gfx90a;gfx942;gfx1100"``
    (the configured ``target.arch``, else :data:`DEFAULT_ROCM_ARCHS`). The CUDA setting stays
    as it was for NVIDIA builds and ROCm builds get their own: in the same shell
    assignment or Dockerfile ``ENV``, or on a line of its own where a line holds one setting
    (YAML, a Makefile assignment, a legacy ``ENV NAME value``)."""
    value = target.arch if target is not None and target.arch else ";".join(DEFAULT_ROCM_ARCHS)
    line_start, line_end = _line_start(text, match.start), _line_end(text, match.end)
    prefix, after = text[line_start:match.start], text[match.end:line_end]
    own_line = after.rstrip().endswith("\\") is False
    make = _MAKE_ASSIGN.match(after)
    if kind == "makefile" and make is not None and re.fullmatch(r"(?:(?:export|override)[ \t]+)?", prefix):
        return _next_line(text, line_end, f"{prefix}{ROCM_ARCH_VARIABLE}{make['op']}{value}", own_line)
    if after.startswith("="):
        word = _WORD.match(text, match.end + 1)
        assert word is not None  # the pattern matches the empty word
        if "$" in word.group() or "`" in word.group():
            return Rewritten(reason="the value comes from a variable: set PYTORCH_ROCM_ARCH where it is chosen")
        if kind in _YAML_KINDS and re.fullmatch(r"[ \t]*-[ \t]+", prefix) and not text[word.end():line_end].strip():
            return _next_line(text, line_end, f"{prefix}{ROCM_ARCH_VARIABLE}={value}", own_line)  # compose list
        quoted = f'"{value}"' if ";" in value else value
        return Rewritten(new=text[match.start:word.end()] + f" {ROCM_ARCH_VARIABLE}={quoted}", end=word.end())
    yaml_value = _YAML_VALUE.match(after)
    if kind in _YAML_KINDS and yaml_value is not None and re.fullmatch(r"[ \t]*", prefix):
        shown = yaml_value["value"].split(" #", 1)[0].strip()
        if not shown or shown[0] in "|>&*!{[":
            return Rewritten(reason="the value is not a plain YAML scalar on this line: add PYTORCH_ROCM_ARCH by hand")
        return _next_line(text, line_end, f'{prefix}{ROCM_ARCH_VARIABLE}: "{value}"', own_line)
    legacy = re.fullmatch(r"(?i)[ \t]*ENV[ \t]+", prefix)
    if kind == "dockerfile" and legacy is not None and after[:1] in (" ", "\t"):
        return _next_line(text, line_end, f'{prefix}{ROCM_ARCH_VARIABLE}="{value}"', own_line)
    return Rewritten(reason="not a setting PYTORCH_ROCM_ARCH can be placed next to: add it by hand")


_YAML_KINDS = frozenset({"ci", "compose", "conda"})

#: what ``--gpus all`` becomes: ROCm's device nodes, readable by the ``video`` group
ROCM_DEVICES = "--device=/dev/kfd --device=/dev/dri --group-add video"
_GPUS_VALUE = re.compile(r"""(?:=|[ \t]+)(?P<value>"all"|'all'|all|\\"all\\")(?=$|[\s'"`;&|)\]])""")


def rocm_devices(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """``docker run --gpus all`` -> ``docker run --device=/dev/kfd --device=/dev/dri --group-add video``:
    every GPU, as ROCm's Docker instructions pass them. A count or a device list has no
    1:1 form (each GPU is a ``/dev/dri/renderD<N>`` node, numbered by the host)."""
    value = _GPUS_VALUE.match(text, match.start + len("--gpus"))
    if value is None:
        return Rewritten(reason="not `--gpus all`: pass the `/dev/dri/renderD<N>` nodes of the GPUs wanted, "
                                "with `--device=/dev/kfd --group-add video`")
    if "/dev/kfd" in text[_line_start(text, match.start):_line_end(text, match.end)]:
        return Rewritten(reason="the command passes /dev/kfd already: drop `--gpus` by hand")
    return Rewritten(new=ROCM_DEVICES, end=value.end())


def _next_line(text: str, line_end: int, line: str, own_line: bool) -> Rewritten:
    """Insert ``line`` after the line that ends at ``line_end``."""
    if not own_line:
        return Rewritten(reason="the setting continues on the next line: add PYTORCH_ROCM_ARCH by hand")
    return Rewritten(new="\n" + line, end=line_end, start=line_end)


def rocm_compose_devices(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """A compose service's ``deploy: resources: reservations: devices: [{driver: nvidia,
    count: all, capabilities: [gpu]}]`` -> ``devices: [/dev/kfd, /dev/dri]`` and
    ``group_add: [video]`` on the service, where ``deploy`` held nothing else (its other
    settings, a GPU count or device IDs, are the user's to move or choose)."""
    service = _compose_service(text, match.start)
    if isinstance(service, str):
        return Rewritten(reason=service)
    key, deploy, keys = service
    if "devices" in keys or "group_add" in keys:
        return Rewritten(reason="the service has `devices` or `group_add` already: merge the ROCm device nodes by hand")
    reservation = _only_path(deploy, ("resources", "reservations", "devices"))
    if reservation is None or not isinstance(reservation, yaml.SequenceNode) or len(reservation.value) != 1:
        return Rewritten(reason="`deploy` holds more than one NVIDIA device reservation: move its other settings "
                                "and add `devices: [/dev/kfd, /dev/dri]` by hand")
    item = {k.value: v for k, v in reservation.value[0].value} if isinstance(reservation.value[0],
                                                                          yaml.MappingNode) else {}
    count = item.get("count")
    if set(item) - {"driver", "count", "capabilities"} or (count is not None and count.value != "all"):
        return Rewritten(reason="the reservation selects GPUs (a count or device IDs): pass the "
                                "`/dev/dri/renderD<N>` node of each with `/dev/kfd`, or set HIP_VISIBLE_DEVICES")
    indent = " " * key.start_mark.column
    line_start = _line_start(text, key.start_mark.index)
    end = _line_end(text, _last_index(deploy))
    new = (f"{indent}devices:\n{indent}  - /dev/kfd\n{indent}  - /dev/dri\n"
           f"{indent}group_add:\n{indent}  - video")
    return Rewritten(new=new, start=line_start, end=end)


def _compose_service(text: str, at: int) -> tuple[yaml.Node, yaml.Node, set[str]] | str:
    """The ``deploy`` key and value of the compose service whose text holds offset ``at``,
    with the service's keys; or why there is none to rewrite."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return "the file does not read as YAML"
    services = mapping_get(root, "services")
    if services is None or not isinstance(services, yaml.MappingNode):
        return "no `services:` mapping"
    for _, service in services.value:
        if isinstance(service, yaml.MappingNode) and service.start_mark.index <= at < service.end_mark.index:
            for key, value in service.value:
                if key.value == "deploy" and value.start_mark.index <= at < value.end_mark.index:
                    if value.flow_style or "\t" in text[key.start_mark.index:value.end_mark.index]:
                        return "`deploy` is written in flow style: rewrite it by hand"
                    return key, value, {k.value for k, _ in service.value}
    return "not in a service's `deploy:` mapping"


def _only_path(node: yaml.Node, path: tuple[str, ...]) -> yaml.Node | None:
    """The node at ``path`` below ``node`` when each mapping on the way has that one key."""
    for name in path:
        if not isinstance(node, yaml.MappingNode) or [k.value for k, _ in node.value] != [name]:
            return None
        node = node.value[0][1]
    return node


def _last_index(node: yaml.Node) -> int:
    """Where the last scalar below ``node`` ends (a block's ``end_mark`` can sit lines past it)."""
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.value and not node.flow_style:
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last
    return node.end_mark.index


def _line_start(text: str, at: int) -> int:
    """Where the line holding offset ``at`` starts."""
    return text.rfind("\n", 0, at) + 1


def _line_end(text: str, at: int) -> int:
    """Where the line holding offset ``at`` ends (its line break, or the end of the text)."""
    end = text.find("\n", at)
    return len(text) if end == -1 else end


SMI_TABLE = Path(__file__).resolve().parent.parent / "kinds" / "smi-equivalents.toml"
#: where a shell command's arguments end: a control operator, a redirection, a comment
_COMMAND_END = re.compile(r"[|;&<>)`#\n]|\$\(")


@functools.cache
def _smi_table() -> tuple[tuple[tuple[tuple[str, ...], str], ...], tuple[tuple[str, str], ...]]:
    """(nvidia-smi arguments, amd-smi command) pairs, and (first argument, why not) pairs."""
    with SMI_TABLE.open("rb") as handle:
        data = tomllib.load(handle)
    return (tuple((tuple(row["args"]), row["amd"]) for row in data["equivalent"]),
            tuple((row["first"], row["why"]) for row in data["declined"]))


def amd_smi(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """``nvidia-smi -L`` -> ``amd-smi list``, for the invocations ``smi-equivalents.toml``
    lists as 1:1 (same purpose, output read the same way); the whole command, up to a
    pipe, redirection, ``;``, ``&&`` or comment, must be one of them."""
    end = _COMMAND_END.search(text, match.end)
    stop = len(text) if end is None else end.start()
    words = text[match.end:stop].split()
    if any(q in text[match.end:stop] for q in "'\"\\$"):
        return Rewritten(reason="the arguments are quoted or computed: rewrite the query by hand")
    before = text[_line_start(text, match.start):match.start]
    recent = text[_nth_line_start(text, match.start, 5):match.start]
    check = next(reversed(list(_SMI_CHECK.finditer(recent))), None)  # the last test before it
    if check is not None and not re.search(r"\b(?:fi|else|elif|done)\b|\|\||\}", recent[check.end():]):
        return Rewritten(reason="in a branch that checks for nvidia-smi, which runs on NVIDIA hosts only: "
                                "add an `amd-smi` branch beside it by hand")
    if text[stop:stop + 2] == "| " or text[stop:stop + 1] == "|" and text[stop:stop + 2] != "||" or \
            re.search(r"(\$\(|`)[^)`]*$", before):
        return Rewritten(reason="its output feeds another command, and AMD SMI lays its output out differently "
                                "(`amd-smi list` prints several lines per GPU): rewrite the pipeline by hand")
    equivalents, declined = _smi_table()
    for args, amd in equivalents:
        number = _same_args(words, args)
        if number is not None:
            used = text[match.start:stop].rstrip()
            return Rewritten(new=amd.replace("{N}", number), end=match.start + len(used))
    first = next((why for arg, why in declined if words and words[0].split("=", 1)[0] == arg), None)
    return Rewritten(reason=first or "no 1:1 AMD SMI form of these arguments: see the rule's rewrite")


#: a shell test for nvidia-smi (``command -v nvidia-smi``): what follows is NVIDIA's branch
_SMI_CHECK = re.compile(r"\b(?:command\s+-v|which|type|hash)\s+nvidia-smi\b")


def _nth_line_start(text: str, at: int, lines: int) -> int:
    """Where the line ``lines`` lines above the one holding ``at`` starts."""
    start = at
    for _ in range(lines + 1):
        start = text.rfind("\n", 0, start)
        if start == -1:
            return 0
    return start + 1


def _same_args(words: Sequence[str], args: Sequence[str]) -> str | None:
    """The number ``{N}`` stands for when ``words`` are ``args`` ("" when there is none);
    None when they differ."""
    if len(words) != len(args):
        return None
    number = ""
    for word, arg in zip(words, args, strict=True):
        if "{N}" in arg:
            head, _, tail = arg.partition("{N}")
            value = word[len(head):len(word) - len(tail)] if word.startswith(head) and word.endswith(tail) else ""
            if not value.isdigit():
                return None
            number = value
        elif word != arg:
            return None
    return number


def rocm_image(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """A CUDA image reference -> the ROCm image ``rocm-images.toml`` pairs with it:
    ``nvcr.io/nvidia/pytorch:24.05-py3`` and ``pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime``
    -> the ``rocm/pytorch`` tag with that PyTorch, ``nvidia/cuda:12.1.1-devel-ubuntu22.04``
    -> ``rocm/dev-ubuntu-22.04:<ROCm>-complete``. The reference is rewritten where it is
    written: an ``ARG`` default the ``FROM`` line uses, the default of ``${IMAGE:-...}``, an
    ``nvidia/cuda`` tag whose CUDA version or Ubuntu comes from a variable
    (``${CUDA_VERSION}-devel-ubuntu${UBUNTU}`` -> ``rocm/dev-ubuntu-${UBUNTU}:...``)."""
    reference, start, end = match.variables.get("image", ""), match.start, match.end
    written = text[start:end]
    if written != reference and written.count(reference) == 1:  # ${IMAGE:-<reference>}, a quoted default
        start += written.index(reference)
        end = start + len(reference)
    elif written != reference:
        reference = written  # resolved from variables: the text as written (nvidia/cuda:${CUDA}-devel-...)
    name, _, tag = reference.rpartition(":") if ":" in reference.rsplit("/", 1)[-1] else (reference, "", "")
    if "$" in name or "@" in reference:
        return Rewritten(reason="the image is named through a variable or pinned by digest: "
                                "change it where it is set")
    bare = name.removeprefix("docker.io/").removeprefix("library/")
    images = rocm_images()
    if "$" in tag and bare != "nvidia/cuda":
        return Rewritten(reason="the tag is built from variables: pick a ROCm image by hand")
    if bare == "nvcr.io/nvidia/pytorch":
        choice = images.for_ngc(tag)
    elif bare in ("pytorch/pytorch", "ghcr.io/pytorch/pytorch"):
        torch = torch_of_pytorch_tag(tag)
        choice = images.for_torch(torch, True, None, f"{bare}:{tag}") if torch is not None else ImageChoice(
            reason="not a `<torch>-cuda<X>-cudnn<Y>-<runtime|devel>` tag: pick a rocm/pytorch tag by hand")
    elif bare == "nvidia/cuda":
        choice = images.for_cuda_base(tag, target.rocm if target is not None else None)
    else:
        return Rewritten(reason="no ROCm image with the same contents in the table (rocm/pytorch, "
                                "rocm/dev-ubuntu-*): pick one by hand (rocm/tensorflow, rocm/jax, rocm/vllm, ...)")
    if choice.image is None:
        return Rewritten(reason=choice.reason)
    return Rewritten(new=choice.image, note=choice.note, start=start, end=end)


#: conda's names of PyTorch and its companions -> their pip names
_CONDA_TORCH = {"pytorch": "torch", "torchvision": "torchvision", "torchaudio": "torchaudio"}
#: a conda dependency: name, then ``=V``/``==V`` and maybe ``=build`` (no build string: ours to move)
_CONDA_SPEC = re.compile(r"(?P<name>[A-Za-z0-9][\w.-]*)\s*(?:(?P<op>==?)\s*(?P<version>[0-9][\w.]*)"
                         r"(?P<build>=\S+)?)?\s*$")
_CUDA_COMPANIONS = ("pytorch-cuda", "cudatoolkit")


def rocm_conda(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """A conda environment's ``pytorch=1.13.1`` + ``pytorch-cuda=11.7`` (or ``cudatoolkit``)
    -> the ``pip:`` section installs ``torch==1.13.1+rocm5.2`` from PyTorch's ROCm index
    (PyTorch publishes ROCm builds as wheels only): the CUDA companions go, PyTorch and
    its pinned companions move to pip with the label of torch's release. One rewrite
    spans every line it touches, so it fixes every ``pytorch-cuda``/``cudatoolkit`` line."""
    if kind != "conda":
        return Rewritten(reason="a `conda install` command: install torch with pip from "
                                "https://download.pytorch.org/whl/rocmX.Y instead, by hand")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return Rewritten(reason="the file does not read as YAML")
    deps = mapping_get(root, "dependencies")
    if not isinstance(deps, yaml.SequenceNode) or deps.flow_style or not deps.value:
        return Rewritten(reason="`dependencies` is not a block list: move PyTorch to pip by hand")
    moved: dict[str, tuple[yaml.Node, str]] = {}  # pip name -> (item, version)
    dropped: list[yaml.Node] = []
    pip: yaml.SequenceNode | None = None
    for item in deps.value:
        if isinstance(item, yaml.MappingNode):
            found = mapping_get(item, "pip")
            pip = found if isinstance(found, yaml.SequenceNode) and not found.flow_style and found.value else pip
            continue
        spec = _CONDA_SPEC.match(str(item.value)) if isinstance(item, yaml.ScalarNode) else None
        if spec is None:
            continue
        name = spec["name"].lower()
        if name in _CUDA_COMPANIONS:
            dropped.append(item)
        elif name in _CONDA_TORCH:
            if spec["build"] or spec["version"] is None:
                return Rewritten(reason=f"`{item.value}` is not pinned to one release (or carries a build "
                                        "string): pin it, then it moves to pip with its ROCm label")
            moved[_CONDA_TORCH[name]] = (item, spec["version"])
    if "torch" not in moved:
        return Rewritten(reason="the environment installs no pinned `pytorch`: drop the CUDA packages "
                                "and install torch from the ROCm index with pip, by hand")
    table = rocm_wheels("torch")
    assert table is not None
    label = _first_label(table, moved["torch"][1])
    if isinstance(label, Rewritten):
        return label
    lines = lines_with_ends(text)  # as YAML counts lines: \n, \r\n, \r
    starts = list(itertools.accumulate(map(len, lines), initial=0))

    def line_of(node: yaml.Node) -> int:
        return int(node.start_mark.line)

    gone = {line_of(node) for node in dropped} | {line_of(node) for node, _ in moved.values()}
    if any(len(text[starts[n]:starts[n + 1]].split("#", 1)[0].split()) != 2 for n in gone):
        return Rewritten(reason="a dependency shares its line with another: move PyTorch to pip by hand")
    dash = text[starts[line_of(deps.value[0])]:deps.value[0].start_mark.index]  # "  - "
    wheels = [f"--extra-index-url https://download.pytorch.org/whl/{label}"] + \
        [f"{name}=={version}+{label}" for name, (_, version) in moved.items()]
    if pip is not None:
        at = line_of(pip.value[0])
        prefix = text[starts[at]:pip.value[0].start_mark.index]
        added = {at: "".join(prefix + wheel + "\n" for wheel in wheels)}
    else:
        at = max(line_of(item) for item in deps.value) + 1
        indent = dash.replace("-", " ")
        has_pip = any(isinstance(i, yaml.ScalarNode) and str(i.value).strip() == "pip" for i in deps.value)
        added = {at: ("" if has_pip else f"{dash}pip\n") + f"{dash}pip:\n" +
                 "".join(f"{indent}  - {wheel}\n" for wheel in wheels)}
    first, last = min(gone | set(added)), max(gone | {n - 1 for n in added})
    new = "".join(added.get(n, "") + ("" if n in gone else lines[n]) for n in range(first, last + 1))
    if at > last:
        new += added.get(at, "")
    end = starts[last + 1] if last + 1 < len(starts) else len(text)
    if not text.endswith("\n") and end == len(text):
        return Rewritten(reason="the file does not end with a line break: add one, then fix again")
    return Rewritten(new=new, start=starts[first], end=end)


PACKAGES_TABLE = Path(__file__).resolve().parent.parent / "kinds" / "rocm-packages.toml"
#: ``cupy-cuda12x``, ``cupy_cuda117``: a CUDA build's package name
_CUPY_CUDA = re.compile(r"(?i)(?<![\w.-])cupy[-_]cuda[0-9a-z]*(?![\w.-])")
#: a local version label (``+cu117``), which a specifier set cannot hold
_LOCAL = re.compile(r"\+[\w.]*")
#: the extras and version specifiers after a requirement's name
_SPECIFIERS = re.compile(r"\s*(?:\[[^\]]*\])?\s*(?P<spec>(?:(?:===?|~=|!=|>=|<=|>|<)\s*[0-9][\w.*+!]*\s*,?\s*)*)")


@functools.cache
def _packages() -> dict[str, Any]:
    """``kinds/rocm-packages.toml``: the ROCm counterparts of CUDA-only packages."""
    return tomllib.loads(PACKAGES_TABLE.read_text(encoding="utf-8"))


def _cupy_wheels() -> tuple[tuple[str, str, tuple[Version, ...]], ...]:
    """(ROCm ``major.minor``, package, CuPy releases) per CuPy ROCm wheel."""
    return tuple((rocm, row["package"], tuple(Version(v) for v in row["versions"]))
                 for rocm, row in _packages()["cupy"]["wheels"].items())


def rocm_cupy(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """``cupy-cuda12x`` -> the CuPy ROCm wheel of the target's ROCm release (``cupy-rocm-7-0``)
    where one has a release the requirement admits, else CuPy's source package ``cupy``,
    which builds for HIP with the environment the note names."""
    span = text[match.start:match.end]
    name = _CUPY_CUDA.search(span)
    if name is None:
        return Rewritten(reason="no `cupy-cudaXX` package name in the requirement: change it by hand")
    spec = _SPECIFIERS.match(span, name.end())
    try:
        wanted = SpecifierSet(_LOCAL.sub("", " ".join(spec["spec"].split()).rstrip(", "))) if spec else SpecifierSet()
    except InvalidSpecifier:
        wanted = None
    environment = _packages()["cupy"]["source_build"]
    series = _rocm_series(target)
    for release, package, versions in _cupy_wheels():
        if series == release and wanted is not None and any(wanted.contains(v) for v in versions):
            return Rewritten(new=span[:name.start()] + package + span[name.end():])
    arch = target.arch if target is not None and target.arch else "<gfx name from rocminfo>"
    why = f"ROCm {series} has" if series is not None else "without `target.rocm` portscan knows"
    return Rewritten(new=span[:name.start()] + "cupy" + span[name.end():],
                     note=f"{why} no CuPy ROCm wheel for this requirement, so pip builds CuPy's source package: "
                          f"install it with {environment.format(arch=arch)}")


#: the NVML bindings ``rocm-amdsmi`` swaps for AMD SMI's Python package
_NVML_PACKAGE = re.compile(r"(?i)(?<![\w.-])(?:pynvml|nvidia[-_.]ml[-_.]py3?|py3nvml)(?![\w.-])")


def rocm_amdsmi(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """``nvidia-ml-py>=12`` -> ``amdsmi`` (``amdsmi==6.4.*`` for a ``target.rocm`` of 6.4
    that PyPI has): AMD SMI's Python package, which ``torch.cuda.utilization()`` and its
    siblings read on ROCm where they read NVML on NVIDIA. Version specifiers go (they
    name NVML releases); markers and comments stay."""
    span = text[match.start:match.end]
    name = _NVML_PACKAGE.search(span)
    if kind == "conda" and not _in_pip_list(text, match.start):
        return Rewritten(reason="a conda dependency: conda has no amdsmi package; list `amdsmi` under `pip:`")
    if name is None:
        return Rewritten(reason=f"{match.variables.get('package', 'this package')} has no drop-in on ROCm (its "
                                "own API over NVML or nvidia-smi): port its uses to amdsmi by hand")
    spec = _SPECIFIERS.match(span, name.end())
    end = name.end() + len(spec.group(0).rstrip()) if spec is not None else name.end()
    on_pypi = _packages()["amdsmi"]["series"]
    series = _rocm_series(target)
    pin = f"=={series}.*" if series in on_pypi else ""
    new = span[:name.start()] + "amdsmi" + pin + span[end:]
    if pin:
        return Rewritten(new=new)
    return Rewritten(new=new, note=f"pin amdsmi to the ROCm release installed (PyPI has {on_pypi[-1]} to {on_pypi[0]}: "
                                   "`amdsmi==6.4.*` for ROCm 6.4): the package loads that ROCm's libamd_smi")


def _rocm_series(target: Target | None) -> str | None:
    """The configured ROCm release as ``major.minor`` (``6.4``), if any."""
    rocm = target.rocm if target is not None else None
    return f"{rocm.major}.{rocm.minor}" if rocm is not None else None


def _in_pip_list(text: str, at: int) -> bool:
    """Does an item of the conda environment's ``pip:`` list start at ``at``? (The
    conda matcher reads the requirements there as pip's.)"""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return False
    deps = mapping_get(root, "dependencies")
    lists = [mapping_get(item, "pip") for item in (deps.value if isinstance(deps, yaml.SequenceNode) else ())]
    return any(isinstance(pip, yaml.SequenceNode) and any(entry.start_mark.index == at for entry in pip.value)
               for pip in lists)


#: name (as ``[fix] rewrite`` gives it) -> the rewrite
TEXT_REWRITES: dict[str, Callable[[str, Match, str, Target | None], Rewritten]] = {
    "rocm-pin": rocm_pin,
    "rocm-index": rocm_index,
    "rocm-arch": rocm_arch,
    "rocm-devices": rocm_devices,
    "rocm-compose-devices": rocm_compose_devices,
    "amd-smi": amd_smi,
    "rocm-image": rocm_image,
    "rocm-conda": rocm_conda,
    "rocm-cupy": rocm_cupy,
    "rocm-amdsmi": rocm_amdsmi,
}


def rewrite(text: str, match: Match, kind: str, target: Target | None = None) -> Rewritten:
    """The rule's text rewrite of one match in a file of ``kind``."""
    assert match.rule.fix is not None and match.rule.fix.kind == "text"
    return TEXT_REWRITES[match.rule.fix.transform](text, match, kind, target)


#: why a text fix leaves a match in Python code (the scan records it: see :mod:`portscan.match.fixsites`)
IN_PYTHON = "a text fix rewrites manifests, container definitions and scripts; in Python code, by hand"


def mark_text_fixes(text: str, kind: str, matches: Sequence[Match]) -> list[Match]:
    """A non-Python file's matches, with ``declined`` set where their rule's text fix
    would not rewrite them."""
    marked = []
    for match in matches:
        spec = match.rule.fix
        if spec is not None and spec.kind == "text" and match.declined is None and match.guard is None:
            reason = rewrite(text, match, kind).reason
            if reason is not None:
                match = dataclasses.replace(match, declined=reason)
        marked.append(match)
    return marked
