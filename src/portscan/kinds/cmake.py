"""The ``cmake`` kind: CMake commands, by name and by what their arguments hold."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from portscan.bounded import Regex
from portscan.kinds.common import code_list
from portscan.kinds.sites import CMakeSource, Span
from portscan.ruleset.prefilter import Token
from portscan.ruleset.table import PatternError, TableReader

_COMMAND = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class CMakePattern:
    """A CMake command (``project``, ``target_link_libraries``, ...) with an argument in
    which ``regex`` finds a match (reported at that match), or, without ``regex``, the
    command itself (reported at its name)."""

    kind: ClassVar[str] = "cmake"
    surfaces: ClassVar[frozenset[str]] = frozenset({"cmake"})
    variables: ClassVar[frozenset[str]] = frozenset({"matched"})
    commands: frozenset[str]  #: lower-cased; CMake command names ignore case
    regex: Regex | None = None  #: searched in each argument's text
    position: int | None = None  #: only the argument at this 0-based index
    once: bool = False  #: only the first match in each command
    unless: Regex | None = None  #: no match in a file whose code (comments blanked) has this
    #: no match in an argument whose next argument is this (``CUDA_ARCHITECTURES OFF``: none)
    unless_next: Regex | None = None

    @classmethod
    def read(cls, r: TableReader) -> CMakePattern:
        names = r.texts("commands", check=_COMMAND, what="CMake command name")
        position = r.raw("position", False)
        if position is not None and (isinstance(position, bool) or not isinstance(position, int)
                                     or position < 0):
            raise PatternError(r.key("position"), "expected a non-negative integer")
        once = r.flag("once")
        regex = r.regex("regex")
        if regex is None and (position is not None or once):
            raise PatternError(r.key("regex"), "`position` and `once` need a regex")
        unless_next = r.regex("unless_next")
        if regex is None and unless_next is not None:
            raise PatternError(r.key("unless_next"), "`unless_next` needs a regex")
        return cls(commands=frozenset(n.lower() for n in names), regex=regex, position=position,
                   once=once, unless=r.regex("unless"), unless_next=unless_next)

    def token_sets(self) -> tuple[frozenset[Token], ...]:
        return ()  # only Python files are prefiltered

    def describe(self) -> str:
        """What it matches, in one or two sentences of Markdown (the rule page's "What it flags")."""
        where = code_list(f"{name}()" for name in sorted(self.commands))
        if self.regex is None:
            return f"The CMake commands {where} in `CMakeLists.txt` and `*.cmake` files."
        at = f" argument {self.position}" if self.position is not None else " an argument"
        unless = f", unless the file matches `{self.unless.pattern}`" if self.unless else ""
        if self.unless_next is not None:
            unless += f"; not where the next argument matches `{self.unless_next.pattern}`"
        return (f"{where} with{at} matching `{self.regex.pattern}`, in `CMakeLists.txt` and "
                f"`*.cmake` files (comments ignored){unless}.")

    def match_cmake(self, source: CMakeSource) -> Iterator[Span]:
        if self.unless is not None and self.unless.search(source.code):
            return
        for command in source.commands:
            if command.name not in self.commands:
                continue
            if self.regex is None:
                yield command.start, command.end
                continue
            args = command.args
            after = {id(arg): following for arg, following in itertools.pairwise(args)}
            if self.position is not None:
                args = args[self.position:self.position + 1]
            for arg in args:
                following = after.get(id(arg))
                if self.unless_next is not None and following is not None \
                        and self.unless_next.search(following.text):
                    continue
                found = False
                for match in self.regex.finditer(arg.text):
                    if match.end() > match.start():
                        yield arg.start + match.start(), arg.start + match.end()
                        found = True
                        if self.once:
                            break
                if found and self.once:
                    break
