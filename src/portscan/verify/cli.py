"""Command-line wiring for `portscan verify` (arguments and the command itself)."""

from __future__ import annotations

import argparse

from portscan.ruleset import RuleSet


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add verify's options to its subparser."""
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                        help="the training command to run")


def run(args: argparse.Namespace, rules: RuleSet) -> int:
    """Run `portscan verify`; return the exit code."""
    raise NotImplementedError("portscan verify is being built")
