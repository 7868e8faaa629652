"""Named transforms: fixes that need Python, referenced from rule files by name.

A transform receives every match of the rules that name it in one module and returns
the rewritten module (or ``None``) with, for each match, whether it was fixed or why
not. It must be all-or-nothing per module when a partial rewrite would not run.
"""

from __future__ import annotations

from portscan.fix.transforms.apex_amp import apex_amp
from portscan.fix.transforms.base import Transform
from portscan.fix.transforms.cuda_home import cuda_home_toolkit
from portscan.fix.transforms.cuda_version import cuda_version_none, nvidia_gate
from portscan.fix.transforms.fp8 import fp8_fnuz
from portscan.fix.transforms.nvcc_flags import hip_nvcc_flags

#: name -> transform; an explicit literal. Rule files name these; the loader checks the
#: names against :data:`portscan.ruleset.fixspec.TRANSFORM_NAMES` (kept equal by a test).
TRANSFORMS: dict[str, Transform] = {"apex-amp": apex_amp, "cuda-version-none": cuda_version_none,
                                    "hip-nvcc-flags": hip_nvcc_flags, "cuda-home-toolkit": cuda_home_toolkit,
                                    "nvidia-gate": nvidia_gate, "fp8-fnuz": fp8_fnuz}
