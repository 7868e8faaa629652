"""CMake files (``CMakeLists.txt``, ``*.cmake``): command invocations with the offset of
every argument, read by a small tokenizer of CMake's language rather than by regular
expressions over lines, because commands span lines, ``#`` comments and ``#[[ ]]``
bracket comments must not match, and findings point at the offending argument.

Findings inside an ``if()`` group whose condition names HIP or ROCm (``if(USE_ROCM)``
... ``else()`` ... ``endif()``) carry the ``vendor-branch`` guard, as in Python and
kernel sources: that build already has a ROCm path; so do flags inside a generator
expression that applies them to CUDA sources only (``$<$<COMPILE_LANGUAGE:CUDA>:...>``):
built as HIP (or C++), the same sources never receive them. Malformed input (an unclosed
parenthesis, quote or bracket) is read as far as it goes; the tokenizer never raises.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

from portscan.kinds.sites import CMakeArgument, CMakeCommand, CMakeKind, CMakeSource
from portscan.match import Match
from portscan.match.levels import VENDOR_BRANCH
from portscan.ruleset.schema import Rule

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+)
  | (?P<bcomment>\#\[(?P<beq>=*)\[.*?(?:\](?P=beq)\]|\Z))
  | (?P<comment>\#[^\n]*)
  | (?P<bracket>\[(?P<aeq>=*)\[(?P<bbody>.*?)(?:\](?P=aeq)\]|\Z))
  | (?P<quoted>"(?P<qbody>(?:[^"\\]|\\.)*)(?:"|\Z))
  | (?P<open>\()
  | (?P<close>\))
  | (?P<word>(?:[^\s()\#"\\]|\\.|"(?:[^"\\]|\\.)*")+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_VENDOR = re.compile(r"(?i)(?:^|[^a-z])(?:hip|rocm|amdgpu)")
_CUDA = re.compile(r"(?i)(?:^|[^a-z])cuda")


def read_cmake(text: str) -> CMakeSource:
    """The file's commands, and its text with comments blanked out (offsets kept)."""
    commands: list[CMakeCommand] = []
    blanked: list[tuple[int, int]] = []
    name: tuple[str, int, int] | None = None  # a word that may open a command
    args: list[CMakeArgument] = []
    depth = 0  # parentheses open in the current command's arguments
    for token in _TOKEN.finditer(text):
        kind = token.lastgroup
        if kind in ("bcomment", "comment"):
            blanked.append(token.span())
        elif kind == "space":
            continue
        elif depth == 0:  # between commands
            if kind == "word":
                value = token.group()
                name = (value.lower(), token.start(), token.end()) if _IDENTIFIER.match(value) else None
            elif kind == "open" and name is not None:
                depth, args = 1, []
            else:
                name = None
        elif kind == "open":
            depth += 1
        elif kind == "close":
            depth -= 1
            if depth == 0 and name is not None:
                commands.append(CMakeCommand(name[0], name[1], name[2], tuple(args)))
                name = None
        elif kind == "quoted":
            args.append(CMakeArgument(token.group("qbody"), token.start("qbody"), quoted=True))
        elif kind == "bracket":
            args.append(CMakeArgument(token.group("bbody"), token.start("bbody"), quoted=True))
        elif kind == "word":
            args.append(CMakeArgument(token.group(), token.start()))
    if depth > 0 and name is not None:  # unclosed at the end of the file: keep what was read
        commands.append(CMakeCommand(name[0], name[1], name[2], tuple(args)))
    return CMakeSource(_blank(text, blanked), tuple(commands))


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    out, last = [], 0
    for start, end in spans:
        out.append(text[last:start])
        out.append(re.sub(r"[^\n]", " ", text[start:end]))
        last = end
    out.append(text[last:])
    return "".join(out)


def vendor_regions(commands: Sequence[CMakeCommand]) -> list[tuple[int, int]]:
    """Offsets of ``if()`` groups (every branch, up to ``endif()``) whose ``if`` or
    ``elseif`` condition names HIP or ROCm; in a file that has such a group, also those
    whose condition names CUDA (``if(WITH_CUDA)`` beside ``if(WITH_ROCM)``: the CUDA side
    of a build that already chooses its vendor)."""
    tests = [command for command in commands if command.name in ("if", "elseif")]
    if not any(_names(command, _VENDOR) for command in tests):
        return []
    regions: list[tuple[int, int]] = []
    stack: list[tuple[int, bool]] = []
    for command in commands:
        if command.name == "if":
            stack.append((command.start, _names(command, _VENDOR) or _names(command, _CUDA)))
        elif command.name == "elseif" and stack:
            start, vendor = stack[-1]
            stack[-1] = (start, vendor or _names(command, _VENDOR) or _names(command, _CUDA))
        elif command.name == "endif" and stack:
            start, vendor = stack.pop()
            if vendor:
                regions.append((start, command.end))
    return regions


#: the opening of a generator expression whose content reaches CUDA compiles only
_CUDA_ONLY_GENEX = re.compile(r"\$<\$<(?:COMPILE_LANGUAGE:CUDA|COMPILE_LANG_AND_ID:CUDA,|CUDA_COMPILER_ID:)")


def cuda_genex_regions(text: str) -> list[tuple[int, int]]:
    """Offsets of ``$<$<COMPILE_LANGUAGE:CUDA>:...>`` (and ``COMPILE_LANG_AND_ID:CUDA,...``,
    ``CUDA_COMPILER_ID:...``) expressions, up to their closing ``>``: what they hold is
    passed to nvcc only, never to a HIP or C++ compile of the same sources."""
    regions: list[tuple[int, int]] = []
    for opening in _CUDA_ONLY_GENEX.finditer(text):
        depth, at = 0, opening.start()
        while at < len(text):
            if text.startswith("$<", at):
                depth, at = depth + 1, at + 2
                continue
            if text[at] == ">":
                depth -= 1
                if depth == 0:
                    regions.append((opening.start(), at + 1))
                    break
            elif text[at] in "\n)":
                break  # unclosed: read as far as it goes, no region
            at += 1
    return regions


def _names(command: CMakeCommand, pattern: re.Pattern[str]) -> bool:
    return any(pattern.search(arg.text) for arg in command.args)


def match_cmake(text: str, rules: Sequence[Rule]) -> list[Match]:
    """Every kind on this surface is a :class:`CMakeKind` (a test checks); each finds its own."""
    if not rules:
        return []
    source = read_cmake(text)
    regions = vendor_regions(source.commands) + (cuda_genex_regions(text) if "$<" in text else [])
    matches: dict[tuple[str, int, int], Match] = {}
    for rule in rules:
        for start, end in cast(CMakeKind, rule.pattern).match_cmake(source):
            guard = VENDOR_BRANCH if any(a <= start and end <= b for a, b in regions) else None
            matches.setdefault((rule.code, start, end), Match(rule, start, end, guard=guard))
    return list(matches.values())
