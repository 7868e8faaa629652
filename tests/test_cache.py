"""The content cache and the worker pool change speed, never results."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from portscan import scan as scan_module
from portscan.cli import main
from portscan.ruleset import builtin_rules_dir, load_rules_cached
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
    cold = outcome(scan_paths([CORPUS], rules, cache=tmp_path, workers=2))
    assert (cache_dir / "results-v1.sqlite").is_file() and (cache_dir / ".gitignore").read_text().endswith("*\n")
    warm = outcome(scan_paths([CORPUS], rules, cache=tmp_path, workers=1))
    monkeypatch.setattr(scan_module, "BULK_MIN", 1)  # the workers run the prefilter too
    bulk = outcome(scan_paths([CORPUS], rules, workers=2))
    assert plain[0] and plain[2] and plain == pooled == cold == warm == bulk


def test_a_changed_file_misses_the_cache(tmp_path: Path, cache_dir: Path, rules) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.py").write_text("import pynvml\n")
    assert [f.rule for f in scan_paths([project], rules, cache=project).findings] == ["PS602"]
    (project / "a.py").write_text("import GPUtil\n")
    assert [f.rule for f in scan_paths([project], rules, cache=project).findings] == ["PS603"]
    narrower = rules.select(["PS602"])  # another rule pack: another key
    (project / "a.py").write_text("import pynvml\n")
    assert [f.rule for f in scan_paths([project], narrower, cache=project).findings] == ["PS602"]


def test_a_corrupt_cache_is_ignored(tmp_path: Path, cache_dir: Path, rules) -> None:
    expected = outcome(scan_paths([FIXTURE], rules))
    scan_paths([FIXTURE], rules, cache=tmp_path)
    (cache_dir / "results-v1.sqlite").write_bytes(b"this is not a database" * 100)
    assert outcome(scan_paths([FIXTURE], rules, cache=tmp_path)) == expected
    shutil.rmtree(cache_dir)
    cache_dir.write_text("a file where the cache folder should be")
    assert outcome(scan_paths([FIXTURE], rules, cache=tmp_path)) == expected


def test_the_rule_pack_is_reloaded_when_a_rule_file_changes(tmp_path: Path, cache_dir: Path) -> None:
    rules_dir = tmp_path / "rules"
    shutil.copytree(builtin_rules_dir(), rules_dir)
    first = load_rules_cached([rules_dir], tmp_path)
    assert list(cache_dir.glob("rules-*.pickle"))
    again = load_rules_cached([rules_dir], tmp_path)
    assert [r.code for r in again.rules] == [r.code for r in first.rules] and again.digest == first.digest
    rule = rules_dir / "tooling" / "pynvml-import.toml"
    rule.write_text(rule.read_text().replace('severity = "error"', 'severity = "warning"', 1))
    changed = load_rules_cached([rules_dir], tmp_path)
    assert changed.by_code["PS602"].severity.value == "warning" and changed.digest != first.digest


def test_no_cache_writes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("PORTSCAN_CACHE_DIR")
    (tmp_path / "a.py").write_text("import pynvml\n")
    main(["scan", "--no-cache", str(tmp_path)])
    assert not (tmp_path / ".portscan_cache").exists()
    main(["scan", str(tmp_path)])
    assert (tmp_path / ".portscan_cache" / "results-v1.sqlite").is_file()
    capsys.readouterr()
