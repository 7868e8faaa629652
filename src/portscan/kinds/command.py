"""The ``command`` kind: programs run with given arguments in shell and Dockerfiles."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import ClassVar

from portscan.kinds.common import CI, PROGRAM, code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import TableReader


@dataclass(frozen=True, slots=True)
class CommandPattern:
    """A program run with given arguments in a shell script, a Makefile recipe or a
    Dockerfile ``RUN`` (``docker run --gpus all``)."""

    kind: ClassVar[str] = "command"
    surfaces: ClassVar[frozenset[str]] = frozenset({"dockerfile", "shell", "makefile", "compose", "apptainer"}) | CI
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "program", "arg"})
    programs: tuple[str, ...]
    args: tuple[str, ...]  #: globs; any argument matching one reports
    subcommands: tuple[str, ...] = ()  #: the first argument must be one of these (``run``)

    @classmethod
    def read(cls, r: TableReader) -> CommandPattern:
        return cls(programs=r.texts("programs", check=PROGRAM, what="program name"),
                   args=r.texts("args", what="argument glob"),
                   subcommands=r.texts("subcommands", required=False, what="subcommand"))

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        sub = f" {'/'.join(self.subcommands)}" if self.subcommands else ""
        return (f"{code_list(self.programs)}{sub} run with an argument matching "
                f"{code_list(self.args)}, in shell scripts, Makefile recipes, Dockerfile `RUN` lines and CI scripts.")

    def matching_argument(self, program: str, args: Sequence[str]) -> int | None:
        """The first argument matching one of ``args``, once the program and subcommand fit."""
        if program not in self.programs:
            return None
        if self.subcommands and (not args or args[0] not in self.subcommands):
            return None
        return next((i for i, arg in enumerate(args) if any(fnmatchcase(arg, g) for g in self.args)), None)
