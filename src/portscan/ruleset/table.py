"""Strict reading of TOML tables: typed values, and an error for any key nobody asked for.

The one reader every part of a rule file goes through (``[match]``, ``[fix]``, examples,
targets), so that all of them report problems alike, as ``key: problem``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from portscan.bounded import Regex

Literal = str | int | float | bool | tuple  # a literal value compared structurally
MISSING = object()  #: the value of an expression that is not a literal (nothing is evaluated)

DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PatternError(ValueError):
    """A ``[match]`` table is malformed; ``key`` names the offending key."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


class TableReader:
    """Reads typed values out of one TOML table and rejects keys nobody asked for."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise PatternError(where, "expected a table")
        self.data = data
        self.where = where
        self.seen: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def raw(self, name: str, required: bool) -> Any:
        self.seen.add(name)
        if name not in self.data:
            if required:
                raise PatternError(self.key(name), "missing required key")
            return None
        return self.data[name]

    def text(self, name: str, required: bool = True, default: str = "") -> str:
        value = self.raw(name, required)
        if value is None:
            return default
        if not isinstance(value, str) or (required and not value.strip()):
            raise PatternError(self.key(name), "expected a non-empty string")
        return value

    def flag(self, name: str, default: bool = False) -> bool:
        """An optional true/false key."""
        value = self.raw(name, False)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise PatternError(self.key(name), "expected true or false")
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: str | None = None) -> str:
        value = self.raw(name, default is None)
        if value is None:
            assert default is not None
            return default
        if value not in choices:
            raise PatternError(self.key(name), f"expected one of {', '.join(choices)}; got {value!r}")
        return value

    def texts(self, name: str, required: bool = True, check: re.Pattern[str] | None = None,
              what: str = "string") -> tuple[str, ...]:
        value = self.raw(name, required)
        if value is None:
            return ()
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise PatternError(self.key(name), f"expected a non-empty list of {what}s")
        if check is not None:
            for item in value:
                if not check.match(item):
                    raise PatternError(self.key(name), f"{item!r} is not a valid {what}")
        return tuple(value)

    def dotted(self, name: str, required: bool = True, wildcard: bool = False) -> tuple[str, ...]:
        value = self.raw(name, required)
        if value is None:
            return ()
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise PatternError(self.key(name), "expected a non-empty list of dotted names")
        for item in value:
            base = item[:-2] if wildcard and item.endswith(".*") else item
            if not DOTTED.match(base):
                raise PatternError(self.key(name), f"{item!r} is not a dotted name")
        return tuple(value)

    def regex(self, name: str) -> Regex | None:
        value = self.raw(name, False)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise PatternError(self.key(name), "expected a regular expression string")
        try:
            re.compile(value)
        except re.error as exc:
            raise PatternError(self.key(name), f"invalid regular expression: {exc}") from None
        return Regex(value)

    def literals(self, name: str) -> tuple[Literal, ...]:
        value = self.raw(name, False)
        if value is None:
            return ()
        if not isinstance(value, list) or not value:
            raise PatternError(self.key(name), "expected a non-empty list of literal values")
        return tuple(to_literal(v, self.key(name)) for v in value)

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            raise PatternError(self.key(unknown[0]), "unknown key")


def to_literal(value: Any, key: str) -> Literal:
    """TOML value -> the Python literal it stands for (arrays become tuples)."""
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list):
        return tuple(to_literal(v, key) for v in value)
    raise PatternError(key, f"{value!r} is not a string, number, boolean or array")


def literal_in(value: object, allowed: Sequence[Literal]) -> bool:
    """Structural equality that keeps ``True`` apart from ``1``."""
    return any(type(value) is type(a) and value == a for a in allowed) or any(
        isinstance(value, (int, float)) and not isinstance(value, bool)
        and isinstance(a, (int, float)) and not isinstance(a, bool) and value == a
        for a in allowed
    )
