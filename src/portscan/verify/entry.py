"""Which command to run: ``[tool.portscan.verify]`` in pyproject.toml, else a ranked guess.

Candidates, scored (higher first), never executed while ranking, whatever their name
(a training word in it adds a little):

* a README command (fenced or indented block) that runs a Python script or module:
  30 when the script trains (below) or its name says train/fit/finetune/pretrain, plus 10
  when it is one of the scripts found below;
* a ``*.py`` (top level, ``scripts/``, ``tools/``, ``src/``, ``examples/``) with an
  ``if __name__ == "__main__":`` block that builds an optimizer or calls ``.backward()``:
  20 for a training name, 16 otherwise, minus 2 per directory level;
* a ``[project.scripts]`` console script: 15 for a training name, 8 otherwise.

A candidate whose script moves work to CUDA without ever asking
``torch.cuda.is_available()`` (or whose command says ``--device cuda``) needs a GPU: on a
machine without one it is not run.

Launchers in README commands (``torchrun``, ``python -m torch.distributed.run``) are
unwrapped to the script they start: ``--nproc`` says how many processes to use.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from portscan.verify.emulation import TARGETS


class ConfigError(ValueError):
    """``[tool.portscan.verify]`` is invalid; the message names the key."""


@dataclass(frozen=True, slots=True)
class Settings:
    """``[tool.portscan.verify]``; None means "not set" (the CLI or the default decides)."""

    command: tuple[str, ...] = ()
    steps: int | None = None
    timeout: float | None = None
    nproc: int | None = None
    emulate: str | None = None
    against: str | None = None
    rtol: float | None = None
    outliers: float | None = None
    max_rise: float | None = None
    allow_imports: tuple[str, ...] = ()
    repeats: int | None = None
    metric: str | None = None
    trend: bool | None = None
    maximize: bool | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    command: tuple[str, ...]
    source: str  #: where it was found, e.g. ``README.md:12``
    reason: str
    score: int
    needs_gpu: str | None = None  #: why it cannot run without a GPU


_KEYS = ("command", "steps", "timeout", "nproc", "emulate", "against", "rtol", "outliers",
         "max-rise", "allow-imports", "repeats", "metric", "trend", "maximize")


def _number(table: dict[str, Any], key: str, kind: type, low: float, high: float | None = None) -> Any:
    value = table.get(key)
    if value is None:
        return None
    wrong = isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float))
    if wrong:
        what = "an integer" if kind is int else "a number"
        raise ConfigError(f"[tool.portscan.verify] {key}: expected {what}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise ConfigError(f"[tool.portscan.verify] {key}: must be {bounds}")
    return kind(value)


def parse_settings(table: Any) -> Settings:
    """Validate a decoded ``[tool.portscan.verify]`` table. Raises :class:`ConfigError`."""
    if not isinstance(table, dict):
        raise ConfigError("[tool.portscan.verify] must be a table")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(f"[tool.portscan.verify] {unknown[0]}: unknown key; known: {', '.join(_KEYS)}")
    command = table.get("command", ())
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as exc:
            raise ConfigError(f"[tool.portscan.verify] command: {exc}") from None
    if not isinstance(command, (list, tuple)) or not all(isinstance(c, str) for c in command) \
            or ("command" in table and not command):
        raise ConfigError("[tool.portscan.verify] command: expected a string or a non-empty list of strings")
    emulate = table.get("emulate")
    if emulate is not None and emulate not in TARGETS:
        raise ConfigError(f"[tool.portscan.verify] emulate: expected one of {', '.join(TARGETS)}")
    against = table.get("against")
    if against is not None and (not isinstance(against, str) or not against):
        raise ConfigError("[tool.portscan.verify] against: expected a file name")
    allow = table.get("allow-imports", [])
    if not isinstance(allow, list) or not all(isinstance(a, str) and a for a in allow):
        raise ConfigError("[tool.portscan.verify] allow-imports: expected a list of module names")
    for key in ("trend", "maximize"):
        if key in table and not isinstance(table[key], bool):
            raise ConfigError(f"[tool.portscan.verify] {key}: expected true or false")
    metric = table.get("metric")
    if metric is not None and (not isinstance(metric, str) or not metric):
        raise ConfigError("[tool.portscan.verify] metric: expected a name")
    return Settings(
        repeats=_number(table, "repeats", int, 1, 100), metric=metric, trend=table.get("trend"),
        maximize=table.get("maximize"),
        command=tuple(command), steps=_number(table, "steps", int, 1),
        timeout=_number(table, "timeout", float, 1), nproc=_number(table, "nproc", int, 1, 64),
        emulate=emulate, against=against, rtol=_number(table, "rtol", float, 0),
        outliers=_number(table, "outliers", float, 0, 1), max_rise=_number(table, "max-rise", float, 0),
        allow_imports=tuple(allow))


def load_settings(project: Path) -> Settings:
    """``[tool.portscan.verify]`` from ``project/pyproject.toml``; empty settings if absent."""
    path = project / "pyproject.toml"
    if not path.is_file():
        return Settings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    table = data.get("tool", {}).get("portscan", {}).get("verify")
    return Settings() if table is None else parse_settings(table)


# -- discovery --------------------------------------------------------------------------

_TRAIN_WORD = re.compile(r"(?i)(train|finetune|fine_tune|pretrain|fit)")
_SCRIPT_DIRS = ("", "scripts", "tools", "src", "examples")
_OPTIMIZER = re.compile(r"\boptim\.|\b(Adam|AdamW|SGD|LAMB|Adafactor|Lion)[A-Za-z]*\(|\.backward\(|"
                        r"\bTrainer\(|\.fit\(")
_LAUNCHERS = ("torchrun",)
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")
#: torchrun options that take no value (everything else starting with ``-`` takes one)
_LAUNCHER_FLAGS = {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path",
                   "-m", "--module", "--tee", "--redirects"}
_SHELL_FENCE = re.compile(r"^\s*```\s*(bash|sh|shell|console|zsh|)\s*$")


def has_main_and_optimizer(source: str) -> bool:
    """An ``if __name__ == "__main__":`` block, and code that trains (optimizer or backward)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    main = any(isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
               and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
               for node in tree.body)
    return main and bool(_OPTIMIZER.search(source))


_CUDA_USE = re.compile(r"""\.cuda\(|device\s*=\s*["']cuda|torch\.device\(\s*["']cuda|\.to\(\s*["']cuda""")
_CUDA_CHECK = re.compile(r"cuda\.is_available\(|cuda\.device_count\(|is_available\(\)")


def gpu_requirement(source: str, command: Sequence[str] = ()) -> str | None:
    """Why ``source`` (run as ``command``) cannot run without a GPU, or None."""
    words = list(command)
    for i, word in enumerate(words):
        value = word.split("=", 1)[1] if "=" in word else words[i + 1] if i + 1 < len(words) else ""
        if word.split("=", 1)[0] in ("--device", "--accelerator") and value.startswith("cuda"):
            return f"the command passes {word.split('=', 1)[0]} {value}"
    if _CUDA_USE.search(source) and not _CUDA_CHECK.search(source):
        return "it moves work to CUDA and never asks torch.cuda.is_available()"
    return None


def gpu_present() -> bool:
    """Whether this machine shows a GPU to a process (without importing torch)."""
    import os
    import shutil

    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        if os.environ.get(name, None) in ("", "-1"):
            return False
    return any(Path(p).exists() for p in ("/dev/nvidia0", "/dev/kfd", "/dev/dxg")) or \
        shutil.which("nvidia-smi") is not None


def _script_candidates(project: Path) -> list[Candidate]:
    found = []
    for folder in _SCRIPT_DIRS:
        directory = project / folder if folder else project
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.py")):
            try:
                source = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if has_main_and_optimizer(source):
                rel = path.relative_to(project).as_posix()
                named = bool(_TRAIN_WORD.search(path.stem))
                score = (20 if named else 16) - 2 * rel.count("/") + (1 if path.name == "train.py" else 0)
                found.append(Candidate(("python", rel), rel, "a __main__ block and an optimizer", score,
                                       gpu_requirement(source, ("python", rel))))
    return found


def _console_scripts(project: Path) -> list[Candidate]:
    path = project / "pyproject.toml"
    try:
        scripts = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {}).get("scripts", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    return [Candidate((name,), f"pyproject.toml [project.scripts] {name}", "a console script",
                      15 if _TRAIN_WORD.search(name) else 8)
            for name in sorted(scripts) if isinstance(name, str)]


def readme_commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) for each shell line in fenced or indented code blocks."""
    commands: list[tuple[int, str]] = []
    fence: str | None = None  # "shell" or "other" while inside a fenced block
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.strip().startswith("```"):
            fence = None if fence else "shell" if _SHELL_FENCE.match(raw) else "other"
            pending = None
            continue
        if fence == "other" or not (fence == "shell" or raw.startswith(("    ", "\t"))):
            pending = None
            continue
        line = raw.strip()
        if pending is not None:
            line = pending[1] + " " + line
            number = pending[0]
        line = re.sub(r"^[$>]\s+", "", line)
        if line.endswith("\\"):
            pending = (number, line[:-1].rstrip())
            continue
        pending = None
        line = re.sub(r"\s+#.*$", "", line)
        if line:
            commands.append((number, line))
    return commands


def unwrap_launcher(argv: Sequence[str]) -> tuple[str, ...]:
    """``torchrun --nproc_per_node=8 train.py --amp`` -> ``python train.py --amp``."""
    words = list(argv)
    if words and Path(words[0]).name in _LAUNCHERS:
        rest = words[1:]
    elif len(words) >= 3 and _is_python(words[0]) and words[1] == "-m" and words[2] in _LAUNCHER_MODULES:
        rest = words[3:]
    else:
        return tuple(words)
    module = False
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        option = rest[i]
        if option in ("-m", "--module"):
            module = True
        i += 1 if "=" in option or option in _LAUNCHER_FLAGS else 2
    if i >= len(rest):
        return tuple(words)
    return ("python", "-m", *rest[i:]) if module else ("python", *rest[i:])


def _is_python(word: str) -> bool:
    return bool(re.fullmatch(r"python[0-9.]*", Path(word).name))


def _target(command: Sequence[str]) -> str:
    """The script or module a ``python ...`` command runs."""
    if len(command) > 2 and command[1] == "-m":
        return command[2]
    return command[1] if len(command) > 1 else ""


def _readme_gpu(project: Path, command: Sequence[str], script: Candidate | None) -> str | None:
    target = _target(command)
    try:
        source = (project / target).read_text(encoding="utf-8", errors="replace") \
            if target.endswith(".py") else ""
    except OSError:
        source = ""
    return gpu_requirement(source, command)


def _readme_candidates(project: Path, scripts: Iterable[Candidate]) -> list[Candidate]:
    known = {c.source: c for c in scripts}
    found = []
    for name in ("README.md", "README.rst", "README.txt", "README"):
        path = project / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for number, line in readme_commands(text):
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            if not words or not (_is_python(words[0]) or Path(words[0]).name in _LAUNCHERS):
                continue
            command = unwrap_launcher(words)
            target = _target(command)
            if not target or target.startswith("-") or not (_TRAIN_WORD.search(target) or target in known):
                continue
            score = 30 + (10 if target in known else 0)
            reason = "a README command" + (f" that runs {target}" if target in known else "")
            found.append(Candidate(command, f"{name}:{number}", reason, score,
                                   _readme_gpu(project, command, known.get(target))))
        break
    return found


def discover_candidates(project: Path) -> list[Candidate]:
    """Every candidate command, best first."""
    scripts = _script_candidates(project)
    candidates = [*_readme_candidates(project, scripts), *scripts,
                  *_console_scripts(project)]
    unique: dict[tuple[str, ...], Candidate] = {}
    for candidate in sorted(candidates, key=lambda c: -c.score):
        unique.setdefault(candidate.command, candidate)
    return list(unique.values())


def pin_snippet(command: Sequence[str]) -> str:
    """The pyproject.toml lines that pin ``command``."""
    items = ", ".join('"' + c.replace("\\", "\\\\").replace('"', '\\"') + '"' for c in command)
    return f"[tool.portscan.verify]\ncommand = [{items}]"
