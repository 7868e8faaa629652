"""`portscan verify`'s pure parts: verdict rules, comparison, traces, discovery, emulation data."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

from portscan.cli import build_parser
from portscan.verify import child
from portscan.verify.emulation import (blocked_modules, blocked_programs, module_rules,
                                       rule_for_module)
from portscan.verify.entry import (ConfigError, discover_candidates, load_settings, parse_settings,
                                   readme_commands, unwrap_launcher)
from portscan.verify.hints import likely_rules
from portscan.verify.reference import ReferenceError, read_reference, to_document, write_reference
from portscan.verify.report import sparkline
from portscan.verify.runner import SOCKET_PATH_MAX, new_entries, torchrun_argv, work_base
from portscan.verify.trace import (Backend, Failure, Observation, Step, failure_from_output,
                                   losses_from_output, merge_traces)
from portscan.verify.verdict import (FAIL, PASS, SKIP, Criteria, compare, fitted_rise, judge,
                                     relative_difference)

from conftest import REPO


def steps(*losses: float | None) -> tuple[Step, ...]:
    return tuple(Step(i, loss) for i, loss in enumerate(losses, start=1))


def observe(losses=(2.0, 1.5, 1.2, 1.0), **overrides) -> Observation:
    values = dict(steps=steps(*losses), loss_source="hooks", stopped_at_cap=True, exit_status=0,
                  timed_out=False, seconds=1.0, runtime_loaded=True)
    values.update(overrides)
    return Observation(**values)


def statuses(verdict) -> dict[str, str]:
    return {check.name: check.status for check in verdict.checks}


# -- verdict ----------------------------------------------------------------------------

def test_a_falling_finite_run_at_the_cap_passes() -> None:
    verdict = judge(observe(), Criteria(steps=4))
    assert verdict.passed
    assert statuses(verdict) == {"run": PASS, "steps": PASS, "finite": PASS, "trend": PASS, "gpu": SKIP}


def test_too_few_steps_fail_unless_the_script_finished() -> None:
    short = observe(losses=(2.0, 1.0), stopped_at_cap=False, exit_status=0)
    assert judge(short, Criteria(steps=4)).passed  # finished on its own after 2 steps
    crashed = observe(losses=(2.0, 1.0), stopped_at_cap=False, exit_status=1)
    verdict = judge(crashed, Criteria(steps=4))
    assert statuses(verdict)["run"] == FAIL and statuses(verdict)["steps"] == FAIL
    nothing = observe(losses=(), stopped_at_cap=False, exit_status=0, runtime_loaded=False)
    detail = {c.name: c.detail for c in judge(nothing, Criteria(steps=4)).checks}["steps"]
    assert "runtime did not load" in detail


def test_non_finite_loss_fails_and_names_the_step() -> None:
    verdict = judge(observe(losses=(2.0, 1.5, math.nan, 1.0)), Criteria(steps=4))
    check = {c.name: c for c in verdict.checks}["finite"]
    assert not verdict.passed and check.status == FAIL and "step 3" in check.detail
    assert statuses(verdict)["trend"] == SKIP
    inf = judge(observe(losses=(2.0, math.inf)), Criteria(steps=2))
    assert statuses(inf)["finite"] == FAIL


def test_trend_rule_allows_noise_but_not_a_rise() -> None:
    assert fitted_rise(steps(1.0, 2.0, 3.0)) == pytest.approx(2.0)
    assert fitted_rise(steps(3.0, 2.0, 1.0)) == pytest.approx(-2.0)
    assert fitted_rise(steps(1.0)) is None
    noisy_flat = observe(losses=(1.00, 1.01, 0.99, 1.01))  # fitted rise 0.006 < 2 % of 1.0
    assert statuses(judge(noisy_flat, Criteria(steps=4)))["trend"] == PASS
    rising = judge(observe(losses=(1.0, 1.1, 1.2, 1.3)), Criteria(steps=4))
    assert statuses(rising)["trend"] == FAIL and not rising.passed
    assert "2 %" in {c.name: c.detail for c in rising.checks}["trend"]  # the rule is stated
    lenient = judge(observe(losses=(1.0, 1.1, 1.2, 1.3)), Criteria(steps=4, max_rise=0.5))
    assert lenient.passed


def test_gpu_check_catches_a_silent_cpu_fallback() -> None:
    gpu = Backend(torch="2.6.0+rocm6.2", cuda=None, hip="6.2.41133", gpu=True, device_count=1,
                  device_name="AMD Instinct MI300X", arch="gfx942:sramecc+:xnack-", capability=(9, 4))
    on_cpu = judge(observe(backend=gpu, param_devices=("cpu",)), Criteria(steps=4))
    check = {c.name: c for c in on_cpu.checks}["gpu"]
    assert not on_cpu.passed and check.status == FAIL and "silent CPU fallback" in check.detail
    on_gpu = judge(observe(backend=gpu, param_devices=("cuda",)), Criteria(steps=4))
    assert on_gpu.passed and statuses(on_gpu)["gpu"] == PASS
    assert "ROCm 6.2.41133" in gpu.label and "gfx942" in gpu.label


def test_timeouts_fail_unless_the_cap_was_reached() -> None:
    hung = judge(observe(stopped_at_cap=False, timed_out=True, exit_status=None), Criteria(steps=4))
    assert statuses(hung)["run"] == FAIL
    lingering = judge(observe(timed_out=True, exit_status=None), Criteria(steps=4))
    assert lingering.passed


# -- comparison ---------------------------------------------------------------------------

def test_relative_difference() -> None:
    assert relative_difference(1.05, 1.0) == pytest.approx(0.05)
    assert relative_difference(-0.9, -1.0) == pytest.approx(0.1)
    assert relative_difference(0.01, 0.0) == pytest.approx(0.01)
    assert relative_difference(math.nan, 1.0) == math.inf


def test_compare_reports_the_first_divergence_and_allows_outliers() -> None:
    reference = steps(*[1.0] * 10)
    same = compare(steps(*[1.0] * 10), reference)
    assert same.ok and same.compared == 10 and same.first_divergence is None and same.allowed == 1
    one_off = compare(steps(1.0, 1.0, 1.2, *[1.0] * 7), reference)
    assert one_off.ok and one_off.first_divergence.step == 3  # 1 of 10 may differ (10 %)
    two_off = compare(steps(1.0, 1.0, 1.2, 1.0, 1.1, *[1.0] * 5), reference)
    assert not two_off.ok and two_off.first_divergence.step == 3 and len(two_off.misses) == 2
    strict = compare(steps(1.0, 1.0, 1.2, *[1.0] * 7), reference, outliers=0.0)
    assert not strict.ok
    loose = compare(steps(1.0, 1.0, 1.2, 1.0, 1.1, *[1.0] * 5), reference, rtol=0.25)
    assert loose.ok


def test_compare_handles_partial_overlap() -> None:
    comparison = compare(steps(1.0, 1.0), steps(1.0, 1.0, 1.0, 1.0))
    assert comparison.ok and comparison.compared == 2 and comparison.missing == 2
    verdict = judge(observe(losses=(2.0, 1.0)), Criteria(steps=2),
                    compare(steps(2.0, 1.0), steps(5.0, 5.0)), "golden.json")
    detail = {c.name: c.detail for c in verdict.checks}["reference"]
    assert not verdict.passed and "first divergence at step 1" in detail and "golden.json" in detail
    nothing = compare(steps(1.0), (Step(7, 1.0),))
    assert not nothing.ok


def test_reference_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "ref.json"
    write_reference(path, to_document([steps(2.0, 1.5)], ["python", "train.py"], None, "rocm", 1))
    reference = read_reference(path)
    assert reference.steps == steps(2.0, 1.5)
    assert reference.command == ("python", "train.py") and reference.emulate == "rocm"
    assert reference.capture == "hooks" and reference.runs == ({1: 2.0, 2: 1.5},)
    path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ReferenceError, match="not a portscan verify reference"):
        read_reference(path)
    with pytest.raises(ReferenceError, match="cannot read"):
        read_reference(tmp_path / "missing.json")


# -- traces and output ----------------------------------------------------------------------

def test_losses_from_output_formats() -> None:
    output = ("\x1b[32mstep 1 loss 2.5\x1b[0m\n"
              "epoch 0 | step: 2 | loss=2.25\r"
              "{'loss': 2.0, 'grad_norm': 1.2, 'learning_rate': 0.001, 'epoch': 0.1}\n"
              " iteration        4/      50 | lm loss: 1.750000E+00 |\n"
              "val_loss 9.0\nvalidation loss: 8.0\nloss: nan\n")
    parsed = losses_from_output(output)
    assert [s.loss for s in parsed][:4] == [2.5, 2.25, 2.0, 1.75]
    assert math.isnan(parsed[4].loss) and len(parsed) == 5
    assert [s.step for s in parsed] == [1, 2, 3, 4, 5]  # not every line has a step: numbered
    numbered = losses_from_output("step 10 loss 1.0\nstep 20 loss 0.5\n")
    assert [s.step for s in numbered] == [10, 20]


def test_failure_from_output() -> None:
    output = ("noise\nTraceback (most recent call last):\n"
              '  File "/p/train.py", line 3, in <module>\n    import tensorrt\n'
              "ModuleNotFoundError: No module named 'tensorrt'\n")
    failure = failure_from_output(output)
    assert failure == Failure(type="ModuleNotFoundError", message="No module named 'tensorrt'",
                              module="tensorrt", frames=(("/p/train.py", 3),),
                              traceback=failure.traceback)
    assert failure_from_output("all good\n") is None


def test_merge_judges_rank_zero_and_prefers_worker_errors() -> None:
    def trace(pid, rank, n, failure=None, owner=True):
        return {"pid": pid, "rank": rank, "owner": owner, "stopped": "step-cap" if n == 3 else "exit",
                "steps": [{"step": i, "loss": 1.0 / i} for i in range(1, n + 1)],
                "failure": failure, "notes": [], "param_devices": ["cpu"],
                "backend": {"torch": "2.13.0", "cuda": None, "hip": None, "gpu": False}}

    launcher = trace(10, None, 0, {"type": "ChildFailedError", "message": "train.py FAILED"})
    worker = {"type": "RuntimeError", "message": "boom", "frames": [{"file": "t.py", "line": 4}]}
    merged = merge_traces([launcher, trace(11, 1, 2, worker), trace(12, 0, 3)],
                          exit_status=1, timed_out=False, seconds=2.0, output="")
    assert len(merged.steps) == 3 and merged.stopped_at_cap
    assert [(r.rank, r.steps) for r in merged.ranks] == [(0, 3), (1, 2)]
    assert merged.failure.type == "RuntimeError" and merged.failure.frames == (("t.py", 4),)
    fallback = merge_traces([], exit_status=0, timed_out=False, seconds=1.0, output="loss 1.0\nloss 0.5\n")
    assert fallback.loss_source == "stdout" and not fallback.runtime_loaded
    assert any("parsed from the output" in note for note in fallback.notes)


def test_sparkline() -> None:
    assert sparkline([3.0, 2.0, 1.0]) == "█▅▁"
    assert sparkline([1.0, math.nan, None]) == "▅!!"
    assert len(sparkline([float(i) for i in range(500)], width=40)) == 40


# -- emulation data comes from the rule pack -------------------------------------------------

def test_blocklist_comes_from_the_rule_pack(rules) -> None:
    blocked = blocked_modules(rules)
    for module in ("tensorrt", "torch_tensorrt", "pycuda", "pynvml", "apex", "apex.amp", "amp_C",
                   "fused_layer_norm_cuda", "nvidia.dali"):
        assert module in blocked, module
    for module in ("flash_attn", "xformers", "bitsandbytes", "triton", "cupy"):
        assert module not in blocked, module  # they have ROCm builds
    assert blocked["pycuda"] == "PS713" and blocked["amp_C"] == "PS208"
    assert "apex" not in blocked_modules(rules, allow=["apex"])
    assert "apex.amp" not in blocked_modules(rules, allow=["apex"])
    assert blocked_programs(rules)["nvidia-smi"] == "PS601"


def test_most_specific_rule_for_a_module(rules) -> None:
    owners = module_rules(rules)
    assert rule_for_module("apex.amp.handle", owners) == "PS202"
    assert rule_for_module("apex", owners) == "PS201"
    assert rule_for_module("apex_utils", owners) is None
    assert rule_for_module("tensorrt.plugin", owners) == "PS101"


def test_child_blocker_is_most_specific_and_raises_module_not_found(rules) -> None:
    blocked = blocked_modules(rules)
    assert child.blocking_rule("apex.amp.handle", blocked) == ("apex.amp", "PS202")
    assert child.blocking_rule("apexx", blocked) is None
    with pytest.raises(ModuleNotFoundError, match="see PS101") as caught:
        child.ImportBlocker(blocked).find_spec("tensorrt")
    assert caught.value.name == "tensorrt"


def test_the_runtime_is_standalone() -> None:
    source = (REPO / "src/portscan/verify/child.py").read_text()
    assert "import portscan" not in source and "from portscan" not in source
    assert "import torch" not in source  # torch is patched after the program imports it


# -- hints --------------------------------------------------------------------------------

def test_hint_prefers_the_scanned_line_over_the_bare_module(rules, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nfrom apex import amp\n")
    failure = Failure(type="ModuleNotFoundError", message="No module named 'apex'", module="apex",
                      frames=((str(script), 2), ("/usr/lib/python3/importlib/__init__.py", 90)))
    hints = likely_rules(failure, tmp_path, rules)
    assert [h.rule.code for h in hints] == ["PS202", "PS201"]
    assert hints[0].where == "train.py:2" and hints[0].line_text == "from apex import amp"
    outside = Failure(type="ModuleNotFoundError", message="", module="pycuda", frames=(("/elsewhere.py", 1),))
    assert [h.rule.code for h in likely_rules(outside, tmp_path, rules)] == ["PS713"]


# -- entry points and settings ----------------------------------------------------------------

def test_settings_are_validated(tmp_path: Path) -> None:
    settings = parse_settings({"command": "python train.py --lr 0.1", "steps": 5, "emulate": "rocm",
                               "allow-imports": ["apex"], "max-rise": 0.1})
    assert settings.command == ("python", "train.py", "--lr", "0.1") and settings.steps == 5
    assert settings.allow_imports == ("apex",) and settings.max_rise == 0.1
    for bad, message in (({"stpes": 5}, "stpes: unknown key"), ({"steps": 0}, "steps: must be"),
                         ({"steps": "5"}, "steps: expected an integer"), ({"command": []}, "command"),
                         ({"emulate": "cuda"}, "emulate"), ({"outliers": 2}, "outliers")):
        with pytest.raises(ConfigError, match=message):
            parse_settings(bad)
    (tmp_path / "pyproject.toml").write_text('[tool.portscan.verify]\ncommand = ["python", "t.py"]\n')
    assert load_settings(tmp_path).command == ("python", "t.py")
    assert load_settings(tmp_path / "nowhere").command == ()


def test_readme_commands_and_launchers() -> None:
    readme = ("# x\n```python\nimport torch\n```\n```bash\n$ pip install -r requirements.txt\n"
              "torchrun --nproc_per_node=8 --master_port 29500 train.py \\\n  --amp  # fast\n```\n"
              "    python -m pkg.finetune --cfg a.yaml\n")
    assert readme_commands(readme) == [(6, "pip install -r requirements.txt"),
                                       (7, "torchrun --nproc_per_node=8 --master_port 29500 train.py --amp"),
                                       (10, "python -m pkg.finetune --cfg a.yaml")]
    torchrun = ["torchrun", "--nproc_per_node=8", "--master_port", "29500", "train.py", "--amp"]
    assert unwrap_launcher(torchrun) == ("python", "train.py", "--amp")
    assert unwrap_launcher(["python", "-m", "torch.distributed.run", "--standalone", "-m", "pkg.train"]) \
        == ("python", "-m", "pkg.train")
    assert unwrap_launcher(["python", "train.py"]) == ("python", "train.py")


def test_discovery_ranks_candidates(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\nopt = torch.optim.SGD([], lr=1)\n"
                                       "if __name__ == '__main__':\n    pass\n")
    (tmp_path / "train_utils.py").write_text("def helper():\n    return 1\n")  # no __main__
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "pretrain.py").write_text("import torch\nloss.backward()\n"
                                                      "if __name__ == '__main__':\n    main()\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[project.scripts]\n'
                                             'x-train = "x.train:main"\nx-serve = "x.serve:main"\n')
    (tmp_path / "README.md").write_text("```bash\npython train.py --epochs 1\n```\n")
    found = discover_candidates(tmp_path)
    assert [c.command for c in found] == [("python", "train.py", "--epochs", "1"), ("python", "train.py"),
                                          ("python", "scripts/pretrain.py"), ("x-train",), ("x-serve",)]
    assert found[0].source == "README.md:2"


def test_discovery_on_the_bundled_fixtures() -> None:
    best = discover_candidates(REPO / "fixtures" / "cuda-trainer")[0]
    assert best.command == ("python", "train.py", "--data", "/datasets/imagenet", "--epochs", "90", "--amp")
    assert discover_candidates(REPO / "fixtures" / "mnist-apex")[0].command == \
        ("python", "train.py", "--steps", "200")


def test_torchrun_argv() -> None:
    launch = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2")
    assert torchrun_argv(["python", "-u", "train.py", "--lr", "1"], 2) == (
        "python", *launch, "train.py", "--lr", "1")
    assert torchrun_argv(["python3", "-m", "pkg.train"], 4)[-2:] == ("-m", "pkg.train")
    console_script = torchrun_argv(["x-train", "--fast"], 2)
    assert console_script == (sys.executable, *launch, "--no-python", "x-train", "--fast")
    with pytest.raises(ValueError, match="already starts torchrun"):
        torchrun_argv(["torchrun", "train.py"], 2)
    with pytest.raises(ValueError, match="Python option"):
        torchrun_argv(["python", "-c", "pass"], 2)


def test_new_entries_collapse_new_folders() -> None:
    before = frozenset({"train.py"})
    after = frozenset({"train.py", "runs", "runs/1", "runs/1/events", "ckpt.pt"})
    assert new_entries(before, after) == ("ckpt.pt", "runs")
    assert new_entries(None, after) == ()


def test_command_line_options_parse() -> None:
    args = build_parser().parse_args(["verify", "--steps", "3", "--emulate", "rocm", "--", "python",
                                      "train.py", "--steps", "9"])
    assert args.command == "verify" and args.steps == 3 and args.emulate == "rocm"
    assert args.cmd == ["--", "python", "train.py", "--steps", "9"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["verify", "--record", "a", "--against", "b"])


def test_text_report_prints_untrusted_text_inertly(rules) -> None:
    import io

    from rich.console import Console

    from portscan.verify.report import Result, render_text

    failure = Failure(type="RuntimeError", message="\x1b[2J[bold]boom[/bold]",
                      traceback="Traceback (most recent call last):\n\x1b]0;title\x07RuntimeError: boom")
    observation = observe(stopped_at_cap=False, exit_status=1, failure=failure,
                          notes=("\x1b[31mred note",))
    result = Result(command=("python", "\x1b[1mtrain.py"), origin="the command line",
                    argv=("python", "train.py"), emulate="rocm", nproc=1, criteria=Criteria(steps=4),
                    observation=observation, verdict=judge(observation, Criteria(steps=4)),
                    output="\x1b[31mlast line\x1b[0m\n")
    buffer = io.StringIO()
    render_text(result, Console(file=buffer, width=200, color_system=None))
    text = buffer.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "[bold]boom[/bold]" in text  # shown as written, not as markup
    assert "not kernels or numerics" in text
    assert text.rstrip().endswith("FAIL: RuntimeError: ?[2J[bold]boom[/bold]")


# -- issue 21: verdicts a porting team can trust ----------------------------------------------

def test_trend_knows_zero_mean_noise_but_not_a_rise() -> None:
    """The old rule (fitted line, 2 % of the mean |loss|) failed about half of zero-mean runs."""
    import random

    failures = 0
    old_failures = 0
    for seed in range(200):
        rng = random.Random(seed)
        losses = [rng.gauss(0.0, 0.3) for _ in range(20)]
        failures += not judge(observe(losses=losses), Criteria(steps=20)).passed
        scale = sum(map(abs, losses)) / 20
        old_failures += fitted_rise(steps(*losses)) > 0.02 * scale
    assert failures <= 4 and old_failures > 60
    rising = [1.0 + 0.05 * i + random.Random(1).gauss(0, 0.01) for i in range(20)]
    assert statuses(judge(observe(losses=rising), Criteria(steps=20)))["trend"] == FAIL
    assert statuses(judge(observe(losses=(1.0, 1.1, 1.2, 1.3)), Criteria(steps=4)))["trend"] == FAIL
    assert statuses(judge(observe(losses=rising), Criteria(steps=20, trend=False)))["trend"] == SKIP
    reward = judge(observe(losses=rising), Criteria(steps=20, metric="reward", maximize=True))
    assert statuses(reward)["trend"] == PASS


def test_a_deterministic_reference_is_tight_and_a_repeated_one_has_a_band() -> None:
    reference = steps(*[1.0 - 0.01 * i for i in range(20)])
    rerun = compare(reference, reference)
    assert rerun.ok and rerun.descent is not None and rerun.descent.ok
    off = compare(steps(*[(1.0 - 0.01 * i) * (1.03 if i >= 5 else 1.0) for i in range(20)]), reference)
    assert not off.ok and off.first_divergence.step == 6  # 3 % is outside the 1 % floor
    import random

    rng = random.Random(5)
    runs = [{i + 1: 1.0 - 0.01 * i + rng.gauss(0, 0.05) for i in range(20)} for _ in range(3)]
    mean = tuple(Step(i, sum(r[i] for r in runs) / 3) for i in range(1, 21))
    other = steps(*[1.0 - 0.01 * i + rng.gauss(0, 0.05) for i in range(20)])
    assert not compare(other, mean).ok and compare(other, mean, runs=runs).ok
    assert compare(other, mean, runs=runs).runs == 3


def test_the_descent_catches_what_per_step_tolerance_lets_through() -> None:
    reference = steps(*[2.0 - 0.05 * i for i in range(20)])
    slower = steps(*[2.0 - 0.05 * i * 0.8 for i in range(20)])  # within 20 %... per step
    comparison = compare(slower, reference, rtol=0.25)
    assert not comparison.misses and not comparison.ok and not comparison.descent.ok
    detail = {c.name: c.detail for c in judge(observe(losses=[s.loss for s in slower]), Criteria(steps=20),
                                              comparison, "golden.json").checks}["reference"]
    assert "descent" in detail and "golden.json" in detail


def test_reference_metadata_warns_when_it_does_not_fit(tmp_path: Path) -> None:
    from portscan.verify.reference import mismatches

    path = tmp_path / "ref.json"
    write_reference(path, to_document([steps(2.0, 1.5), steps(2.2, 1.4)], ["python", "t.py"], None, None, 2,
                                      capture="stdout"))
    reference = read_reference(path)
    assert len(reference.runs) == 2 and reference.steps[0].loss == pytest.approx(2.1)
    found = mismatches(reference, command=("python", "u.py"), nproc=1, capture="hooks",
                       backend_kind="cuda", metric="loss")
    text = " | ".join(found)
    assert "parsed output" in text and "another command" in text and "--nproc 2" in text
    assert not mismatches(reference, command=("python", "t.py"), nproc=2, capture="stdout",
                          backend_kind=None, metric="loss")
    old = json.loads(path.read_text())
    old.update(version=1, steps=[{"step": 1, "loss": 2.0}])
    for key in ("capture", "runs", "repeats", "commands"):
        old.pop(key, None)
    path.write_text(json.dumps(old))
    assert "version 1" in " ".join(mismatches(read_reference(path), command=("python", "t.py"), nproc=2,
                                              capture="hooks", backend_kind=None, metric="loss"))


def test_seeded_commands_for_repeats(tmp_path: Path) -> None:
    from portscan.verify.cli import seeded_commands

    assert seeded_commands(["python", "t.py", "--seed", "5"], 3, tmp_path)[2] == ("python", "t.py", "--seed", "7")
    assert seeded_commands(["python", "t.py", "--seed=5"], 2, tmp_path)[1] == ("python", "t.py", "--seed=6")
    (tmp_path / "s.py").write_text("parser.add_argument('--seed', type=int)\n")
    assert seeded_commands(["python", "s.py"], 2, tmp_path) == (("python", "s.py"), ("python", "s.py", "--seed", "1"))
    (tmp_path / "n.py").write_text("print(1)\n")
    assert seeded_commands(["python", "n.py"], 2, tmp_path) == (("python", "n.py"), ("python", "n.py"))


def test_the_emulated_import_error_agrees_with_the_rule_it_cites(rules) -> None:
    """Issue 22: "apex has no build for a PyTorch ROCm install" contradicted PS201."""
    from portscan.verify.emulation import block_reasons

    blocked = blocked_modules(rules)
    reasons = block_reasons(rules, blocked)
    for module, code in blocked.items():
        with pytest.raises(ModuleNotFoundError) as caught:
            child.ImportBlocker(blocked, reasons).find_spec(module)
        message = str(caught.value)
        rule = rules.by_code[code]
        assert rule.render_message({"module": module, "matched": module}).replace("`", "") in message, module
        assert f"see {code}" in message and "has no build" not in message
    assert "ROCm/apex" in reasons["apex"] and "--allow-import apex" in reasons["apex"]


def _recorder(tmp_path: Path, steps_cap: int = 3) -> child.Recorder:
    return child.Recorder({"steps": steps_cap, "trace_dir": str(tmp_path)})


class FakeLoss:
    requires_grad = True

    def __init__(self, value: float) -> None:
        self.value = value

    def numel(self) -> int:
        return 1

    def detach(self) -> FakeLoss:
        return self

    def item(self) -> float:
        return self.value


def test_runtime_series_per_optimizer_closure_and_non_optimizer_steps(tmp_path: Path, monkeypatch) -> None:
    """Without torch: the runtime's bookkeeping on stand-in optimizers and losses."""
    monkeypatch.setattr(child, "APPEND_INTERVAL", 0.0)
    recorder = _recorder(tmp_path, steps_cap=0)
    discriminator, generator = object.__new__(type("Adam", (), {})), object.__new__(type("SGD", (), {}))
    recorder.optimizers.append(lambda: discriminator)  # noqa: B023 - as series_of would
    recorder.names.append("Adam")
    for value in (1.0, 2.0):
        recorder.note_loss(FakeLoss(value), None)
        recorder.record_step(discriminator)
        recorder.note_loss(FakeLoss(value + 10), None)
        recorder.record_step(generator)
    recorder.before_step(discriminator, (), {})
    for value in (5.0, 4.0, 3.0):  # a closure evaluated three times inside one step
        recorder.note_loss(FakeLoss(value), None)
    recorder.record_step(discriminator)
    recorder.note_loss(FakeLoss(7.0), None)
    recorder.record_step(discriminator, skipped=True)
    by_series = {}
    for step in recorder.steps:
        by_series.setdefault(step["series"], []).append((step["loss"], step.get("evaluations"),
                                                         step.get("skipped")))
    assert by_series["1"] == [(1.0, None, None), (2.0, None, None), (5.0, 3, None), (7.0, None, True)]
    assert by_series["2"] == [(11.0, None, None), (12.0, None, None)]
    assert recorder.names == ["Adam", "SGD"]
    module = type("module", (), {})
    module.DistributedOptimizer = type("DistributedOptimizer", (), {"step": lambda self, context_id: None})
    recorder.on_distributed_optim(module)
    remote = module.DistributedOptimizer()
    remote.step(1)
    assert recorder.steps[-1]["series"] == "3" and recorder.names[-1] == "DistributedOptimizer"


def test_runtime_caps_backward_calls_without_an_optimizer(tmp_path: Path) -> None:
    recorder = _recorder(tmp_path, steps_cap=3)
    for value in (3.0, 2.0, 1.0):
        recorder.note_loss(FakeLoss(value), None)
    with pytest.raises(child.StepCapReached):
        recorder.note_loss(FakeLoss(0.5), None)  # the 4th backward does not run
    assert recorder.stopped == "step-cap" and (tmp_path / f"cap-{os.getpid()}").exists()
    trace = json.loads((tmp_path / f"trace-{os.getpid()}.json").read_text())
    merged = merge_traces([trace], exit_status=0, timed_out=False, seconds=1.0, output="")
    assert merged.loss_source == "backward" and [s.loss for s in merged.steps] == [3.0, 2.0, 1.0]


def test_discovery_finds_any_training_script_and_skips_gpu_only_ones(tmp_path: Path, monkeypatch) -> None:
    from portscan.verify.cli import UsageError, make_plan
    from portscan.verify.entry import Settings, gpu_requirement

    body = "import torch\nopt = torch.optim.Adam([])\nif __name__ == '__main__':\n    pass\n"
    (tmp_path / "main.py").write_text(body)
    (tmp_path / "makemore.py").write_text(body)
    (tmp_path / "reinforce.py").write_text(body.replace("opt =", "model = model.cuda()\nopt ="))
    (tmp_path / "README.md").write_text("```\npython makemore.py -i names.txt\n```\n")
    found = {c.command: c for c in discover_candidates(tmp_path)}
    assert ("python", "main.py") in found and ("python", "reinforce.py") in found
    assert found[("python", "makemore.py", "-i", "names.txt")].source == "README.md:2"
    assert found[("python", "reinforce.py")].needs_gpu and not found[("python", "main.py")].needs_gpu
    assert gpu_requirement("", ["python", "t.py", "--device", "cuda"])
    assert gpu_requirement("x.cuda() if torch.cuda.is_available() else x", ()) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    args = build_parser().parse_args(["verify"])
    only_gpu = tmp_path / "gpu"
    only_gpu.mkdir()
    (only_gpu / "train.py").write_text(body.replace("opt =", "x.cuda()\nopt ="))
    with pytest.raises(UsageError, match="need a GPU and this machine has none"):
        make_plan(args, Settings(), only_gpu)


def test_text_report_grammar_header_and_tail_without_steps(rules) -> None:
    import io

    from rich.console import Console

    from portscan.verify.report import Result, render_text

    def render(observation: Observation) -> str:
        result = Result(command=("python", "train.py"), origin="the command line", argv=("python", "train.py"),
                        emulate=None, nproc=1, criteria=Criteria(steps=1), observation=observation,
                        verdict=judge(observation, Criteria(steps=1)),
                        output="Loading...\nno data found, nothing to train\n")
        buffer = io.StringIO()
        render_text(result, Console(file=buffer, width=200, color_system=None))
        return buffer.getvalue()

    one = render(observe(losses=(1.0,)))
    assert one.startswith("portscan verify -- python train.py") and "1 step in" in one
    assert "1 steps" not in one
    empty = render(observe(losses=(), stopped_at_cap=False, exit_status=0))
    assert "nothing to train" in empty  # no step seen: the output tail explains why


def test_the_run_directory_goes_where_multiprocessing_sockets_fit(tmp_path: Path) -> None:
    """A long TMPDIR would push ``pymp-*/listener-*`` past the socket path limit."""
    assert work_base("/tmp") == "/tmp"
    deep = "/" + "d" * (SOCKET_PATH_MAX - 40)
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    assert work_base(deep, short=("/no/such/folder", str(not_a_folder), "/tmp")) == "/tmp"
    assert work_base(deep, short=("/no/such/folder", deep + "/x")) == deep  # nowhere fits: as before
