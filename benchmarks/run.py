"""portscan's speed benchmark: one command, medians, ratios against a baseline measured
in the same run (machines here are shared and noisy).

    python benchmarks/run.py [--corpus DIR] [--repeat N] [--only SCENARIO[,...]] [--record]

Corpus: the Python tree of the installed torch package (default), or any directory.
Scenarios (``--only`` takes these names), each run as a user runs it (a fresh `portscan`
process, interpreter start included), several times, median reported:

  regex       read every .py file of the corpus and run one regex over it (in-process):
              the floor the corpus scenarios are compared with (run whenever one of them is)
  cold        `portscan scan --no-cache` over the whole corpus
  warm        `portscan scan` with a populated cache and nothing changed
  precommit   `portscan scan --force-exclude` on 5 files, rule pack cached, results not
  semgrep     `semgrep --config benchmarks/semgrep-rules.yml` (only if semgrep is installed)
  generated   one generated 3 MB module, 120,000 lines of `v{i} = torch.version.cuda`: without
              `import torch` (nothing to report) against CPython's `ast.parse` of the same
              file in a fresh `python -c` (interpreter start included on both sides; a bare
              `python -c pass` is shown too), and with `import torch` at the top (120,000
              findings: for information, no target)
  accuracy    cold scans of the accuracy corpus's 3 largest trees (by bytes of the files
              portscan reads, under --accuracy-cache; skipped when the trees are not there:
              `benchmarks/accuracy/run.py` fetches them), each against a read-and-regex pass
              over those same files
  parsers     the corpus and every accuracy tree scanned again with `--parser libcst` (the
              LibCST-only path): its time, and whether its JSON report is the default
              parser's byte for byte (issue 18: the findings must be identical)
  fix         `portscan fix --diff` of one generated 2.4 MB module (20,000 functions and a
              data blob; one fixable import): LibCST parses only what it rewrites
  formats     `portscan scan --no-cache` of fixtures/cuda-trainer as JSON and as SARIF
              (whose `fixes` run the fix engine), alternating, and their ratio
  verify      per-step overhead of `portscan verify`'s injected hooks: median step time of
              benchmarks/step_timer.py plain and under `portscan verify`

Peak RSS is per scenario: the largest resident set of any one process of that scenario's
process tree (portscan and its pool workers, which it joins before it exits), from the
`os.wait4` resource usage of each measured process, taken in a small wrapper process so
that the benchmark's own memory does not leak into it; the largest over the repeats. It
is not a sum over processes alive at the same time.

The child processes import portscan from this checkout's ``src/`` (PYTHONPATH), so the
commit named in the report is the code measured. ``--record`` inserts the report under
"## Runs" in benchmarks/RESULTS.md, newest first.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "RESULTS.md"
#: the console script, as users run it (`python -m` would put the cwd on sys.path)
PORTSCAN = str(Path(sys.executable).parent / "portscan")
SCENARIOS = ("regex", "cold", "warm", "precommit", "semgrep", "generated", "accuracy", "parsers", "fix", "formats",
             "verify")
#: scenarios whose ratios are against the corpus's regex pass
_ON_CORPUS = frozenset({"cold", "warm", "precommit", "semgrep", "formats", "parsers"})
GENERATED_LINES = 120_000
LARGEST_TREES = 3


@dataclass(frozen=True)
class Measure:
    """One process tree's wall time and the largest resident set of any process in it."""

    seconds: float
    rss_mb: float


#: Runs argv (its stdout discarded, its stderr passed on) and prints its wall time, its peak
#: RSS in KiB and its exit status. A fresh small process: a child's ``ru_maxrss`` starts at
#: the high-water mark of the process that forked it (the memory map it shares until exec),
#: so measured from the benchmark process itself it would never read below the benchmark's
#: own size. Isolated (``-I``): a scanned tree's ``types.py`` in the cwd must not shadow the
#: standard library's.
_WRAPPER = """
import os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def measure(argv: Sequence[str], cwd: Path | None = None, env: Mapping[str, str] | None = None,
            ok: Iterable[int] = (0, 1)) -> Measure:
    """Run ``argv`` to its end, from :data:`_WRAPPER`. ``os.wait4`` gives the child's
    resource usage together with that of the descendants it waited for (Linux: its own
    peak and theirs), which is where a process pool's joined workers show up."""
    done = subprocess.run([sys.executable, "-I", "-c", _WRAPPER, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    try:
        seconds, rss_kib, status = done.stdout.split()[-3:]
    except ValueError:
        raise SystemExit(f"{' '.join(argv)}: no measurement ({done.returncode}): {done.stderr[-2000:]}") from None
    if int(status) not in tuple(ok):
        raise SystemExit(f"{' '.join(argv)} failed ({status}): {done.stderr[-2000:]}")
    return Measure(float(seconds), int(rss_kib) / 1024)  # Linux: KiB


def summary(runs: Sequence[Measure]) -> Measure:
    """Median time, largest peak."""
    return Measure(statistics.median(m.seconds for m in runs), max(m.rss_mb for m in runs))


def repeated(run: Callable[[], Measure], repeat: int) -> Measure:
    return summary([run() for _ in range(repeat)])


def default_corpus() -> Path:
    out = subprocess.run([sys.executable, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def regex_pass(paths: Iterable[Path]) -> Measure:
    """Read each file and run one regex over it, in this process (no RSS of its own)."""
    pattern = re.compile(r"\bimport\s+(\w+)")
    start = time.perf_counter()
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        for _ in pattern.finditer(text):
            pass
    return Measure(time.perf_counter() - start, 0.0)


def precommit_files(corpus: Path, count: int = 5) -> list[str]:
    """Five mid-sized files a commit might touch: ones the prefilter sends to the parser."""
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


def generated_module(lines: int = GENERATED_LINES, import_torch: bool = False) -> str:
    """A generated data module (a `_pb2.py` or a table): ``lines`` assignments of
    `torch.version.cuda`, a name the rules look for, which without `import torch` can
    match nowhere."""
    head = "import torch\n" if import_torch else ""
    return head + "".join(f"v{i} = torch.version.cuda\n" for i in range(lines))


def write_generated(directory: Path, import_torch: bool = False, lines: int = GENERATED_LINES) -> Path:
    path = directory / ("generated_import.py" if import_torch else "generated.py")
    path.write_text(generated_module(lines, import_torch), encoding="utf-8")
    return path


def big_module() -> str:
    """A 2.4 MB module with one fixable finding (``import pynvml``): 20,000 small functions
    and an embedded data blob, the shape of a generated module in a repository."""
    functions = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20_000))
    blob = "".join(f"{i:08x}," for i in range(190_000))
    return f'import pynvml\nDATA = """{blob}"""\n' + functions


def same_report(a: Path, b: Path) -> bool:
    """Do two JSON reports hold the same findings, errors and extensions?"""
    left, right = (json.loads(p.read_text(encoding="utf-8")) for p in (a, b))
    keys = ("findings", "errors", "extensions", "summary")
    return all(left[k] == right[k] for k in keys)


def tree_files(root: Path) -> list[Path]:
    """The files a scan of ``root`` reads (portscan's own discovery, the tree's config)."""
    from portscan.config import find_config, load_config
    from portscan.discover import Excludes, discover

    config = find_config(root)
    excludes = None
    if config is not None:
        loaded = load_config(config)
        excludes = Excludes(loaded.base, loaded.exclude, loaded.extend_exclude)
    return [source.path for source in discover([root], excludes).files]


def largest_trees(trees: Path, count: int = LARGEST_TREES) -> list[tuple[Path, list[Path], int]]:
    """(root, files read, their bytes) of the ``count`` largest trees directly under ``trees``."""
    sized = []
    for root in sorted(p for p in trees.iterdir() if p.is_dir()):
        files = tree_files(root)
        sized.append((root, files, sum(p.stat().st_size for p in files)))
    return sorted(sized, key=lambda t: -t[2])[:count]


def verify_overhead(repeat: int, width: int, env: Mapping[str, str]) -> tuple[float, float, float]:
    """(plain, hooked, median of the paired hooked/plain ratios) of the median step time
    in ms of an MLP (784-width-10, AdamW, CPU, one thread), over ``repeat`` rounds that
    alternate which of the two runs first. The plain run gets the environment `verify`
    gives its child, so only the hooks differ."""
    timer = str(HERE / "step_timer.py")
    steps = 1500 if width <= 512 else 300
    env = {**env, "CUDA_VISIBLE_DEVICES": "", "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1",
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


# --- the report: pure functions of the measured numbers ---

@dataclass(frozen=True)
class Target:
    """One of issue 18's targets: ``value`` of the measured numbers at most ``limit``."""

    label: str
    limit: float
    unit: str  #: "s", "x" or "MB"
    value: Callable[[Mapping[str, float]], float]
    needs: tuple[str, ...]  #: the measured numbers it is computed from


TARGETS = (
    Target("torch tree cold ≤ 7x the regex pass", 7, "x", lambda m: m["cold_s"] / m["regex_s"], ("cold_s", "regex_s")),
    Target("torch tree cold ≤ 3 s", 3, "s", lambda m: m["cold_s"], ("cold_s",)),
    Target("torch tree warm ≤ 2x the regex pass", 2, "x", lambda m: m["warm_s"] / m["regex_s"], ("warm_s", "regex_s")),
    Target("peak RSS of the cold torch scan ≤ 300 MB", 300, "MB", lambda m: m["cold_rss_mb"], ("cold_rss_mb",)),
    Target("generated 3 MB module ≤ 2x ast.parse", 2, "x", lambda m: m["generated_s"] / m["ast_parse_s"],
           ("generated_s", "ast_parse_s")),
    Target("generated 3 MB module ≤ 300 MB", 300, "MB", lambda m: m["generated_rss_mb"], ("generated_rss_mb",)),
    Target("pre-commit run ≤ 0.6 s", 0.6, "s", lambda m: m["precommit_s"], ("precommit_s",)),
    Target("fix on a 2.4 MB module < 10 s", 10, "s", lambda m: m["fix_s"], ("fix_s",)),
    Target("trees whose findings differ between the parsers", 0, "n", lambda m: m["parser_differences"],
           ("parser_differences",)),
)


def _amount(value: float, unit: str) -> str:
    return {"s": f"{value:.2f} s", "x": f"{value:.1f}x", "MB": f"{value:.0f} MB", "n": f"{value:.0f}"}[unit]


def target_rows(measured: Mapping[str, float], targets: Sequence[Target] = TARGETS) -> list[tuple[str, str, str]]:
    """(target, measured, status) for each target; status is ``met``, ``**missed**``
    (with by how much) or ``not measured`` (its scenario was not run)."""
    rows = []
    for target in targets:
        if any(key not in measured for key in target.needs):
            rows.append((target.label, "—", "not measured"))
            continue
        value = target.value(measured)
        status = "met" if value <= target.limit else \
            f"**missed** ({value / target.limit:.1f}x the limit)" if target.limit else "**missed**"
        rows.append((target.label, _amount(value, target.unit), status))
    return rows


def insert_run(results: str, section: str) -> str:
    """``results`` (RESULTS.md) with ``section`` as the newest run: first under
    "## Runs" (which is added at the end when missing), older runs kept below it."""
    section = section.strip("\n") + "\n"
    lines = results.splitlines(keepends=True)
    heading = next((i for i, line in enumerate(lines) if line.rstrip() == "## Runs"), None)
    if heading is None:
        return results.rstrip("\n") + "\n\n## Runs\n\n" + section
    after = heading + 1
    while after < len(lines) and not lines[after].strip():
        after += 1
    rest = "".join(lines[after:])
    return "".join(lines[:heading + 1]) + "\n" + section + ("\n" + rest if rest else "")


def portscan_commit(repo: Path = REPO) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), "describe", "--always", "--dirty", "--abbrev=10"],
                              capture_output=True, text=True, check=False)
    except OSError:
        return "not a git checkout"
    return f"commit {done.stdout.strip()}" if done.returncode == 0 and done.stdout.strip() else "not a git checkout"


def machine() -> str:
    load = f", load average {os.getloadavg()[0]:.2f} at the start" if hasattr(os, "getloadavg") else ""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}{load}"


def render(stamp: str, machine_line: str, commit: str, corpus_line: str, repeat: int,
           rows: Sequence[tuple[str, str, str, str]], measured: Mapping[str, float], notes: Sequence[str]) -> str:
    """The run's RESULTS.md section."""
    out = [f"### {stamp} — {machine_line}; portscan {commit}", "",
           f"{corpus_line}; median of {repeat} runs.", "",
           "| scenario | seconds | ratio | peak RSS |", "|---|---|---|---|"]
    out += [f"| {name} | {seconds} | {ratio} | {rss} |" for name, seconds, ratio, rss in rows]
    out += ["", "Targets (issue 18), from the numbers above:", "",
            "| target | measured | status |", "|---|---|---|"]
    out += [f"| {target} | {value} | {status} |" for target, value, status in target_rows(measured)]
    if notes:
        out += ["", *notes]
    return "\n".join(out) + "\n"


def parse_only(value: str | None) -> tuple[str, ...]:
    if not value:
        return SCENARIOS
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown scenario {', '.join(unknown)} (choose from {', '.join(SCENARIOS)})")
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="directory to scan (default: the installed torch package)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", type=parse_only, default=SCENARIOS, metavar="SCENARIO[,...]",
                        help=f"run only these scenarios ({', '.join(SCENARIOS)})")
    parser.add_argument("--accuracy-cache", type=Path, default=HERE / "accuracy" / ".cache", metavar="DIR",
                        help="the accuracy runner's cache, whose trees/ the accuracy scenario scans")
    parser.add_argument("--record", action="store_true", help="insert this run under '## Runs' in RESULTS.md")
    parser.add_argument("--markdown", action="store_true", help="(the report is always markdown; kept for scripts)")
    parser.add_argument("--skip-verify", action="store_true")
    args = parser.parse_args()
    only = set(args.only) - ({"verify"} if args.skip_verify else set())
    if only & _ON_CORPUS:
        only.add("regex")
    if "semgrep" in only and not shutil.which("semgrep"):
        only.discard("semgrep")
    sys.path.insert(0, str(REPO / "src"))
    started = machine()  # the load average before this run adds to it
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")  # when the run began
    uses_corpus = bool(only & (_ON_CORPUS | {"regex"}))
    corpus = (args.corpus or default_corpus()).resolve() if uses_corpus else None
    py_files = sorted(corpus.rglob("*.py")) if corpus else []
    lines = sum(p.read_bytes().count(b"\n") for p in py_files)
    rows: list[tuple[str, str, str, str]] = []
    measured: dict[str, float] = {}
    notes: list[str] = []

    def row(name: str, m: Measure, ratio: str) -> None:
        rows.append((name, f"{m.seconds:.2f}", ratio, f"{m.rss_mb:.0f} MB" if m.rss_mb else "—"))

    with tempfile.TemporaryDirectory(prefix="portscan-bench-") as scratch:
        env = {**os.environ, "PORTSCAN_CACHE_DIR": str(Path(scratch) / "cache"),
               "PYTHONPATH": os.pathsep.join([str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}

        def portscan(*argv: str, cwd: Path | None = None) -> Measure:
            return measure([PORTSCAN, *argv], cwd=cwd, env=env)

        baseline = 0.0
        if "regex" in only:
            regex = repeated(lambda: regex_pass(py_files), args.repeat)
            baseline = measured["regex_s"] = regex.seconds
            row("regex pass (read + one regex, the corpus's .py files)", regex, "1.0x")

        def vs(m: Measure) -> str:
            return f"{m.seconds / baseline:.1f}x regex" if baseline else "—"

        reports = Path(scratch) / "reports"
        reports.mkdir()
        if "cold" in only or "parsers" in only:
            default_report = reports / "corpus.json"
            cold = repeated(lambda: portscan("scan", "--no-cache", "--format", "json", "-o", str(default_report),
                                             str(corpus)), args.repeat)
            measured["cold_s"], measured["cold_rss_mb"] = cold.seconds, cold.rss_mb
            row("cold scan (no cache)", cold, vs(cold))

        if "warm" in only:
            portscan("scan", "--format", "json", str(corpus))  # populate the cache
            warm = repeated(lambda: portscan("scan", "--format", "json", str(corpus)), args.repeat)
            measured["warm_s"] = warm.seconds
            row("warm scan (cache, nothing changed)", warm, vs(warm))

        if "precommit" in only and corpus is not None:
            hook_files = precommit_files(corpus)
            from portscan.cache import DATABASE

            portscan("scan", "--format", "concise", *hook_files, cwd=corpus)  # cache the rule pack

            def hook_run() -> Measure:  # the rule pack is cached (an earlier run); these files' results are not
                (Path(scratch) / "cache" / DATABASE).unlink(missing_ok=True)
                return portscan("scan", "--force-exclude", "--format", "concise", *hook_files, cwd=corpus)

            hook = repeated(hook_run, args.repeat)
            measured["precommit_s"] = hook.seconds
            row(f"pre-commit run on {len(hook_files)} files", hook, vs(hook))

        if "semgrep" in only:
            semgrep = shutil.which("semgrep") or "semgrep"
            sg = repeated(lambda: measure([semgrep, "--config", str(HERE / "semgrep-rules.yml"), "--metrics=off",
                                           "--quiet", "--json", str(corpus)], ok=range(256)), args.repeat)
            row("semgrep, equivalent rules", sg, vs(sg))
            if "cold_s" in measured:
                rows.append(("portscan cold vs semgrep", f"{measured['cold_s'] / sg.seconds:.2f}", "(ratio)", ""))

        if "generated" in only:
            where = Path(scratch) / "generated"
            where.mkdir()
            plain, with_import = write_generated(where), write_generated(where, import_torch=True)
            size = plain.stat().st_size / 1e6
            python = repeated(lambda: measure([sys.executable, "-c", "pass"]), args.repeat)
            parse = repeated(lambda: measure([sys.executable, "-c", "import ast, sys; "
                                              "ast.parse(open(sys.argv[1], 'rb').read(), sys.argv[1])",
                                              plain.name], cwd=where), args.repeat)
            gen = repeated(lambda: portscan("scan", "--no-cache", "--format", "json", plain.name, cwd=where),
                           args.repeat)
            gen_import = repeated(lambda: portscan("scan", "--no-cache", "--format", "json", with_import.name,
                                                   cwd=where), args.repeat)
            measured["ast_parse_s"] = parse.seconds
            measured["generated_s"], measured["generated_rss_mb"] = gen.seconds, gen.rss_mb
            row("python -c pass (interpreter start, for reference)", python, "")
            row(f"ast.parse of the generated {size:.1f} MB module ({GENERATED_LINES:,} lines), fresh python",
                parse, "1.0x ast.parse")
            row("generated module, no import of torch (no finding)", gen,
                f"{gen.seconds / parse.seconds:.1f}x ast.parse")
            row(f"generated module with import torch ({GENERATED_LINES:,} findings; no target)", gen_import,
                f"{gen_import.seconds / parse.seconds:.1f}x ast.parse")

        if "accuracy" in only:
            trees = args.accuracy_cache / "trees"
            if not trees.is_dir():
                notes.append(f"Accuracy trees: {trees} is absent (`benchmarks/accuracy/run.py` fetches them); "
                             "not measured.")
                print(notes[-1], file=sys.stderr)
            else:
                for root, files, size in largest_trees(trees):
                    floor = summary([regex_pass(files) for _ in range(args.repeat)])
                    scan = summary([portscan("scan", "--no-cache", "--format", "json", ".", cwd=root)
                                    for _ in range(args.repeat)])
                    row(f"accuracy tree {root.name}: regex pass over the {len(files):,} files portscan reads "
                        f"({size / 1e6:.1f} MB)", floor, "1.0x")
                    row(f"accuracy tree {root.name}: cold scan", scan, f"{scan.seconds / floor.seconds:.1f}x regex")

        if "parsers" in only:
            libcst_report = reports / "corpus-libcst.json"
            libcst = repeated(lambda: portscan("scan", "--no-cache", "--parser", "libcst", "--format", "json", "-o",
                                               str(libcst_report), str(corpus)), args.repeat)
            row("cold scan with --parser libcst (the LibCST-only path)", libcst, vs(libcst))
            trees = sorted(p for p in (args.accuracy_cache / "trees").glob("*") if p.is_dir())
            differ = [] if same_report(default_report, libcst_report) else [corpus.name]
            for root in trees:
                pair = [reports / f"{root.name}.{parser}.json" for parser in ("ast", "libcst")]
                for parser, out in zip(("ast", "libcst"), pair, strict=True):
                    portscan("scan", "--no-cache", "--parser", parser, "--format", "json", "-o", str(out), ".",
                             cwd=root)
                differ += [] if same_report(*pair) else [root.name]
            measured["parser_differences"] = len(differ)
            notes.append(f"Parsers: the JSON reports of the default parser and of `--parser libcst` are "
                         f"{'the same' if not differ else 'different'} on the corpus and on {len(trees)} accuracy "
                         f"trees{': ' + ', '.join(differ) if differ else ''}.")

        if "fix" in only:
            where = Path(scratch) / "fix"
            where.mkdir()
            module = where / "big.py"
            module.write_text(big_module(), encoding="utf-8")
            fix = repeated(lambda: portscan("fix", "--diff", "--no-cache", module.name, cwd=where), args.repeat)
            measured["fix_s"] = fix.seconds
            row(f"fix --diff of a generated {module.stat().st_size / 1e6:.1f} MB module (one fixable import)", fix, "")

        if "formats" in only:
            fixture = REPO / "fixtures" / "cuda-trainer"
            formats: dict[str, list[Measure]] = {"json": [], "sarif": []}
            for round_ in range(max(args.repeat, 5)):  # alternate, so load changes hit both alike
                for name in ("json", "sarif") if round_ % 2 == 0 else ("sarif", "json"):
                    formats[name].append(portscan("scan", "--no-cache", "--format", name, str(fixture)))
            as_json, as_sarif = summary(formats["json"]), summary(formats["sarif"])
            row("fixtures/cuda-trainer as JSON", as_json, vs(as_json))
            row("fixtures/cuda-trainer as SARIF", as_sarif, vs(as_sarif))
            rows.append(("SARIF vs JSON", f"{as_sarif.seconds / as_json.seconds:.2f}", "(ratio)", ""))

        if "verify" in only:
            rounds = max(args.repeat, 7)
            for width in (128, 2048):
                plain_ms, hooked_ms, ratio = verify_overhead(rounds, width, env)
                notes.append(f"verify hooks, MLP 784-{width}-10 (CPU, 1 thread): median step {plain_ms:.3f} ms "
                             f"plain, {hooked_ms:.3f} ms hooked; paired overhead {(ratio - 1) * 100:+.1f} % "
                             f"(median of {rounds} alternating rounds).")

    if "semgrep" in args.only and not shutil.which("semgrep"):
        notes.append("semgrep: not installed here, not measured.")
    corpus_line = (f"Corpus: `{corpus}` ({len(py_files)} .py files, {lines:,} lines)" if corpus else "Corpus: not used")
    corpus_line += f"; scenarios: {', '.join(s for s in SCENARIOS if s in only)}"
    report = render(stamp, started, portscan_commit(), corpus_line, args.repeat, rows, measured, notes)
    print(report, end="")
    if args.record:
        RESULTS.write_text(insert_run(RESULTS.read_text(encoding="utf-8"), report), encoding="utf-8")
        print(f"recorded in {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
