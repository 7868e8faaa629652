"""`portscan fix`: the loop's guarantees, file handling, the CLI, and the proof on the
bundled repositories (fixed, rescanned, compiled, and trained on CPU)."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import libcst as cst
import pytest

from portscan.cli import main
from portscan.fix import apply as apply_module
from portscan.fix import engine
from portscan.fix.apply import fix_paths, write_atomic, FileChangedError
from portscan.fix.engine import fix_source
from portscan.fix.rewrite import Edit
from portscan.match import fixsites
from portscan.model import ScanResult
from portscan.scan import declares_extensions, scan_paths, scan_source

from conftest import FIXTURE, REPO, SMOKE_TRAINING

MNIST = REPO / "fixtures" / "mnist-apex"
MNIST_PORTED = REPO / "fixtures" / "mnist-apex-ported"
TRAINING_PATH = ("train.py", "models/__init__.py", "models/vit.py", "utils/__init__.py", "utils/amp.py",
                 "utils/gpu.py")


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def copy(tree: Path, tmp_path: Path) -> Path:
    target = tmp_path / tree.name
    shutil.copytree(tree, target)
    return target


def start_training(root: Path, *args: str, script: str = "train.py") -> subprocess.Popen[str]:
    """``python train.py ARGS`` in ``root`` on the CPU, started: independent runs of one
    test overlap (each is mostly torch's import)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.Popen([sys.executable, script, *args], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def finished(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def run_training(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return finished(start_training(root, *args))


# ----------------------------------------------------------------------------- the proof


#: the fixture's training needs torch (the CPU build in the test extras), not apex
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed: the training runs need it")


def require_current_torch(repo: Path) -> None:
    """What a port does to the fixture's requirements first: a torch with ROCm wheels and
    the `torch.amp` API (still a CUDA build pin, PS801, so the findings stay the same)."""
    for name, old, new in (("setup.py", '"torch>=1.13"', '"torch>=2.4"'),
                           ("pyproject.toml", "torch==1.13.1+cu117", "torch==2.4.1+cu121"),
                           ("requirements.txt", "torch==1.13.1+cu117", "torch==2.4.1+cu121")):
        text = (repo / name).read_text()
        assert old in text, name
        (repo / name).write_text(text.replace(old, new))


@needs_torch
def test_the_fixture_trains_on_cpu_only_after_the_fixes(tmp_path: Path) -> None:
    """The README's claim: once the requirements allow a current torch only, SMOKE_TRAINING
    trains after `portscan fix --unsafe-fixes`."""
    import torch

    if torch.version.cuda is not None:  # the GPU is hidden from the run (CUDA_VISIBLE_DEVICES="")
        pytest.skip("a CUDA build of torch: the fixture's gpu_summary asks torch.version.cuda, as CUDA-era "
                    "code does, and calls get_device_name with no GPU visible; the claim is about the CPU build")
    repo = copy(FIXTURE, tmp_path)
    require_current_torch(repo)
    running = start_training(copy(FIXTURE, tmp_path / "unfixed"), *SMOKE_TRAINING)  # while `repo` is fixed
    assert main(["fix", "--unsafe-fixes", str(repo)]) == 1  # findings remain to port by hand
    trained = run_training(repo, *SMOKE_TRAINING)
    unfixed = finished(running)
    assert unfixed.returncode != 0 and "No module named 'apex'" in unfixed.stderr
    assert trained.returncode == 0, trained.stderr
    assert "stopped after 2 steps" in trained.stdout


def test_fixture_fix_proof(tmp_path: Path, rules, capsys) -> None:
    repo = copy(FIXTURE, tmp_path)
    before_scan = scan_paths([repo], rules)
    original = snapshot(repo)

    # --diff prints a patch, writes nothing, exits 1
    assert main(["fix", "--diff", str(repo)]) == 1
    out = capsys.readouterr()
    assert "+++ b/utils/gpu.py" in out.out and "except ImportError:" in out.out
    assert "Would fix" in out.err
    assert snapshot(repo) == original

    # safe fixes only: apex stays, the guarded imports land; the summary says why the
    # count rises (the uses of a guarded import are listed under its finding, a warning,
    # not reported one by one; the code the fixes wrote adds one)
    main(["fix", str(repo)])
    summary = capsys.readouterr().out
    safe = scan_paths([repo], rules)
    added = len(safe.findings) - len(before_scan.findings)
    assert (len(before_scan.findings), added) == (75, 1)
    assert "1 more finding in the fixed files than before: 1 on code the fixes wrote (PS402)" in summary
    guarded_imports = [f for f in safe.findings if f.rule in ("PS101", "PS102", "PS602") and f.guard == "fallback"]
    assert guarded_imports and all(f.severity.value == "warning" for f in guarded_imports)
    # `trt.__version__` in a message and the constant `trt.Logger.WARNING` are no uses
    assert sum(len(f.uses) for f in guarded_imports) == 7
    assert "from apex import amp" in (repo / "train.py").read_text()
    assert "except ImportError:" in (repo / "utils/gpu.py").read_text()

    # the fixture allows torch 1.13, which has no torch.amp.GradScaler: apex amp becomes
    # torch.cuda.amp's scaler (and torch.amp's autocast, 1.12); RMSNorm (2.4) stays apex's
    safe_tree = snapshot(repo)
    main(["fix", "--unsafe-fixes", "--diff", str(repo)])
    declined = capsys.readouterr()
    assert '+        scaler = torch.cuda.amp.GradScaler(enabled=cfg["opt_level"] != "O0")' in declined.out
    assert 'with torch.amp.autocast("cuda", dtype=torch.float16, enabled=scaler.is_enabled()):' in declined.out
    assert "`torch.nn.RMSNorm` needs torch >= 2.4; the project allows torch 1.13 (setup.py:37)" in declined.err
    assert snapshot(repo) == safe_tree

    # unsafe fixes, once the requirements allow a current torch only: no apex import left
    # anywhere on the training path
    require_current_torch(repo)
    main(["fix", "--unsafe-fixes", "--show-fixes", str(repo)])
    out = capsys.readouterr().out
    assert "train.py: PS209, PS216, PS218, PS222, PS223" in out
    for name in TRAINING_PATH:
        tree = ast.parse((repo / name).read_text())
        imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + \
                   [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m.split(".")[0] == "apex"], name

    # every Python file compiles
    for path in repo.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")

    # rescan: what the fixes claim is gone; what is manual remains
    after = scan_paths([repo], rules)
    def unguarded(result, code):
        return sum(1 for f in result.findings if f.rule == code and f.guard is None)
    for code in ("PS209", "PS210", "PS211", "PS216", "PS218", "PS222", "PS223"):
        assert unguarded(before_scan, code) > 0 and unguarded(after, code) == 0, code
    # the version comparison is guarded; the two places that use the version as a value
    # read the HIP version on ROCm (unsafe)
    assert (unguarded(before_scan, "PS401"), unguarded(after, "PS401")) == (3, 0)
    assert 'int(x) for x in (".".join(torch.version.hip.split(".")[:2]) if torch.version.hip else ' \
        'torch.version.cuda).split(".")[:2]' in (repo / "setup.py").read_text()
    for code in ("PS101", "PS102", "PS602"):  # imports guarded, warnings that list their uses
        guarded_imports = [f for f in after.findings if f.rule == code and f.span.line <= 10]
        assert {f.guard for f in guarded_imports} == {"fallback"}
        assert {f.severity.value for f in guarded_imports} == {"warning"}
        assert any(f.uses for f in guarded_imports), code
    for code in ("PS301", "PS503", "PS910"):
        assert unguarded(after, code) == unguarded(before_scan, code) > 0, code
    # SM gates (and the FlashAttention-3 import under one), nvcc-only flags and the toolkit
    # check: NVIDIA's path kept, ROCm's added (guarded)
    for code in ("PS501", "PS502", "PS702", "PS404", "PS902", "PS903", "PS904"):
        assert unguarded(before_scan, code) > 0 and unguarded(after, code) == 0, code
    # the CUDA wheel pins and index in requirements.txt and pyproject.toml became ROCm ones
    for code in ("PS801", "PS802"):
        assert unguarded(before_scan, code) > 0 and unguarded(after, code) == 0, code
    requirements = (repo / "requirements.txt").read_text()
    assert "+rocm" in requirements and "+cu" not in requirements
    assert "download.pytorch.org/whl/rocm" in requirements

    # a second run is a no-op
    fixed = snapshot(repo)
    main(["fix", "--unsafe-fixes", str(repo)])
    assert "Nothing to fix" in capsys.readouterr().out
    assert snapshot(repo) == fixed


@needs_torch
def test_auto_fixed_mnist_trains_like_the_hand_port(tmp_path: Path) -> None:
    repo = copy(MNIST, tmp_path)
    run = fix_paths([repo], _rules(), unsafe=True)
    assert sorted(a.rule for f in run.files for a in f.applied) == ["PS209", "PS216", "PS218"]
    assert run.after.findings == ()
    running = [start_training(repo, "--steps", "30"), start_training(MNIST_PORTED, "--steps", "30")]
    fixed, ported = (finished(p) for p in running)
    assert fixed.returncode == 0 and ported.returncode == 0, fixed.stderr
    losses = [float(line.split()[-1]) for line in fixed.stdout.splitlines() if line.startswith("step")]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert fixed.stdout == ported.stdout  # same seeds, same maths: identical on CPU


def _rules():
    from portscan.ruleset.loader import load_rules

    return load_rules()


# ----------------------------------------------------------------------------- the loop


AMP_SOURCE = "import torch\n\nscaler = torch.cuda.amp.GradScaler()  # keep me\nx  =  [1,2]\n"


def test_formatting_and_unrelated_lines_are_kept(rules) -> None:
    source = ("import torch\n# a comment\nx = (1 +\n     2)   # odd spacing\n"
              "scaler = torch.cuda.amp.GradScaler(\n    init_scale=1024,  # why\n)\n"
              "y  =  [ 1,2 ]\n")
    result = fix_source(source, "a.py", rules)
    assert result.fixed == source.replace("torch.cuda.amp.GradScaler(\n", 'torch.amp.GradScaler(\n    "cuda",\n')
    assert [a.rule for a in result.applied] == ["PS316"]


def test_guarded_findings_are_not_rewritten(rules) -> None:
    source = ("import torch\n\nif torch.version.hip:\n    pass\nelse:\n"
              "    v = int(torch.version.cuda.split('.')[0])\n")
    assert not fix_source(source, "a.py", rules, unsafe=True).changed


def test_unsafe_fixes_need_the_flag(rules) -> None:
    source = "from apex.optimizers import FusedSGD\nopt = FusedSGD(params, 0.1, set_grad_none=True)\n"
    safe = fix_source(source, "a.py", rules)
    assert not safe.changed and [n.rule for n in safe.not_fixed] == ["PS213"]
    assert "--unsafe-fixes" in safe.not_fixed[0].reason
    assert "torch.optim.SGD(params, 0.1)" in fix_source(source, "a.py", rules, unsafe=True).fixed


def test_a_fix_that_breaks_the_code_is_reverted(rules, monkeypatch) -> None:
    def broken(ctx, match, spec):
        return Edit(match.node, cst.Name("lambda"), match, spec.tier)

    monkeypatch.setitem(engine.TEMPLATES, "replace", broken)
    result = fix_source(AMP_SOURCE, "a.py", rules)
    assert result.fixed == AMP_SOURCE and not result.changed
    assert result.error is not None and "does not parse" in result.error


def test_a_fix_that_never_settles_is_reverted(rules, monkeypatch) -> None:
    def grow(ctx, match, spec):
        return Edit(match.node, cst.parse_expression("torch.cuda.amp.GradScaler"), match, spec.tier)

    def renamed(ctx, match, spec):  # each pass adds a wrapper: never the same text twice
        node = match.node
        return Edit(node, cst.Call(cst.Name("wrap"), [cst.Arg(node)]), match, spec.tier)

    monkeypatch.setitem(engine.TEMPLATES, "replace", renamed)
    monkeypatch.setattr(fixsites, "replace_declined", lambda match, spec, parent, *_: None)  # every site, always
    result = fix_source(AMP_SOURCE, "a.py", rules)
    assert not result.changed and "did not settle" in (result.error or "")


def test_a_crashing_fix_leaves_the_file(rules, monkeypatch) -> None:
    def crash(ctx, match, spec):
        raise RuntimeError("boom")

    monkeypatch.setitem(engine.TEMPLATES, "replace", crash)
    result = fix_source(AMP_SOURCE, "a.py", rules)
    assert not result.changed and "boom" in (result.error or "")


def test_unparsable_input_is_reported_not_fixed(tmp_path: Path, rules) -> None:
    (tmp_path / "bad.py").write_text("import torch\nscaler = torch.cuda.amp.GradScaler(\n")
    (tmp_path / "good.py").write_text(AMP_SOURCE)
    run = fix_paths([tmp_path], rules)
    assert [f.path for f in run.changed] == ["good.py"]
    assert [(e.path, e.kind) for e in run.after.errors] == [("bad.py", "parse")]
    assert (tmp_path / "bad.py").read_text().endswith("GradScaler(\n")


# ----------------------------------------------------------------------------- files


def test_encoding_bom_and_line_endings_are_kept(tmp_path: Path, rules) -> None:
    crlf = AMP_SOURCE.replace("\n", "\r\n")
    cases = {
        "bom.py": b"\xef\xbb\xbf" + crlf.encode(),
        "latin.py": ("# -*- coding: latin-1 -*-\r\n# café\r\n" + crlf).encode("latin-1"),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    old_mac = AMP_SOURCE.replace("\n", "\r").encode()  # LibCST cannot round-trip lone CRs
    (tmp_path / "cr.py").write_bytes(old_mac)
    run = fix_paths([tmp_path], rules)
    for name, data in cases.items():
        new = (tmp_path / name).read_bytes()
        assert new == data.replace(b"torch.cuda.amp.GradScaler()", b'torch.amp.GradScaler("cuda")'), name
    assert (tmp_path / "cr.py").read_bytes() == old_mac
    assert [(e.path, e.kind) for e in run.errors] == [("cr.py", "fix")]


def test_writes_are_atomic_and_keep_the_mode(tmp_path: Path, rules) -> None:
    path = tmp_path / "train.py"
    path.write_text(AMP_SOURCE)
    path.chmod(0o640)
    fix_paths([tmp_path], rules)
    assert "torch.amp.GradScaler" in path.read_text()
    assert (path.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]  # no temporary left


def test_a_file_changed_meanwhile_is_skipped(tmp_path: Path, rules, monkeypatch) -> None:
    path = tmp_path / "train.py"
    path.write_text(AMP_SOURCE)
    real = apply_module.fix_source

    def edit_meanwhile(*args, **kwargs):
        result = real(*args, **kwargs)
        path.write_text(AMP_SOURCE + "# edited by someone else\n")
        return result

    monkeypatch.setattr(apply_module, "fix_source", edit_meanwhile)
    run = fix_paths([tmp_path], rules)
    assert path.read_text().endswith("# edited by someone else\n")
    assert [e.kind for e in run.errors] == ["write"] and "changed on disk" in run.errors[0].message
    with pytest.raises(FileChangedError):
        write_atomic(path, b"x", b"something else")


def test_symlinks_are_not_replaced(tmp_path: Path, rules) -> None:
    real = tmp_path / "real" / "train.py"
    real.parent.mkdir()
    real.write_text(AMP_SOURCE)
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").symlink_to(real)
    run = fix_paths([project / "train.py"], rules)
    assert (project / "train.py").is_symlink() and real.read_text() == AMP_SOURCE
    assert "symbolic link" in run.errors[0].message


# ----------------------------------------------------------------------------- CLI


def test_cli_exit_codes_and_selection(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.py").write_text(AMP_SOURCE + "from apex.optimizers import FusedSGD\n"
                                   "opt = FusedSGD(p, 0.1, set_grad_none=True)\n")
    assert main(["fix", "--diff", "--select", "PS2", str(tmp_path)]) == 0  # PS213 is unsafe: no diff
    assert capsys.readouterr().out == ""
    assert main(["fix", "--diff", "--ignore", "PS316", "--unsafe-fixes", str(tmp_path)]) == 1
    diff = capsys.readouterr().out
    assert "torch.optim.SGD" in diff and "torch.amp.GradScaler" not in diff
    assert main(["fix", "--select", "PS9X", str(tmp_path)]) == 2
    assert "matches no rule" in capsys.readouterr().err
    assert main(["fix", str(tmp_path / "missing")]) == 2
    assert main(["fix", "--unsafe-fixes", str(tmp_path)]) == 0  # everything fixed, nothing remains
    assert "No findings remain" in capsys.readouterr().out


def test_rules_and_explain_show_fix_tiers(capsys) -> None:
    main(["rules"])
    table = capsys.readouterr().out
    assert any("PS316" in line and "safe" in line for line in table.splitlines())
    assert any("PS209" in line and "unsafe" in line for line in table.splitlines())
    main(["explain", "PS209"])
    page = capsys.readouterr().out
    assert "Fix" in page and "unsafe" in page and "weight_decay=0.0" in page


HIP = '(".".join(torch.version.hip.split(".")[:2]) if torch.version.hip else torch.version.cuda)'


@pytest.mark.parametrize(("line", "fixed", "tier"), [
    ('ok = tuple(int(v) for v in torch.version.cuda.split(".")[:2]) >= (12, 4)',
     'ok = torch.version.cuda is not None and tuple(int(v) for v in torch.version.cuda.split(".")[:2]) >= (12, 4)',
     "safe"),
    # only one branch needs a guard, so none is written: the value itself gets the HIP form
    ('ok = f((a if c else torch.version.cuda.split("."))) == b',
     f'ok = f((a if c else {HIP}.split("."))) == b', "unsafe"),
    ('ok = any(p == "12" for p in torch.version.cuda.split("."))',  # no comparison around it
     f'ok = any(p == "12" for p in {HIP}.split("."))', "unsafe"),
    ('major = int(torch.version.cuda.split(".")[0])',  # the value itself is used
     f'major = int({HIP}.split(".")[0])', "unsafe"),
    ('V = torch.version.cuda\nmajor = int(V.split(".")[0])', None, None),  # carried by a name
])
def test_cuda_version_guard_only_where_it_keeps_meaning(rules, line: str, fixed: str | None, tier: str | None
                                                        ) -> None:
    source = f"import torch\n{line}\n"
    result = fix_source(source, "a.py", rules.select(["PS401"]), unsafe=True)
    assert result.fixed == (source if fixed is None else f"import torch\n{fixed}\n")
    if fixed is None:
        assert result.not_fixed, "a declined site must say why"
    else:
        assert {a.tier.value for a in result.applied} == {tier}
    # the scan decides the same per site, with the site's tier
    marked = [f.fix for f in scan_source(source, "a.py", rules.select(["PS401"]))]
    assert marked == [tier] * len(marked)
    assert marked, "the line is reported either way"


def test_a_replace_fix_that_declines_a_site_is_not_marked(rules) -> None:
    """``isinstance(opt, FusedAdam)`` is not a call (and FusedAdam's rewrite may pick Adam or
    AdamW, so it is not renamed): the scan marks neither it nor the call ``[unsafe fix]``,
    as rewriting only the call would split the module, and fix --unsafe-fixes declines
    both with the scan's reasons."""
    source = "from apex.optimizers import FusedAdam\nok = isinstance(opt, FusedAdam)\nopt = FusedAdam(params)\n"
    marked = {f.span.line: f.fix for f in scan_source(source, "a.py", rules.select(["PS209"]))}
    assert marked == {2: None, 3: None}
    result = fix_source(source, "a.py", rules.select(["PS209"]), unsafe=True)
    assert not result.applied and not result.changed
    assert [(n.line, n.reason) for n in result.not_fixed] == [
        (2, "only calls are rewritten; this use is not called"),
        (3, "`FusedAdam` at line 2 stays as it is, so it would no longer mean what this call builds; "
            "port the module's uses together by hand")]
    alone = fix_source(source.replace("ok = isinstance(opt, FusedAdam)\n", ""), "a.py", rules.select(["PS209"]),
                       unsafe=True)
    assert [a.rule for a in alone.applied] == ["PS209"]


def test_not_fixed_lines_are_those_of_the_input(rules) -> None:
    """A guard-import fix adds lines above a declined site; the message keeps the line
    the user reads in the file as it was (``--diff`` included: nothing is written)."""
    source = "import pynvml\nimport torch\n\nmajor = int(torch.version.cuda[0])\n"
    result = fix_source(source, "a.py", rules.select(["PS602", "PS401"]))
    assert result.changed and result.fixed.count("\n") > source.count("\n")
    assert [(n.rule, n.line) for n in result.not_fixed] == [("PS401", 4)]


@pytest.fixture(scope="module")
def fixture_scans(rules) -> Callable[[str], ScanResult]:
    """The scan of ``fixtures/NAME``, made once for the module (the fixtures do not change)."""
    return functools.cache(lambda name: scan_paths([REPO / "fixtures" / name], rules))


@pytest.mark.parametrize("fixture", sorted(p.name for p in (REPO / "fixtures").iterdir() if p.is_dir()))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix_markers_equal_what_fix_applies(tmp_path: Path, rules, fixture_scans, fixture: str, unsafe: bool) -> None:
    """On every fixture, the findings a scan marks fixable (file, rule and line) are
    exactly those ``portscan fix`` (``--unsafe-fixes``) applies."""
    root = REPO / "fixtures" / fixture
    tiers = {"safe", "unsafe"} if unsafe else {"safe"}
    marked = Counter((f.path, f.rule, f.span.line) for f in fixture_scans(fixture).findings if f.fix in tiers)
    run = fix_paths([copy(root, tmp_path)], rules, unsafe=unsafe, write=False)
    applied = Counter((f.path, a.rule, a.line) for f in run.files for a in f.applied)
    assert applied == marked


@pytest.mark.parametrize("fixture", sorted(p.name for p in (REPO / "fixtures").iterdir() if p.is_dir()))
def test_fix_reports_what_a_fresh_scan_of_its_result_finds(tmp_path: Path, rules, fixture: str) -> None:
    """``fix`` takes the fixed files' findings from the engine's last pass instead of
    scanning them again: they are those a scan of the written tree finds."""
    root = copy(REPO / "fixtures" / fixture, tmp_path)
    run = fix_paths([root], rules, unsafe=True)
    # a file that declares extensions (setup.py) is scanned again with the project's other
    # files, so only its findings may be missing
    assert all(f.findings is not None or declares_extensions("python", f.fixed) for f in run.files)
    assert run.after == scan_paths([root], rules)


@pytest.mark.parametrize("source", [
    "import torch\nscaler = torch.amp.GradScaler(device=d) if NEW else torch.cuda.amp.GradScaler()\n",
    "import torch\ntry:\n    s = torch.amp.GradScaler(device=d)\nexcept AttributeError:\n"
    "    s = torch.cuda.amp.GradScaler()\n",
])
def test_compatibility_shims_for_old_torch_are_left_alone(rules, source: str) -> None:
    result = fix_source(source, "a.py", rules.select(["PS316"]))
    assert not result.changed and result.not_fixed


def test_a_guarded_apex_import_left_empty_goes_away(rules) -> None:
    source = ("import torch\n\ndef main(args, model, optimizer, loader):\n    if args.fp16:\n"
              "        try:\n            from apex import amp\n        except ImportError:\n"
              "            raise ImportError(\"Please install apex\")\n"
              "        model, optimizer = amp.initialize(model, optimizer, opt_level=args.level)\n"
              "    for x in loader:\n        loss = model(x)\n        if args.fp16:\n"
              "            with amp.scale_loss(loss, optimizer) as scaled:\n                scaled.backward()\n"
              "        else:\n            loss.backward()\n        optimizer.step()\n")
    fixed = fix_source(source, "a.py", rules, unsafe=True).fixed
    assert "try:" not in fixed and "apex" not in fixed
    assert "    if args.fp16:\n        scaler = torch.amp.GradScaler(\"cuda\", enabled=args.level != \"O0\")\n" in fixed
    compile(fixed, "a.py", "exec")


def test_amp_in_a_closure_of_the_initializing_function(rules) -> None:
    source = ("from apex import amp\n\ndef train(model, optimizer, loader):\n"
              "    model, optimizer = amp.initialize(model, optimizer)\n\n    def update(batch):\n"
              "        loss = model(batch).sum()\n        with amp.scale_loss(loss, optimizer) as s:\n"
              "            s.backward()\n        optimizer.step()\n\n    for batch in loader:\n        update(batch)\n")
    fixed = fix_source(source, "a.py", rules, unsafe=True).fixed
    assert "    scaler = torch.amp.GradScaler(\"cuda\")\n" in fixed
    assert "        scaler.scale(loss).backward()\n        scaler.step(optimizer)\n" in fixed


def test_a_comment_does_not_make_a_compatibility_branch(rules) -> None:
    source = ("from apex.parallel import DistributedDataParallel as DDP\nif distributed:\n"
              "    # model = torch.nn.parallel.DistributedDataParallel(model)\n    model = DDP(model)\n")
    fixed = fix_source(source, "a.py", rules, unsafe=True).fixed
    assert "    model = torch.nn.parallel.DistributedDataParallel(model)\n" in fixed


def test_a_guarded_import_lists_its_uses_after_fixing(tmp_path: Path, rules) -> None:
    import io

    from rich.console import Console

    from portscan.report.fixes import render_fix_summary

    source = "import pynvml\n\ndef count():\n    pynvml.nvmlInit()\n    return pynvml.nvmlDeviceGetCount()\n"
    (tmp_path / "gpu.py").write_text(source)
    assert len(scan_paths([tmp_path], rules).findings) == 1  # the import fails first
    run = fix_paths([tmp_path], rules)
    # the uses of the now guarded import are listed under its finding, not added to the count
    assert run.added == ()
    [after] = run.after.findings
    assert (after.guard, after.severity.value, after.uses) == ("fallback", "warning", ((7, 5), (8, 12)))
    out = io.StringIO()
    render_fix_summary(run, Console(file=out, width=10_000), wrote=True, show_fixes=False)
    assert "more finding" not in out.getvalue()


def test_an_import_used_at_import_time_is_neither_marked_nor_guarded(rules) -> None:
    """guard-import declines where the name runs when the module is imported; the scan
    decides the same, so `[fix]` is not promised (it was, before the decision moved)."""
    source = ("import pynvml\nimport tensorrt\n\nHANDLE_TYPE = pynvml.c_nvmlDevice_t\n\n"
              "def build(onnx):\n    return tensorrt.Builder(tensorrt.Logger())\n")
    marks = {f.span.line: f.fix for f in scan_source(source, "gpu.py", rules) if f.span.line <= 2}
    assert marks == {1: None, 2: "safe"}
    result = fix_source(source, "gpu.py", rules)
    assert [n.reason for n in result.not_fixed if n.line == 1] == [
        "`pynvml` is used at import time (`HANDLE_TYPE = pynvml.c_nvmlDevice_t`), not only inside functions"]
    assert "try:\n    import tensorrt\nexcept ImportError:" in result.fixed
    assert "try:\n    import pynvml" not in result.fixed
