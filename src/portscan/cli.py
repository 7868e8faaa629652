"""Command line: parse arguments, run a stage, print, return the exit code.

Exit codes (ruff's convention):
  0  nothing found: no findings and every file could be scanned
  1  findings, or files that could not be read or parsed (the scan went on)
  2  usage error, broken rule file, or an internal error
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from collections.abc import Sequence

from portscan import __version__

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

EPILOG = """\
exit status:
  0  no findings, and every file could be scanned
  1  findings, or files that could not be read or parsed
  2  usage error, invalid rule file, or internal error
"""


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
    scan.add_argument("--format", choices=("full", "json"), default="full",
                      help="full: grouped report with code frames (default); "
                           "json: one JSON object (see docs/json-output.md)")
    return parser


def run_scan(args: argparse.Namespace) -> int:
    from rich.console import Console

    from portscan.discover import UsageError
    from portscan.ruleset import RuleSetError, load_rules
    from portscan.scan import scan_paths

    try:
        rules = load_rules()
    except RuleSetError as exc:
        for error in exc.errors:
            print(f"portscan: invalid rule file: {error}", file=sys.stderr)
        return EXIT_ERROR
    try:
        result = scan_paths(args.paths or [Path(".")], rules)
    except UsageError as exc:
        print(f"portscan: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.format == "json":
        from portscan.report.json import render_json

        sys.stdout.write(render_json(result))
    else:
        from portscan.report.text import render_text

        out = Console(highlight=False)
        if not out.is_terminal:
            # piped or redirected: never wrap or crop, so each line stays greppable
            out = Console(highlight=False, soft_wrap=True, width=10_000)
        render_text(result, out)
    if any(error.kind == "internal" for error in result.errors):
        return EXIT_ERROR
    return EXIT_FINDINGS if result.findings or result.errors else EXIT_CLEAN


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        return run_scan(args)
    except KeyboardInterrupt:
        return 130
