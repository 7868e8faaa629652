"""Dockerfiles: ``FROM`` images, ``ENV``/``ARG`` settings, and the shell commands of
``RUN``, ``CMD`` and ``ENTRYPOINT`` (programs, ``docker`` flags, ``pip install``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence

from portscan.match import Match
from portscan.match.commands import Command, Word, commands
from portscan.match.common import command_matches, env_matches, image_matches
from portscan.ruleset.schema import Rule

_INSTRUCTION = re.compile(r"(?P<word>[A-Za-z]+)(?P<space>\s+|$)")
_COMMENT_LINE = re.compile(r"(?m)^[ \t]*#.*\n?")
_ENV_PAIR = re.compile(r"(?P<name>[A-Za-z_]\w*)=(?P<value>\"[^\"]*\"|'[^']*'|\S*)")


def instructions(text: str) -> Iterator[tuple[str, int, str]]:
    """(INSTRUCTION, offset of its arguments, arguments) with continuations joined.

    The arguments keep their raw layout: a continued line's ``\\`` and newline stay in
    the text, so offsets into it are offsets into the file.
    """
    offset = 0
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        start = offset
        body = lines[i]
        offset += len(lines[i])
        i += 1
        continued = body.rstrip("\r\n").endswith("\\")
        while continued and i < len(lines):
            body += lines[i]
            if not lines[i].lstrip().startswith("#"):  # comment lines keep a RUN continued
                continued = lines[i].rstrip("\r\n").endswith("\\")
            offset += len(lines[i])
            i += 1
        stripped = body.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        head = _INSTRUCTION.match(stripped)
        if head is None:
            continue
        args_at = start + (len(body) - len(stripped)) + head.end()
        yield head.group("word").upper(), args_at, text[args_at:start + len(body)].rstrip()


def _exec_form(args: str, at: int) -> list[Command] | None:
    """``["nvidia-smi", "-L"]``: the JSON (exec) form, as one command."""
    if not args.startswith("["):
        return None
    try:
        argv = json.loads(args)
    except json.JSONDecodeError:
        return None
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return None
    words, cursor = [], 0
    for value in argv:
        found = args.find(json.dumps(value), cursor)
        found = cursor if found < 0 else found
        words.append(Word(value, at + found + 1, at + found + 1 + len(value)))
        cursor = found + len(value)
    return [Command((), tuple(words))]


def match_dockerfile(text: str, rules: Sequence[Rule]) -> list[Match]:
    matches: list[Match] = []
    for instruction, at, args in instructions(text):
        if instruction == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            if words:
                matches += image_matches(words[0], at + args.index(words[0]), rules)
        elif instruction in ("ENV", "ARG"):
            pairs = list(_ENV_PAIR.finditer(args))
            if pairs:
                for pair in pairs:
                    value = pair.group("value").strip("\"'")
                    matches += env_matches(pair.group("name"), value, at + pair.start(), rules)
            elif instruction == "ENV" and len(args.split(None, 1)) == 2:  # legacy `ENV KEY value`
                name, value = args.split(None, 1)
                matches += env_matches(name, value.strip(), at, rules)
        elif instruction in ("RUN", "CMD", "ENTRYPOINT"):
            parsed = _exec_form(args, at)
            if parsed is None:  # Docker drops comment lines inside a continued RUN
                script = _COMMENT_LINE.sub(lambda m: " " * len(m.group(0)), args)
                parsed = list(commands(script, at))
            matches += command_matches(parsed, rules)
    return matches
