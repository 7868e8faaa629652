"""Shell scripts: the programs they run, the flags they pass, the variables they
export and the packages they install (see :mod:`portscan.match.commands`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence

from portscan.match import Match
from portscan.match.commands import Command, Word, commands
from portscan.match.common import command_matches, presence_tested
from portscan.ruleset.schema import Rule

#: a program word that is one variable (``$NVCC``, ``"${TRTEXEC}"``)
_PROGRAM_VARIABLE = re.compile(r"^\$(?:\{(?P<braced>\w+)\}|(?P<plain>\w+))$")


def match_shell(text: str, rules: Sequence[Rule]) -> list[Match]:
    return list(command_matches(programs_followed(commands(text)), rules, tested=presence_tested(text)))


def programs_followed(found: Iterable[Command]) -> Iterator[Command]:
    """The commands of a script, a program run through a variable read as the program the
    script assigned it before (``TRTEXEC="/usr/src/tensorrt/bin/trtexec"``, then
    ``${TRTEXEC} --onnx=model.onnx``), as a Makefile's ``$(NVCC)`` is. Only a literal
    value counts (one holding ``$`` or a substitution is unknown), the last one before the
    command; the program is reported where the command names the variable."""
    assigned: dict[str, str] = {}
    for command in found:
        for word in command.assignments:
            name, _, value = word.value.partition("=")
            if value and "$" not in value and "`" not in value:
                assigned[name] = value
            else:
                assigned.pop(name, None)
        head = command.words[0] if command.words else None
        variable = _PROGRAM_VARIABLE.match(head.value) if head is not None else None
        runs = (variable.group("braced") or variable.group("plain")) if variable is not None else None
        if head is not None and runs in assigned:
            program = Word(assigned[runs], head.start, head.end, quoted=head.quoted)
            command = dataclasses.replace(command, words=(program, *command.words[1:]))
        yield command
