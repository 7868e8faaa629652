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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from portscan.ruleset.loader import RuleSet
    from portscan.verify.entry import Candidate, Settings
    from portscan.verify.reference import Reference
    from portscan.verify.runner import RunSpec
    from portscan.verify.trace import Observation
    from portscan.verify.verdict import Comparison, Criteria

EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130
EPILOG = """\
exit status:
  0  PASS
  1  FAIL: a check failed (the report says which, and the likely rule for a crash)
  2  usage error, invalid [tool.portscan.verify], unreadable reference, or a command
     that cannot start
  130  interrupted (Ctrl-C): the report shows the steps so far

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
    parser.add_argument("--repeats", type=_positive_int, metavar="N",
                        help="with --record: run N times (other seeds where the command takes "
                             "--seed) and store the spread as the comparison band (default 1)")
    parser.add_argument("--rtol", type=_non_negative, metavar="R",
                        help="narrowest per-step band for --against, relative (default 0.01)")
    parser.add_argument("--outliers", type=_fraction, metavar="F",
                        help="fraction of compared steps allowed outside the band (default 0.1)")
    parser.add_argument("--max-rise", type=_non_negative, metavar="F",
                        help="how much the last third of the window may lie above the first, "
                             "beyond the noise, as a fraction of the mean loss (default 0.02)")
    parser.add_argument("--metric", metavar="NAME",
                        help="what to judge: loss (the first optimizer's, default), loss@2 (the "
                             "second optimizer's), or a name the script prints, e.g. reward")
    parser.add_argument("--maximize", action="store_true", default=None,
                        help="the metric should rise (a reward or an accuracy)")
    parser.add_argument("--no-trend", dest="trend", action="store_false", default=None,
                        help="do not judge the trend (objectives that need not fall in N steps)")
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
    repeats: int = 1


class UsageError(ValueError):
    pass


def make_plan(args: argparse.Namespace, settings: Settings, project: Path) -> Plan:
    """Merge the command line over ``[tool.portscan.verify]`` over the defaults."""
    from portscan.verify.entry import discover_candidates, gpu_present
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
        if not gpu_present():
            runnable = [c for c in found if not c.needs_gpu]
            if not runnable:
                raise UsageError(f"the training entry points found need a GPU and this machine has "
                                 f"none (`{' '.join(found[0].command)}`, {found[0].source}: "
                                 f"{found[0].needs_gpu}); not run")
            found = runnable + [c for c in found if c.needs_gpu]
        best, alternatives, guessed = found[0], tuple(found[1:4]), True
        command, origin = list(best.command), f"{best.source} ({best.reason})"
    criteria = Criteria(
        steps=pick(args.steps, settings.steps, DEFAULT_STEPS),
        timeout=pick(args.timeout, settings.timeout, DEFAULT_TIMEOUT),
        rtol=pick(args.rtol, settings.rtol, DEFAULT_RTOL),
        outliers=pick(args.outliers, settings.outliers, DEFAULT_OUTLIERS),
        max_rise=pick(args.max_rise, settings.max_rise, DEFAULT_MAX_RISE),
        trend=pick(args.trend, settings.trend, True), metric=pick(args.metric, settings.metric, "loss"),
        maximize=pick(args.maximize, settings.maximize, False))
    repeats = pick(args.repeats, settings.repeats, 1)
    if args.repeats and args.record is None:
        raise UsageError("--repeats needs --record: it records the spread of several runs")
    against = args.against
    if against is None and args.record is None and settings.against:
        against = project / settings.against
    return Plan(command=tuple(command), origin=origin, guessed=guessed,
                alternatives=alternatives, criteria=criteria,
                emulate=args.emulate or settings.emulate, nproc=pick(args.nproc, settings.nproc, 1),
                against=against, allow=tuple(settings.allow_imports) + tuple(args.allow_import),
                repeats=repeats if args.record is not None else 1)


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
    reasons = emulation.block_reasons(rules, blocked) if blocked else {}
    return RunSpec(argv=argv, cwd=project, steps=plan.criteria.steps, timeout=plan.criteria.timeout,
                   emulate=plan.emulate, blocked=blocked, programs=programs, reasons=reasons)


def _reference_notes(reference: Reference, observation: Observation, comparison: Comparison,
                     plan: Plan) -> list[str]:
    from portscan.verify.reference import backend_kind_of, mismatches

    backend = asdict(observation.backend) if observation.backend else None
    notes = [f"warning: {text}" for text in mismatches(
        reference, command=plan.command, nproc=plan.nproc, capture=observation.loss_source,
        backend_kind=backend_kind_of(backend), metric=plan.criteria.metric)]
    if comparison.missing:
        notes.append(f"{plural(comparison.missing, 'reference step')} not reached by this run")
    return notes


def step_notes(observation: Observation) -> list[str]:
    """What a reader must know about how the judged steps' losses were formed."""
    from portscan.verify.trace import plural

    notes = []
    steps = observation.steps
    accumulated = [s.backward_calls for s in steps if s.backward_calls > 1 and not s.evaluations]
    if accumulated:
        counts = sorted(set(accumulated))
        notes.append(f"gradient accumulation: each step's loss is the mean of its "
                     f"{'/'.join(map(str, counts))} micro-batch losses (a script that divides by the "
                     f"count reports the divided values)")
    if any(s.evaluations for s in steps):
        notes.append("a closure optimizer (LBFGS-like): each step's loss is its first closure "
                     "evaluation, the value step() returns; the others are not averaged in")
    skipped = [s.step for s in steps if s.skipped]
    if skipped:
        notes.append(f"GradScaler skipped {plural(len(skipped), 'step')} (inf/NaN gradients): "
                     f"{', '.join(map(str, skipped[:10]))}{' ...' if len(skipped) > 10 else ''}")
    return notes


def seeded_commands(command: Sequence[str], repeats: int, project: Path) -> tuple[tuple[str, ...], ...]:
    """The command for each recorded run: the first as given, the others with another
    ``--seed`` where the command passes one or its script defines one, else the same."""
    words = list(command)
    runs = [tuple(words)]
    for i, word in enumerate(words):
        if word == "--seed" and i + 1 < len(words) and _is_int(words[i + 1]):
            base = int(words[i + 1])
            return tuple(tuple(words[:i + 1] + [str(base + k)] + words[i + 2:]) for k in range(repeats))
        if word.startswith("--seed=") and _is_int(word[7:]):
            base = int(word[7:])
            return tuple(tuple(words[:i] + [f"--seed={base + k}"] + words[i + 1:]) for k in range(repeats))
    script = next((w for w in words[1:] if w.endswith(".py")), None)
    takes_seed = False
    if script is not None:
        try:
            takes_seed = bool(re.search(r"""["']--seed["']""", (project / script).read_text(errors="replace")))
        except OSError:
            takes_seed = False
    for k in range(1, repeats):
        runs.append(tuple([*words, "--seed", str(k)]) if takes_seed else tuple(words))
    return tuple(runs)


def _is_int(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+", text))


def remove_created(project: Path, created: Sequence[str]) -> list[str]:
    """Remove what a failed run of a *guessed* command created in the project; return the
    entries that could not be removed."""
    import shutil

    left = []
    root = project.resolve()
    for entry in created:
        path = (root / entry)
        try:
            path.resolve().relative_to(root)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except (OSError, ValueError):
            left.append(entry)
    return left


def run(args: argparse.Namespace, rules: RuleSet) -> int:
    """Run ``portscan verify``; return the exit code."""
    from rich.console import Console

    from portscan.verify.entry import ConfigError, load_settings
    from portscan.verify.hints import likely_rules
    from portscan.verify.reference import ReferenceError, read_reference, to_document, write_reference
    from portscan.verify.report import Result, render_json, render_text
    from portscan.verify.runner import RunError, run_command, torchrun_argv
    from portscan.verify.trace import merge_traces, select_metric
    from portscan.verify.verdict import compare, judge

    project = args.project
    if not project.is_dir():
        return _error(f"{project}: not a directory")
    try:
        plan = make_plan(args, load_settings(project), project)
        reference = read_reference(plan.against) if plan.against else None
        commands = seeded_commands(plan.command, plan.repeats, project)
        argvs = [torchrun_argv(c, plan.nproc) if plan.nproc > 1 else c for c in commands]
    except (ConfigError, ReferenceError, UsageError, ValueError) as exc:
        return _error(str(exc))
    if plan.guessed:
        _announce_guess(plan)
    echo = _echo_to_stderr if args.show_output else None
    recorded_runs = []
    result = None
    for index, argv in enumerate(argvs):
        try:
            output = run_command(_run_spec(plan, tuple(argv), project, rules), echo=echo)
        except RunError as exc:
            return _error(str(exc))
        observation = merge_traces(output.traces, exit_status=output.exit_status,
                                   timed_out=output.timed_out, seconds=output.seconds,
                                   output=output.output, interrupted=output.interrupted,
                                   lingered=output.lingered)
        observation = select_metric(observation, plan.criteria.metric, output.output)
        notes: list[str] = step_notes(observation)
        if len(argvs) > 1:
            notes.append(f"run {index + 1} of {len(argvs)}: `{' '.join(commands[index])}`")
        comparison = None
        if reference is not None:
            comparison = compare(observation.steps, reference.steps, plan.criteria.rtol,
                                 plan.criteria.outliers, reference.runs)
            notes += _reference_notes(reference, observation, comparison, plan)
        verdict = judge(observation, plan.criteria, comparison,
                        reference_name=plan.against.name if plan.against else "the reference")
        if output.created:
            left = list(output.created)
            if plan.guessed and not verdict.passed:
                left = remove_created(project, output.created)
                removed = len(output.created) - len(left)
                if removed:
                    notes.append(f"the guessed command failed: removed the {plural(removed, 'entry', 'entries')} "
                                 f"it created in the project ({_shown(output.created)})")
            if left:
                notes.append(f"{plural(len(left), 'new entry', 'new entries')} appeared in the project "
                             f"during the run ({_shown(left)}); portscan leaves them")
        hints = likely_rules(observation.failure, project, rules) if observation.failure else ()
        result = Result(command=plan.command, origin=plan.origin, argv=tuple(argv), emulate=plan.emulate,
                        nproc=plan.nproc, criteria=plan.criteria, observation=observation, verdict=verdict,
                        output=output.output, hints=hints,
                        reference_file=str(plan.against) if plan.against else None, notes=tuple(notes))
        if not verdict.passed or output.interrupted:
            break
        recorded_runs.append(observation)

    assert result is not None
    if args.record is not None:
        if len(recorded_runs) < len(argvs):
            result = replace(result, notes=(*result.notes, f"{args.record} was not written: only passing "
                                                           f"runs make a reference"))
        else:
            first = recorded_runs[0]
            document = to_document([o.steps for o in recorded_runs], plan.command, first.backend,
                                   plan.emulate, plan.nproc, capture=first.loss_source,
                                   metric=plan.criteria.metric, commands=commands)
            try:
                write_reference(args.record, document)
            except OSError as exc:
                return _error(f"{args.record}: cannot write: {exc.strerror or exc}")
            result = replace(result, recorded=str(args.record), repeats=len(recorded_runs))
    if args.format == "json":
        sys.stdout.write(render_json(result))
    else:
        out = Console(highlight=False)
        if not out.is_terminal:  # piped or redirected: never wrap, so each line stays greppable
            out = Console(highlight=False, soft_wrap=True, width=10_000)
        render_text(result, out)
    if result.observation.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_PASS if result.verdict.passed else EXIT_FAIL


def plural(count: int, noun: str, many: str | None = None) -> str:
    from portscan.verify.trace import plural as _plural

    return _plural(count, noun, many)


def _shown(entries: Sequence[str]) -> str:
    return ", ".join(entries[:5]) + (" ..." if len(entries) > 5 else "")


def _echo_to_stderr(line: str) -> None:
    sys.stderr.write(line)
    sys.stderr.flush()
