"""The fix engine on large inputs: the pieces that were quadratic in the number of
lines or findings (issue 18, item 3), checked by what they compute, not by time."""

from __future__ import annotations

import difflib
import random

import libcst as cst
import pytest

from portscan.fix import linediff
from portscan.parse import parse_python


def _apply(a: list[str], b: list[str], opcodes: list[linediff.Opcode]) -> list[str]:
    out: list[str] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
            out += a[i1:i2]
        else:
            out += b[j1:j2]
    return out


def _edited(rng: random.Random, size: int, repeat: int) -> tuple[list[str], list[str]]:
    a = [f"{rng.choice('abc')}{rng.randint(0, repeat)}\n" for _ in range(size)]
    b = list(a)
    for _ in range(rng.randint(0, size // 10 + 1)):
        k = rng.randint(0, max(0, len(b) - 1))
        roll = rng.random()
        if roll < 0.3 and b:
            del b[k]
        elif roll < 0.6:
            b.insert(k, f"new {rng.random()}\n")
        elif b:
            b[k] = f"changed {rng.random()}\n"
    return a, b


@pytest.mark.parametrize("seed", range(40))
def test_line_opcodes_turn_the_old_lines_into_the_new(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut at unique lines (forced here for small inputs too), the opcodes still cover
    both sides contiguously and rebuild the new text; adjacent blocks are merged."""
    rng = random.Random(seed)
    a, b = _edited(rng, rng.randint(0, 300), 5 if seed % 2 else 500)
    monkeypatch.setattr(linediff, "DIRECT_PAIRS", 0)
    ops = linediff.opcodes(a, b)
    assert _apply(a, b, ops) == b
    i = j = 0
    for tag, i1, i2, j1, j2 in ops:
        assert (i1, j1) == (i, j) and tag in ("equal", "replace", "delete", "insert")
        i, j = i2, j2
    assert (i, j) == (len(a), len(b))
    assert all(not (x[0] == y[0] == "equal") for x, y in zip(ops, ops[1:], strict=False))


def test_small_inputs_keep_difflibs_own_answer() -> None:
    rng = random.Random(7)
    for _ in range(30):
        a, b = _edited(rng, rng.randint(0, 200), 3)
        assert linediff.opcodes(a, b) == difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def test_a_large_rewrite_of_repeated_lines_aligns_on_the_unique_ones() -> None:
    """A fix of every function of a generated module: 60,000 lines, most of them
    repeated. Each changed line is its own block, and the unique lines stay equal."""
    old, new = [], []
    for i in range(10_000):
        body = [f"def step_{i}(x):\n", "    s = torch.cuda.amp.GradScaler()\n", "    return x\n", "\n"]
        old += body
        new += [body[0], '    s = torch.amp.GradScaler("cuda")\n', *body[2:]]
    ops = linediff.opcodes(old, new)
    changed = [op for op in ops if op[0] != "equal"]
    assert len(changed) == 10_000
    assert all(op[0] == "replace" and op[2] - op[1] == 1 for op in changed)
    assert _apply(old, new, ops) == new


def test_parsing_skips_node_validation_only_while_libcst_parses() -> None:
    module = parse_python("x = torch.version.cuda\n")
    assert module.code == "x = torch.version.cuda\n"
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")  # nodes the fixes build are still validated


def test_fix_gives_libcst_only_files_with_something_to_fix(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``fix`` parses with LibCST only the files it rewrites: after a scan has cached a
    tree, only the files whose findings include a rule with a fix are read again; without
    the cache, the scan's fast parse finds the rest have nothing to fix (issue 18). The
    outcome is the same either way."""
    import shutil
    from pathlib import Path

    from portscan.fix import engine
    from portscan.fix.apply import fix_paths
    from portscan.ruleset.loader import load_rules
    from portscan.scan import scan_paths

    rules = load_rules()
    fixable = {r.code for r in rules.rules if r.fix is not None}
    tree, plain = tmp_path / "tree", tmp_path / "plain"
    shutil.copytree(Path(__file__).parent.parent / "fixtures" / "cuda-trainer", tree)
    # a module whose text has a fixable rule's tokens (in a comment) but nothing to fix
    (tree / "utils" / "report.py").write_text(
        "import torch\n\n# torch.cuda.amp.GradScaler() went away in our last refactor\n"
        "def device_report():\n    return torch.cuda.get_device_name(), torch.version.cuda\n")
    shutil.copytree(tree, plain)
    cache = tmp_path / "cache"
    before = scan_paths([tree], rules, cache=cache, workers=1)
    with_fix = {f.path for f in before.findings if f.rule in fixable}
    assert "utils/report.py" not in with_fix and "train.py" in with_fix
    assert any(f.path == "utils/report.py" for f in before.findings)

    parse, parsed = engine.parse_python, []
    monkeypatch.setattr(engine, "parse_python", lambda text: parsed.append(text) or parse(text))
    cached = fix_paths([tree], rules, cache=cache, workers=1)
    report = (tree / "utils" / "report.py").read_text()
    assert parsed and report not in parsed
    parsed.clear()
    fast, seen = engine.parse_for_matching, []
    monkeypatch.setattr(engine, "parse_for_matching", lambda text: seen.append(text) or fast(text))
    uncached = fix_paths([plain], rules, cache=None, workers=1)
    assert report in seen and report not in parsed  # the fast parse finds that out
    assert [(f.path, f.applied) for f in cached.files] == [(f.path, f.applied) for f in uncached.files]
    assert cached.after.findings == uncached.after.findings


def test_a_scan_with_nothing_to_parse_never_imports_libcst(tmp_path) -> None:
    """The match kinds name LibCST's node classes, but load it only on first use: a
    scan whose files are all cached (or prefiltered out) does not import it (0.1 s)."""
    import subprocess
    import sys
    from pathlib import Path

    fixture = Path(__file__).parent.parent / "fixtures" / "cuda-trainer"
    env = {"PORTSCAN_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    probe = ("import sys; from portscan.cli import main; main(['scan', '--format', 'json', '-o', sys.argv[2], "
             "sys.argv[1]]); print('libcst._nodes.base' in sys.modules)")
    first = subprocess.run([sys.executable, "-c", probe, str(fixture), str(tmp_path / "a.json")],
                           capture_output=True, text=True, env=env, check=False)
    warm = subprocess.run([sys.executable, "-c", probe, str(fixture), str(tmp_path / "b.json")],
                          capture_output=True, text=True, env=env, check=False)
    assert first.stdout.strip() == "True", first.stderr  # files were parsed: it was loaded
    assert warm.stdout.strip() == "False", warm.stderr
    assert (tmp_path / "a.json").read_text().count('"rule"') == (tmp_path / "b.json").read_text().count('"rule"')


@pytest.mark.parametrize("shape", ["one line", "aligned"])
def test_rewriting_many_calls_locates_nodes_a_bounded_number_of_times(shape: str, monkeypatch) -> None:
    """Locating a node costs a code generation up to it, so a pass that located once per
    rewritten call was quadratic (a 1,000-call module took 57 s instead of 5 s): the count
    must not grow with the number of calls."""
    from portscan.fix import rewrite
    from portscan.fix.engine import fix_source
    from portscan.match import python as python_matcher
    from portscan.ruleset.loader import load_rules

    rules = load_rules().select(["PS209", "PS316"])

    def module(calls: int) -> str:
        lines = ["import torch", "from apex.optimizers import FusedAdam", ""]
        for i in range(calls):
            lines.append(f"s{i} = torch.cuda.amp.GradScaler(init_scale=2.0 ** {i % 16})")
            if shape == "aligned":
                lines += [f"o{i} = FusedAdam(params{i},", "                lr=1e-3)"]
            else:
                lines.append(f"o{i} = FusedAdam(params{i}, lr=1e-3)")
        return "\n".join(lines) + "\n"

    def locations(calls: int) -> int:
        count = 0
        real = rewrite.locate

        def counting(*args, **kwargs):
            nonlocal count
            count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(rewrite, "locate", counting)
        monkeypatch.setattr(python_matcher, "locate", counting)
        result = fix_source(module(calls), "gen.py", rules, unsafe=True)
        assert result.error is None and len(result.applied) == 2 * calls
        return count

    assert locations(40) == locations(10)


def test_what_each_fix_touched_stays_its_own_when_every_line_changes() -> None:
    """With every line rewritten the line diff is one block; each applied fix must still
    record only its own lines (recording the block's gave every fix all of them: memory
    quadratic in the number of fixes), and still own the hunk that shows it."""
    from portscan.fix.engine import fix_source
    from portscan.ruleset.loader import load_rules

    calls = 300
    text = "import torch\n" + "".join(f"s{i} = torch.cuda.amp.GradScaler(init_scale={i + 1}.0)\n"
                                      for i in range(calls))
    result = fix_source(text, "gen.py", load_rules().select(["PS316"]))
    assert len(result.applied) == calls
    assert sum(len(a.touches) for a in result.applied) <= 3 * calls
    assert all(blocks for _, blocks in result.hunks())
