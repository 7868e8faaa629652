"""Shell command lines: words with their positions, split into simple commands.

Used for shell scripts, Dockerfile ``RUN``/``CMD`` lines and command strings passed to
``subprocess`` in Python. A small lexer rather than ``shlex`` because findings need the
offset of each word in the file; it understands quotes, backslash escapes, comments,
the control operators (``;`` ``&&`` ``||`` ``|`` ``&`` ``(`` ``)``) and line
continuations, which is all a porting scan needs (no expansion is performed).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

_OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "(", ")", "\n")
#: Words that run the command after them (``sudo nvidia-smi``); ``timeout`` takes a duration.
WRAPPERS = frozenset({"sudo", "env", "exec", "nohup", "time", "nice", "stdbuf", "command",
                      "timeout", "xargs", "srun", "mpirun", "numactl"})
#: Shell keywords that may open a command position (``if nvidia-smi; then ...``).
KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{"})
#: Keywords whose clause is not a command (``for x in a b; do``, ``fi``, ``done``).
NOT_COMMANDS = frozenset({"for", "case", "select", "in", "fi", "done", "esac", "}", "function"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
_PIP = re.compile(r"^pip(\d+(\.\d+)?)?$")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass(frozen=True, slots=True)
class Word:
    """A shell word after quote removal, with the offsets of its raw text."""

    value: str
    start: int
    end: int
    operator: bool = False  #: a control operator (``;``, ``&&``, a line end, ...)
    quoted: bool = False  #: the raw text starts with a quote


@dataclass(frozen=True, slots=True)
class Command:
    """One simple command: ``VAR=value`` prefixes, then the program and its arguments."""

    assignments: tuple[Word, ...]
    words: tuple[Word, ...]  #: program first; wrappers such as ``sudo`` already removed
    #: its pipeline is followed by ``|| true`` or ``|| :``: a failure stops nothing
    #: (``nvidia-smi -L | head -1 || true``)
    tolerated: bool = False

    @property
    def program(self) -> str:
        return posixpath.basename(self.words[0].value) if self.words else ""

    @property
    def args(self) -> tuple[Word, ...]:
        return self.words[1:]


def lex(text: str, base: int = 0) -> Iterator[Word]:
    """Words and operators of a shell text; operators come as words too (``value`` is the
    operator, ``"\\n"`` for a line end). ``base`` is added to every offset."""
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "\\" and text.startswith("\\\n", i):
            i += 2  # line continuation
            continue
        if char in " \t\r":
            i += 1
            continue
        if char == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        operator = next((op for op in _OPERATORS if text.startswith(op, i)), None)
        if operator is not None:
            yield Word(operator, base + i, base + i + len(operator), operator=True)
            i += len(operator)
            continue
        start, value = i, []
        while i < n and text[i] not in " \t\r\n;&|()":
            char = text[i]
            if char == "\\" and i + 1 < n:
                if text[i + 1] != "\n":
                    value.append(text[i + 1])
                i += 2
            elif char in "'\"`":  # a `command substitution` stays one word, like a quote
                close = _closing(text, i)
                value.append(text[i + 1:close])
                i = close + 1
            else:
                value.append(char)
                i += 1
        yield Word("".join(value), base + start, base + i, quoted=text[start] in "'\"")


def _closing(text: str, i: int) -> int:
    """Where the quote (or backtick) opened at ``i`` closes (``len(text)`` if never): in
    double quotes a ``$(...)`` is skipped whole, since it may hold quotes of its own
    (``"$(dirname "$(which nvcc)")"``)."""
    quote, j, n = text[i], i + 1, len(text)
    while j < n and text[j] != quote:
        if quote == '"' and text[j] == "\\":
            j += 2
            continue
        if quote == '"' and text.startswith("$(", j):
            depth, j = 1, j + 2
            while j < n and depth:
                if text[j] in "'\"":  # a quoted part inside the substitution
                    j = _closing(text, j)
                depth += {"(": 1, ")": -1}.get(text[j], 0) if j < n else 0
                j += 1
            continue
        j += 1
    return min(j, n)


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and name.isidentifier()


def commands(text: str, base: int = 0) -> Iterator[Command]:
    """Simple commands of a shell text, ``export X=y`` giving an assignment-only command.

    ``bash -c "..."`` is looked into, and so are command substitutions inside a word
    (``"$(nvidia-smi -L)"``, ```nvidia-smi -L```, ``NUM=$(...)``): their commands are
    yielded too. An unquoted ``$(`` already splits at its ``(``.
    """
    words: list[Word] = []
    pipeline: list[list[Word]] = []  # the commands joined by ``|`` so far
    lexed = list(lex(text, base))
    for i, word in enumerate(lexed):
        if word.operator:
            if words:
                pipeline.append(words)
            if word.value not in ("|", "|&"):
                tolerated = _tolerates(lexed, i)
                for part in pipeline:
                    yield from _command(part, tolerated)
                pipeline = []
            words = []
        else:
            words.append(word)
            raw = text[word.start - base:word.end - base]
            if "`" in raw or "$(" in raw:
                for offset, inner in substitutions(raw):
                    yield from commands(inner, word.start + offset)
    for part in pipeline + [words] if words else pipeline:
        yield from _command(part)


def _tolerates(lexed: list[Word], i: int) -> bool:
    """Whether the operator at ``i`` starts ``|| true`` / ``|| :`` (a whole command): the
    pipeline before it may fail without stopping anything."""
    after = lexed[i + 1:i + 3]
    return (lexed[i].value == "||" and bool(after) and after[0].value in ("true", ":")
            and not after[0].quoted and (len(after) == 1 or after[1].operator))


def substitutions(raw: str) -> Iterator[tuple[int, str]]:
    """(offset, text) of each ```...``` and ``$(...)`` in a word's raw text, outside single
    quotes (where the shell expands nothing)."""
    i, n = 0, len(raw)
    quote = ""
    while i < n:
        char = raw[i]
        if char == "\\":
            i += 2
            continue
        if char == "'" and quote != '"':
            quote = "" if quote == "'" else "'"
        elif char == '"' and quote != "'":
            quote = "" if quote == '"' else '"'
        elif quote != "'" and char == "`":
            close = raw.find("`", i + 1)
            close = n if close < 0 else close
            yield i + 1, raw[i + 1:close]
            i = close
        elif quote != "'" and raw.startswith("$(", i) and not raw.startswith("$((", i):
            depth, j = 1, i + 2
            while j < n and depth:
                depth += {"(": 1, ")": -1}.get(raw[j], 0)
                j += 1
            yield i + 2, raw[i + 2:j - 1 if depth == 0 else j]
            i = j - 1
        i += 1


def _command(words: list[Word], tolerated: bool = False) -> Iterator[Command]:
    while words and words[0].value in KEYWORDS and not words[0].quoted:
        words = words[1:]
    if not words or (words[0].value in NOT_COMMANDS and not words[0].quoted):
        return
    if words[0].value == "command" and len(words) > 1 and words[1].value in ("-v", "-V"):
        return  # `command -v nvidia-smi` asks whether it exists; it does not run it
    assignments: list[Word] = []
    i = 0
    while i < len(words) and _is_assignment(words[i].value):
        assignments.append(words[i])
        i += 1
    if i < len(words) and words[i].value in ("export", "declare", "local", "readonly"):
        yield Command(tuple(assignments) + tuple(w for w in words[i + 1:]
                                                  if _is_assignment(w.value)), ())
        return
    while i < len(words):
        head = posixpath.basename(words[i].value)
        if head not in WRAPPERS:
            break
        i += 1
        while i < len(words) and (words[i].value.startswith("-") or _is_assignment(words[i].value)
                                  or (head == "timeout" and words[i].value[:1].isdigit())):
            if _is_assignment(words[i].value):
                assignments.append(words[i])
            i += 1
    rest = words[i:]
    if (len(rest) >= 3 and posixpath.basename(rest[0].value) in SHELLS
            and rest[1].value in ("-c", "-lc", "-ec")):
        inner = rest[2]
        yield Command(tuple(assignments), tuple(rest[:2]), tolerated)
        yield from commands(inner.value, inner.start + (1 if inner.quoted else 0))
        return
    yield Command(tuple(assignments), tuple(rest), tolerated)


def pip_arguments(command: Command) -> tuple[list[Word], list[Word]] | None:
    """For ``pip install`` / ``python -m pip install`` / ``uv pip install``: the
    requirement words and the index URLs; None for any other command."""
    values = [w.value for w in command.words]
    if not values:
        return None
    start = None
    program = command.program
    if _PIP.match(program) and values[1:2] == ["install"]:
        start = 2
    elif _PYTHON.match(program) and values[1:4] == ["-m", "pip", "install"]:
        start = 4
    elif program == "uv" and values[1:3] == ["pip", "install"]:
        start = 3
    if start is None:
        return None
    requirements: list[Word] = []
    indexes: list[Word] = []
    words = command.words[start:]
    skip_next = False
    for i, word in enumerate(words):
        if skip_next:
            skip_next = False
            continue
        value = word.value
        if value in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links"):
            if i + 1 < len(words):
                indexes.append(words[i + 1])
            skip_next = True
        elif value.startswith(("--index-url=", "--extra-index-url=", "--find-links=")):
            url = value.split("=", 1)[1]
            indexes.append(Word(url, word.end - len(url), word.end))
        elif value in ("-r", "--requirement", "-c", "--constraint", "-t", "--target",
                       "--prefix", "--root", "--src", "--trusted-host", "--platform",
                       "--python-version", "--implementation", "--abi", "--progress-bar"):
            skip_next = True
        elif value in ("-e", "--editable"):
            continue
        elif not value.startswith("-") and value not in (".", "..") and "\0" not in value:
            requirements.append(word)
    return requirements, indexes


def continued_lines(text: str, comments_continue: bool = False) -> Iterator[tuple[int, str]]:
    """(offset, raw text) of each line joined with its backslash continuations (raw: the
    ``\\`` and newlines stay, so offsets into it are offsets into the file). With
    ``comments_continue`` (Dockerfiles), a ``#`` line inside a continuation keeps it going."""
    offset = 0
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        start = offset
        body = lines[i]
        offset += len(body)
        i += 1
        continued = body.rstrip("\r\n").endswith("\\")
        while continued and i < len(lines):
            line = lines[i]
            body += line
            offset += len(line)
            i += 1
            if not (comments_continue and line.lstrip().startswith("#")):
                continued = line.rstrip("\r\n").endswith("\\")
        yield start, body
