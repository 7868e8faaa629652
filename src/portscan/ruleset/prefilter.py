"""The literal prefilter: tokens a file must contain before a rule could match it.

Kinds state their token sets (:meth:`token_sets`); :class:`Prefilter` tests a file's text
against the token sets of every Python rule at once, so most files need no parse.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from portscan.bounded import Regex

# The standard library's own regex parser, to read literal prefixes out of regexes.
if sys.version_info >= (3, 11):
    from re import _constants as _re_constants  # type: ignore[attr-defined]
    from re import _parser as _re_parser  # type: ignore[attr-defined]
else:  # pragma: no cover - Python 3.10
    import sre_constants as _re_constants
    import sre_parse as _re_parser


@dataclass(frozen=True, slots=True)
class Fragment:
    """A prefilter token that is a substring, not a whole word (from a regex)."""

    text: str
    ignore_case: bool = False
    #: the regex is anchored at the start of a string literal: the text follows a quote
    quoted: bool = False

    def occurs(self, text: str, folded: str) -> bool:
        """Is it in ``text`` (``folded`` is ``text.casefold()``, for ignore-case)?"""
        haystack, needle = (folded, self.text.casefold()) if self.ignore_case else (text, self.text)
        if not self.quoted:
            return needle in haystack
        return f'"{needle}' in haystack or f"'{needle}" in haystack


@dataclass(frozen=True, slots=True)
class Anchor:
    """A prefilter token that is a regular expression over the file's import lines (see
    :func:`import_lines`), for evidence words cannot give. Compiled on first use: a rule
    pack holds hundreds, and a run over a few files tests only some of them."""

    source: str
    _compiled: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def occurs(self, imports: str) -> bool:
        if self._compiled is None:
            object.__setattr__(self, "_compiled", re.compile(self.source))
        return self._compiled.search(imports) is not None  # type: ignore[union-attr]


_IMPORT_WORD = re.compile(r"\b(?:from|import)[ \t]")
_CONTINUATION = re.compile(r"\\\r?\n")


#: the names of a parenthesised import are read up to this many characters on
_PARENTHESISED_MAX = 4000


def import_lines(text: str) -> str:
    """Every line that may hold an import statement (``x = 1; import y`` too), with the
    lines a trailing backslash or an open parenthesis (``from m import (``) continues it
    onto (as one line), joined: what anchors
    search. Found from the occurrences of ``import`` (every import statement spells
    it), which is far cheaper than testing every line."""
    lines: list[str] = []
    find, end = text.find, -1
    at = find("import")
    while at >= 0:
        if at > end:
            start = text.rfind("\n", 0, at) + 1
            end = _line_end(text, at)
            while end < len(text) and text[max(start, end - 2):end].rstrip("\r").endswith("\\"):
                end = _line_end(text, end + 1)
            if "(" in text[at:end] and ")" not in text[at:end]:  # `from m import (` a, b `)`
                close = text.find(")", end)
                end = _line_end(text, close) if 0 <= close - end <= _PARENTHESISED_MAX else end
            line = _CONTINUATION.sub(" ", text[start:end]).replace("\n", " ")
            if _IMPORT_WORD.search(line):
                lines.append(line)
        at = find("import", max(at + 6, end))
    return "\n".join(lines)


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


def import_anchor(module: str) -> Anchor:
    """``import m``, ``import a, m.sub as x``, ``from m import ...``, ``from m.sub import``
    for the top-level package of ``module``."""
    root = re.escape(module.split(".")[0])
    return Anchor(rf"\bfrom\s+{root}\b|\bimport\s+(?:[\w.]+(?:\s+as\s+\w+)?\s*,\s*)*{root}\b")


def relative_import_anchor(modules: Sequence[str]) -> Anchor:
    """A relative import of one of ``modules`` (``from . import ck, cutlass``, also in
    parentheses over several lines), or of a name from one (``from .cutlass import
    FwOp``, not ``from .cutlass.utils import``)."""
    names = "|".join(re.escape(m) for m in modules)
    return Anchor(rf"\bfrom\s+\.+(?:\w+\.)*(?:{names})\s+import\b"
                  rf"|\bfrom\s+\.+[\w.]*\s+import\b[^\n]*\b(?:{names})\b")


@dataclass(frozen=True, slots=True)
class InCode:
    """A token that must occur in the file's code: outside its comments and its string
    literals other than f-strings (see :func:`code_only`). A qualified name is used in
    code only, so a docstring's ``>>> torch.cuda.get_device_capability()`` or a generated
    table of names in strings does not send a file to the parser for it."""

    token: str | Anchor


Token = str | Fragment | Anchor | InCode
"""A whole word ("tensorrt", "nvidia-smi"), a fragment, an anchor, or one of them in code."""

# String literals and comments, read left to right as Python's tokenizer reads them (a `#`
# inside a string is text, a quote inside a comment is text), triple quotes first, each
# body an unrolled loop (linear, no backtracking). An f-string is kept whole, since the
# names in its braces are code (`f"+cu{torch.version.cuda}"`): a string whose quote follows
# an `f` (`f`, `rf`, `fr` prefixes; also `elif"x"`, which only keeps more). Python 3.12's
# f-strings may nest their own quote (`f"{d["k"]}"`); read this way they fall into pieces,
# each kept or dropped, so only an odd count of nested quotes (or a nested `#`) could hide
# code, and no further than the end of that line.
_STRING_BODY = "|".join((
    r"'''[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*'''",
    r'"""[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*"""',
    r"'[^'\\\n]*(?:\\[\s\S][^'\\\n]*)*'",
    r'"[^"\\\n]*(?:\\[\s\S][^"\\\n]*)*"',
))
_STRING_OR_COMMENT = re.compile(
    rf"""(?=[#'"])(?:#[^\r\n]*|(?:(?<=[fF])|(?<=[fF][rR]))(?P<f>{_STRING_BODY})|(?:{_STRING_BODY}))""")


def code_only(text: str) -> str:
    """``text`` with each comment and each string literal but f-strings replaced by a space."""
    return _STRING_OR_COMMENT.sub(r"\g<f> ", text)


def regex_fragments(regex: Regex, quoted: bool = False) -> tuple[Fragment, ...]:
    """Literal text one piece of which every match of ``regex`` begins with, if the regex
    starts (after anchors) with literals or an alternation of literals; else ``()``.
    With ``quoted`` (the regex is matched against string literals), a ``^`` anchor means
    the text follows a quote in the source.

    ``^(?i:rocm|hip)(:[0-9]+)?$`` gives ``rocm`` and ``hip`` (case-insensitive).
    """
    try:
        items = list(_re_parser.parse(regex.pattern, regex.flags))
    except Exception:  # noqa: BLE001 - an unusual regex just gets no tokens
        return ()
    anchored = bool(items) and items[0][0] is _re_constants.AT \
        and items[0][1] in (_re_constants.AT_BEGINNING, _re_constants.AT_BEGINNING_STRING)
    found = _leading_literals(items, bool(regex.flags & re.IGNORECASE))
    if not found or not all(f.text for f in found):
        return ()
    return tuple(Fragment(f.text, f.ignore_case, quoted=anchored and quoted) for f in found)


def _leading_literals(items: list, ignore_case: bool) -> list[Fragment] | None:
    while items and items[0][0] is _re_constants.AT:
        items = items[1:]
    if not items:
        return None
    op, av = items[0]
    if op is _re_constants.LITERAL:
        text = ""
        for op2, av2 in items:
            if op2 is not _re_constants.LITERAL:
                break
            text += chr(av2)
        return [Fragment(text, ignore_case)]
    if op is _re_constants.SUBPATTERN:
        add_flags, body = av[1], av[3]
        return _leading_literals(list(body), ignore_case or bool(add_flags & re.IGNORECASE))
    if op is _re_constants.BRANCH:
        found: list[Fragment] = []
        for branch in av[1]:
            sub = _leading_literals(list(branch), ignore_case)
            if not sub:
                return None
            found.extend(sub)
        return found
    return None


def required_literals(regex: Regex) -> tuple[Fragment, ...]:
    """Literal runs (two characters or more) that every match of ``regex`` contains, read
    from its top-level sequence: ``\\b(?:torch|xformers)==\\S*\\+cu\\d`` needs ``==`` and
    ``+cu``. Added to a leading fragment they keep a regex that starts with a common word
    from sending every file that has the word to the parser."""
    try:
        items = list(_re_parser.parse(regex.pattern, regex.flags))
    except Exception:  # noqa: BLE001 - an unusual regex just gets no tokens
        return ()
    ignore_case = bool(regex.flags & re.IGNORECASE)
    runs, text = [], ""
    for op, av in [*items, (None, None)]:
        if op is _re_constants.LITERAL:
            text += chr(av)
            continue
        if len(text) >= 2:
            runs.append(Fragment(text, ignore_case))
        text = ""
    return tuple(runs)


def segment_sets(names: tuple[str, ...]) -> tuple[frozenset[Token], ...]:
    return tuple(frozenset(n.removesuffix(".*").split(".")) for n in names)


def qualified_sets(names: tuple[str, ...]) -> tuple[frozenset[Token], ...]:
    """Token sets for uses of qualified names. Besides every segment and an import of
    the top-level package (names resolve through imports only), a use of ``a.b.c``
    spells its tail ``b.c`` (``a.b.c``, ``X.b.c``, ``b.c`` after ``from a import b``), or
    an import line names ``b`` or ``c`` (``import a.b as X``, ``from a.b import c``).
    All of them in code (:class:`InCode`)."""
    sets: list[frozenset[Token]] = []
    for name in names:
        parts = name.removesuffix(".*").split(".")
        segments = frozenset(map(InCode, parts)) | {InCode(import_anchor(parts[0]))}
        if len(parts) < 2 or name.endswith(".*"):
            sets.append(segments)
            continue
        sets.append(segments | {InCode(".".join(parts[-2:]))})
        sets.append(segments | {InCode(_tail_import(parts))})
    return tuple(sets)


def _tail_import(parts: list[str]) -> Anchor:
    """The import a use of ``parts`` needs where the use does not spell the tail: one that
    names its next-to-last or last part (``import a.b as Y`` or ``from a import b`` for
    ``Y.c``, ``from a.b import c``). For a two-part name ``a.b`` the next-to-last part is
    the package, which ``import a`` names without binding anything that spells other than
    ``a.b``: only ``import a as X`` (for ``X.b``) or an import naming ``b`` will do."""
    last = re.escape(parts[-1])
    if len(parts) > 2:
        return Anchor(rf"\b(?:{re.escape(parts[-2])}|{last})\b")
    return Anchor(rf"\b{last}\b|\b{re.escape(parts[0])}\s+as\s")


_WORD = re.compile(r"\w+")
#: bytes that are ASCII word characters stay, every other byte becomes a space
_WORD_BYTES = bytes(c if c < 128 and (chr(c).isalnum() or c == ord("_")) else 32 for c in range(256))


def ascii_words(text: str) -> list[str]:
    """The ASCII words of ``text`` (non-ASCII characters split words, so a word with one
    in it gives its ASCII parts: a superset of the words a rule token can be). A byte
    translation is several times faster than a ``\\w+`` regex over a large file."""
    return text.encode("utf-8", "surrogatepass").translate(_WORD_BYTES).decode("ascii").split()


R = TypeVar("R")


def _with_whole_text(token_set: frozenset[Token]) -> frozenset[Token]:
    """A token set with what each :class:`InCode` token wraps added, to be found in the
    whole text first: most files fail there, before any of them is cut to its code."""
    return token_set | {t.token for t in token_set if isinstance(t, InCode)}


class _Text:
    """One text's tokens, each looked for at most once."""

    __slots__ = ("text", "vocabulary", "words", "compounds", "known", "_folded", "_imports", "_code")

    def __init__(self, text: str, vocabulary: frozenset[str], compounds: dict[str, str]) -> None:
        self.text = text
        self.vocabulary = vocabulary
        self.words = vocabulary.intersection(ascii_words(text))
        self.compounds = compounds
        self.known: dict[Token, bool] = {}
        self._folded: str | None = None
        self._imports: str | None = None
        self._code: _Text | None = None

    def occurs(self, token: Token) -> bool:
        """Is ``token`` (not a plain word: those are in ``words``) in the text?"""
        known = self.known.get(token)
        if known is None:
            if isinstance(token, str):
                known = token in self.text and re.search(self.compounds[token], self.text) is not None
            elif isinstance(token, Fragment):
                if token.ignore_case and self._folded is None:
                    self._folded = self.text.casefold()
                known = token.occurs(self.text, self._folded or self.text)
            elif isinstance(token, Anchor):
                if self._imports is None:
                    self._imports = import_lines(self.text)
                known = token.occurs(self._imports)
            else:
                if self._code is None:
                    self._code = _Text(code_only(self.text), self.vocabulary, self.compounds)
                inner = token.token
                known = inner in self._code.words if inner in self.vocabulary else self._code.occurs(inner)
            self.known[token] = known
        return known


class Prefilter(Generic[R]):
    """Which of some rules could match a text, from each rule's token sets alone."""

    def __init__(self, rules: Iterable[tuple[R, Sequence[frozenset[Token]]]]) -> None:
        planned = tuple((rule, tuple(map(_with_whole_text, sets))) for rule, sets in rules)
        tokens = {t for _, sets in planned for s in sets for t in s}
        words = {t for t in tokens if isinstance(t, str)}
        self._words = frozenset(t for t in words if _WORD.fullmatch(t))
        #: tokens that are not plain words ("nvidia-smi"), each with its own bounded search
        self._compounds = {t: r"(?<!\w)" + re.escape(t) + r"(?!\w)" for t in sorted(words - self._words)}
        self._rules = tuple(rule for rule, _ in planned)
        #: each token set as (rule's position, its plain words, the rest), filed under its
        #: longest plain word (None: it has none), so a text's words pick the sets to test;
        #: the rest is tested in the whole text first, in code (:class:`InCode`) last
        self._by_word: dict[str | None, list[tuple[int, frozenset[str], tuple[Token, ...]]]] = {}
        for position, (_, sets) in enumerate(planned):
            for token_set in sets:
                cheap = frozenset(t for t in token_set if t in self._words)
                key = max(cheap, key=lambda w: (len(w), w)) if cheap else None
                rest = sorted((t for t in token_set if t not in self._words), key=lambda t: isinstance(t, InCode))
                self._by_word.setdefault(key, []).append((position, cheap, tuple(rest)))

    def candidates(self, text: str) -> tuple[R, ...]:
        """Rules that could match ``text``: every token of one of their token sets occurs,
        in the order they were given.

        Each segment of a qualified name occurs literally in any file that uses it
        (aliases rename only a prefix, which the import statement spells out), so a
        file for which this returns nothing needs no parsing. Words are found in one
        pass; the costlier tokens (compounds, fragments, anchors) are looked for only
        for token sets whose words are all there, and at most once each.
        """
        seen = _Text(text, self._words, self._compounds)
        if not seen.words and None not in self._by_word:
            return ()
        found: set[int] = set()
        for key in (*seen.words, None):
            for position, cheap, rest in self._by_word.get(key, ()):
                if position not in found and cheap <= seen.words and all(seen.occurs(t) for t in rest):
                    found.add(position)
        return tuple(self._rules[i] for i in sorted(found))
