"""The content cache and the worker pool change speed, never results."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from portscan import scan as scan_module
from portscan.cache import DATABASE
from portscan.cli import main
from portscan.ruleset.loader import builtin_rules_dir, load_rules, load_rules_cached
from portscan.scan import scan_paths

from conftest import FIXTURE

CORPUS = FIXTURE.parent  # every bundled repository: Python, manifests, containers, kernels


def outcome(result):
    return result.findings, result.errors, result.extensions, result.files_scanned


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("PORTSCAN_CACHE_DIR", str(folder))
    return folder


def test_same_findings_with_and_without_cache_and_workers(tmp_path: Path, cache_dir: Path, rules,
                                                           monkeypatch) -> None:
    plain = outcome(scan_paths([CORPUS], rules, workers=1))
    monkeypatch.setattr(scan_module, "PARALLEL_MIN", 1)  # make even this corpus use the pool
    pooled = outcome(scan_paths([CORPUS], rules, workers=2))
    cold = outcome(scan_paths([CORPUS], rules, cache=cache_dir, workers=2))
    assert (cache_dir / DATABASE).is_file()
    warm = outcome(scan_paths([CORPUS], rules, cache=cache_dir, workers=1))
    monkeypatch.setattr(scan_module, "BULK_MIN", 1)  # the workers run the prefilter too
    bulk = outcome(scan_paths([CORPUS], rules, workers=2))
    assert plain[0] and plain[2] and plain == pooled == cold == warm == bulk


def test_project_facts_are_worked_out_while_the_pool_parses(tmp_path: Path, monkeypatch, rules) -> None:
    """With the pool parsing Python, the facts the kernel findings need (which modules are
    vendor-gated, which CUDA-like names the project declares) are worked out meanwhile,
    once each, instead of after the pool, when nothing else runs; the findings stay the
    same."""
    project = tmp_path / "p"
    shutil.copytree(FIXTURE, project)
    (project / "csrc" / "spmm.cu").parent.mkdir(exist_ok=True)
    (project / "csrc" / "spmm.cu").write_text(
        "#include <cusparse.h>\n"
        "__global__ void reduce(float* v) { v[0] += __shfl_xor_sync(0xffffffff, v[0], 16); }\n"
        "void spmm(cusparseHandle_t h) { int alg = CUSPARSE_SPMM_COO_ALG3; }\n")
    plain = outcome(scan_paths([project], rules, workers=1))
    assert {"PS924"} <= {f.rule for f in plain[0] if f.path == "csrc/spmm.cu"}
    pooling = {"now": False}
    calls: list[tuple[str, bool]] = []

    def spy(name, real):
        def run(*args, **kwargs):
            calls.append((name, pooling["now"]))
            return real(*args, **kwargs)
        return run

    def parallel(*args, **kwargs):
        pooling["now"] = True
        try:
            return real_parallel(*args, **kwargs)
        finally:
            pooling["now"] = False

    real_parallel = scan_module._parallel
    monkeypatch.setattr(scan_module, "_parallel", parallel)
    monkeypatch.setattr(scan_module, "gated_paths", spy("gated", scan_module.gated_paths))
    monkeypatch.setattr(scan_module, "declared_cuda_names", spy("names", scan_module.declared_cuda_names))
    monkeypatch.setattr(scan_module, "BULK_MIN", 1)  # this corpus is small: pool it as a big tree is
    assert outcome(scan_paths([project], rules, workers=2)) == plain
    assert sorted(calls) == [("gated", True), ("names", True)]


def test_a_changed_file_misses_the_cache(tmp_path: Path, cache_dir: Path, rules) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.py").write_text("import pynvml\n")
    assert [f.rule for f in scan_paths([project], rules, cache=cache_dir).findings] == ["PS602"]
    (project / "a.py").write_text("import GPUtil\n")
    assert [f.rule for f in scan_paths([project], rules, cache=cache_dir).findings] == ["PS603"]
    narrower = rules.select(["PS602"])  # another rule pack: another key
    (project / "a.py").write_text("import pynvml\n")
    assert [f.rule for f in scan_paths([project], narrower, cache=cache_dir).findings] == ["PS602"]


def test_a_corrupt_cache_is_ignored(tmp_path: Path, cache_dir: Path, rules) -> None:
    expected = outcome(scan_paths([FIXTURE], rules))
    scan_paths([FIXTURE], rules, cache=cache_dir)
    (cache_dir / DATABASE).write_bytes(b"this is not a database" * 100)
    assert outcome(scan_paths([FIXTURE], rules, cache=cache_dir)) == expected
    shutil.rmtree(cache_dir)
    cache_dir.write_text("a file where the cache folder should be")
    assert outcome(scan_paths([FIXTURE], rules, cache=cache_dir)) == expected


def test_malformed_entries_are_misses(tmp_path: Path, cache_dir: Path, rules) -> None:
    """Rows of the wrong shape (another type, missing fields, bad enum values, not JSON)
    are ignored: the scan recomputes them and reports the same findings."""
    expected = outcome(scan_paths([FIXTURE], rules))
    scan_paths([FIXTURE], rules, cache=cache_dir)
    db = sqlite3.connect(cache_dir / DATABASE)
    keys = [k for (k,) in db.execute("SELECT key FROM results")]
    rows = [(k, json.loads(v)) for k, v in db.execute("SELECT key, value FROM results")]
    keys = [k for k, _ in rows]
    finding = next(v["raw"][0] for _, v in rows if isinstance(v["raw"], list) and v["raw"])
    junk = ['{"findings": []}', '[{"rule": "PS1"}]', "not json", '{"path": "a", "kind": 3, "message": ""}',
            json.dumps([{**finding, "severity": "fatal"}]), json.dumps([{**finding, "extra": 1}]),
            "[" * 100_000, json.dumps([finding]),  # the shape before extensions were stored alongside
            json.dumps({"raw": [{**finding, "severity": "fatal"}], "extensions": []}),
            json.dumps({"raw": [finding], "extensions": [["ops", "3", []]]}), json.dumps({"raw": [finding]})]
    with db:
        db.executemany("UPDATE results SET value = ? WHERE key = ?",
                       [(junk[i % len(junk)], key) for i, key in enumerate(keys)])
    db.close()
    assert outcome(scan_paths([FIXTURE], rules, cache=cache_dir)) == expected


def test_the_rule_pack_is_reloaded_when_a_rule_file_changes(tmp_path: Path, cache_dir: Path) -> None:
    rules_dir = tmp_path / "rules"
    shutil.copytree(builtin_rules_dir(), rules_dir)
    first = load_rules_cached([rules_dir], cache_dir)
    [stored] = cache_dir.glob("rules-*.json")
    again = load_rules_cached([rules_dir], cache_dir)
    assert [r.code for r in again.rules] == [r.code for r in first.rules] and again.digest == first.digest
    rule = rules_dir / "tooling" / "pynvml-import.toml"
    rule.write_text(rule.read_text().replace('severity = "error"', 'severity = "warning"', 1))
    changed = load_rules_cached([rules_dir], cache_dir)
    assert changed.by_code["PS602"].severity.value == "warning" and changed.digest != first.digest


def test_a_rule_pack_is_built_once_per_process_until_a_byte_changes(tmp_path: Path) -> None:
    """The process keeps each pack it built, by the files' paths and bytes: a second load
    is the same set; a file changed in place, size and mtime kept, is a new pack."""
    rules_dir = tmp_path / "rules"
    shutil.copytree(builtin_rules_dir(), rules_dir)
    first = load_rules([rules_dir])
    assert load_rules([rules_dir]) is first and first.filter() is first
    rule = rules_dir / "tooling" / "pynvml-import.toml"
    before = rule.stat()
    rule.write_text(rule.read_text().replace('severity = "error"', 'severity = "info" ', 1))
    os.utime(rule, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert rule.stat().st_size == before.st_size
    changed = load_rules([rules_dir])
    assert changed is not first and changed.by_code["PS602"].severity.value == "info"
    assert first.by_code["PS602"].severity.value == "error"


def test_the_rule_pack_copy_round_trips_and_a_bad_copy_is_a_miss(tmp_path: Path, cache_dir: Path) -> None:
    """The JSON copy rebuilds rules equal to the loaded ones (patterns, fixes, targets,
    examples); a copy of the wrong shape is ignored and rewritten."""
    fresh = load_rules_cached([builtin_rules_dir()], cache_dir)
    [stored] = cache_dir.glob("rules-*.json")
    copy = load_rules_cached([builtin_rules_dir()], cache_dir)
    assert copy.rules == fresh.rules and copy.digest == fresh.digest
    data = json.loads(stored.read_text())
    data[0]["severity"] = "fatal"
    stored.write_text(json.dumps(data))
    assert load_rules_cached([builtin_rules_dir()], cache_dir).rules == fresh.rules
    assert json.loads(stored.read_text())[0]["severity"] == fresh.rules[0].severity.value


def test_the_cache_lives_in_the_user_cache_directory(tmp_path: Path, monkeypatch, capsys) -> None:
    """Not in the scanned tree; ``--no-cache`` writes nothing anywhere."""
    monkeypatch.delenv("PORTSCAN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.py").write_text("import pynvml\n")
    main(["scan", "--no-cache", str(project)])
    assert not (tmp_path / "xdg").exists()
    main(["scan", str(project)])
    assert (tmp_path / "xdg" / "portscan" / DATABASE).is_file()
    assert [p.name for p in project.iterdir()] == ["a.py"]
    capsys.readouterr()


def test_a_changed_hipify_table_misses_the_cache(tmp_path: Path, cache_dir: Path, rules, monkeypatch) -> None:
    """PS924 depends on the shipped hipify table; results cached with another table are not reused."""
    from portscan.match import hipify

    project = tmp_path / "p"
    project.mkdir()
    (project / "k.cu").write_text("void f(float **p) { cudaMalloc(p, 4); }\n")
    assert "cudaMalloc" in hipify.load_hipify_names()
    assert [f.rule for f in scan_paths([project], rules, cache=cache_dir).findings] == []
    table = tmp_path / "hipify-names.txt"
    table.write_text("\n".join(line for line in hipify.TABLE.read_text().splitlines() if line != "cudaMalloc"))
    monkeypatch.setattr(hipify, "TABLE", table)
    assert [f.rule for f in scan_paths([project], rules, cache=cache_dir).findings] == ["PS924"]


def test_the_key_covers_portscans_own_code(tmp_path: Path) -> None:
    """An edited checkout (same version number) must not serve results of the code
    before the edit: the salt holds a digest of the package's code and data files."""
    from portscan.cache import Cache, code_digest, tree_digest

    package = tmp_path / "pkg"
    (package / "match").mkdir(parents=True)
    (package / "match" / "python.py").write_text("A = 1\n")
    (package / "match" / "hipify-names.txt").write_text("cudaMalloc\n")
    before = tree_digest(package)
    (package / "match" / "python.py").write_text("A = 2\n")
    assert tree_digest(package) != before
    (package / "match" / "python.py").write_text("A = 1\n")
    assert tree_digest(package) == before
    (package / "match" / "hipify-names.txt").write_text("cudaFree\n")
    assert tree_digest(package) != before
    assert code_digest() in Cache(tmp_path / "c", "salt").salt


def test_the_key_covers_the_files_package() -> None:
    """Relative imports resolve by the file's package, so a file moved under (or out of)
    a package with the same text and the same top-level modules is a different entry;
    the package survives the trip to a worker process."""
    import pickle

    from portscan.cache import entry_key
    from portscan.model import OwnModules

    plain = entry_key("s", "python", "a/b.py", OwnModules({"a"}), "x = 1\n")
    packaged = entry_key("s", "python", "a/b.py", OwnModules({"a"}, "a"), "x = 1\n")
    assert plain != packaged
    assert plain == entry_key("s", "python", "a/b.py", frozenset({"a"}), "x = 1\n")
    assert pickle.loads(pickle.dumps(OwnModules({"a"}, "a.b"))).package == "a.b"
