"""portscan's speed benchmark: one command, medians, ratios against a baseline measured
in the same run (machines here are shared and noisy).

    python benchmarks/run.py [--corpus DIR] [--repeat N] [--markdown]

Corpus: the Python tree of the installed torch package (default), or any directory.
Scenarios, each run as a user runs it (a fresh `portscan` process, interpreter start
included), several times, median reported:

  regex pass       read every .py file and run one regex over it (in-process): the floor
  cold scan        `portscan scan --no-cache` over the whole tree
  warm scan        `portscan scan` with a populated cache and nothing changed
  pre-commit       `portscan scan --force-exclude` on 5 files, rule pack cached, results not
  semgrep          `semgrep --config benchmarks/semgrep-rules.yml` (only if semgrep is installed)
  report formats   `portscan scan --no-cache` of fixtures/cuda-trainer as JSON and as SARIF
                   (whose `fixes` run the fix engine), alternating, and their ratio
  verify hooks     per-step overhead of `portscan verify`'s injected hooks: median step
                   time of benchmarks/step_timer.py plain and under `portscan verify`

Peak RSS is the largest resident set of any portscan process (workers included).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: the console script, as users run it (`python -m` would put the cwd on sys.path)
PORTSCAN = str(Path(sys.executable).parent / "portscan")


def default_corpus() -> Path:
    out = subprocess.run([sys.executable, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def portscan(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    """Wall time of one `portscan` process (exit status 0 or 1 both fine)."""
    start = time.perf_counter()
    done = subprocess.run([PORTSCAN, *args], cwd=cwd, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"portscan {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


def regex_pass(corpus: Path) -> float:
    pattern = re.compile(r"\bimport\s+(\w+)")
    start = time.perf_counter()
    for path in corpus.rglob("*.py"):
        text = path.read_text(encoding="utf-8", errors="replace")
        for _ in pattern.finditer(text):
            pass
    return time.perf_counter() - start


def median(run, repeat: int) -> float:
    return statistics.median(run() for _ in range(repeat))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB


def precommit_files(corpus: Path, count: int = 5) -> list[str]:
    """Five mid-sized files a commit might touch: ones the prefilter sends to the parser."""
    sys.path.insert(0, str(REPO / "src"))
    from portscan.ruleset.loader import load_rules

    rules = load_rules()
    chosen = []
    for path in sorted(corpus.rglob("*.py"), key=lambda p: p.as_posix()):
        size = path.stat().st_size
        if 4_000 <= size <= 40_000 and rules.candidates(path.read_text(encoding="utf-8", errors="replace")):
            chosen.append(path.relative_to(corpus).as_posix())
        if len(chosen) == count:
            break
    return chosen


def verify_overhead(repeat: int, width: int) -> tuple[float, float, float]:
    """(plain, hooked, median of the paired hooked/plain ratios) of the median step time
    in ms of an MLP (784-width-10, AdamW, CPU, one thread), over ``repeat`` rounds that
    alternate which of the two runs first. The plain run gets the environment `verify`
    gives its child, so only the hooks differ."""
    timer = str(HERE / "step_timer.py")
    steps = 1500 if width <= 512 else 300
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    plain: list[float] = []
    hooked: list[float] = []
    with tempfile.TemporaryDirectory(prefix="portscan-steps-") as scratch:
        out = str(Path(scratch) / "times.json")
        command = [sys.executable, timer, "--steps", str(steps), "--width", str(width), "--out", out]
        runs = [(command, plain), ([PORTSCAN, "verify", "--steps", str(steps + 1), "--", *command], hooked)]
        for round_ in range(repeat):
            for argv, into in runs if round_ % 2 == 0 else runs[::-1]:
                subprocess.run(argv, env=env, check=True, capture_output=True)
                into.append(json.loads(Path(out).read_text())["median_ms"])
    ratios = [h / p for p, h in zip(plain, hooked, strict=True)]
    return statistics.median(plain), statistics.median(hooked), statistics.median(ratios)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="directory to scan (default: the installed torch package)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true", help="print a RESULTS.md section")
    parser.add_argument("--skip-verify", action="store_true")
    args = parser.parse_args()
    corpus = (args.corpus or default_corpus()).resolve()
    files = sum(1 for _ in corpus.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in corpus.rglob("*.py"))
    rows: list[tuple[str, float, str]] = []

    with tempfile.TemporaryDirectory(prefix="portscan-bench-") as scratch:
        env = {**os.environ, "PORTSCAN_CACHE_DIR": str(Path(scratch) / "cache")}
        baseline = median(lambda: regex_pass(corpus), args.repeat)
        rows.append(("regex pass (read + one regex)", baseline, "1.0x"))

        cold = median(lambda: portscan("scan", "--no-cache", "--format", "json", str(corpus), env=env),
                      args.repeat)
        rows.append(("cold scan (no cache)", cold, f"{cold / baseline:.1f}x"))
        cold_rss = peak_rss_mb()

        portscan("scan", "--format", "json", str(corpus), env=env)  # populate the cache
        warm = median(lambda: portscan("scan", "--format", "json", str(corpus), env=env), args.repeat)
        rows.append(("warm scan (cache, nothing changed)", warm, f"{warm / baseline:.1f}x"))

        hook_files = precommit_files(corpus)
        from portscan.cache import DATABASE

        def hook_run() -> float:  # the rule pack is cached (an earlier run); these files' results are not
            (Path(scratch) / "cache" / DATABASE).unlink(missing_ok=True)
            return portscan("scan", "--force-exclude", "--format", "concise", *hook_files, cwd=corpus, env=env)

        hook = median(hook_run, args.repeat)
        rows.append((f"pre-commit run on {len(hook_files)} files", hook, f"{hook / baseline:.1f}x"))

        semgrep = shutil.which("semgrep")
        if semgrep:
            def semgrep_run() -> float:
                start = time.perf_counter()
                subprocess.run([semgrep, "--config", str(HERE / "semgrep-rules.yml"), "--metrics=off", "--quiet",
                                "--json", str(corpus)], capture_output=True, check=False)
                return time.perf_counter() - start

            sg = median(semgrep_run, args.repeat)
            rows.append(("semgrep, equivalent rules", sg, f"{sg / baseline:.1f}x"))
            rows.append(("portscan cold vs semgrep", cold / sg, "(ratio)"))

        fixture = REPO / "fixtures" / "cuda-trainer"
        formats: dict[str, list[float]] = {"json": [], "sarif": []}
        for round_ in range(max(args.repeat, 5)):  # alternate, so load changes hit both alike
            for name in ("json", "sarif") if round_ % 2 == 0 else ("sarif", "json"):
                formats[name].append(portscan("scan", "--no-cache", "--format", name, str(fixture), env=env))
        as_json, as_sarif = statistics.median(formats["json"]), statistics.median(formats["sarif"])
        rows.append(("fixtures/cuda-trainer as JSON", as_json, f"{as_json / baseline:.1f}x"))
        rows.append(("fixtures/cuda-trainer as SARIF", as_sarif, f"{as_sarif / baseline:.1f}x"))
        rows.append(("SARIF vs JSON", as_sarif / as_json, "(ratio)"))

    verify = [] if args.skip_verify else [(width, *verify_overhead(max(args.repeat, 7), width))
                                          for width in (128, 2048)]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    out = [f"### {stamp} — {machine}", "",
           f"Corpus: `{corpus}` ({files} .py files, {lines:,} lines); median of {args.repeat} runs.", "",
           "| scenario | seconds | vs regex pass |", "|---|---|---|"]
    out += [f"| {name} | {value:.2f} | {ratio} |" for name, value, ratio in rows]
    out += ["", f"Peak RSS of a cold scan (largest portscan process): {cold_rss:.0f} MB."]
    for width, plain, hooked, ratio in verify:
        out.append(f"verify hooks, MLP 784-{width}-10 (CPU, 1 thread): median step {plain:.3f} ms plain, "
                   f"{hooked:.3f} ms hooked; paired overhead {(ratio - 1) * 100:+.1f} % "
                   f"(median of {max(args.repeat, 7)} alternating rounds).")
    if not shutil.which("semgrep"):
        out.append("semgrep: not installed here, not measured.")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
