"""The ``subprocess`` kind: programs started from Python, shell scripts, Dockerfiles and CI steps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from portscan.kinds.python_surface import PythonSurface
from portscan.kinds.common import CI, PROGRAM, code_list
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import TableReader

#: Calls that start a process; their first argument is a command line or argv list.
DEFAULT_SPAWN_CALLEES = (
    "subprocess.run",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "subprocess.Popen",
    "subprocess.getoutput",
    "subprocess.getstatusoutput",
    "os.system",
    "os.popen",
    "os.execv",
    "os.execvp",
    "os.execvpe",
    "os.execl",
    "os.execlp",
    "os.spawnv",
    "os.spawnvp",
    "os.spawnl",
    "os.spawnlp",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
)


def spawn_words(callees: Sequence[str]) -> frozenset[str]:
    """One word each of ``callees`` that a Python file calling it must spell: the longest
    segment of its qualified name (every segment appears in a file that uses the name, the
    import spelling out what an alias renames: ``subprocess``, ``system``, ``popen``). A
    command run from Python is matched only where the module calls one of them, itself
    or through its own helpers, so a file without any of these words needs no parse."""
    return frozenset(max(callee.split("."), key=len) for callee in callees)


@dataclass(frozen=True, slots=True)
class SubprocessPattern:
    """A program name in the command passed to a process-spawning call."""

    kind: ClassVar[str] = "subprocess"
    surfaces: ClassVar[frozenset[str]] = frozenset({"python", "dockerfile", "shell", "makefile", "compose",
                                                    "apptainer"}) | CI
    #: the sites of the Python walk it reads (see portscan.kinds.python_surface)
    python_sites: ClassVar[frozenset[str]] = frozenset({"calls"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched", "program"})
    programs: tuple[str, ...]
    callees: tuple[str, ...] = DEFAULT_SPAWN_CALLEES

    @classmethod
    def read(cls, r: TableReader) -> SubprocessPattern:
        programs = r.texts("programs", check=PROGRAM, what="program name")
        callees = r.dotted("callees", required=False) or DEFAULT_SPAWN_CALLEES
        return cls(programs=programs, callees=callees)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return tuple(frozenset({p, word}) for p in self.programs for word in sorted(spawn_words(self.callees)))

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        return (f"Running {code_list(self.programs)}: from Python through `subprocess`, "
                "`os.system`, `os.popen` and friends (argv lists, shell command lines, "
                "`shlex.split(...)`, a program written as a path such as "
                "`os.path.join(CUDA_HOME, \"bin\", \"nvcc\")` or `shutil.which(...)`) or through "
                "the module's own helpers that pass a command on to them, in shell scripts and "
                "Makefile recipes, and in Dockerfile `RUN`/`CMD` lines.")

    def matches_program(self, program: str) -> bool:
        return program in self.programs

    # -- the Python surface (see portscan.kinds.python_surface) ---------------------------

    @classmethod
    def resolve_python(cls, rules: Sequence[tuple[Any, SubprocessPattern]], surface: PythonSurface) -> None:
        """Each listed program in the command a process-spawning call gets, directly or
        through the module's own helpers (``surface.forwarded``)."""

        def report(found: Sequence[tuple[Any, SubprocessPattern]], command: Any, scope: Any) -> None:
            for word, node in surface.commands(command, scope):
                program = surface.program_name(word)
                for rule, p in found:
                    if program is not None and p.matches_program(program):
                        surface.hit(rule, id(node), node, program=program)

        for callees in dict.fromkeys(p.callees for _, p in rules):
            found = [(rule, p) for rule, p in rules if p.callees == callees]

            def command_of(call: Any, scope: Any, callees: tuple[str, ...] = callees) -> Any:
                callee = next((c for c in surface.callee_names(call, scope) if c in callees), None)
                return None if callee is None else surface.argument(
                    call, 1 if callee.startswith("os.spawn") else 0, "args")

            for call, scope in surface.calls:
                command = command_of(call, scope)
                if command is not None:
                    report(found, command, scope)
            for _, scope, command in surface.forwarded(command_of):
                report(found, command, scope)
