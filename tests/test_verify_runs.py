"""`portscan verify` end to end: small real training scripts run under CPU torch.

Each test starts the real command as a child process with the runtime injected, so
these fail when step capping, loss capture, emulation, timeouts or torchrun break.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

import pytest

from portscan.cli import main
from portscan.verify.runner import work_base

from conftest import REPO

#: every test here runs training scripts with this interpreter's torch
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed: verify's end-to-end runs need it")

FIXTURES = REPO / "fixtures"
VERIFY = FIXTURES / "verify"
TOY = str(VERIFY / "toy_train.py")
STUBS = FIXTURES / "verify" / "stubs"  # a CPU stand-in for NVIDIA apex's Python API


def tree(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns for p in root.rglob("*")
            if "__pycache__" not in p.parts}


@pytest.fixture(scope="module", autouse=True)
def fixtures_unchanged():
    """No run may change the fixtures."""
    before = tree(FIXTURES)
    yield
    assert tree(FIXTURES) == before


@pytest.fixture(autouse=True)
def own_temporary_directory(monkeypatch, tmp_path_factory):
    """Each test's runs use a temporary directory of their own, which must be empty
    afterwards: other jobs on the machine cannot trip the check, nor this one theirs."""
    tmp = tmp_path_factory.mktemp("verify-tmp")
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    yield
    assert sorted(p.name for p in tmp.iterdir()) == []


@pytest.fixture(autouse=True)
def environment(monkeypatch):
    """``python`` in commands is this interpreter (the one with torch); the runs use the CPU
    even where a GPU is present, so the losses and verdicts do not depend on the machine."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "")


def verify(capsys, *args: str) -> tuple[int, dict]:
    code = main(["verify", "--format", "json", *args])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


class _ThreadStdout(io.TextIOBase):
    """``sys.stdout`` while runs overlap: what each thread prints goes to its own buffer."""

    def __init__(self, other: TextIO) -> None:
        self.buffers: dict[int, io.StringIO] = {}
        self.other = other  #: where any other thread's output goes

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return self.buffers.get(threading.get_ident(), self.other).write(text)


def verify_chains(*chains: Sequence[Sequence[str]]) -> list[list[tuple[int, str]]]:
    """Chains of `portscan verify ARGS` runs (JSON unless ARGS say ``--format text``), each
    chain's runs in order and the chains at once, two at a time: (exit code, stdout) of
    every run. Runs that do not depend on each other overlap, since each is mostly its
    child's import of torch; the runs are the same as one after another."""
    out = _ThreadStdout(sys.stdout)

    def chain(runs: Sequence[Sequence[str]]) -> list[tuple[int, str]]:
        results = []
        for args in runs:
            out.buffers[threading.get_ident()] = buffer = io.StringIO()
            results.append((main(["verify", "--format", "json", *args]), buffer.getvalue()))
        return results

    with contextlib.redirect_stdout(out), ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(chain, chains))


def verify_together(*runs: Sequence[str]) -> list[tuple[int, dict]]:
    """Independent JSON runs at once (see :func:`verify_chains`): (exit code, document) each."""
    return [(code, json.loads(text)) for [(code, text)] in verify_chains(*([run] for run in runs))]


def printed(document: dict) -> dict[int, float]:
    """``step S loss L`` lines the script printed itself."""
    found = (re.match(r"step (\d+) loss (\S+)$", line) for line in document["output_tail"])
    return {int(m.group(1)): float(m.group(2)) for m in found if m}


def captured(document: dict) -> dict[int, float]:
    return {s["step"]: s["loss"] for s in document["steps"]}


def checks(document: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in document["checks"]}


def test_step_cap_with_dataloader_workers(capsys, monkeypatch, tmp_path: Path) -> None:
    """Under a TMPDIR too long for multiprocessing's sockets below verify's own directory
    (which hung the workers until the timeout), so the run's directory goes elsewhere."""
    long = tmp_path / ("t" * max(1, 90 - len(str(tmp_path))))
    long.mkdir()
    monkeypatch.setenv("TMPDIR", str(long))
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    assert work_base(str(long)) != str(long)
    code, doc = verify(capsys, "--steps", "5", "--timeout", "120", "--", "python", TOY, "--workers", "2")
    assert not doc["run"]["timed_out"] and list(long.iterdir()) == []
    assert code == 0 and doc["verdict"] == "pass", doc["checks"]
    assert doc["run"]["stopped_at_cap"] and doc["run"]["exit_status"] == 0
    assert [s["step"] for s in doc["steps"]] == [1, 2, 3, 4, 5]
    # the script printed steps 1-4; verify stopped it inside the 5th optimizer.step()
    assert sorted(printed(doc)) == [1, 2, 3, 4]
    assert all(captured(doc)[step] == loss for step, loss in printed(doc).items())
    assert doc["run"]["loss_source"] == "hooks" and doc["param_devices"] == ["cpu"]
    assert doc["backend"]["torch"].startswith("2.") and doc["backend"]["gpu"] is False


def test_amp_scaled_losses_are_unscaled_and_accumulation_is_averaged(capsys) -> None:
    code, doc = verify(capsys, "--steps", "4", "--", "python", TOY, "--amp", "scaler", "--accum", "2")
    assert code == 0, doc["checks"]
    assert sorted(printed(doc)) == [1, 2, 3]
    # GradScaler(init_scale=1024) scaled every loss; verify reports the unscaled mean of 2 micro-batches
    assert all(captured(doc)[step] == loss for step, loss in printed(doc).items())
    assert all(s["backward_calls"] == 2 for s in doc["steps"])
    assert max(captured(doc).values()) < 10


def test_the_port_end_to_end(monkeypatch, tmp_path: Path) -> None:
    """The issue's done criterion, on the fixture repository and its hand-ported twin."""
    monkeypatch.setenv("PYTHONPATH", str(STUBS))  # as on a CUDA machine with apex installed
    unfixed, ported = str(FIXTURES / "mnist-apex"), str(FIXTURES / "mnist-apex-ported")
    golden = tmp_path / "golden.json"

    # 1 and 2 at once, then 3 and 4 (they compare with 1's recording)
    (code, doc), (code_2, doc_2) = verify_together(
        ("--project", unfixed, "--steps", "12", "--record", str(golden)),
        ("--project", unfixed, "--steps", "12", "--emulate", "rocm"))
    [(code_3, out_3)], [(code_4, text)] = verify_chains(
        [("--project", ported, "--steps", "12", "--emulate", "rocm", "--against", str(golden))],
        [("--project", ported, "--steps", "12", "--emulate", "rocm", "--against", str(golden),
          "--format", "text", "--", "python", "train.py", "--lr", "0.003")])

    # 1. without emulation the apex code trains (its README command is discovered): record it
    assert code == 0 and doc["recorded"] == str(golden), doc["checks"]
    assert doc["command"] == ["python", "train.py", "--steps", "200"]
    assert doc["command_origin"].startswith("README.md:9")
    recorded = json.loads(golden.read_text())
    assert recorded["format"] == "portscan-verify-reference" and len(recorded["steps"]) == 12
    assert recorded["backend"]["torch"] == doc["backend"]["torch"]

    # 2. under emulation the same code fails on the apex import, and the rule is named
    code, doc = code_2, doc_2
    assert code == 1 and doc["verdict"] == "fail"
    assert doc["failure"]["type"] == "ModuleNotFoundError" and doc["failure"]["module"] == "apex"
    assert "portscan --emulate rocm" in doc["failure"]["message"]
    assert doc["likely_rules"][0]["code"] == "PS202" and doc["likely_rules"][0]["where"] == "train.py:13"
    assert doc["headline"] == "ModuleNotFoundError: apex.amp (train.py:13) — see PS202 apex-amp"
    assert "not kernels or numerics" in doc["emulation_scope"]

    # 3. the port passes N steps under emulation (command pinned in its pyproject.toml) and
    #    matches the recording step for step (FusedAdam's default is AdamW's update)
    code, doc = code_3, json.loads(out_3)
    assert code == 0 and doc["verdict"] == "pass", doc["checks"]
    assert doc["command_origin"] == "pyproject.toml [tool.portscan.verify]"
    assert len(doc["steps"]) == 12 and checks(doc)["reference"] == "pass"
    assert doc["reference"]["compared"] == 12 and doc["reference"]["outside"] == 0
    assert all(s["difference"] == 0 for s in doc["steps"])
    assert doc["emulated"]["hip"] and doc["emulated"]["capability"] == [9, 4]
    assert doc["backend"]["hip"] is None  # the real build is recorded, not the emulated one

    # 4. a perturbed learning rate is told apart, in the text report
    assert code_4 == 1
    assert re.search(r"✗ reference +\d+ of 12 steps differ from golden\.json", text)
    assert re.search(r"first divergence at step ([2-9]|1[0-2]):", text)  # step 1 precedes any update
    assert re.search(r"step +loss +reference +difference", text)
    assert re.search(r"loss +[▁▂▃▄▅▆▇█]{12} ", text) and re.search(r"ref +[▁▂▃▄▅▆▇█]{12}", text)
    assert "not kernels or numerics" in text and "FAIL: reference:" in text


def test_emulated_device_queries_and_crash_mapped_to_a_rule(capsys) -> None:
    probe = str(FIXTURES / "verify" / "cuda_probe.py")
    code, doc = verify(capsys, "--emulate", "rocm", "--", "python", probe)
    seen = "\n".join(doc["output_tail"])
    assert code == 1
    assert re.search(r"hip=6\.\d+\.\S+ cuda=None", seen)
    assert "capability=(9, 4) name=AMD Instinct MI300X" in seen
    assert "arch=gfx942:sramecc+:xnack- warp=64 sms=304" in seen
    assert re.search(r"pynvml: No module named 'pynvml' \(portscan --emulate rocm: .* see PS602\)", seen)
    assert "which nvidia-smi: None" in seen and re.search(r"nvidia-smi: 127 .*see PS601", seen)
    assert doc["failure"]["type"] == "AttributeError"
    assert doc["likely_rules"][0]["code"] == "PS401"
    assert doc["likely_rules"][0]["where"].endswith("cuda_probe.py:24")
    assert "Traceback" in doc["failure"]["traceback"]


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (waiting on it, not on a guess of how long that takes)."""
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_hang_is_killed_with_its_process_group(tmp_path: Path) -> None:
    """Ends the run when the script says it hangs (an event, not a timeout guessed to
    outlast torch's import on a loaded machine); the whole group goes, the trace stays."""
    from portscan.verify.runner import RunSpec, run_command
    from portscan.verify.trace import merge_traces

    hanging = threading.Event()
    seen: list[str] = []

    def echo(line: str) -> None:
        seen.append(line)
        if line.startswith("sleeper pid"):
            hanging.set()

    spec = RunSpec(argv=("python", TOY, "--hang-after", "2"), cwd=tmp_path, steps=50, timeout=300)
    output = run_command(spec, echo=echo, stop=hanging)
    assert output.timed_out and output.exit_status is None
    observation = merge_traces(output.traces, exit_status=None, timed_out=True, seconds=output.seconds,
                               output=output.output)
    assert [s.step for s in observation.steps] == [1, 2]  # the trace survives the kill
    sleeper = next(int(line.split()[-1]) for line in seen if line.startswith("sleeper pid"))
    assert _gone(sleeper), f"process {sleeper} outlived the run"


def test_the_timeout_kills_the_run(capsys) -> None:
    """The timeout itself, on a command that can only end by it (no torch, no race)."""
    code, doc = verify(capsys, "--timeout", "1", "--", "python", "-c", "import time; time.sleep(120)")
    assert code == 1 and doc["run"]["timed_out"] and checks(doc)["run"] == "fail"
    assert doc["run"]["seconds"] < 60


def test_sys_exit_before_the_cap(capsys) -> None:
    code, doc = verify(capsys, "--steps", "10", "--", "python", TOY, "--exit-after", "3", "--exit-code", "3")
    assert code == 1 and doc["run"]["exit_status"] == 3 and len(doc["steps"]) == 3
    assert doc["headline"] is None and "exited with status 3" in json.dumps(doc["checks"])


def test_a_nan_loss_fails(capsys) -> None:
    code, doc = verify(capsys, "--steps", "5", "--", "python", TOY, "--nan-at", "3")
    assert code == 1 and checks(doc)["finite"] == "fail"
    assert doc["steps"][2]["loss"] == "nan"
    assert doc["headline"] is None and "step 3" in json.dumps(doc["checks"])


def test_no_optimizer_step_judges_the_backward_losses(capsys) -> None:
    # the script calls sys.exit(0) after 6 of the 10 steps asked for: finishing early passes;
    # the captured backward losses are judged, not the printed output
    code, doc = verify(capsys, "--steps", "10", "--", "python", TOY, "--no-step", "--exit-after", "6")
    assert code == 0, doc["checks"]
    assert "finished after 6 backward calls" in {c["name"]: c["detail"] for c in doc["checks"]}["steps"]
    assert doc["run"]["loss_source"] == "backward" and len(doc["steps"]) == 6
    assert all(captured(doc)[step] == loss for step, loss in printed(doc).items())
    # with no backward seen at all, the printed losses are the fallback
    code, doc = verify(capsys, "--", "python", "-c", "print('loss 1.0'); print('loss 0.5')")
    assert code == 0 and doc["run"]["loss_source"] == "stdout" and len(doc["steps"]) == 2
    assert any("parsed from the output" in note for note in doc["notes"])


def test_nproc_2_on_gloo(capsys) -> None:
    code, doc = verify(capsys, "--steps", "4", "--nproc", "2", "--",
                       "python", str(FIXTURES / "verify" / "ddp_train.py"))
    assert code == 0, (doc["checks"], doc["output_tail"])
    assert doc["argv"][1:4] == ["-m", "torch.distributed.run", "--standalone"]
    assert [(r["rank"], r["steps"]) for r in doc["ranks"]] == [(0, 4), (1, 4)]
    assert any("gloo" in note for note in doc["notes"])


def test_usage_errors_exit_2(capsys, tmp_path: Path) -> None:
    assert main(["verify", "--project", str(tmp_path)]) == 2
    assert "no training entry point found" in capsys.readouterr().err
    assert main(["verify", "--against", str(tmp_path / "none.json"), "--", "python", "-c", "pass"]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["verify", "--", "no-such-program-portscan"]) == 2
    assert "cannot run" in capsys.readouterr().err
    (tmp_path / "pyproject.toml").write_text("[tool.portscan.verify]\nsteps = 0\n")
    assert main(["verify", "--project", str(tmp_path), "--", "python", "-c", "pass"]) == 2
    assert "steps: must be at least 1" in capsys.readouterr().err


def test_a_crashing_child_fails_cleanly(capsys) -> None:
    start = time.monotonic()
    code, doc = verify(capsys, "--steps", "20", "--", "python", TOY, "--crash-after", "3")
    assert time.monotonic() - start < 60
    assert code == 1 and checks(doc)["run"] == "fail"
    # steps reach the disk in batches 10 ms (APPEND_INTERVAL) apart: a hard crash loses the queued ones
    assert doc["run"]["exit_status"] != 0 and [s["step"] for s in doc["steps"]] in ([1, 2], [1, 2, 3])
    assert all(isinstance(s["loss"], float) for s in doc["steps"])


def test_megabytes_of_output_are_bounded(capsys) -> None:
    code, doc = verify(capsys, "--steps", "5", "--", "python", TOY, "--spam-mb", "24")
    assert code == 0, doc["checks"]
    assert len(doc["steps"]) == 5
    assert sum(len(line) for line in doc["output_tail"]) < 2_000_000  # a tail, not 24 MB


# -- the shapes of real training loops (issue 21) ------------------------------------------

def script(name: str) -> str:
    return str(VERIFY / name)


def test_two_optimizers_keep_their_own_losses(tmp_path: Path) -> None:
    """A GAN: the generator's loss no longer rolls into the discriminator's next step."""
    (code, doc), (code_g, doc_g) = verify_together(
        ("--project", str(tmp_path), "--steps", "4", "--", "python", script("gan.py")),
        ("--project", str(tmp_path), "--steps", "4", "--metric", "loss@2", "--", "python", script("gan.py")))
    assert code == 0, doc["checks"]
    seen = [re.match(r"iter (\d+) loss_D (\S+) loss_G (\S+)$", line) for line in doc["output_tail"]]
    printed_d = {int(m.group(1)): float(m.group(2)) for m in seen if m}
    printed_g = {int(m.group(1)): float(m.group(3)) for m in seen if m}
    assert sorted(printed_d) == [1, 2, 3]
    assert all(captured(doc)[i] == printed_d[i] for i in printed_d)
    assert all(s["backward_calls"] == 1 for s in doc["steps"])
    generator = {s["step"]: s["loss"] for s in doc["series"][0]["steps"]}
    assert doc["series"][0]["name"] == "loss@2" and all(generator[i] == printed_g[i] for i in printed_g)
    assert code_g == 0 and captured(doc_g)[1] == printed_g[1]


def test_a_closure_optimizer_reports_its_first_evaluation(capsys, tmp_path: Path) -> None:
    code, doc = verify(capsys, "--project", str(tmp_path), "--steps", "4", "--", "python", script("lbfgs.py"))
    assert code == 0, doc["checks"]
    assert sorted(printed(doc)) == [1, 2, 3]
    assert all(captured(doc)[step] == loss for step, loss in printed(doc).items())  # not a mean
    assert all(s["evaluations"] > 1 for s in doc["steps"])
    assert any("closure" in note for note in doc["notes"])


@pytest.mark.parametrize("seed", ["4", "13"])
def test_a_zero_mean_policy_gradient_loss_passes(tmp_path: Path, seed: str) -> None:
    """Seeds 4 and 13 rose by the old fitted-line rule: zero-mean noise is not a rise."""
    (code, doc), (code_reward, doc_reward) = verify_together(
        ("--project", str(tmp_path), "--steps", "30", "--", "python", script("reinforce.py"), "--seed", seed),
        ("--project", str(tmp_path), "--steps", "30", "--metric", "reward", "--maximize", "--",
         "python", script("reinforce.py"), "--seed", seed))
    assert code == 0 and checks(doc)["trend"] == "pass", doc["checks"]
    code, doc = code_reward, doc_reward
    assert code == 0 and doc["run"]["loss_source"] == "stdout" and len(doc["steps"]) >= 29, doc["checks"]


def test_manual_sgd_is_capped_and_judged_on_its_backward_losses(capsys, tmp_path: Path) -> None:
    code, doc = verify(capsys, "--project", str(tmp_path), "--steps", "15", "--",
                       "python", script("manual_sgd.py"))
    assert code == 0, doc["checks"]
    assert doc["run"]["stopped_at_cap"] and doc["run"]["loss_source"] == "backward"
    assert [s["step"] for s in doc["steps"]] == list(range(1, 16))
    assert doc["steps"][0]["loss"] > doc["steps"][-1]["loss"]  # full precision, not "1.96"
    assert doc["run"]["seconds"] < 60  # capped: the script alone runs 2000 iterations


def test_skipped_scaler_steps_are_marked_and_float64_is_kept(tmp_path: Path) -> None:
    (code, doc), (code_64, doc_64) = verify_together(
        ("--project", str(tmp_path), "--steps", "5", "--", "python", TOY, "--amp", "scaler", "--skip-at", "3"),
        ("--project", str(tmp_path), "--steps", "4", "--", "python", TOY, "--dtype", "float64"))
    assert code == 0, doc["checks"]
    assert [s["skipped"] for s in doc["steps"]] == [False, False, True, False, False]
    assert all(captured(doc)[step] == loss for step, loss in printed(doc).items())  # not merged
    code, doc = code_64, doc_64
    assert code == 0 and printed(doc) and all(captured(doc)[k] == v for k, v in printed(doc).items())


def test_a_run_kept_alive_after_the_cap_is_stopped_promptly(capsys, tmp_path: Path, monkeypatch) -> None:
    """The script waits for a helper at exit (as RPC workers do): stopped seconds after
    the cap, not at the 300 s timeout, and it passes. (A shorter grace than the default
    5 s: this script never ends by itself, so any grace ends it the same way.)"""
    from portscan.verify import runner

    monkeypatch.setattr(runner, "CAP_GRACE", 1.0)
    code, doc = verify(capsys, "--project", str(tmp_path), "--steps", "3", "--timeout", "300", "--",
                       "python", TOY, "--linger")
    assert code == 0 and doc["run"]["stopped_at_cap"] and not doc["run"]["timed_out"], doc["checks"]
    assert doc["run"]["seconds"] < 100
    assert "kept the run alive" in {c["name"]: c["detail"] for c in doc["checks"]}["run"]
    helper = next(int(line.split()[-1]) for line in doc["output_tail"] if line.startswith("helper pid"))
    assert _gone(helper)


def test_ctrl_c_prints_the_steps_so_far(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "portscan", "verify", "--project", str(tmp_path), "--steps", "500",
         "--show-output", "--format", "json", "--", "python", TOY, "--hang-after", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ,
        # a background job of a non-interactive shell (CI) inherits SIGINT ignored; a user's
        # terminal delivers it, so the child gets the default disposition back
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert process.stderr is not None
    for line in process.stderr:  # wait for the event: the script says it hangs
        if line.startswith("sleeper pid"):
            break
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 130
    doc = json.loads(out)
    assert [s["step"] for s in doc["steps"]] == [1, 2, 3] and checks(doc)["run"] == "fail"
    assert "interrupted" in {c["name"]: c["detail"] for c in doc["checks"]}["run"]


def test_against_catches_a_1_2x_learning_rate_and_passes_reruns(tmp_path: Path) -> None:
    regress = script("regress.py")
    project = tmp_path / "project"  # the references lie outside it: no run sees another's file appear
    project.mkdir()
    golden, band = tmp_path / "golden.json", tmp_path / "band.json"
    in_project = ("--project", str(project))
    # two chains at once: one run and three compared with it; three recorded runs and one compared with them
    (recorded_one, rerun, faster, seed_7), (recorded_band, seed_7_in_band) = verify_chains(
        [(*in_project, "--record", str(golden), "--", "python", regress),
         (*in_project, "--against", str(golden), "--", "python", regress),
         (*in_project, "--against", str(golden), "--format", "text", "--", "python", regress, "--lr", "0.06"),
         (*in_project, "--against", str(golden), "--", "python", regress, "--seed", "7")],
        [(*in_project, "--record", str(band), "--repeats", "3", "--", "python", regress),
         (*in_project, "--against", str(band), "--", "python", regress, "--seed", "7")])
    code, doc = recorded_one[0], json.loads(recorded_one[1])
    assert code == 0 and doc["recorded"]
    # a same-seed rerun matches exactly
    code, doc = rerun[0], json.loads(rerun[1])
    assert code == 0 and doc["reference"]["outside"] == 0, doc["checks"]
    assert not [n for n in doc["notes"] if n.startswith("warning")]
    # a 1.2x learning rate fails and names the step, with both values
    code, text = faster
    assert code == 1
    divergence = re.search(r"first divergence at step (\d+): (\S+) vs (\S+) ", text)
    assert divergence and int(divergence.group(1)) >= 2 and divergence.group(2) != divergence.group(3)
    assert "warning: the reference ran another command" in text
    # another seed fails against one run, passes against three recorded with other seeds
    assert seed_7[0] == 1
    code, doc = recorded_band[0], json.loads(recorded_band[1])
    assert code == 0 and doc["repeats"] == 3, doc["notes"]
    recorded = json.loads(band.read_text())
    assert recorded["repeats"] == 3 and len(recorded["steps"][0]["runs"]) == 3
    assert recorded["commands"][1][-2:] == ["--seed", "1"] and recorded["capture"] == "hooks"
    code, doc = seed_7_in_band[0], json.loads(seed_7_in_band[1])
    assert code == 0, doc["checks"]


def test_without_torch_these_tests_skip_with_the_reason(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    env = {**os.environ, "PYTHONPATH": str(hide)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-n", "0",
                           __file__], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "torch is not installed" in done.stdout and " passed" not in done.stdout
