"""The real-code fix harness (benchmarks/fix_harness.py): each check reports what it is
for, on a small apex training project made here (no network, no mirror)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("pyflakes")

ROOT = Path(__file__).resolve().parents[1]


def _harness():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fix_harness", ROOT / "benchmarks" / "fix_harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


harness = _harness()

TRAIN = '''\
import torch
from apex import amp
from apex.parallel import DistributedDataParallel as DDP

from model import Net


def train(args, loader):
    model = Net(args.hidden).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    model = DDP(model, delay_allreduce=True)
    for batch, target in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(batch.cuda()), target.cuda())
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
    return model
'''

MODEL = '''\
import torch
from apex.normalization import FusedLayerNorm


class Net(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.proj = torch.nn.Linear(hidden, hidden)
        self.norm = FusedLayerNorm(hidden, eps=1e-5)

    def forward(self, x):
        return self.norm(self.proj(x))
'''


def kinds(failures) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(f.check for f in failures)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "train.py").write_text(TRAIN)
    (root / "model.py").write_text(MODEL)
    (root / "README.md").write_text("# a project\n")
    (root / "requirements.txt").write_text("torch==2.1.0+cu121  # CUDA 12.1 build\ntimm\n")
    (root / "Dockerfile").write_text("FROM nvcr.io/nvidia/pytorch:24.05-py3\nCOPY . /app\n")
    return root


def test_a_real_fix_run_passes_every_check(project: Path, tmp_path: Path) -> None:
    before = {p.name: p.read_bytes() for p in project.iterdir()}
    result = harness.run_tree("project", project, tmp_path / "scratch")
    assert result.failures == []
    assert result.changed == ["Dockerfile", "model.py", "requirements.txt", "train.py"]
    assert {"PS210", "PS216", "PS218", "PS222", "PS801", "PS831"} <= set(result.applied)
    assert {p.name: p.read_bytes() for p in project.iterdir()} == before  # the copy was fixed, not the tree
    # the share: the pin and the image (errors with a documented rewrite) are gone with the apex findings
    assert result.rewrite_errors == (2, 0)
    assert 0 < result.fixed <= result.findings


def test_a_text_file_that_no_longer_reads_as_its_kind_is_a_failure() -> None:
    broken = harness.text_failures("pyproject.toml", b'dependencies = ["torch"]\n', b"dependencies = [\n")
    assert kinds(broken) == ["read"]
    assert harness.text_failures("requirements.txt", b"torch==2.1.0+cu121\n", b"torch==2.1.0+rocm5.6\n") == []
    assert kinds(harness.text_failures("notes.md", b"a\n", b"b\n")) == ["fix-error"]


def test_check_file_reports_a_new_undefined_name_and_not_an_old_one() -> None:
    before = "import apex\n\nmodel = apex.parallel.DistributedDataParallel(model)\nprint(missing)\n"
    after = "model = torch.nn.parallel.DistributedDataParallel(model)\nprint(missing)\n"
    failures, _ = harness.check_file("m.py", before, after)
    assert [(f.check, f.line, f.detail) for f in failures] == [("undefined", 1, "UndefinedName 'torch'")]


def test_check_file_reports_a_new_unused_import() -> None:
    before = "from apex.optimizers import FusedAdam\nopt = FusedAdam(params)\n"
    after = "import torch\nfrom apex.optimizers import FusedAdam\nopt = torch.optim.AdamW(params)\n"
    failures, _ = harness.check_file("m.py", before, after)
    assert kinds(failures) == ["unused-import"]
    assert "FusedAdam" in failures[0].detail


def test_check_file_reports_a_try_left_with_only_pass() -> None:
    before = "try:\n    from apex import amp\nexcept ImportError:\n    amp = None\n"
    after = "try:\n    pass\nexcept ImportError:\n    amp = None\n"
    failures, _ = harness.check_file("m.py", before, after)
    assert kinds(failures) == ["try-pass"]
    assert failures[0].line == 1


def test_check_file_reports_parse_and_compile_errors_only_when_the_original_was_fine() -> None:
    assert kinds(harness.check_file("m.py", "x = 1\n", "x = (1\n")[0]) == ["parse"]
    assert kinds(harness.check_file("m.py", "def f():\n    return 1\n", "return 1\n")[0]) == ["compile"]
    assert harness.check_file("m.py", "print 'py2'\n", "print 'py3'\n")[0] == []


def test_use_site_flags_attributes_the_target_type_lacks() -> None:
    before = "import apex\nmodel = apex.parallel.DistributedDataParallel(model)\nmodel.disable_allreduce()\n"
    after = "import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model)\nmodel.disable_allreduce()\n"
    rules = {"PS222": frozenset({"disable_allreduce", "enable_allreduce"})}
    failures, _ = harness.check_file("m.py", before, after, {"PS222": 1}, rules)
    assert [(f.check, f.line) for f in failures] == [("use-site", 3)]
    assert harness.check_file("m.py", before, after, {"PS210": 1}, rules)[0] == []  # another rule's fix


def test_source_only_names_come_from_the_loaded_rule_or_its_file(tmp_path: Path) -> None:
    rule_file = tmp_path / "ddp.toml"
    rule_file.write_text(textwrap.dedent('''
        code = "PS999"
        [fix]
        kind = "replace"
        [[fix.replace]]
        to = "torch.nn.parallel.DistributedDataParallel"
        source_only = ["disable_allreduce", "enable_allreduce"]
        '''))
    fix = SimpleNamespace(kind="replace", replace=(SimpleNamespace(to="t"),))
    from_file = SimpleNamespace(code="PS999", origin=str(rule_file), fix=fix)
    entry = SimpleNamespace(source_only=("allreduce",))  # the field, once the loader knows it
    loaded = SimpleNamespace(code="PS998", origin=str(tmp_path / "none.toml"),
                             fix=SimpleNamespace(kind="replace", replace=(entry,)))
    other = SimpleNamespace(code="PS997", origin=str(rule_file), fix=SimpleNamespace(kind="delete", replace=()))
    assert harness.source_only_names([from_file, loaded, other]) == {
        "PS999": frozenset({"disable_allreduce", "enable_allreduce"}), "PS998": frozenset({"allreduce"})}


def test_the_built_in_rules_load_for_the_use_site_check() -> None:
    from portscan.ruleset.loader import load_rules

    names = harness.source_only_names(load_rules().rules)
    assert all(code.startswith("PS") and isinstance(v, frozenset) for code, v in names.items())


def test_a_second_run_that_changes_something_is_reported() -> None:
    again = "--- a/train.py\n+++ b/train.py\n@@ -3,1 +3,1 @@\n-import apex\n+import torch\n"
    failures = harness.idempotence_failures(again)
    assert [(f.check, f.path, f.line) for f in failures] == [("idempotence", "train.py", 3)]
    assert harness.idempotence_failures("") == []


def test_diff_is_checked_against_the_written_files() -> None:
    original = "import torch\nfrom apex import amp\nx = 1"
    written = "import torch\nx = 2"
    diff = ("--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,2 @@\n import torch\n-from apex import amp\n-x = 1\n"
            "\\ No newline at end of file\n+x = 2\n\\ No newline at end of file\n")
    assert harness.diff_mismatches(diff, {"m.py": original}, {"m.py": written}) == []
    wrong = harness.diff_mismatches(diff, {"m.py": original}, {"m.py": "import torch\nx = 3"})
    assert [(f.check, f.path) for f in wrong] == [("diff", "m.py")]
    missing = harness.diff_mismatches("", {"m.py": original}, {"m.py": written})
    assert [f.detail for f in missing] == ["written but not in the diff"]


def test_the_fix_summary_is_read_back() -> None:
    text = ("Fixed 3 findings in 2 files\n  Python: 3 in 2 files (PS210, PS216, PS218 ×2)\n"
            "    model.py: PS210\n    train.py: PS216, PS218 ×2\n"
            "  1 more finding in the fixed files than before: 1 on code the fixes wrote (PS401)\n"
            "Check in review (what a rewrite could not know for sure):\n"
            "  Dockerfile:1 PS831 ngc-container-image: NGC PyTorch 22.12-py3 carries PyTorch 2.0: Python 3.9 for 3.8\n"
            "Not fixed (left to you, with the reason):\n  Python:\n"
            "    config.py:220 PS223 apex-sync-batchnorm: only calls are rewritten; this use is not called\n"
            "  broken.py: not written: permission denied\n"
            "2 findings remain: 0 fixable with --unsafe-fixes, 2 to port by hand\n  Python: 2 by hand (PS201 ×2)\n")
    summary = harness.read_summary(text)
    assert summary.applied == {"model.py": {"PS210": 1}, "train.py": {"PS216": 1, "PS218": 2}}
    assert summary.declined == (("config.py", 220, "PS223", "only calls are rewritten; this use is not called"),)
    assert summary.errors == (("broken.py", "not written: permission denied"),)


def test_the_diff_of_a_file_without_a_final_newline_applies(tmp_path: Path) -> None:
    """Found by the harness: when the changed last line had no newline, `--diff` ran the
    old side's last line on into the new side's (``-model = DDP(model)+import torch``)."""
    from portscan.fix.apply import fix_paths
    from portscan.report.fixes import unified_diff
    from portscan.ruleset.loader import load_rules

    source = "from apex.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)"
    (tmp_path / "m.py").write_text(source)
    run = fix_paths([tmp_path], load_rules().select(["PS222"]), unsafe=True, write=False)
    diff = unified_diff(run)
    assert "\n-model = DDP(model)\n\\ No newline at end of file\n+" in diff
    fixed = run.changed[0].fixed
    assert harness.diff_mismatches(diff, {"m.py": source}, {"m.py": fixed}) == []


def test_a_rule_fixed_on_some_uses_of_a_module_and_declined_on_others_is_reported() -> None:
    summary = harness.Summary(applied={"model.py": {"PS210": 2}, "other.py": {"PS222": 1}},
                              declined=(("model.py", 11, "PS210", "only calls are rewritten; this use is not called"),
                                        ("other.py", 3, "PS210", "only calls are rewritten; this use is not called")),
                              errors=())
    assert [(f.check, f.path, f.line) for f in harness.mixed_failures(summary)] == [("mixed", "model.py", 11)]


def test_mixed_counts_replace_fixes_at_warning_or_above() -> None:
    from portscan.ruleset.loader import load_rules

    codes = harness.mixed_codes(load_rules().rules)
    assert {"PS209", "PS210", "PS222"} <= codes  # apex FusedAdam, FusedLayerNorm, DDP
    assert not codes & {"PS316", "PS614"}  # torch.cuda.amp (info), a guard-import
    summary = harness.Summary(applied={"m.py": {"PS316": 1}}, declined=(("m.py", 4, "PS316", "*args"),), errors=())
    assert harness.mixed_failures(summary, codes) == []
