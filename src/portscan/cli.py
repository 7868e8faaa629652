"""Command line: parse arguments, resolve the configuration, run a stage, print, return
the exit code.

Exit codes (Ruff's convention):
  0  scan: no finding at or above --fail-on and every file could be scanned; verify: PASS
  1  scan/fix: findings remain (or files could not be read); verify: FAIL
  2  usage error, invalid configuration or rule file, or an internal error
Machine-readable output goes to stdout; human chatter to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from portscan import __version__
from portscan.model import Severity
from portscan.parse import PARSERS

if TYPE_CHECKING:
    from typing import TextIO

    from rich.console import Console

    from portscan.config import Config
    from portscan.model import ScanResult
    from portscan.ruleset.schema import Rule
    from portscan.ruleset.loader import RuleSet

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

EPILOG = """\
exit status:
  0  no findings at or above --fail-on, and every file could be scanned
  1  findings at or above --fail-on (default: any), files that could not be read or
     parsed, or (with --report-unused-noqa) suppressions that silence nothing
  2  usage error, invalid configuration or rule file, or internal error
  --exit-zero turns 1 into 0; 2 stays 2

configuration: [tool.portscan] in the nearest pyproject.toml, or portscan.toml
(docs/configuration.md); command-line flags override it
"""

FIX_EPILOG = """\
tiers:
  safe    behaviour identical on NVIDIA and ROCm; applied by default
  unsafe  may change behaviour or needs review; applied with --unsafe-fixes
  (rules without a fix only suggest a rewrite; `portscan explain CODE` shows it)

exit status:
  0  no findings at or above --fail-on remain (with --diff: nothing would change)
  1  findings remain, a file could not be fixed, or (with --exit-non-zero-on-fix) a file
     was changed (with --diff: something would change)
  2  usage error, invalid configuration or rule file, or internal error
"""

TEST_EPILOG = """\
exit status:
  0  every example behaves as its rule file says
  1  an example failed (each failure is listed with what was expected and what happened)
  2  usage error, invalid configuration or rule file, or a DIR without rule files
"""

FORMATS = ("full", "concise", "json", "sarif", "github", "markdown")
MACHINE_FORMATS = ("json", "sarif", "github")


def codes(text: str) -> list[str]:
    return [part.strip().upper() for part in text.split(",") if part.strip()]


def add_common(parser: argparse.ArgumentParser, verb: str) -> None:
    """Options `scan` and `fix` share: paths, configuration, rule selection, exit control."""
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help=f"files or directories to {verb} (default: the current directory)")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="configuration file (default: the nearest pyproject.toml with "
                             "[tool.portscan], or portscan.toml)")
    parser.add_argument("--isolated", action="store_true",
                        help="ignore configuration files in the scanned tree (for untrusted trees such "
                             "as pull requests from forks); --config and other flags still apply")
    parser.add_argument("--select", metavar="CODES", default="",
                        help="only these rules: comma-separated codes or prefixes (PS2,PS316); "
                             "replaces the configured select")
    parser.add_argument("--extend-select", metavar="CODES", default="", help="add to the selection")
    parser.add_argument("--ignore", metavar="CODES", default="",
                        help="not these rules: comma-separated codes or prefixes")
    parser.add_argument("--rules-dir", type=Path, action="append", default=[], metavar="DIR",
                        help="also load the rule files in DIR (repeatable; validated like built-in rules)")
    parser.add_argument("--target-arch", metavar="GFX", help="GPU target, e.g. gfx942, gfx90a, gfx1100")
    parser.add_argument("--target-rocm", metavar="VERSION", help="ROCm release, e.g. 6.4")
    parser.add_argument("--fail-on", choices=("error", "warning", "info"),
                        help="lowest severity that makes the exit status 1 (default: info)")
    parser.add_argument("--force-exclude", action="store_true",
                        help="apply the configured excludes to files named on the command line "
                             "(what pre-commit needs)")
    parser.add_argument("--exit-zero", action="store_true",
                        help="exit 0 even when findings remain (2 still means an error)")
    parser.add_argument("--no-cache", action="store_true",
                        help="do not read or write the cache (results are the same either way)")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="worker processes for large trees (default: one per core; 1: none)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="portscan",
        description="Find what keeps a CUDA-era PyTorch repository from running on ROCm.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"portscan {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    scan = commands.add_parser(
        "scan", help="scan files and directories for CUDA-only code",
        description="Scan a repository for code, manifests, containers and kernels that fail or "
                    "behave differently on ROCm.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(scan, "scan")
    scan.add_argument("--format", choices=FORMATS, default="full",
                      help="full: grouped report with code frames (default); concise: one line per "
                           "finding; json: one object (docs/json-output.md); sarif: SARIF 2.1.0 for "
                           "code scanning; github: workflow annotations; markdown: a migration report")
    scan.add_argument("-o", "--output-file", type=Path, metavar="FILE",
                      help="write the report to FILE instead of stdout")
    scan.add_argument("--statistics", action="store_true", help="also count findings per rule")
    scan.add_argument("--baseline", type=Path, metavar="FILE",
                      help="report only findings not recorded in FILE (see --write-baseline)")
    scan.add_argument("--write-baseline", type=Path, metavar="FILE",
                      help="record the current findings in FILE and exit 0")
    scan.add_argument("--report-unused-noqa", action="store_true",
                      help="list `# noqa: PSxxx` / `# portscan: ignore[...]` comments that silence nothing")
    scan.add_argument("--parser", choices=PARSERS, default="ast",
                      help="how Python files are parsed: ast (default) reads CPython's own tree, several "
                           "times faster; libcst parses with LibCST, the parser of record that fix "
                           "rewrites with. The findings are the same")
    fix = commands.add_parser(
        "fix", help="apply ROCm-safe rewrites",
        description="Rewrite CUDA-only code with the fixes rules declare, keeping formatting "
                    "and comments. Safe fixes by default; unsafe ones with --unsafe-fixes.",
        epilog=FIX_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(fix, "fix")
    fix.add_argument("--unsafe-fixes", action="store_true",
                     help="also apply fixes that may change behaviour (review the diff)")
    fix.add_argument("--diff", action="store_true",
                     help="print a unified diff of the changes and write nothing")
    fix.add_argument("--show-fixes", action="store_true",
                     help="list the fixes applied in each file")
    fix.add_argument("--exit-non-zero-on-fix", action="store_true",
                     help="exit 1 when a file was changed, even if no finding remains")
    rules = commands.add_parser("rules", help="list every rule",
                                description="List every rule: code, name, severity, category, fix.")
    rules.add_argument("--format", choices=("table", "tsv", "json"),
                       help="table: aligned columns (default on a terminal); tsv: a header line, then one "
                            "tab-separated line per rule, never truncated (default when piped); json: "
                            "every field of every rule")
    rules.add_argument("--rules-dir", type=Path, action="append", default=[], metavar="DIR")
    explain = commands.add_parser("explain", help="show a rule's documentation",
                                  description="Show what a rule flags, ROCm behaviour, rewrite, "
                                              "example and references.")
    explain.add_argument("rule", metavar="CODE", help="rule code or name, e.g. PS202 or apex-amp")
    explain.add_argument("--rules-dir", type=Path, action="append", default=[], metavar="DIR")
    verify = commands.add_parser(
        "verify", help="run the project's training for a few steps and judge the port",
        description="Run a training command for a few steps on the GPU that is there (or under "
                    "ROCm emulation) and check that it trains.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from portscan.verify.cli import add_arguments as add_verify_arguments

    add_verify_arguments(verify)
    test = commands.add_parser(
        "test", help="run the examples of rule files",
        description="Check every [[bad]]/[[good]] example and [[fix.example]] of the rule files in "
                    "DIR, the way portscan's own test suite checks the built-in rules.",
        epilog=TEST_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    test.add_argument("dirs", nargs="*", type=Path, metavar="DIR",
                      help="rule directories (default: the configured rules-dirs, else the built-in rules)")
    test.add_argument("-v", "--verbose", action="store_true", help="list the passing examples too")
    docs = commands.add_parser("docs", help="write docs/rules/ from the rule files",
                               description="Generate one Markdown page per rule plus an index.")
    docs.add_argument("--out", type=Path, default=Path("docs/rules"), help="output folder")
    docs.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 if the folder is out of date")
    return parser


class Failure(Exception):
    """A usage, configuration or rule-file problem: print it, exit 2."""


def given_paths(args: argparse.Namespace) -> list[Path]:
    """The paths to scan or fix: those given, else the current directory."""
    return args.paths or [Path(".")]


def settings(args: argparse.Namespace) -> tuple[Config, RuleSet, Path | None]:
    """The configuration for this run (file, then flags over it), the selected rules and
    the cache directory (see :func:`cache_dir`), for `scan` and `fix`."""
    from portscan.config import Config, ConfigError, load_config, nearest_config, parse_target, selection
    path = args.config
    try:
        if path is not None and not path.is_file():
            raise Failure(f"{path}: no such configuration file")
        if path is not None:
            config = load_config(path)
        else:
            config = Config() if args.isolated else nearest_config(config_start(given_paths(args)))
        target = dict(arch=args.target_arch, rocm=args.target_rocm)
        if any(target.values()):
            flags = parse_target({k: v for k, v in target.items() if v},
                                 lambda key, problem: ConfigError(f"--target-{key}: {problem}"))
            config = dataclasses.replace(config, target=dataclasses.replace(
                config.target, **{k: getattr(flags, k) for k, v in target.items() if v}))
        if args.fail_on:
            config = dataclasses.replace(config, fail_on=Severity(args.fail_on))
    except ConfigError as exc:
        raise Failure(f"invalid configuration: {exc}") from None
    cache = cache_dir(args)
    rules = load_rules_or_fail([*config.rules_dirs, *args.rules_dir], cache)
    select, ignore = selection(config, codes(args.select), codes(args.ignore), codes(args.extend_select))
    try:
        return config, rules.filter(select, ignore), cache
    except ValueError as exc:
        raise Failure(str(exc)) from None


def config_start(paths: Sequence[Path]) -> Path:
    """Where the search for a configuration file starts: the deepest directory holding
    every path given (pre-commit passes files; a scan usually one directory)."""
    directories = [p.absolute() if p.is_dir() else p.absolute().parent for p in paths]
    return Path(os.path.commonpath(directories)) if directories else Path.cwd()


def cache_dir(args: argparse.Namespace) -> Path | None:
    """The cache folder (see :mod:`portscan.cache`); None with ``--no-cache``, or when
    the folder lies inside a scanned path, where it could have come with the tree."""
    from portscan.cache import ENVIRONMENT, cache_root, inside

    if args.no_cache:
        return None
    folder = cache_root()
    holder = inside(folder, given_paths(args))
    if holder is not None:
        print(f"portscan: not using the cache folder {folder}: it lies inside the scanned path {holder}, "
              f"so it may have come with the tree (set {ENVIRONMENT} to a folder outside it)", file=sys.stderr)
        return None
    return folder


def load_rules_or_fail(extra: Sequence[Path] = (), cache: Path | None = None) -> RuleSet:
    from portscan.ruleset.loader import RuleSetError, builtin_rules_dir, load_rules_cached

    try:
        return load_rules_cached([builtin_rules_dir(), *extra], cache)
    except RuleSetError as exc:
        raise Failure("\n".join(f"invalid rule file: {error}" for error in exc.errors)) from None


def console_for(stream: TextIO) -> Console:
    """A rich console; piped or redirected, it never wraps or crops, so each line
    stays greppable. rich honours NO_COLOR and drops colour off a terminal."""
    from rich.console import Console

    out = Console(highlight=False, file=stream)
    if not out.is_terminal:
        out = Console(highlight=False, soft_wrap=True, width=10_000, file=stream)
    return out


def progress_bar() -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A transient progress bar on stderr when it is an interactive terminal (not under
    pre-commit or CI); (update, stop) callbacks."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal or os.environ.get("PRE_COMMIT") or os.environ.get("CI"):
        return None, lambda: None
    bar = Progress(TextColumn("scanning"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=console, transient=True)
    task = bar.add_task("scan", total=None)
    bar.start()
    return (lambda done, total: bar.update(task, completed=done, total=total)), bar.stop


def render(result: ScanResult, rules: RuleSet, fmt: str, stream: TextIO, cache: Path | None = None) -> None:
    if fmt == "json":
        from portscan.report.json import render_json

        stream.write(render_json(result))
    elif fmt == "markdown":
        from portscan.report.markdown import render_markdown

        stream.write(render_markdown(result))
    elif fmt == "sarif":
        from portscan.report.sarif import render_sarif

        stream.write(render_sarif(result, rules, __version__, cache))
    elif fmt == "github":
        from portscan.report.github import render_github

        stream.write(render_github(result))
    elif fmt == "concise":
        from portscan.report.concise import render_concise

        stream.write(render_concise(result))
    else:
        from portscan.report.text import render_text

        render_text(result, console_for(stream))


def statistics(result: ScanResult, console: Console) -> None:
    from collections import Counter

    from rich.table import Table

    counts = Counter((f.rule, f.name, f.severity.value, f.fix or "-") for f in result.findings)
    table = Table(show_edge=False, box=None, pad_edge=False)
    for column, justify in (("count", "right"), ("code", "left"), ("name", "left"),
                            ("severity", "left"), ("fix", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for (code, name, severity, fix), n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        table.add_row(str(n), code, name, severity, fix)
    console.print(table)


def exit_status(result: ScanResult, fail_on: Severity, exit_zero: bool) -> int:
    if any(error.kind == "internal" for error in result.errors):
        return EXIT_ERROR
    failing = any(f.severity.rank >= fail_on.rank for f in result.findings) or bool(result.errors) \
        or bool(result.unused_suppressions)
    return EXIT_FINDINGS if failing and not exit_zero else EXIT_CLEAN


def run_scan(args: argparse.Namespace) -> int:
    from portscan import api
    from portscan.discover import UsageError

    config, rules, cache = settings(args)
    update, stop = progress_bar() if args.format in ("full", "concise", "markdown") else (None, lambda: None)
    try:
        result = api.scan(given_paths(args), rules, config=config, force_exclude=args.force_exclude,
                          report_unused=args.report_unused_noqa, progress=update, cache=cache,
                          workers=args.jobs, parser=args.parser)
    except UsageError as exc:
        raise Failure(str(exc)) from None
    finally:
        stop()
    chatter = console_for(sys.stderr)
    if args.write_baseline is not None:
        count = api.write_baseline(result, args.write_baseline)
        chatter.print(f"portscan: recorded {count} findings in {args.write_baseline}")
        return EXIT_ERROR if any(e.kind == "internal" for e in result.errors) else EXIT_CLEAN
    baseline_file = args.baseline or config.baseline
    if baseline_file is not None:
        try:
            result, known = api.apply_baseline(result, baseline_file)
        except api.BaselineError as exc:
            raise Failure(str(exc)) from None
        chatter.print(f"portscan: {known.known} findings are in the baseline {baseline_file}"
                      + (f"; {known.gone} baseline entries are fixed (write the baseline again to "
                         "drop them)" if known.gone else ""))
    if args.output_file is not None:
        with args.output_file.open("w", encoding="utf-8") as out:
            render(result, rules, args.format, out, cache)
    else:
        render(result, rules, args.format, sys.stdout, cache)
    for unused in result.unused_suppressions:
        chatter.print(f"portscan: {unused.describe()}")
    if args.statistics:
        statistics(result, chatter if args.format in MACHINE_FORMATS or args.output_file else
                   console_for(sys.stdout))
    return exit_status(result, config.fail_on, args.exit_zero)


def run_fix(args: argparse.Namespace) -> int:
    from portscan import api
    from portscan.discover import UsageError
    from portscan.report.fixes import render_fix_summary, unified_diff

    config, rules, cache = settings(args)
    try:
        run = api.fix(given_paths(args), rules, unsafe=args.unsafe_fixes, write=not args.diff,
                      config=config, force_exclude=args.force_exclude, cache=cache, workers=args.jobs)
    except UsageError as exc:
        raise Failure(str(exc)) from None
    if args.diff:
        sys.stdout.write(unified_diff(run))
    console = console_for(sys.stderr if args.diff else sys.stdout)
    render_fix_summary(run, console, wrote=not args.diff, show_fixes=args.show_fixes)
    if args.diff:
        return EXIT_FINDINGS if run.changed else EXIT_CLEAN
    status = exit_status(run.after, config.fail_on, args.exit_zero)
    if status == EXIT_CLEAN and not args.exit_zero and (
            run.errors or (args.exit_non_zero_on_fix and run.changed)):
        return EXIT_FINDINGS
    return status


def configured_rules(extra: Sequence[Path] = ()) -> RuleSet:
    """Built-in rules plus the in-house ones the configuration (found from the current
    directory) and ``--rules-dir`` name."""
    from portscan.config import ConfigError, nearest_config

    try:
        dirs = nearest_config(Path.cwd()).rules_dirs
    except ConfigError as exc:
        raise Failure(f"invalid configuration: {exc}") from None
    return load_rules_or_fail([*dirs, *extra])


def run_rules(args: argparse.Namespace) -> int:
    rules = configured_rules(args.rules_dir)
    if args.format == "json":
        from portscan.report.json import rule_to_dict

        sys.stdout.write(json.dumps([rule_to_dict(rule) for rule in rules.rules], indent=2) + "\n")
        return EXIT_CLEAN
    rows = [rule_row(rule) for rule in rules.rules]
    if (args.format or ("table" if sys.stdout.isatty() else "tsv")) == "tsv":
        sys.stdout.writelines("\t".join(row) + "\n" for row in [list(RULE_COLUMNS), *rows])
        return EXIT_CLEAN
    from rich.table import Table

    table = Table(title=f"{len(rules)} rules", title_justify="left", show_edge=False)
    for column in RULE_COLUMNS:
        table.add_column(column, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    console_for(sys.stdout).print(table)
    return EXIT_CLEAN


RULE_COLUMNS = ("code", "name", "severity", "category", "confidence", "fixable")


def rule_row(rule: Rule) -> list[str]:
    """One rule's `portscan rules` cells, in :data:`RULE_COLUMNS` order."""
    return [rule.code, rule.name, rule.severity.value, rule.category, rule.confidence.value,
            rule.fix.tier.value if rule.fix else "-"]


def find_rule(rules: RuleSet, key: str) -> Rule | None:
    return rules.by_code.get(key.upper()) or next((r for r in rules.rules if r.name == key), None)


def run_explain(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markdown import Markdown

    from portscan.docs import render_rule_page

    rule = find_rule(configured_rules(args.rules_dir), args.rule)
    if rule is None:
        print(f"portscan: no rule {args.rule!r}; `portscan rules` lists them", file=sys.stderr)
        return EXIT_ERROR
    page = render_rule_page(rule, banner=False)
    Console(highlight=False).print(Markdown(page))
    return EXIT_CLEAN


def run_test(args: argparse.Namespace) -> int:
    from portscan.config import ConfigError, nearest_config
    from portscan.ruleset.loader import RuleSet, builtin_rules_dir
    from portscan.testing import run_rule_tests

    builtin = builtin_rules_dir().resolve()
    try:
        dirs = [d.resolve() for d in args.dirs or nearest_config(Path.cwd()).rules_dirs or [builtin]]
    except ConfigError as exc:
        raise Failure(f"invalid configuration: {exc}") from None
    rules = load_rules_or_fail([d for d in dirs if not d.is_relative_to(builtin)])
    chosen = [r for r in rules.rules if any(Path(r.origin).resolve().is_relative_to(d) for d in dirs)]
    empty = [d for d in dirs if not any(Path(r.origin).resolve().is_relative_to(d) for r in chosen)]
    if empty:
        raise Failure("\n".join(f"{d}: no rule files" for d in empty))
    results = run_rule_tests(RuleSet(chosen))
    for result in results:
        if args.verbose or not result.passed:
            print(f"{'ok  ' if result.passed else 'FAIL'} {result.id} ({shown(Path(result.origin))})")
        for problem in result.problems:
            print(textwrap.indent(problem.rstrip("\n"), "    "))
    failed = sum(not r.passed for r in results)
    print(f"{len(results) - failed} passed, {failed} failed: {len(results)} examples of {len(chosen)} rules")
    return EXIT_FINDINGS if failed else EXIT_CLEAN


def shown(path: Path) -> Path:
    """``path`` relative to the current directory when it is below it."""
    absolute = path.resolve()
    return absolute.relative_to(Path.cwd()) if absolute.is_relative_to(Path.cwd()) else absolute


def run_docs(args: argparse.Namespace) -> int:
    from portscan.docs import render_all

    pages = render_all(load_rules_or_fail().rules)
    existing = {p.name: p.read_text(encoding="utf-8") for p in args.out.glob("*.md")} \
        if args.out.is_dir() else {}
    stale = sorted(set(existing) - set(pages))
    changed = sorted(name for name, text in pages.items() if existing.get(name) != text)
    if args.check:
        for name in changed + stale:
            print(f"portscan: {args.out / name} is out of date; run `portscan docs`", file=sys.stderr)
        return EXIT_FINDINGS if changed or stale else EXIT_CLEAN
    args.out.mkdir(parents=True, exist_ok=True)
    for name in changed:
        (args.out / name).write_text(pages[name], encoding="utf-8")
    for name in stale:
        (args.out / name).unlink()
    print(f"portscan: {len(changed)} written, {len(stale)} removed, {len(pages)} pages in {args.out}")
    return EXIT_CLEAN


def run_verify(args: argparse.Namespace) -> int:
    from portscan.verify.cli import run

    return run(args, configured_rules())


COMMANDS = {"scan": run_scan, "fix": run_fix, "rules": run_rules, "explain": run_explain, "test": run_test,
            "docs": run_docs, "verify": run_verify}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        return COMMANDS[args.command](args)
    except Failure as exc:
        for line in str(exc).splitlines():
            print(f"portscan: {line}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
