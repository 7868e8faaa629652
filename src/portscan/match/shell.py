"""Shell scripts: the programs they run, the flags they pass, the variables they
export and the packages they install (see :mod:`portscan.match.commands`)."""

from __future__ import annotations

from collections.abc import Sequence

from portscan.match import Match
from portscan.match.commands import commands
from portscan.match.common import command_matches, presence_tested
from portscan.ruleset.schema import Rule


def match_shell(text: str, rules: Sequence[Rule]) -> list[Match]:
    return list(command_matches(commands(text), rules, tested=presence_tested(text)))
