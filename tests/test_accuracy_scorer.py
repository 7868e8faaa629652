"""The accuracy benchmark's scorer and tree handling, on a tiny synthetic corpus (no network)."""

from __future__ import annotations

import io
from dataclasses import replace
import subprocess
import sys
import tarfile
import dataclasses
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks" / "accuracy"))

import run  # noqa: E402
from score import (CorpusError, Finding, Label, Score, cuda_nearby, drifted, precision, read_tree,  # noqa: E402
                   score_tree)

TREE = '''
[tree]
id = "{id}"
project = "demo"
kind = "{kind}"
source = "git"
repo = "someone/demo"
commit = "{commit}"

[[label]]
path = "train.py"
line = 2
category = "python"
kind = "true"
description = "torch.version.cuda split"
excerpt = "torch.version.cuda.split"

[[label]]
path = "train.py"
line = 12
category = "python"
kind = "true"
description = "a miss"
excerpt = "amp.initialize"

[[label]]
path = "train.py"
line = 20
category = "python"
kind = "trap"
description = "nccl works on ROCm"
excerpt = "backend=\\"nccl\\""

[[label]]
path = "Dockerfile"
line = 1
category = "container"
kind = "trap"
description = "a violated trap"
excerpt = "FROM rocm/pytorch"

[[judgement]]
rule = "PS401"
path = "train.py"
line = 2
verdict = "true"
reason = "raises on ROCm"
excerpt = "torch.version.cuda.split"

[[judgement]]
rule = "PS999"
path = "train.py"
line = 30
verdict = "false"
reason = "no longer reported"
excerpt = "y = 2"
'''


def source_tree(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    lines = ["import torch", "major = torch.version.cuda.split('.')[0]", *["pass"] * 9,
             "model, opt = amp.initialize(model, opt)", *["pass"] * 7,
             "dist.init_process_group(backend=\"nccl\")", *["pass"] * 9, "x = 1"]
    (root / "train.py").write_text("\n".join(lines) + "\n")
    (root / "Dockerfile").write_text("FROM rocm/pytorch:latest\n")
    return root


def write_tree(folder: Path, kind: str = "precision", tree_id: str = "demo-1", commit: str = "a" * 40) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{tree_id}.toml"
    path.write_text(TREE.format(id=tree_id, kind=kind, commit=commit))
    return path


def test_labels_and_judgements_are_scored(tmp_path: Path) -> None:
    tree = read_tree(write_tree(tmp_path))
    root = source_tree(tmp_path / "src")
    findings = [Finding("PS401", "train.py", 4, "error"),  # within 3 lines of the first label
                Finding("PS202", "train.py", 10, "info"),  # near the miss, but only info
                Finding("PS401", "train.py", 2, "error"),  # judged true
                Finding("PS830", "Dockerfile", 1, "warning"),  # on a trap
                Finding("PS305", "train.py", 40, "warning")]  # nobody judged it
    score = Score()
    score_tree(tree, findings, {x: cuda_nearby(x, root) for x in tree.labels if x.kind == "true"}, score)
    t = score.total
    assert (t.true, t.found, t.found_any, t.traps, t.violations) == (2, 1, 2, 2, 1)
    assert (t.cuda_true, t.cuda_found) == (1, 1)  # "torch.version.cuda" is a CUDA token; amp.initialize is not
    assert [label.description for label, _ in score.misses] == ["a miss"]
    assert [(f.rule, f.line) for f in score.misses[0][1]] == [("PS401", 4), ("PS202", 10), ("PS401", 2)]
    assert [label.description for label, _ in score.violations] == ["a violated trap"]
    assert score.by_category["container"].violations == 1 and score.by_project["demo"].true == 2
    assert score.verdicts == {"true": 1} and score.gone == 1
    assert [f.rule for _, f in score.unjudged] == ["PS401", "PS830", "PS305"]  # PS401 at line 4: not judged
    assert precision(score.verdicts) == "1.00"
    text = run.render(score, [tree], ["other-tree"], [("demo-1", 0.5, 5, 31)], [])
    assert "| recall, warning or above (true labels found) | 0.50 (1/2) |" in text
    assert "| trap violations (warning or above on a trap) | 0.50 (1/2) |" in text
    assert "Skipped (tree not available" in text and "other-tree" in text
    assert "train.py:12 [python] a miss — portscan: PS401 error at 4, PS202 info at 10, PS401 error at 2" in text


def test_a_use_line_is_judged_apart_from_the_findings_and_counted_once(tmp_path: Path) -> None:
    """Precision is per finding; a line a finding lists in ``uses`` has its own verdict
    in the second row, and a place that is both a finding and a use counts once."""
    tree = read_tree(write_tree(tmp_path))
    judged_false_use = dataclasses.replace(tree.judgements[1], rule="PS401", line=30)
    tree = dataclasses.replace(tree, judgements=(tree.judgements[0], judged_false_use))
    findings = [Finding("PS401", "train.py", 2, "error"),
                Finding("PS401", "train.py", 2, "error", use=True),  # the same place again, as a use
                Finding("PS401", "train.py", 30, "error", use=True)]
    score = Score()
    score_tree(tree, findings, {}, score)
    assert score.verdicts == {"true": 1} and score.use_verdicts == {"false": 1}
    assert score.unjudged == [] and score.gone == 0
    now = run.headline(score)
    assert now["precision"].startswith("1.00 (1 true, 0 false")
    assert now["precision_lines"].startswith("0.50 (1 true, 1 false, 0 debatable; use lines alone: 0 true, 1 false")


def test_the_headline_shows_the_reference_columns_beside_todays_figures(tmp_path: Path) -> None:
    tree = read_tree(write_tree(tmp_path))
    score = Score()
    score_tree(tree, [Finding("PS401", "train.py", 4, "error")], {}, score)
    reference = tmp_path / "reference.toml"
    reference.write_text('[[column]]\nlabel = "before"\nrecall = "0.00 (0/2)"\n'
                         '[[column]]\nlabel = "target"\ntraps = "<= 0.02"\n')
    table = run.headline_table(score, reference)
    assert table[0] == "| measure | value | before | target |"
    assert "| recall, warning or above (true labels found) | 0.50 (1/2) | 0.00 (0/2) | - |" in table
    assert "| trap violations (warning or above on a trap) | 0.00 (0/2) | - | <= 0.02 |" in table
    assert run.headline_table(score, tmp_path / "none.toml")[0] == "| measure | value |"


def test_a_drifted_excerpt_is_caught(tmp_path: Path) -> None:
    tree = read_tree(write_tree(tmp_path))
    root = source_tree(tmp_path / "src")
    assert drifted(tree, root) == {tree.judgements[1]: "demo-1: train.py:30: excerpt 'y = 2' not on that line"}
    (root / "train.py").write_text("\n" + (root / "train.py").read_text())  # every line moves down one
    assert len(drifted(tree, root)) == 5
    (root / "Dockerfile").unlink()
    assert "demo-1: Dockerfile: no such file" in drifted(tree, root).values()


@pytest.mark.parametrize("edit, problem", [
    (("kind = \"true\"", "kind = \"maybe\""), "label[0].kind"),
    (("category = \"python\"", "category = \"docs\""), "label[0].category"),
    (("excerpt = \"amp.initialize\"", f"excerpt = \"{'x' * 81}\""), "longer than 80"),
    (("line = 2\n", "line = 0\n"), "label[0].line"),
    (("commit = \"" + "a" * 40, "commit = \"abc"), "40-hex commit"),
    (("verdict = \"true\"", "verdict = \"yes\""), "judgement[0].verdict"),
])
def test_malformed_tree_files_are_rejected(tmp_path: Path, edit: tuple[str, str], problem: str) -> None:
    path = write_tree(tmp_path)
    path.write_text(path.read_text().replace(*edit, 1))
    with pytest.raises(CorpusError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        read_tree(path)


def test_sdists_are_extracted_without_leaving_the_tree(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as t:
        for name, data in (("demo-1.0/setup.py", b"import torch\n"), ("demo-1.0/../../evil.py", b"x"),
                           ("demo-1.0/pkg/a.py", b"a\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    archive = tmp_path / "demo-1.0.tar.gz"
    archive.write_bytes(buffer.getvalue())
    run.extract(archive, tmp_path / "out" / "demo-1.0")
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py"))
    assert files == ["out/demo-1.0/pkg/a.py", "out/demo-1.0/setup.py"]


def test_git_trees_are_found_and_exported(tmp_path: Path) -> None:
    work = source_tree(tmp_path / "mirror" / "someone+demo" / "repo")
    git = ["git", "-C", str(work), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "demo"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    tree = read_tree(write_tree(tmp_path / "trees", kind="pair", commit=commit))
    assert run.find_git_tree(tree, None, tmp_path / "cache") is None  # no folder given: skipped
    root = run.find_git_tree(tree, tmp_path / "mirror", tmp_path / "cache")
    assert root == tmp_path / "cache" / "trees" / "demo-1"
    assert (root / "train.py").read_text() == (work / "train.py").read_text()
    assert len(drifted(tree, root)) == 1  # only the deliberately stale judgement


def test_a_finding_nearer_a_true_label_does_not_violate_a_trap(tmp_path: Path) -> None:
    """A finding belongs to the nearest label (ties to the true one): the real finding
    on a true label's line does not count against a trap two lines away, a finding
    nearer the trap still does."""
    true = Label("demo-1", "a.cu", 6, "kernel", "true", "the real site", "x")
    trap = Label("demo-1", "a.cu", 8, "kernel", "trap", "a construct that works", "y")
    tree = replace(read_tree(write_tree(tmp_path)), labels=(true, trap), judgements=())
    on_true = Finding("PS927", "a.cu", 6, "error")
    on_trap = Finding("PS911", "a.cu", 8, "warning")
    for findings, violations in (([on_true], 0), ([on_true, on_trap], 1), ([Finding("PS9", "a.cu", 7, "error")], 0)):
        score = Score()
        score_tree(tree, findings, {}, score)
        assert (score.total.found, score.total.violations) == (1, violations)
