"""Command line: parse arguments, run a stage, print, return the exit code.

Exit codes (ruff's convention):
  0  scan: nothing found and every file could be scanned; verify: PASS
  1  scan: findings, or files that could not be read or parsed; verify: FAIL
  2  usage error, broken rule file, or an internal error
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from collections.abc import Sequence

from portscan import __version__

if TYPE_CHECKING:
    from typing import TextIO

    from rich.console import Console

    from portscan.ruleset import Rule, RuleSet

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

EPILOG = """\
exit status:
  0  no findings, and every file could be scanned
  1  findings, or files that could not be read or parsed
  2  usage error, invalid rule file, or internal error
"""

FIX_EPILOG = """\
tiers:
  safe    behaviour identical on NVIDIA and ROCm; applied by default
  unsafe  may change behaviour or needs review; applied with --unsafe-fixes
  (rules without a fix only suggest a rewrite; `portscan explain CODE` shows it)

exit status:
  0  no findings remain (with --diff: nothing would change)
  1  findings remain, or a file could not be fixed (with --diff: something would change)
  2  usage error, invalid rule file, or internal error
"""


def add_rule_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--select", metavar="CODES", default="",
                        help="only these rules: comma-separated codes or prefixes (PS2,PS316)")
    parser.add_argument("--ignore", metavar="CODES", default="",
                        help="not these rules: comma-separated codes or prefixes")


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
        description="Scan Python files for code that fails or behaves differently on ROCm.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scan.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                      help="files or directories to scan (default: the current directory)")
    scan.add_argument("--format", choices=("full", "json", "markdown"), default="full",
                      help="full: grouped report with code frames (default); "
                           "json: one JSON object (see docs/json-output.md); "
                           "markdown: a migration report with a readiness verdict")
    add_rule_selection(scan)
    fix = commands.add_parser(
        "fix", help="apply ROCm-safe rewrites",
        description="Rewrite CUDA-only code with the fixes rules declare, keeping formatting "
                    "and comments. Safe fixes by default; unsafe ones with --unsafe-fixes.",
        epilog=FIX_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    fix.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                     help="files or directories to fix (default: the current directory)")
    fix.add_argument("--unsafe-fixes", action="store_true",
                     help="also apply fixes that may change behaviour (review the diff)")
    fix.add_argument("--diff", action="store_true",
                     help="print a unified diff of the changes and write nothing")
    fix.add_argument("--show-fixes", action="store_true",
                     help="list the fixes applied in each file")
    add_rule_selection(fix)
    rules = commands.add_parser("rules", help="list every rule",
                                description="List every rule: code, name, severity, category.")
    rules.add_argument("--format", choices=("table", "json"), default="table")
    explain = commands.add_parser("explain", help="show a rule's documentation",
                                  description="Show what a rule flags, ROCm behaviour, rewrite, "
                                              "example and references.")
    explain.add_argument("rule", metavar="CODE", help="rule code or name, e.g. PS202 or apex-amp")
    verify = commands.add_parser(
        "verify", help="run the project's training for a few steps and judge the port",
        description="Run a training command for a few steps on the GPU that is there (or under "
                    "ROCm emulation) and check that it trains.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from portscan.verify.cli import add_arguments as add_verify_arguments

    add_verify_arguments(verify)
    docs = commands.add_parser("docs", help="write docs/rules/ from the rule files",
                               description="Generate one Markdown page per rule plus an index.")
    docs.add_argument("--out", type=Path, default=Path("docs/rules"), help="output folder")
    docs.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 if the folder is out of date")
    return parser


def load_rules_or_report() -> RuleSet | None:
    from portscan.ruleset import RuleSetError, load_rules

    try:
        return load_rules()
    except RuleSetError as exc:
        for error in exc.errors:
            print(f"portscan: invalid rule file: {error}", file=sys.stderr)
        return None


def selected(args: argparse.Namespace, rules: RuleSet) -> RuleSet:
    """The rules ``--select``/``--ignore`` leave. Raises ``ValueError`` for a selector
    that matches no rule."""
    def split(text: str) -> list[str]:
        return [part.strip().upper() for part in text.split(",") if part.strip()]

    return rules.filter(split(args.select), split(args.ignore))


def run_scan(args: argparse.Namespace, rules: RuleSet) -> int:
    from portscan.discover import UsageError
    from portscan.scan import scan_paths

    try:
        result = scan_paths(args.paths or [Path(".")], selected(args, rules))
    except (UsageError, ValueError) as exc:
        print(f"portscan: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.format == "json":
        from portscan.report.json import render_json

        sys.stdout.write(render_json(result))
    elif args.format == "markdown":
        from portscan.report.markdown import render_markdown

        sys.stdout.write(render_markdown(result))
    else:
        from portscan.report.text import render_text

        render_text(result, console_for(sys.stdout))
    if any(error.kind == "internal" for error in result.errors):
        return EXIT_ERROR
    return EXIT_FINDINGS if result.findings or result.errors else EXIT_CLEAN


def console_for(stream: TextIO) -> Console:
    """A rich console; piped or redirected, it never wraps or crops, so each line
    stays greppable."""
    from rich.console import Console

    out = Console(highlight=False, file=stream)
    if not out.is_terminal:
        out = Console(highlight=False, soft_wrap=True, width=10_000, file=stream)
    return out


def run_fix(args: argparse.Namespace, rules: RuleSet) -> int:
    from portscan.discover import UsageError
    from portscan.fix.apply import fix_paths
    from portscan.report.fixes import render_fix_summary, unified_diff

    try:
        run = fix_paths(args.paths or [Path(".")], selected(args, rules), unsafe=args.unsafe_fixes,
                        write=not args.diff)
    except (UsageError, ValueError) as exc:
        print(f"portscan: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.diff:
        sys.stdout.write(unified_diff(run))
    console = console_for(sys.stderr if args.diff else sys.stdout)
    render_fix_summary(run, console, wrote=not args.diff, show_fixes=args.show_fixes)
    if args.diff:
        return EXIT_FINDINGS if run.changed else EXIT_CLEAN
    if any(e.kind == "internal" for e in run.after.errors):
        return EXIT_ERROR
    return EXIT_FINDINGS if run.after.findings or run.after.errors or run.errors else EXIT_CLEAN


def run_rules(args: argparse.Namespace, rules: RuleSet) -> int:
    if args.format == "json":
        from portscan.report.json import rule_to_dict

        sys.stdout.write(json.dumps([rule_to_dict(rule) for rule in rules.rules], indent=2) + "\n")
        return EXIT_CLEAN
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rules)} rules", title_justify="left", show_edge=False)
    for column in ("code", "name", "severity", "category", "confidence", "fixable"):
        table.add_column(column)
    for rule in rules.rules:
        table.add_row(rule.code, rule.name, rule.severity.value, rule.category,
                      rule.confidence.value, rule.fix.tier.value if rule.fix else "-")
    Console(highlight=False).print(table)
    return EXIT_CLEAN


def find_rule(rules: RuleSet, key: str) -> Rule | None:
    return rules.by_code.get(key.upper()) or next((r for r in rules.rules if r.name == key), None)


def run_explain(args: argparse.Namespace, rules: RuleSet) -> int:
    from rich.console import Console
    from rich.markdown import Markdown

    from portscan.docs import render_rule_page

    rule = find_rule(rules, args.rule)
    if rule is None:
        print(f"portscan: no rule {args.rule!r}; `portscan rules` lists them", file=sys.stderr)
        return EXIT_ERROR
    page = render_rule_page(rule).split("\n", 1)[1]  # drop the generated-file banner
    Console(highlight=False).print(Markdown(page))
    return EXIT_CLEAN


def run_docs(args: argparse.Namespace, rules: RuleSet) -> int:
    from portscan.docs import render_all

    pages = render_all(rules.rules)
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


def run_verify(args: argparse.Namespace, rules: RuleSet) -> int:
    from portscan.verify.cli import run

    return run(args, rules)


COMMANDS = {"scan": run_scan, "fix": run_fix, "rules": run_rules, "explain": run_explain, "docs": run_docs,
            "verify": run_verify}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    rules = load_rules_or_report()
    if rules is None:
        return EXIT_ERROR
    try:
        return COMMANDS[args.command](args, rules)
    except KeyboardInterrupt:
        return 130
