"""The ROCm image that stands in for a CUDA one, read from ``rocm-images.toml`` (data
with its sources): NGC PyTorch containers and ``pytorch/pytorch`` CUDA tags become the
``rocm/pytorch`` tag carrying the same PyTorch (and Python, where known), ``nvidia/cuda``
tags become ``rocm/dev-ubuntu-<same Ubuntu>:<ROCm>`` (``-complete`` where the CUDA tag
carries libraries). Used by the ``rocm-image`` text rewrite.

Each choice is an :class:`ImageChoice`: the image, and a note when the match is not
exact (a nearer Python, another PyTorch patch release, a tag seen only in public code),
which the fix summary prints so the unsafe rewrite is reviewed with it.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TABLE = Path(__file__).resolve().parent / "rocm-images.toml"


@dataclass(frozen=True, slots=True)
class RocmPytorchTag:
    """One ``rocm/pytorch`` tag and what it carries."""

    tag: str
    rocm: Version
    ubuntu: str
    python: Version
    torch: Version
    confidence: str

    @property
    def image(self) -> str:
        return f"rocm/pytorch:{self.tag}"


@dataclass(frozen=True, slots=True)
class ImageChoice:
    """The image to write, or why there is none (``image`` is None)."""

    image: str | None = None
    note: str | None = None  #: what is not an exact match, for the reviewer
    reason: str | None = None  #: why nothing is written


@dataclass(frozen=True, slots=True)
class RocmImages:
    ngc: dict[str, tuple[str, Version]]  #: NGC tag -> (torch major.minor, Python)
    pytorch: tuple[RocmPytorchTag, ...]
    dev_ubuntu: dict[str, tuple[Version, ...]]  #: Ubuntu release -> ROCm releases with -complete tags

    def for_torch(self, torch: Version, exact: bool, python: Version | None, what: str) -> ImageChoice:
        """The rocm/pytorch tag for a PyTorch release (``exact``: the patch matters too) and
        Python: same PyTorch first, then same Python, AMD-documented tags, newest ROCm."""
        same_minor = [t for t in self.pytorch if t.torch.release[:2] == torch.release[:2]]
        if not same_minor:
            nearest = min(self.pytorch, key=lambda t: abs(_minor_number(t.torch) - _minor_number(torch)))
            return ImageChoice(reason=f"no rocm/pytorch image in the table carries PyTorch "
                                      f"{_minor(torch)} ({what}); the nearest is {nearest.image}: "
                                      "pick a tag by hand")

        def rank(t: RocmPytorchTag) -> tuple[bool, bool, bool, Version, Version]:
            return (not exact or t.torch == torch, python is None or t.python == python,
                    t.confidence == "high", t.rocm, t.torch)

        best = max(same_minor, key=rank)
        notes = []
        if exact and best.torch != torch:
            notes.append(f"PyTorch {best.torch} for {torch}")
        if python is not None and best.python != python:
            notes.append(f"Python {best.python} for {python} (no tag with PyTorch {_minor(torch)} has {python})")
        elif python is None:
            notes.append(f"Python {best.python}: the table does not say which Python {what} has")
        if best.confidence != "high":
            notes.append("a tag seen in public code, not in AMD's documentation")
        return ImageChoice(best.image, f"{what}: " + "; ".join(notes) if notes else None)

    def for_ngc(self, tag: str) -> ImageChoice:
        """``nvcr.io/nvidia/pytorch:24.05-py3`` -> the rocm/pytorch tag with its PyTorch."""
        known = self.ngc.get(tag)
        if known is None:
            return ImageChoice(reason=f"NGC PyTorch {tag} is not in the table of NGC releases "
                                      "(src/portscan/kinds/rocm-images.toml): pick a rocm/pytorch tag by hand")
        torch, python = known
        return self.for_torch(Version(torch), False, python, f"NGC PyTorch {tag} carries PyTorch {torch}")

    def for_cuda_base(self, tag: str, rocm: Version | None) -> ImageChoice:
        """``nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04`` -> ``rocm/dev-ubuntu-22.04:6.4.1-complete``
        (``rocm``: the configured target, else the newest listed)."""
        found = _CUDA_TAG.fullmatch(tag)
        if found is None:
            return ImageChoice(reason="not an Ubuntu tag of nvidia/cuda (`<version>-<flavour>-ubuntuXX.04`); "
                                      "AMD publishes rocm/dev-ubuntu-* images only: pick a base by hand")
        ubuntu = found.group("ubuntu")
        if "$" in ubuntu:  # the image for each Ubuntu the variable may name
            releases = tuple(sorted(set.intersection(*(set(r) for r in self.dev_ubuntu.values()))))
        else:
            releases = self.dev_ubuntu.get(ubuntu, ())
        if not releases:
            return ImageChoice(reason=f"no rocm/dev-ubuntu-{ubuntu} image is listed (the table has Ubuntu "
                                      f"{', '.join(self.dev_ubuntu)}): move to a newer Ubuntu by hand")
        complete = found.group("flavour") != "base"
        chosen, note = releases[-1], None
        if rocm is not None:
            chosen = rocm
            if rocm not in releases:
                note = f"ROCm {rocm} (the target) is not among the releases listed for this image: check the tag exists"
        image = f"rocm/dev-ubuntu-{ubuntu}:{chosen}{'-complete' if complete else ''}"
        if "$" in ubuntu:
            note = "; ".join(filter(None, (note, f"the Ubuntu comes from {ubuntu}: rocm/dev-ubuntu images exist for "
                                                 f"{', '.join(self.dev_ubuntu)}")))
        return ImageChoice(image, note)


#: nvidia/cuda tags: ``12.1.1-cudnn8-devel-ubuntu22.04``, ``11.8.0-runtime-ubuntu20.04``; the CUDA
#: version (not used) and the Ubuntu (written into the ROCm image's name) may be variables
_VARIABLE = r"\$\{\w+\}|\$\w+"
_CUDA_TAG = re.compile(rf"(?:\d+\.\d+(?:\.\d+)?|{_VARIABLE})"
                       r"-(?P<flavour>base|runtime|devel|cudnn\d*-runtime|cudnn\d*-devel)"
                       rf"-ubuntu(?P<ubuntu>\d\d\.04|{_VARIABLE})")


def _minor(version: Version) -> str:
    return ".".join(str(p) for p in version.release[:2])


def _minor_number(version: Version) -> int:
    major, minor = (version.release + (0,))[:2]
    return major * 100 + minor


@functools.cache
def rocm_images() -> RocmImages:
    with TABLE.open("rb") as handle:
        data = tomllib.load(handle)
    dev = data["dev_ubuntu"]
    return RocmImages(
        ngc={row["tag"]: (row["torch"], Version(row["python"])) for row in data["ngc"]},
        pytorch=tuple(RocmPytorchTag(row["tag"], Version(row["rocm"]), row["ubuntu"], Version(row["python"]),
                                     Version(row["torch"]), row["confidence"]) for row in data["rocm_pytorch"]),
        dev_ubuntu={ubuntu: tuple(sorted(Version(v) for v in dev[ubuntu]))
                    for ubuntu in dev if ubuntu[:2].isdigit()},
    )


def torch_of_pytorch_tag(tag: str) -> Version | None:
    """``2.3.1-cuda12.1-cudnn8-runtime`` -> 2.3.1 (a CUDA tag of pytorch/pytorch); None otherwise."""
    found = re.fullmatch(r"(?P<torch>\d+\.\d+(?:\.\d+)?)-cuda[\d.]+(?:-cudnn\d*)?-(?:runtime|devel)", tag)
    if found is None:
        return None
    try:
        return Version(found.group("torch"))
    except InvalidVersion:  # pragma: no cover - the pattern admits versions only
        return None
