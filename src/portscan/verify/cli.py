"""Command-line wiring for ``portscan verify``: options, the plan, the run, the report.

Exit status: 0 PASS, 1 FAIL, 2 usage or configuration error (no command, bad
``[tool.portscan.verify]``, unreadable reference, a command that cannot start).
This module is imported when the parser is built, so it imports nothing heavy at the
top: the rest of the verify package loads only when verify runs (torch never does: it
runs in the child).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from portscan.ruleset import RuleSet
    from portscan.verify.entry import Candidate, Settings
    from portscan.verify.reference import Reference
    from portscan.verify.runner import RunSpec
    from portscan.verify.trace import Observation
    from portscan.verify.verdict import Comparison, Criteria

EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
EPILOG = """\
exit status:
  0  PASS
  1  FAIL: a check failed (the report says which, and the likely rule for a crash)
  2  usage error, invalid [tool.portscan.verify], unreadable reference, or a command
     that cannot start

command: after --, else `command` in [tool.portscan.verify], else the best candidate
found (printed with how to pin it). See docs/verify.md.
"""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError("must be between 0 and 1")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add verify's options to its subparser."""
    parser.epilog = EPILOG
    parser.usage = ("portscan verify [--steps N] [--timeout S] [--record FILE | --against FILE] "
                    "[--emulate rocm] [--nproc N] [--format text|json] [options] [-- CMD ...]")
    parser.add_argument("--steps", type=_positive_int, metavar="N",
                        help="optimizer steps to run before stopping (default 20)")
    parser.add_argument("--timeout", type=_positive_float, metavar="S",
                        help="seconds before the whole process group is killed (default 600)")
    reference = parser.add_mutually_exclusive_group()
    reference.add_argument("--record", type=Path, metavar="FILE",
                           help="write the steps, losses and backend of a passing run to FILE")
    reference.add_argument("--against", type=Path, metavar="FILE",
                           help="compare each step's loss with a reference written by --record")
    parser.add_argument("--rtol", type=_non_negative, metavar="R",
                        help="relative tolerance per step for --against (default 0.05)")
    parser.add_argument("--outliers", type=_fraction, metavar="F",
                        help="fraction of compared steps allowed outside --rtol (default 0.1)")
    parser.add_argument("--max-rise", type=_non_negative, metavar="F",
                        help="how much the fitted loss line may rise over the window, as a "
                             "fraction of the mean loss (default 0.02)")
    parser.add_argument("--emulate", choices=("rocm",),
                        help="make the Python layer look like a PyTorch ROCm build on an MI300X")
    parser.add_argument("--allow-import", action="append", default=[], metavar="MODULE",
                        help="under --emulate, let MODULE import (e.g. apex, when you build ROCm/apex)")
    parser.add_argument("--nproc", type=_positive_int, metavar="N",
                        help="processes to launch through torch.distributed.run (default 1)")
    parser.add_argument("--project", type=Path, default=Path("."), metavar="DIR",
                        help="the project: working directory of the command, and where "
                             "pyproject.toml is read (default: the current directory)")
    parser.add_argument("--show-output", action="store_true",
                        help="stream the command's output to stderr while it runs")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    # not "command": that is the top-level parser's subcommand dest
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                        help="the training command, as an argument list (no shell)")


@dataclass(frozen=True, slots=True)
class Plan:
    command: tuple[str, ...]
    origin: str
    guessed: bool  #: discovered, not given
    alternatives: tuple[Candidate, ...]
    criteria: Criteria
    emulate: str | None
    nproc: int
    against: Path | None
    allow: tuple[str, ...]


class UsageError(ValueError):
    pass


def make_plan(args: argparse.Namespace, settings: Settings, project: Path) -> Plan:
    """Merge the command line over ``[tool.portscan.verify]`` over the defaults."""
    from portscan.verify.entry import discover_candidates
    from portscan.verify.verdict import (DEFAULT_MAX_RISE, DEFAULT_OUTLIERS, DEFAULT_RTOL,
                                         DEFAULT_STEPS, DEFAULT_TIMEOUT, Criteria)

    def pick(cli, configured, default):
        return cli if cli is not None else configured if configured is not None else default

    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    alternatives: tuple[Candidate, ...] = ()
    guessed = False
    if command:
        origin = "the command line"
    elif settings.command:
        command, origin = list(settings.command), "pyproject.toml [tool.portscan.verify]"
    else:
        found = discover_candidates(project)
        if not found:
            raise UsageError("no command given, none in [tool.portscan.verify], and no training "
                             "entry point found; run `portscan verify -- python train.py ...`")
        best, alternatives, guessed = found[0], tuple(found[1:4]), True
        command, origin = list(best.command), f"{best.source} ({best.reason})"
    criteria = Criteria(
        steps=pick(args.steps, settings.steps, DEFAULT_STEPS),
        timeout=pick(args.timeout, settings.timeout, DEFAULT_TIMEOUT),
        rtol=pick(args.rtol, settings.rtol, DEFAULT_RTOL),
        outliers=pick(args.outliers, settings.outliers, DEFAULT_OUTLIERS),
        max_rise=pick(args.max_rise, settings.max_rise, DEFAULT_MAX_RISE))
    against = args.against
    if against is None and args.record is None and settings.against:
        against = project / settings.against
    return Plan(command=tuple(command), origin=origin, guessed=guessed,
                alternatives=alternatives, criteria=criteria,
                emulate=args.emulate or settings.emulate, nproc=pick(args.nproc, settings.nproc, 1),
                against=against, allow=tuple(settings.allow_imports) + tuple(args.allow_import))


def _kind(backend: dict) -> str:
    """``rocm``, ``cuda`` or ``cpu``: what the work ran on."""
    if not backend.get("gpu"):
        return "cpu"
    return "rocm" if backend.get("hip") else "cuda"


def _error(message: str) -> int:
    print(f"portscan verify: {_CONTROL.sub('?', message)}", file=sys.stderr)
    return EXIT_ERROR


def _announce_guess(plan: Plan) -> None:
    """Say which discovered command runs, what else was considered, and how to pin it."""
    from rich.console import Console
    from rich.text import Text

    from portscan.verify.entry import pin_snippet

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(Text(f"portscan verify: no command given; running `{' '.join(plan.command)}` "
                   f"from {plan.origin}"))
    for other in plan.alternatives:
        err.print(Text(f"  also considered: `{' '.join(other.command)}` ({other.source}, {other.reason})",
                       style="dim"))
    pin = "\n".join("    " + line for line in pin_snippet(plan.command).splitlines())
    err.print(Text(f"  pin it in pyproject.toml:\n{pin}", style="dim"))


def _run_spec(plan: Plan, argv: tuple[str, ...], project: Path, rules: RuleSet) -> RunSpec:
    from portscan.discover import first_party_modules
    from portscan.verify import emulation
    from portscan.verify.runner import RunSpec

    blocked: dict[str, str] = {}
    programs: dict[str, str] = {}
    if plan.emulate:
        # the project's own top-level modules are never a missing package
        allow = plan.allow + tuple(sorted(first_party_modules(project.resolve())))
        blocked = emulation.blocked_modules(rules, allow)
        programs = emulation.blocked_programs(rules)
    return RunSpec(argv=argv, cwd=project, steps=plan.criteria.steps, timeout=plan.criteria.timeout,
                   emulate=plan.emulate, blocked=blocked, programs=programs)


def _reference_notes(reference: Reference, observation: Observation, comparison: Comparison) -> list[str]:
    notes = []
    if reference.backend and observation.backend and \
            _kind(reference.backend) != _kind(asdict(observation.backend)):
        notes.append("the reference comes from another backend: expect differences within the "
                     "tolerance, not equality")
    if comparison.missing:
        notes.append(f"{comparison.missing} reference steps were not reached by this run")
    return notes


def run(args: argparse.Namespace, rules: RuleSet) -> int:
    """Run ``portscan verify``; return the exit code."""
    from rich.console import Console

    from portscan.verify.entry import ConfigError, load_settings
    from portscan.verify.hints import likely_rules
    from portscan.verify.reference import ReferenceError, read_reference, to_document, write_reference
    from portscan.verify.report import Result, render_json, render_text
    from portscan.verify.runner import RunError, run_command, torchrun_argv
    from portscan.verify.trace import merge_traces
    from portscan.verify.verdict import compare, judge

    project = args.project
    if not project.is_dir():
        return _error(f"{project}: not a directory")
    try:
        plan = make_plan(args, load_settings(project), project)
        reference = read_reference(plan.against) if plan.against else None
        argv = torchrun_argv(plan.command, plan.nproc) if plan.nproc > 1 else plan.command
    except (ConfigError, ReferenceError, UsageError, ValueError) as exc:
        return _error(str(exc))
    if plan.guessed:
        _announce_guess(plan)
    echo = _echo_to_stderr if args.show_output else None
    try:
        output = run_command(_run_spec(plan, tuple(argv), project, rules), echo=echo)
    except RunError as exc:
        return _error(str(exc))

    observation = merge_traces(output.traces, exit_status=output.exit_status,
                               timed_out=output.timed_out, seconds=output.seconds, output=output.output)
    notes: list[str] = []
    if output.created:
        shown = ", ".join(output.created[:5]) + (" ..." if len(output.created) > 5 else "")
        notes.append(f"{len(output.created)} new entries appeared in the project during the run "
                     f"({shown}); portscan leaves them")
    comparison = None
    if reference is not None:
        comparison = compare(observation.steps, reference.steps, plan.criteria.rtol, plan.criteria.outliers)
        notes += _reference_notes(reference, observation, comparison)
    verdict = judge(observation, plan.criteria, comparison,
                    reference_name=plan.against.name if plan.against else "the reference")
    hints = likely_rules(observation.failure, project, rules) if observation.failure else ()

    recorded = None
    if args.record is not None and not verdict.passed:
        notes.append(f"{args.record} was not written: only a passing run makes a reference")
    elif args.record is not None:
        try:
            write_reference(args.record, to_document(observation.steps, plan.command, observation.backend,
                                                     plan.emulate, plan.nproc))
        except OSError as exc:
            return _error(f"{args.record}: cannot write: {exc.strerror or exc}")
        recorded = str(args.record)

    result = Result(command=plan.command, origin=plan.origin, argv=tuple(argv), emulate=plan.emulate,
                    nproc=plan.nproc, criteria=plan.criteria, observation=observation, verdict=verdict,
                    output=output.output, hints=hints,
                    reference_file=str(plan.against) if plan.against else None,
                    recorded=recorded, notes=tuple(notes))
    if args.format == "json":
        sys.stdout.write(render_json(result))
    else:
        out = Console(highlight=False)
        if not out.is_terminal:  # piped or redirected: never wrap, so each line stays greppable
            out = Console(highlight=False, soft_wrap=True, width=10_000)
        render_text(result, out)
    return EXIT_PASS if verdict.passed else EXIT_FAIL


def _echo_to_stderr(line: str) -> None:
    sys.stderr.write(line)
    sys.stderr.flush()
