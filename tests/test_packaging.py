"""A plain (non-editable) wheel carries the rule files and scans without the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling")
    source = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "src", "rules"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)],
                   cwd=source, check=True, capture_output=True, timeout=300)
    (built,) = out.glob("portscan-*.whl")
    return built


def test_wheel_contains_every_rule_file(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(n.removeprefix("portscan/rules/") for n in names
                     if n.startswith("portscan/rules/") and n.endswith(".toml"))
    expected = sorted(p.relative_to(REPO / "rules").as_posix() for p in (REPO / "rules").rglob("*.toml"))
    assert shipped == expected and expected
    assert "portscan/match/hipify-names.txt" in names  # the CUDA-API check's table (PS924)
    assert "portscan/kinds/rocm-wheels.toml" in names  # releases with ROCm wheels (PS882, report)


def test_installed_wheel_scans_the_fixture(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                    "--target", str(target), str(wheel)], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-m", "portscan", "scan", "--format", "json",
                           str(REPO / "fixtures" / "cuda-trainer")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert len(json.loads(done.stdout)["findings"]) == 75
    probe = subprocess.run([sys.executable, "-c", "import portscan.ruleset.loader as r; "
                            "print(r.builtin_rules_dir())"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert Path(probe.stdout.strip()).is_relative_to(target)
