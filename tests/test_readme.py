"""The README's claims that name a number or a command, checked against the code: the
rule count, the install-and-test commands (`.ci/run`), the example report, every
`portscan ...` command line and flag, and the smoke-training command after a fix."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from portscan.cli import build_parser, main
from portscan.ruleset.loader import load_rules

from conftest import REPO, SMOKE_TRAINING

README = (REPO / "README.md").read_text(encoding="utf-8")
CODE_BLOCKS = re.findall(r"(?ms)^```[a-z]*\n(.*?)^```", README)


def subcommands() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_rule_count_is_the_packs() -> None:
    (claimed,) = re.findall(r"^(\d+) rules, each a TOML file", README, re.MULTILINE)
    assert int(claimed) == len(load_rules()), "update the count in the README's Rules section"


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` is the README's second command, verbatim (the first is run below)."""
    install, test = [line for line in CODE_BLOCKS[0].splitlines() if line and not line.startswith("#")]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test in ci and install.startswith(test.split(" && pip")[0])


def test_the_readme_scan_prints_the_readme_report(capsys, monkeypatch) -> None:
    install = next(line for line in CODE_BLOCKS[0].splitlines() if "portscan scan" in line)
    command = shlex.split(install.rsplit("&& ", 1)[1])
    monkeypatch.chdir(REPO)
    assert command[0] == "portscan" and main(command[1:]) == 1  # "exit status 1: it has findings"
    out = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    report = next(block for block in CODE_BLOCKS if "findings in" in block)
    for chunk in report.split("\n...\n"):
        lines = [line.rstrip() for line in chunk.strip("\n").splitlines()]
        starts = [i for i, line in enumerate(out) if line == lines[0]]
        assert any(out[i:i + len(lines)] == lines for i in starts), f"not in the scan output:\n{chunk}"


def readme_command_lines() -> list[str]:
    """Every `portscan CMD ...` the README shows, in code blocks and code spans, up to a
    comment or the end of the span."""
    spans = re.findall(r"`(portscan [a-z-][^`]*)`", README)
    lines = [m for block in CODE_BLOCKS for m in re.findall(r"(?<![\w./-])portscan [a-z-][^#\n`]*", block)]
    return sorted({line.strip() for line in spans + lines})


@pytest.mark.parametrize("line", readme_command_lines())
def test_every_readme_command_names_real_options(line: str) -> None:
    words = line.split()
    commands = subcommands()
    if words[1].startswith("-"):  # `portscan --version`
        assert words[1] in build_parser()._option_string_actions
        return
    assert words[1] in commands, f"no `portscan {words[1]}`"
    known = commands[words[1]]._option_string_actions
    words = words[:words.index("--")] if "--" in words else words  # `verify -- CMD`: CMD's own
    flags = [w.split("=")[0].strip("[]|,") for w in words[2:] if w.startswith(("-", "[-"))]
    for flag in (f for part in flags for f in part.split("|") if f.startswith("-")):
        assert flag in known, f"`portscan {words[1]}` has no {flag}"


def test_every_flag_the_readme_names_exists() -> None:
    known = set(build_parser()._option_string_actions)
    for parser in subcommands().values():
        known |= set(parser._option_string_actions)
    prose = re.sub(r"(?ms)^```.*?^```", "", README)
    prose = re.sub(r"`(?!portscan )[a-z][\w./-]* [^`]*`", "", prose)  # another program's command line
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", prose))
    foreign = {"--gpus", "--all-files", "--files"}  # docker's and pre-commit's, named alone
    assert named and named <= known | foreign, named - known


def test_the_smoke_training_claim_is_the_tested_command() -> None:
    """tests/test_fix.py runs `python train.py` with SMOKE_TRAINING after the fixes."""
    assert f"python train.py {' '.join(SMOKE_TRAINING)}` then trains on CPU" in " ".join(README.split())
