"""Makefiles (``Makefile``, ``GNUmakefile``, ``makefile``, ``*.mk``): each recipe line is
a shell command line, read by :mod:`portscan.match.commands` so that every rule of the
shell surface applies (the program run, its arguments, ``pip install`` lines).

Make variables are followed one way, because a Makefile names its compiler and flags
once and uses them everywhere: a recipe word ``$(NVCC)`` or ``${NVCC}`` stands for the
words of the variable's definitions (``NVCC := $(CUDA_HOME)/bin/nvcc``,
``NVCCFLAGS += -gencode ...``), each kept at the offset where the definition writes
it, so a flag is reported on the line that sets it. Other make syntax (functions,
automatic variables, conditionals) is left as it is; nothing is evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from portscan.match import Match
from portscan.match.commands import Command, Word, commands, continued_lines, lex
from portscan.match.common import command_matches, env_matches
from portscan.ruleset.schema import Rule

_ASSIGN = re.compile(r"^(?P<export>(?:(?:export|override)[ \t]+)*)(?P<name>[A-Za-z_][\w.-]*)[ \t]*"
                     r"(?P<op>::?=|:::=|\?=|\+=|!=|=)[ \t]*(?P<value>.*)$", re.DOTALL)
_RULE = re.compile(r"^[^\s:=#][^:=#]*::?(?!=)")
_DIRECTIVE = re.compile(r"^(?:ifeq|ifneq|ifdef|ifndef|else|endif)\b")
_REFERENCE = re.compile(r"^\$\{(?P<name>[A-Za-z_][\w.-]*)\}$")
_RECIPE_PREFIX = re.compile(r"^[@+\-]+")
_DEPTH = 4  #: variables referring to variables, followed this deep
_WIDTH = 256  #: words one reference may expand to (a bound, for pathological files)


def braced(text: str) -> str:
    """``$(NAME)`` written as ``${NAME}`` (same length): the shell lexer splits words on
    parentheses, not on braces. ``$$(...)`` is the shell's own command substitution."""
    out = list(text)
    stack: list[bool] = []  # per open parenthesis: does it open a make reference?
    for i, char in enumerate(text):
        if char == "(":
            reference = i > 0 and text[i - 1] == "$" and (i < 2 or text[i - 2] != "$")
            stack.append(reference)
            if reference:
                out[i] = "{"
        elif char == ")" and stack and stack.pop():
            out[i] = "}"
    return "".join(out)


def _split(text: str, base: int) -> list[Word]:
    return [w for w in lex(braced(text), base) if not w.operator]


@dataclass(frozen=True, slots=True)
class Makefile:
    """What a Makefile says, as far as a scan reads it."""

    #: variable name -> the words of all its definitions (every branch of an ``ifeq``)
    variables: Mapping[str, list[Word]]
    recipes: tuple[tuple[int, str], ...]  #: (offset, text) of each recipe line
    exports: tuple[Word, ...]  #: ``export NAME = value``, as a ``NAME=value`` word at the name


def read_makefile(text: str) -> Makefile:
    """Variables, recipe lines (tab-indented lines after a ``target:`` line, and the part
    after ``;`` of ``target: prerequisites ; recipe``) and exports; never raises."""
    variables: dict[str, list[Word]] = {}
    recipes: list[tuple[int, str]] = []
    exports: list[Word] = []
    in_rule = False
    for offset, line in continued_lines(text):
        if line.startswith("\t"):
            if in_rule:
                recipes.append((offset + 1, line[1:]))
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or _DIRECTIVE.match(stripped):
            continue
        assign = _ASSIGN.match(line.rstrip("\r\n"))
        if assign is not None:
            in_rule = False
            value = assign.group("value").split("#", 1)[0]
            words = _split(value, offset + assign.start("value"))
            # every definition counts (`=` after `?=`, branches of ifeq): over-approximate
            variables.setdefault(assign.group("name"), []).extend(words)
            if assign.group("export"):
                exports.append(Word(f"{assign.group('name')}={' '.join(w.value for w in words)}",
                                    offset + assign.start("name"), offset + assign.end("name")))
            continue
        rule = _RULE.match(line)
        if rule is not None:
            in_rule = True
            recipe = line[rule.end():]
            semicolon = recipe.find(";")
            if semicolon >= 0:  # `target: prerequisites ; recipe`
                recipes.append((offset + rule.end() + semicolon + 1, recipe[semicolon + 1:]))
        else:
            in_rule = False
    return Makefile(variables, tuple(recipes), tuple(exports))


def _expand(word: Word, variables: Mapping[str, list[Word]], depth: int = 0) -> list[Word]:
    """A word that is one variable reference -> the words of its definitions, recursively."""
    reference = _REFERENCE.match(word.value)
    if reference is None or depth >= _DEPTH or reference.group("name") not in variables:
        return [word]
    words: list[Word] = []
    for inner in variables[reference.group("name")]:
        words.extend(_expand(inner, variables, depth + 1))
        if len(words) >= _WIDTH:
            return words[:_WIDTH]
    return words


def recipe_commands(makefile: Makefile) -> Iterator[Command]:
    """The shell commands of every recipe, with make variables followed."""
    variables = makefile.variables
    for offset, recipe in makefile.recipes:
        prefix = _RECIPE_PREFIX.match(recipe.lstrip(" \t"))
        skip = (len(recipe) - len(recipe.lstrip(" \t"))) + (prefix.end() if prefix else 0)
        for command in commands(braced(recipe[skip:]), offset + skip):
            words: list[Word] = []
            for i, word in enumerate(command.words):
                expanded = _expand(word, variables)
                if i == 0 and expanded and expanded[0] is not word:  # `$(NVCC)`: the program
                    words.append(Word(expanded[0].value, word.start, word.end))
                    words.extend(expanded[1:])
                else:
                    words.extend(expanded)
            yield Command(command.assignments, tuple(words))


def match_makefile(text: str, rules: Sequence[Rule]) -> list[Match]:
    if not rules:
        return []
    makefile = read_makefile(text)
    found: dict[tuple[str, int, int], Match] = {}
    for match in command_matches(recipe_commands(makefile), rules):
        found.setdefault((match.rule.code, match.start, match.end), match)
    for word in makefile.exports:
        name, _, value = word.value.partition("=")
        for match in env_matches(name, value, word.start, rules):
            found.setdefault((match.rule.code, match.start, match.end), match)
    return list(found.values())
