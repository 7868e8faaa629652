"""`portscan verify` end to end: small real training scripts run under CPU torch.

Each test starts the real command as a child process with the runtime injected, so
these fail when step capping, loss capture, emulation, timeouts or torchrun break.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import pytest

from portscan.cli import main

from conftest import REPO

FIXTURES = REPO / "fixtures"
TOY = str(FIXTURES / "verify" / "toy_train.py")
STUBS = FIXTURES / "verify" / "stubs"  # a CPU stand-in for NVIDIA apex's Python API
LEFTOVER = re.compile(r"^(portscan-verify-|torchelastic_|pymp-)")


def tree(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns for p in root.rglob("*")
            if "__pycache__" not in p.parts}


@pytest.fixture(scope="module", autouse=True)
def nothing_left_behind():
    """No run may change the fixtures or leave anything in the temporary directory."""
    tmp = Path(tempfile.gettempdir())
    before_tmp = {p.name for p in tmp.iterdir() if LEFTOVER.match(p.name)}
    before = tree(FIXTURES)
    yield
    assert tree(FIXTURES) == before
    assert {p.name for p in tmp.iterdir() if LEFTOVER.match(p.name)} <= before_tmp


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


def printed(document: dict) -> dict[int, float]:
    """``step S loss L`` lines the script printed itself."""
    found = (re.match(r"step (\d+) loss (\S+)$", line) for line in document["output_tail"])
    return {int(m.group(1)): float(m.group(2)) for m in found if m}


def captured(document: dict) -> dict[int, float]:
    return {s["step"]: s["loss"] for s in document["steps"]}


def checks(document: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in document["checks"]}


def test_step_cap_with_dataloader_workers(capsys) -> None:
    code, doc = verify(capsys, "--steps", "5", "--", "python", TOY, "--workers", "2")
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


def test_the_port_end_to_end(capsys, monkeypatch, tmp_path: Path) -> None:
    """The issue's done criterion, on the fixture repository and its hand-ported twin."""
    monkeypatch.setenv("PYTHONPATH", str(STUBS))  # as on a CUDA machine with apex installed
    unfixed, ported = str(FIXTURES / "mnist-apex"), str(FIXTURES / "mnist-apex-ported")
    golden = tmp_path / "golden.json"

    # 1. without emulation the apex code trains (its README command is discovered): record it
    code, doc = verify(capsys, "--project", unfixed, "--steps", "12", "--record", str(golden))
    assert code == 0 and doc["recorded"] == str(golden), doc["checks"]
    assert doc["command"] == ["python", "train.py", "--steps", "200"]
    assert doc["command_origin"].startswith("README.md:9")
    recorded = json.loads(golden.read_text())
    assert recorded["format"] == "portscan-verify-reference" and len(recorded["steps"]) == 12
    assert recorded["backend"]["torch"] == doc["backend"]["torch"]

    # 2. under emulation the same code fails on the apex import, and the rule is named
    code, doc = verify(capsys, "--project", unfixed, "--steps", "12", "--emulate", "rocm")
    assert code == 1 and doc["verdict"] == "fail"
    assert doc["failure"]["type"] == "ModuleNotFoundError" and doc["failure"]["module"] == "apex"
    assert "portscan --emulate rocm" in doc["failure"]["message"]
    assert doc["likely_rules"][0]["code"] == "PS202" and doc["likely_rules"][0]["where"] == "train.py:13"
    assert doc["headline"] == "ModuleNotFoundError: apex.amp (train.py:13) — see PS202 apex-amp"
    assert "not kernels or numerics" in doc["emulation_scope"]

    # 3. the port passes N steps under emulation (command pinned in its pyproject.toml) and
    #    matches the recording step for step (FusedAdam's default is AdamW's update)
    code, doc = verify(capsys, "--project", ported, "--steps", "12", "--emulate", "rocm",
                       "--against", str(golden))
    assert code == 0 and doc["verdict"] == "pass", doc["checks"]
    assert doc["command_origin"] == "pyproject.toml [tool.portscan.verify]"
    assert len(doc["steps"]) == 12 and checks(doc)["reference"] == "pass"
    assert doc["reference"]["compared"] == 12 and doc["reference"]["outside"] == 0
    assert all(s["difference"] == 0 for s in doc["steps"])
    assert doc["emulated"]["hip"] and doc["emulated"]["capability"] == [9, 4]
    assert doc["backend"]["hip"] is None  # the real build is recorded, not the emulated one

    # 4. a perturbed learning rate is told apart, in the text report
    code = main(["verify", "--project", ported, "--steps", "12", "--emulate", "rocm",
                 "--against", str(golden), "--", "python", "train.py", "--lr", "0.003"])
    text = capsys.readouterr().out
    assert code == 1
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


def test_a_hang_is_killed_with_its_process_group(capsys) -> None:
    start = time.monotonic()
    code, doc = verify(capsys, "--timeout", "4", "--steps", "50", "--", "python", TOY, "--hang-after", "2")
    assert time.monotonic() - start < 30
    assert code == 1 and doc["run"]["timed_out"] and checks(doc)["run"] == "fail"
    assert [s["step"] for s in doc["steps"]] == [1, 2]  # the trace survives the kill
    sleeper = next(int(line.split()[-1]) for line in doc["output_tail"] if line.startswith("sleeper pid"))
    for _ in range(50):  # the grandchild was in the group: gone once init reaps it
        try:
            os.kill(sleeper, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"process {sleeper} outlived the timeout")


def test_sys_exit_before_the_cap(capsys) -> None:
    code, doc = verify(capsys, "--steps", "10", "--", "python", TOY, "--exit-after", "3", "--exit-code", "3")
    assert code == 1 and doc["run"]["exit_status"] == 3 and len(doc["steps"]) == 3
    assert doc["headline"] is None and "exited with status 3" in json.dumps(doc["checks"])


def test_a_nan_loss_fails(capsys) -> None:
    code, doc = verify(capsys, "--steps", "5", "--", "python", TOY, "--nan-at", "3")
    assert code == 1 and checks(doc)["finite"] == "fail"
    assert doc["steps"][2]["loss"] == "nan"
    assert doc["headline"] is None and "step 3" in json.dumps(doc["checks"])


def test_no_optimizer_step_falls_back_to_the_output(capsys) -> None:
    # the script calls sys.exit(0) after 6 of the 10 steps asked for: finishing early passes
    code, doc = verify(capsys, "--steps", "10", "--", "python", TOY, "--no-step", "--exit-after", "6")
    assert code == 0, doc["checks"]
    assert "finished after 6" in {c["name"]: c["detail"] for c in doc["checks"]}["steps"]
    assert doc["run"]["loss_source"] == "stdout" and len(doc["steps"]) == 6
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
