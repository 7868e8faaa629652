"""Frozen dataclasses to JSON and back, checked against their type hints.

Caches are read back from disk, and a disk can hold anything: a file planted by a
scanned repository, a truncated write, an older portscan's format. So nothing read back
is ever unpickled or evaluated; it is decoded as plain JSON data and rebuilt field by
field from the declared types, and anything that does not fit raises :class:`DataError`
(callers treat that as a cache miss).

Supported: ``None``, ``str``, ``int``, ``float``, ``bool``, enums, ``tuple[X, ...]``,
fixed tuples, a bare ``tuple`` of literals, ``frozenset[X]``, ``Mapping[str, X]``,
unions, ``SpecifierSet`` and frozen dataclasses of these. In a union of
several dataclasses a value is written as ``{"type": ClassName, "value": {...}}``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from re import error as re_error
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet


class DataError(ValueError):
    """Data that does not have the shape its type declares."""


def dump(tp: Any, value: Any) -> Any:
    """``value`` (of type ``tp``) as JSON-ready data."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        members = [a for a in args if a is not type(None)]
        classes = [a for a in members if dataclasses.is_dataclass(a)]
        if len(classes) > 1 and dataclasses.is_dataclass(value):
            return {"type": type(value).__name__, "value": dump(type(value), value)}
        return dump(_member_for(members, value), value)
    if origin is tuple or tp is tuple:
        if tp is tuple or (len(args) == 2 and args[1] is Ellipsis):
            item = args[0] if args else tuple
            return [dump(item, v) if args else _dump_literal(v) for v in value]
        return [dump(a, v) for a, v in zip(args, value, strict=True)]
    if origin is frozenset:
        return sorted((dump(args[0], v) for v in value), key=repr)
    if origin in (Mapping, dict):
        return {k: dump(args[1], v) for k, v in value.items()}
    if tp is SpecifierSet:
        return str(value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return value.value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        return {f.name: dump(hints[f.name], getattr(value, f.name)) for f in _fields(tp)}
    return value


def load(tp: Any, data: Any) -> Any:
    """Rebuild a value of type ``tp`` from :func:`dump`'s data; raises :class:`DataError`."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return _expect(data, data is None, "null")
    if origin in (typing.Union, types.UnionType):
        return _load_union(args, data)
    if origin is tuple or tp is tuple:
        _expect(data, isinstance(data, list), "a list")
        if tp is tuple or (len(args) == 2 and args[1] is Ellipsis):
            return tuple(load(args[0], v) if args else _load_literal(v) for v in data)
        _expect(data, len(data) == len(args), f"a list of {len(args)}")
        return tuple(load(a, v) for a, v in zip(args, data, strict=True))
    if origin is frozenset:
        _expect(data, isinstance(data, list), "a list")
        return frozenset(load(args[0], v) for v in data)
    if origin in (Mapping, dict):
        _expect(data, isinstance(data, dict) and all(isinstance(k, str) for k in data), "an object")
        return {k: load(args[1], v) for k, v in data.items()}
    if tp is SpecifierSet:
        try:
            return SpecifierSet(_scalar(str, data))
        except InvalidSpecifier as exc:
            raise DataError(str(exc)) from None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            raise DataError(f"{data!r} is not a {tp.__name__}") from None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        fields = _fields(tp)
        _expect(data, isinstance(data, dict) and set(data) == {f.name for f in fields},
                f"the fields of {tp.__name__}")
        hints = _hints(tp)
        try:
            return tp(**{f.name: load(hints[f.name], data[f.name]) for f in fields})
        except (TypeError, ValueError, re_error) as exc:  # a __post_init__ check (a Regex compiles)
            raise DataError(f"{tp.__name__}: {exc}") from None
    if tp in (str, int, float, bool):
        return _scalar(tp, data)
    raise DataError(f"cannot read a {tp!r}")


def _load_union(args: tuple[Any, ...], data: Any) -> Any:
    if data is None and type(None) in args:
        return None
    members = [a for a in args if a is not type(None)]
    classes = {a.__name__: a for a in members if isinstance(a, type) and dataclasses.is_dataclass(a)}
    if len(classes) > 1 and isinstance(data, dict) and set(data) == {"type", "value"}:
        chosen = classes.get(data["type"]) if isinstance(data["type"], str) else None
        _expect(data, chosen is not None, f"one of {sorted(classes)}")
        return load(chosen, data["value"])
    for member in members:
        if not _may_fit(member, type(data)):  # type: ignore[arg-type]
            continue
        try:
            return load(member, data)
        except DataError:
            continue
    raise DataError(f"{_show(data)} fits none of {members}")


@functools.cache
def _may_fit(tp: Any, kind: type) -> bool:
    """Could JSON data of type ``kind`` load as ``tp`` at all? Skips the members of a union
    that would fail (raising costs more than the check: a rule pack loads ~1,000 unions)."""
    origin = typing.get_origin(tp) or tp
    if isinstance(origin, type) and issubclass(origin, enum.Enum):
        return True
    if kind is list:
        return origin in (tuple, frozenset)
    if kind is dict:
        return origin in (Mapping, dict) or dataclasses.is_dataclass(origin)
    if kind is str:
        return origin in (str, SpecifierSet)
    if kind is int:
        return origin in (int, float)
    return origin is kind


def _member_for(members: list[Any], value: Any) -> Any:
    for member in members:
        base = typing.get_origin(member) or member
        if base is tuple and isinstance(value, tuple) or isinstance(base, type) and isinstance(value, base):
            return member
    return members[0]


def _dump_literal(value: Any) -> Any:
    return [_dump_literal(v) for v in value] if isinstance(value, tuple) else value


def _load_literal(data: Any) -> Any:
    if isinstance(data, list):
        return tuple(_load_literal(v) for v in data)
    _expect(data, isinstance(data, (str, int, float, bool)), "a literal")
    return data


def _scalar(tp: type, data: Any) -> Any:
    if tp is float and type(data) is int:
        return float(data)
    return _expect(data, type(data) is tp, tp.__name__)


def _expect(data: Any, ok: bool, what: str) -> Any:
    if not ok:
        raise DataError(f"expected {what}, got {_show(data)}")
    return data


def _show(data: Any) -> str:
    text = repr(data)
    return text if len(text) <= 60 else text[:57] + "..."


@functools.cache
def _fields(tp: type) -> tuple[dataclasses.Field[Any], ...]:
    return tuple(f for f in dataclasses.fields(tp) if f.init)


@functools.cache
def _hints(tp: type) -> dict[str, Any]:
    return typing.get_type_hints(tp)
