"""What ``--emulate rocm`` takes away, derived from the rule pack (never a second list).

The emulated target is a stock PyTorch ROCm install: the ROCm wheel of torch plus
packages from PyPI, without ROCm forks such as ROCm/apex (which ``rocm/pytorch`` images
do carry: ``--allow-import apex`` there). So:

* every **import rule of severity error** is blocked: those modules fail to import on
  ROCm (TensorRT family, pycuda, NVML wrappers, DALI, RAPIDS, cuda-python, apex's CUDA
  extension modules, ...);
* the whole **apex family** (import rules of category ``apex``) is blocked: the apex
  on PyPI is another package, NVIDIA apex builds for CUDA only, and AMD's ROCm/apex is
  not in a stock install (it is built from source, or comes with ``rocm/pytorch`` images);
* import rules of severity warning outside apex are *not* blocked: flash-attn, xformers,
  bitsandbytes, CuPy, Transformer Engine, vLLM and the like have ROCm builds, and
  blocking them would report failures a ROCm user would not see;
* programs named by **subprocess rules of severity error** (nvidia-smi, nvcc, nsys, ...)
  are shadowed on ``PATH`` by a stub that fails, and hidden from ``shutil.which``.

``allow`` lifts the block for modules a project does have on ROCm (say it builds
ROCm/apex): every blocked module at or below an allowed name imports normally.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from portscan.model import Severity
from portscan.kinds.common import is_at_or_below
from portscan.kinds.imports import ImportPattern
from portscan.kinds.spawn import SubprocessPattern
from portscan.ruleset.schema import Rule
from portscan.ruleset.loader import RuleSet

TARGETS = ("rocm",)
TARGET_DEVICE = "AMD Instinct MI300X (gfx942, capability (9, 4), warp size 64)"
SCOPE = ("emulation checks the Python layer (imports, torch.version, device queries), "
         "not kernels or numerics: the work still runs on this machine's CPU or GPU")


def import_rules(rules: RuleSet) -> tuple[Rule, ...]:
    return tuple(rule for rule in rules.rules if isinstance(rule.pattern, ImportPattern))


def module_rules(rules: RuleSet) -> dict[str, str]:
    """Every module an import rule names, with the rule code (first rule wins on ties)."""
    owners: dict[str, str] = {}
    for rule in import_rules(rules):
        assert isinstance(rule.pattern, ImportPattern)
        for module in rule.pattern.modules:
            owners.setdefault(module, rule.code)
    return owners


def is_blocked_rule(rule: Rule) -> bool:
    return rule.pattern.kind == "import" and (rule.severity is Severity.ERROR or rule.category == "apex")


def blocked_modules(rules: RuleSet, allow: Iterable[str] = ()) -> dict[str, str]:
    """Modules that fail to import under emulation, each with the rule that predicts it."""
    allowed = tuple(allow)
    blocked: dict[str, str] = {}
    for rule in rules.rules:
        if not is_blocked_rule(rule) or not isinstance(rule.pattern, ImportPattern):
            continue
        for module in rule.pattern.modules:
            if not any(is_at_or_below(module, name) for name in allowed):
                blocked.setdefault(module, rule.code)
    return blocked


def block_reasons(rules: RuleSet, blocked: Mapping[str, str]) -> dict[str, str]:
    """Why each blocked module fails to import, in its rule's own words, so the error a
    program sees agrees with the rule it cites (PS201 says ROCm/apex exists; so does this)."""
    reasons = {}
    for module, code in blocked.items():
        rule = rules.by_code[code]
        message = rule.render_message({"module": module, "matched": module}).replace("`", "")
        top = module.split(".")[0]
        reasons[module] = (f"{message}; the emulated stock PyTorch ROCm install does not have it "
                           f"(--allow-import {top} if yours does)")
    return reasons


def blocked_programs(rules: RuleSet) -> dict[str, str]:
    """Programs a ROCm machine lacks, from the subprocess rules of severity error."""
    programs: dict[str, str] = {}
    for rule in rules.rules:
        if isinstance(rule.pattern, SubprocessPattern) and rule.severity is Severity.ERROR:
            for program in rule.pattern.programs:
                programs.setdefault(program, rule.code)
    return programs


def rule_for_module(name: str, owners: Mapping[str, str]) -> str | None:
    """The most specific import rule covering ``name`` (``apex.amp.handle`` -> apex.amp's)."""
    covering = [module for module in owners if is_at_or_below(name, module)]
    return owners[max(covering, key=len)] if covering else None


def write_program_stubs(directory: Path, programs: Mapping[str, str]) -> None:
    """One failing executable per program, saying what a ROCm machine would say."""
    directory.mkdir(parents=True, exist_ok=True)
    for program, code in programs.items():
        message = f"{program}: command not found (portscan --emulate rocm; see {code})"
        path = directory / program
        path.write_text(f"#!/bin/sh\necho {shlex.quote(message)} >&2\nexit 127\n", encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def prepend_path(directory: Path, path: str | None) -> str:
    return os.pathsep.join([str(directory), *([path] if path else [])])
