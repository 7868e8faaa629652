"""The published pre-commit hooks, run by the real pre-commit against a temporary git
repository: they fail on CUDA-only code, honour the configured excludes for files passed
by name, work on any subset of files, and pass once the findings are suppressed or
baselined; the fixing hook fails when it changes files.

pre-commit needs a git repository to clone the hooks from; the sources under test may
be a tarball, an sdist or a `git archive` copy, so the hooks come from a throwaway
repository built from the files a `pip install` of portscan needs. Each run is
`pre-commit run` with a configuration naming that repository at its commit, as
`try-repo` writes one; unlike `try-repo` (a fresh store each time) the runs share one
store, so pre-commit installs the hooks' environment once for the module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO

pytest.importorskip("pre_commit")
if shutil.which("git") is None:  # pragma: no cover
    pytest.skip("git is not installed", allow_module_level=True)

CONFIG = '[tool.portscan]\nextend-exclude = ["vendor/"]\n'
PROBE = "import pynvml\nimport torch\n\nMAJOR = int(torch.version.cuda.split('.')[0])\n"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=repo,
                   check=True, capture_output=True)


def make_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    git(root, "init", "-q", ".")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


#: What pre-commit's `pip install .` of the hook repository reads.
HOOK_SOURCES = (".pre-commit-hooks.yaml", "pyproject.toml", "README.md", "src", "rules")


@pytest.fixture(scope="module")
def hooks(tmp_path_factory) -> Path:
    """A git repository holding only this checkout's hook sources, committed, so
    `try-repo` works whether or not the sources are themselves a git checkout."""
    root = tmp_path_factory.mktemp("hook-repo")
    for name in HOOK_SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, root / name)
    git(root, "init", "-q", ".")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "hooks")
    return root


@pytest.fixture(scope="module")
def config(hooks: Path, tmp_path_factory) -> Path:
    """What `try-repo` writes: both published hooks from ``hooks`` at its commit (outside
    the project, as `try-repo` keeps it, so no project has it unstaged)."""
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hooks, check=True, capture_output=True,
                         text=True).stdout.strip()
    path = tmp_path_factory.mktemp("pre-commit-config") / ".pre-commit-config.yaml"
    path.write_text(f"repos:\n- repo: {hooks}\n  rev: {rev}\n  hooks:\n  - id: portscan\n  - id: portscan-fix\n")
    return path


def run_hook(config: Path, repo: Path, home: Path, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    env.pop("PRE_COMMIT", None)
    selection = ["--files", *files] if files else ["--all-files"]
    return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--config", str(config), hook, *selection],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_report_hook_fails_then_passes_when_suppressed_or_baselined(tmp_path: Path, home: Path, config: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"pyproject.toml": CONFIG, "probe.py": PROBE, "ok.py": "import os\n",
                                         "vendor/nv.py": "import pynvml\n"})
    run = run_hook(config, repo, home, "portscan")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "probe.py:1:8: PS602" in run.stdout and "probe.py:4" in run.stdout
    assert "vendor/nv.py" not in run.stdout  # excluded although pre-commit names it

    subset = run_hook(config, repo, home, "portscan", "ok.py", "vendor/nv.py")  # a partition without findings
    assert subset.returncode == 0, subset.stdout

    (repo / "probe.py").write_text("import pynvml  # noqa: PS602\nimport torch\n\n"
                                   "MAJOR = int(torch.version.cuda.split('.')[0])  # portscan: ignore[PS401]\n")
    git(repo, "add", "-A")
    suppressed = run_hook(config, repo, home, "portscan")
    assert suppressed.returncode == 0, suppressed.stdout

    (repo / "probe.py").write_text(PROBE)
    subprocess.run([sys.executable, "-m", "portscan", "scan", "--write-baseline", ".portscan-baseline.json", "."],
                   cwd=repo, check=True, capture_output=True)
    (repo / "pyproject.toml").write_text(CONFIG + 'baseline = ".portscan-baseline.json"\n')
    git(repo, "add", "-A")
    baselined = run_hook(config, repo, home, "portscan")
    assert baselined.returncode == 0, baselined.stdout
    (repo / "probe.py").write_text("\n\n" + PROBE + "import GPUtil\n")  # moved lines pass; a new finding fails
    git(repo, "add", "-A")
    again = run_hook(config, repo, home, "portscan")
    assert again.returncode == 1 and "PS603" in again.stdout and "PS602" not in again.stdout


def test_fixing_hook_fails_when_it_changes_files(tmp_path: Path, home: Path, config: Path) -> None:
    source = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n"
    repo = make_repo(tmp_path / "proj", {"train.py": source, "vendor/old.py": source, "pyproject.toml": CONFIG})
    run = run_hook(config, repo, home, "portscan-fix")
    assert run.returncode == 1 and "files were modified by this hook" in run.stdout, run.stdout
    assert (repo / "train.py").read_text() == 'import torch\n\nscaler = torch.amp.GradScaler("cuda")\n'
    assert (repo / "vendor" / "old.py").read_text() == source  # excluded
    git(repo, "add", "-A")
    assert run_hook(config, repo, home, "portscan-fix").returncode == 0  # nothing left to change or report
