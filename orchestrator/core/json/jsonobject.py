"""Frozen dataclasses that read and write a JSON object without changing its bytes: the trial records
(`orchestrator.core.measured.records`), the ranks' reports (`orchestrator.run.reports`) and the profiles
(`orchestrator.core.profile.result`).

One `from_json`/`to_json` pair, generic over the dataclass's fields, so no field is looked up by a string
anywhere else. A file written by an older orch lacks keys added since, and one written by a newer orch may
hold keys this one does not know; both must survive a read and a write unchanged. So an object keeps the
keys its JSON had, in their order (`json_keys`), and the values of keys it has no field for (`json_extra`).
An object built in code writes every field, in declaration order, but for a field declared `optional()`
that is None (a key older writers left out when it did not apply), unless `json_keys` says otherwise
(`only`, `with_fields`).

A field is converted on the way in by its annotation: a `JsonObject` subclass from its JSON object, a
`tuple[X, ...]` from its JSON list (each item converted as X), a `StrEnum` from its value; anything else
(a `list`, a `dict`, a number: an int stays an int) is kept as JSON gave it. Tuples are written as lists.

    >>> @dataclass(frozen=True, slots=True)
    ... class Point(JsonObject):
    ...     x: float
    ...     tags: tuple[str, ...] = ()
    ...     note: str | None = optional()
    >>> p = Point.from_json({"y": [1], "x": 2, "tags": ["a"]})
    >>> p.x, p.tags, p.to_json()
    (2, ('a',), {'y': [1], 'x': 2, 'tags': ['a']})
    >>> Point(x=1.5).to_json()
    {'x': 1.5, 'tags': []}
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self, TypeVar

_META = ("json_keys", "json_extra")
_OPTIONAL = "orch.optional"

Convert = Callable[[Any], Any]


_T = TypeVar("_T")


def _identity(value: _T) -> _T:
    return value


def _converter(annotation: object) -> Convert:
    """How a JSON value becomes the field's value, from the field's annotation."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        inner = _converter(args[0]) if len(args) == 1 else _identity
        return lambda value: None if value is None else inner(value)
    if typing.get_origin(annotation) is tuple and args:
        item = _converter(args[0])   # tuple[X, ...]: every item an X
        return lambda value: tuple(item(v) for v in value)
    if isinstance(annotation, type) and issubclass(annotation, JsonObject):
        return annotation.from_json
    if isinstance(annotation, type) and issubclass(annotation, StrEnum):
        return annotation
    return _identity


def optional() -> Any:
    """A field that defaults to None and, when None, is left out of what an object built in code writes."""
    return field(default=None, metadata={_OPTIONAL: True})


_FIELDS: dict[type, dict[str, Convert]] = {}       # per class, read once (type hints are slow to resolve)
_OPTIONAL_FIELDS: dict[type, frozenset[str]] = {}


def _optional_fields(cls: type) -> frozenset[str]:
    if cls not in _OPTIONAL_FIELDS:
        _OPTIONAL_FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get(_OPTIONAL))
    return _OPTIONAL_FIELDS[cls]


def _fields(cls: type) -> dict[str, Convert]:
    """The JSON fields of a dataclass, in declaration order, with each one's converter."""
    if cls not in _FIELDS:
        hints = typing.get_type_hints(cls)
        _FIELDS[cls] = {f.name: _converter(hints[f.name]) for f in dataclasses.fields(cls) if f.name not in _META}
    return _FIELDS[cls]


def _plain(value: object) -> Any:
    """A field's value as JSON holds it."""
    if isinstance(value, JsonObject):
        return value.to_json()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class JsonObject:
    """Base of a frozen dataclass that is one JSON object (see the module docstring)."""

    # The keys the JSON object had, in its order (None: every field, in declaration order).
    json_keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)
    # Keys this orch has no field for, with their values, written back as they were.
    json_extra: Mapping[str, object] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Self:
        """The object of a parsed JSON object; raises TypeError/ValueError when it is not one."""
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        known = _fields(cls)
        values = {name: convert(data[name]) for name, convert in known.items() if name in data}
        extra = {key: value for key, value in data.items() if key not in known}
        return cls(**values, json_keys=tuple(data), json_extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The JSON object, its keys in the order they were read (or declared)."""
        known = _fields(type(self))
        return {key: _plain(getattr(self, key)) if key in known else self.json_extra[key]
                for key in self.keys()}

    def keys(self) -> tuple[str, ...]:
        """The keys `to_json` writes."""
        if self.json_keys is not None:
            return self.json_keys
        optional = _optional_fields(type(self))
        return tuple(name for name in _fields(type(self)) if name not in optional or getattr(self, name) is not None)

    def has(self, name: str) -> bool:
        """Whether the JSON object holds the key (an older file may lack a field added since)."""
        return name in self.keys()

    def only(self, *names: str) -> Self:
        """The object written with just these keys, in this order (the others are absent, not null)."""
        return dataclasses.replace(self, json_keys=names)

    def with_fields(self, **changes: Any) -> Self:
        """The object with these fields set, each written (appended after the present keys when it was absent)."""
        keys = self.keys()
        added = tuple(name for name in changes if name not in keys)
        return dataclasses.replace(self, **changes, json_keys=keys + added)


_JSON_TYPE_NAMES = {str: "a string", bool: "true or false", int: "a whole number", float: "a number"}


def _type_ok(annotation: object, value: object) -> bool:
    """Whether a field's value (as `from_json` converted it) is of its annotation's JSON type. What the annotation
    does not pin down (a dict's values, a JSON value) passes."""
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(_type_ok(a, value) for a in args)
    if annotation is type(None):
        return value is None
    if annotation in (str, bool):
        return isinstance(value, annotation)
    if annotation in (int, float):
        return isinstance(value, (int, float) if annotation is float else int) and not isinstance(value, bool)
    if typing.get_origin(annotation) is tuple and args:
        return isinstance(value, tuple) and all(_type_ok(args[0], v) for v in value)
    if typing.get_origin(annotation) in (dict, Mapping):
        return isinstance(value, Mapping)
    if isinstance(annotation, type) and issubclass(annotation, JsonObject):
        return isinstance(value, annotation)
    return True


def _wanted(annotation: object) -> str:
    real = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    names = [_JSON_TYPE_NAMES.get(a, "an object" if isinstance(a, type) and issubclass(a, JsonObject) or
                                  typing.get_origin(a) in (dict, Mapping) else "a list") for a in real]
    nullable = type(None) in typing.get_args(annotation)
    return " or ".join([*dict.fromkeys(names), *(["null"] if nullable else [])])


def wrong_types(obj: JsonObject, path: str = "") -> list[str]:
    """Every field of `obj` (and of its sections, recursively) whose value is not of its annotation's JSON type,
    as `path: must be ..., not ...`: `from_json` keeps scalars as JSON gave them, so a reader that trusts a file
    checks them once, here.

    >>> @dataclass(frozen=True, slots=True)
    ... class Run(JsonObject):
    ...     host: str | None = None
    ...     ranks: int = 1
    >>> wrong_types(Run.from_json({"host": 7, "ranks": 2.5}))
    ['host: must be a string or null, not int', 'ranks: must be a whole number, not float']
    """
    hints = typing.get_type_hints(type(obj))
    problems = []
    for name in _fields(type(obj)):
        problems += _wrong_value(hints[name], getattr(obj, name), f"{path}{name}")
    return problems


def _wrong_value(annotation: object, value: object, where: str) -> list[str]:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is tuple and isinstance(value, tuple):   # a list: each item, by its place
        return [p for i, item in enumerate(value) for p in _wrong_value(args[0], item, f"{where}[{i}]")]
    if not _type_ok(annotation, value):
        return [f"{where}: must be {_wanted(annotation)}, not {type(value).__name__}"]
    return wrong_types(value, f"{where}.") if isinstance(value, JsonObject) else []
