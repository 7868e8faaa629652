"""Container definitions: Dockerfiles (``FROM`` images, ``ENV``/``ARG`` settings, and the
shell commands of ``RUN``, ``CMD`` and ``ENTRYPOINT``: programs, ``docker`` flags, ``pip
install``) and Apptainer/Singularity definition files (``From:`` and the ``%post``-style
sections, read as shell).

Base images are often templated: ``ARG BASE=nvcr.io/nvidia/pytorch:24.05-py3`` then
``FROM ${BASE}``, or ``FROM nvidia/cuda:${CUDA}-devel``. Variables are resolved from the
``ARG`` defaults before the first ``FROM`` (the only ones Docker lets ``FROM`` use) and
from ``${VAR:-default}``. When the whole image comes from one ``ARG``, the finding sits
on that ``ARG``'s default, the text a port changes; otherwise on the ``FROM`` line, with
the image resolved as far as the defaults go.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from portscan.match import Match
from portscan.match.commands import Command, Word, commands, continued_lines
from portscan.match.common import command_matches, env_matches, image_matches, image_name, presence_tested
from portscan.ruleset.schema import Rule

_INSTRUCTION = re.compile(r"(?P<word>[A-Za-z]+)(?P<space>\s+|$)")
_COMMENT_LINE = re.compile(r"(?m)^[ \t]*#.*\n?")
_ENV_PAIR = re.compile(r"(?P<name>[A-Za-z_]\w*)=(?P<value>\"[^\"]*\"|'[^']*'|\S*)")
#: ``$NAME``, ``${NAME}``, ``${NAME:-default}`` / ``${NAME-default}``
VARIABLE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_]\w*)(?::?-(?P<default>[^}]*))?\}|(?P<bare>[A-Za-z_]\w*))")


def substitute(text: str, values: dict[str, str]) -> str:
    """Variables replaced by their values, else by their ``:-`` default, else kept."""
    def value(m: re.Match[str]) -> str:
        name = m.group("braced") or m.group("bare")
        if name in values:
            return values[name]
        return m.group("default") if m.group("default") is not None else m.group(0)
    return VARIABLE.sub(value, text)


def instructions(text: str) -> Iterator[tuple[str, int, str]]:
    """(INSTRUCTION, offset of its arguments, arguments) with continuations joined.

    The arguments keep their raw layout: a continued line's ``\\`` and newline stay in
    the text, so offsets into it are offsets into the file.
    """
    for start, body in continued_lines(text, comments_continue=True):  # comment lines keep a RUN continued
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


def _arg_defaults(args: str, at: int) -> Iterator[tuple[str, str, int]]:
    """``ARG NAME=default`` (several per line allowed): (name, default, offset of the default)."""
    for pair in _ENV_PAIR.finditer(args):
        raw = pair.group("value")
        quoted = raw[:1] in "\"'" and len(raw) >= 2
        yield pair.group("name"), raw[1:-1] if quoted else raw, at + pair.start("value") + quoted


@dataclass(frozen=True, slots=True)
class ArgDefault:
    """``ARG NAME=default`` before the first ``FROM``: the value with earlier ARGs
    substituted (as Docker expands it), and where the default is written."""

    value: str
    start: int
    length: int  #: of the default as written


def _from_image(args: str, at: int, defaults: dict[str, ArgDefault], rules: Sequence[Rule],
                ) -> tuple[str, list[Match]]:
    """The image a ``FROM`` builds on (resolved), and its matches."""
    words = [w for w in args.split() if not w.startswith("--")]
    if not words:
        return "", []
    written = words[0]
    start = at + args.index(written)
    resolved = substitute(written, {name: d.value for name, d in defaults.items()})
    whole = VARIABLE.fullmatch(written)
    name = whole and (whole.group("braced") or whole.group("bare"))
    if name and name in defaults:  # FROM ${BASE}: report at the default a port changes
        default = defaults[name]
        return resolved, image_matches(resolved, default.start, rules, length=default.length)
    return resolved, image_matches(resolved, start, rules, length=len(written))


def match_dockerfile(text: str, rules: Sequence[Rule]) -> list[Match]:
    matches: list[Match] = []
    defaults: dict[str, ArgDefault] = {}  # ARGs before the first FROM
    images: list[str] = []
    seen_from = False
    for instruction, at, args in instructions(text):
        if instruction == "FROM":
            seen_from = True
            resolved, found = _from_image(args, at, defaults, rules)
            matches += found
            if resolved:
                images.append(image_name(resolved))
        elif instruction in ("ENV", "ARG"):
            if instruction == "ARG" and not seen_from:
                for name, value, offset in _arg_defaults(args, at):
                    resolved = substitute(value, {n: d.value for n, d in defaults.items()})
                    defaults[name] = ArgDefault(resolved, offset, len(value))
            pairs = list(_ENV_PAIR.finditer(args))
            if pairs:
                for pair in pairs:
                    value = pair.group("value").strip("\"'")
                    matches += env_matches(pair.group("name"), value, at + pair.start(), rules)
            elif instruction == "ENV" and len(args.split(None, 1)) == 2:  # legacy `ENV KEY value`
                name, value = args.split(None, 1)
                matches += env_matches(name, value.strip(), at, rules)
        elif instruction == "HEALTHCHECK":  # HEALTHCHECK [--interval=...] CMD <command>
            command = re.search(r"(?:^|\s)CMD\s+", args, re.IGNORECASE)
            if command:
                rest = args[command.end():]
                probe = _exec_form(rest, at + command.end()) or list(commands(rest, at + command.end()))
                matches += command_matches(probe, rules, images=tuple(images))
        elif instruction in ("RUN", "CMD", "ENTRYPOINT"):
            parsed = _exec_form(args, at)
            if parsed is None:  # Docker drops comment lines inside a continued RUN
                script = _COMMENT_LINE.sub(lambda m: " " * len(m.group(0)), args)
                parsed = list(commands(script, at))
            matches += command_matches(parsed, rules, images=tuple(images), tested=presence_tested(args))
    return matches


# ------------------------------------------------------------------ Apptainer / Singularity

_HEADER = re.compile(r"(?im)^[ \t]*(?P<key>bootstrap|from)[ \t]*:[ \t]*(?P<value>\S+)")
_SECTION = re.compile(r"(?m)^%(?P<name>[A-Za-z]+)[^\n]*\n?")
#: sections whose body is a shell script (``%files``, ``%labels``, ``%help`` are not)
_SHELL_SECTIONS = frozenset({"post", "setup", "environment", "runscript", "startscript", "test"})


def match_apptainer(text: str, rules: Sequence[Rule]) -> list[Match]:
    """An Apptainer/Singularity definition: ``From:`` of a ``Bootstrap: docker``-style
    header is a base image; the shell sections are scripts. A ``.def`` file without a
    ``Bootstrap:`` header (a linker module definition, say) yields nothing."""
    sections = list(_SECTION.finditer(text))
    header = text[: sections[0].start()] if sections else text
    keys = {m.group("key").lower(): m for m in _HEADER.finditer(header)}
    if "bootstrap" not in keys:
        return []
    matches: list[Match] = []
    images: tuple[str, ...] = ()
    if "from" in keys and keys["bootstrap"].group("value").lower() in ("docker", "docker-daemon",
                                                                       "docker-archive", "oras"):
        image = keys["from"]
        matches += image_matches(image.group("value"), image.start("value"), rules)
        images = (image_name(image.group("value")),)
    for i, section in enumerate(sections):
        if section.group("name").lower() not in _SHELL_SECTIONS:
            continue
        end = sections[i + 1].start() if i + 1 < len(sections) else len(text)
        matches += command_matches(commands(text[section.end():end], section.end()), rules,
                                   images=images, tested=presence_tested(text[section.end():end]))
    return matches
