"""A scanned tree is untrusted: nothing it ships runs, and nothing it ships hides findings.

Each case here is listed in docs/robustness.md#security. The CLI runs as a user or CI
runs it, in the tree, with the environment that names its cache folders, and the trusted
cache in a folder of the test's own: in this process (what a run reads is on disk; the
rule packs it keeps in memory are keyed by the bytes they came from, so a planted copy
is still read), except the run that fills each planted test's trusted cache, a real
`python -m portscan` process.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from portscan import __version__, bounded
from portscan.cache import DATABASE
from portscan.cli import main
from portscan.ruleset.loader import builtin_rules_dir

from conftest import FIXTURE, REPO

SRC = REPO / "src" / "portscan"


class Payload:
    """Unpickling this writes ``marker``: proof that a planted pickle ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def environment(cwd: Path, cache: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PORTSCAN_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(cwd.parent / "user-cache")  # the default, if no override
    if cache is not None:
        env["PORTSCAN_CACHE_DIR"] = str(cache)
    return env


def portscan_process(*argv: str, cwd: Path, cache: Path | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "portscan", *argv], cwd=cwd, env=environment(cwd, cache),
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture()
def portscan(monkeypatch, capsys):
    """``portscan ARGV`` in ``cwd`` with ``cache`` as its cache folder (None: the default
    one), in this process: (exit code, stdout, stderr) as a completed process."""

    def run(*argv: str, cwd: Path, cache: Path | None) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        with monkeypatch.context() as patch:
            patch.delenv("PORTSCAN_CACHE_DIR", raising=False)
            for name in ("XDG_CACHE_HOME", "PORTSCAN_CACHE_DIR"):
                if name in (env := environment(cwd, cache)):
                    patch.setenv(name, env[name])
            patch.chdir(cwd)
            code = main(list(argv))
            out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["portscan", *argv], code, out, err)

    return run


def findings(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str, int]]:
    assert done.returncode in (0, 1), done.stderr
    return sorted((f["rule"], f["path"], f["line"]) for f in json.loads(done.stdout)["findings"])


def old_rule_cache_name() -> str:
    """The name portscan <= 0.1.0 gave its pickled rule pack (the signature it computed)."""
    signature = hashlib.sha256(f"{__version__}|{sys.version}".encode())
    for path in sorted(builtin_rules_dir().rglob("*.toml")):
        stat = path.stat()
        signature.update(f"{path}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return f"rules-{signature.hexdigest()[:24]}.pickle"


def plant(folder: Path, keys: list[str], marker: Path, rows: bytes | str) -> None:
    """Every cache file name portscan has used, under the keys a scan of the tree looks up."""
    folder.mkdir(parents=True, exist_ok=True)
    payload = pickle.dumps(Payload(marker))
    (folder / old_rule_cache_name()).write_bytes(payload)
    for name in {p.name for p in folder.parent.glob("trusted/rules-*.json")} | {"rules-0.json"}:
        (folder / name).write_bytes(payload)
    for database, value in (("results-v1.sqlite", payload), (DATABASE, rows)):
        db = sqlite3.connect(folder / database)
        with db:
            db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value BLOB)")
            db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?)", [(k, value) for k in keys])
        db.close()


@pytest.fixture()
def planted(tmp_path: Path) -> tuple[Path, Path, Path, list[tuple[str, str, int]]]:
    """(repository, trusted cache, marker, expected findings): a copy of the fixture whose
    `.portscan_cache/` holds pickle payloads and "no findings" rows under the real keys."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    trusted = tmp_path / "trusted"
    expected = findings(portscan_process("scan", "--format", "json", ".", cwd=repo, cache=trusted))
    assert expected
    db = sqlite3.connect(trusted / DATABASE)
    keys = [k for (k,) in db.execute("SELECT key FROM results")]
    db.close()
    assert keys
    marker = tmp_path / "pwned"
    plant(repo / ".portscan_cache", keys, marker, pickle.dumps(Payload(marker)))
    return repo, trusted, marker, expected


def test_planted_pickles_never_run_and_every_finding_is_reported(planted, portscan) -> None:
    repo, trusted, marker, expected = planted
    runs = [
        ("scan", "--format", "json", "."),
        ("scan", "--format", "sarif", "."),
        ("scan", "--force-exclude", "--format", "concise", "train.py", "setup.py"),  # the pre-commit hook
        ("fix", "--diff", "."),
    ]
    hooked = repo / "utils" / "gpu.py"
    # the default cache, the trusted one, and a cache folder pointed into the tree itself
    for cache in (None, trusted, repo / ".portscan_cache"):
        for argv in runs:
            done = portscan(*argv, cwd=repo, cache=cache)
            assert done.returncode in (0, 1), done.stderr
            assert not marker.exists(), f"a planted pickle ran during portscan {' '.join(argv)}"
        assert findings(portscan("scan", "--format", "json", ".", cwd=repo, cache=cache)) == expected
        done = portscan("fix", "--force-exclude", "--exit-non-zero-on-fix", "utils/gpu.py", cwd=repo, cache=cache)
        assert done.returncode == 1 and not marker.exists()  # the fix hook ran and rewrote the file
        assert hooked.read_text() != (FIXTURE / "utils" / "gpu.py").read_text()
        shutil.copy(FIXTURE / "utils" / "gpu.py", hooked)


def test_pickles_planted_in_the_trusted_cache_are_misses(planted, portscan) -> None:
    """Even a payload in portscan's own cache folder is data that fails to decode."""
    repo, trusted, marker, expected = planted
    db = sqlite3.connect(trusted / DATABASE)
    keys = [k for (k,) in db.execute("SELECT key FROM results")]
    db.close()
    plant(trusted, keys, marker, pickle.dumps(Payload(marker)))
    for name in trusted.glob("rules-*.json"):
        name.write_bytes(pickle.dumps(Payload(marker)))
    assert findings(portscan("scan", "--format", "json", ".", cwd=repo, cache=trusted)) == expected
    assert not marker.exists()


def test_a_planted_empty_results_cache_hides_nothing(planted, portscan) -> None:
    """Well-formed "no findings" rows under the real keys, shipped in the tree, in the old
    and current file names, and in a cache folder pointed into the tree."""
    repo, _, marker, expected = planted
    db = sqlite3.connect(repo / ".portscan_cache" / "results-v1.sqlite")
    keys = [k for (k,) in db.execute("SELECT key FROM results")]
    db.close()
    shutil.rmtree(repo / ".portscan_cache")
    plant(repo / ".portscan_cache", keys, marker, "[]")
    for cache in (None, repo / ".portscan_cache"):
        done = portscan("scan", "--format", "json", ".", cwd=repo, cache=cache)
        assert findings(done) == expected
    assert "not using the cache folder" in done.stderr and "inside the scanned path" in done.stderr


def test_a_hostile_regex_in_a_local_rule_is_bounded(tmp_path: Path, monkeypatch, capsys, portscan) -> None:
    """A catastrophic pattern from the tree's own `rules-dirs` fails that one file with a
    `timeout` error within its budget; every other finding is still reported."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    rules = repo / "in-house"
    rules.mkdir()
    rule = (builtin_rules_dir() / "kernels" / "inline-ptx-asm.toml").read_text()
    header, _, rest = rule.partition("[match]")
    body = rest.split("\n[[", 1)[1]
    (rules / "slow.toml").write_text(
        header.replace('code = "PS', 'code = "XY', 1).replace('name = "', 'name = "slow-', 1)
        + '[match]\nkind = "kernel"\nregex = \'(a|aa)+$\'\n\n[[' + body)
    (repo / "csrc" / "hostile.cu").write_text("__global__ void k() { int n = " + "a" * 64 + "!; }\n")
    (repo / "pyproject.toml").write_text('[tool.portscan]\nrules-dirs = ["in-house"]\n')
    baseline = {(f["rule"], f["path"], f["line"]) for f in json.loads(
        portscan("scan", "--isolated", "--format", "json", "repo", cwd=tmp_path, cache=None).stdout)["findings"]}
    monkeypatch.setattr(bounded, "BUDGET_S", 0.5)
    monkeypatch.delenv("PORTSCAN_CACHE_DIR")
    monkeypatch.chdir(repo)
    start = time.monotonic()
    status = main(["scan", "--no-cache", "--format", "json", "."])
    elapsed = time.monotonic() - start
    out = json.loads(capsys.readouterr().out)
    assert status == 1 and elapsed < 30
    assert [(e["path"], e["kind"]) for e in out["errors"]] == [("csrc/hostile.cu", "timeout")]
    assert "budget" in out["errors"][0]["message"]
    assert baseline - {(f["rule"], f["path"], f["line"]) for f in out["findings"]} == set()


@pytest.mark.parametrize("table", [
    'rules-dirs = ["../outside"]',
    'rules-dirs = ["/etc"]',
    'baseline = "../baseline.json"',
    'rules-dirs = ["linked"]',  # a symlink in the tree that leads out of it
])
def test_a_config_may_not_reach_outside_its_project(tmp_path: Path, table: str, portscan) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    (tmp_path / "outside").mkdir()
    (tmp_path / "baseline.json").write_text("{}")
    (repo / "linked").symlink_to(tmp_path / "outside")
    (repo / "pyproject.toml").write_text(f"[tool.portscan]\n{table}\n")
    done = portscan("scan", ".", cwd=repo, cache=None)
    assert done.returncode == 2 and "lies outside the project" in done.stderr
    isolated = portscan("scan", "--isolated", "--format", "json", ".", cwd=repo, cache=None)
    assert findings(isolated)  # --isolated ignores the tree's configuration and scans


def test_the_tree_writes_nothing_but_the_report(planted, tmp_path: Path, portscan) -> None:
    """A scan writes only its cache (outside the tree) and `-o`."""
    repo, trusted, _, _ = planted
    before = {p: p.stat().st_mtime_ns for p in repo.rglob("*")}
    done = portscan("scan", "--format", "sarif", "-o", str(tmp_path / "out.sarif"), ".", cwd=repo, cache=trusted)
    assert done.returncode in (0, 1)
    assert {p: p.stat().st_mtime_ns for p in repo.rglob("*")} == before
    assert json.loads((tmp_path / "out.sarif").read_text())["runs"]


def imports_and_calls(path: Path) -> list[str]:
    """Code-executing deserialisers named in one module: imports and calls."""
    banned_modules = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"}
    unsafe_yaml = {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in banned_modules]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in banned_modules:
            found.append(node.module or "")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "yaml":
            if node.attr in unsafe_yaml or node.attr in {"Loader", "UnsafeLoader", "FullLoader"}:
                found.append(f"yaml.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"eval", "exec"}:
            found.append(node.func.id)
    return found


#: The one audited code generation: the fast parse's node makers, compiled at import from
#: LibCST's own field names (the way dataclasses make ``__init__``), never from text a scan
#: reads; tests/test_leancst.py checks that nothing else reaches them.
GENERATED = {"leancst.py": ["exec"]}


def test_no_code_executing_formats_in_the_sources() -> None:
    """pickle/marshal/shelve, unsafe YAML loaders and eval/exec appear nowhere in src/
    except `verify`, which runs the project's command by design, and the makers above."""
    offenders = {str(p.relative_to(SRC)): found for p in sorted(SRC.rglob("*.py"))
                 if "verify" not in p.relative_to(SRC).parts and (found := imports_and_calls(p))}
    assert offenders == GENERATED


def test_the_source_check_catches_each_form(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import pickle\nfrom marshal import loads\nimport shelve\nimport yaml\n"
                      "yaml.load(s, Loader=yaml.Loader)\nyaml.unsafe_load(s)\neval('1')\n"
                      "yaml.safe_load(s)\nyaml.compose(s, Loader=yaml.SafeLoader)\n")
    assert sorted(imports_and_calls(sample)) == ["eval", "marshal", "pickle", "shelve", "yaml.Loader",
                                                 "yaml.load", "yaml.unsafe_load"]
    assert yaml.safe_load("a: 1") == {"a": 1}  # the safe loaders stay allowed
