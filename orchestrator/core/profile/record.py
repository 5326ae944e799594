"""Frozen dataclasses read from and written back to JSON exactly: one `from_json`/`to_json` pair for every
record of a profile, generic over the dataclass's fields.

Why exactly: a profile folder is re-rendered from the files it holds (`orch profile --report-only`), and the
files written before a key was added must read and write back unchanged. So a record read from JSON keeps
the keys it was read with, in their order (`_keys`), and the keys it does not know (`_extra`); a field
absent from the file takes its default and is written back only if it was changed. A record built in code
writes its fields in declaration order, leaving out the `optional()` ones still at their default (keys
only some results carry, such as a failed run's log tail).

A field is decoded by its annotation: another record, a `tuple[Record, ...]`, a tuple of plain values,
`X | None`, or plain JSON kept as read (numbers are not converted: an int stays an int).

    >>> @dataclass(frozen=True, slots=True)
    ... class Point(Record):
    ...     x: float = 0.0
    ...     note: str | None = optional(None)
    >>> p = Point.from_json({"y": [1], "x": 2})
    >>> p.x, p.to_json()
    (2, {'y': [1], 'x': 2})
    >>> Point(x=1.5).to_json()
    {'x': 1.5}
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self, TypeVar

T = TypeVar("T")
_OPTIONAL = "omit_at_default"


def optional(default: T) -> T:
    """A field written only when it differs from `default` (a key only some records carry)."""
    out: T = field(default=default, metadata={_OPTIONAL: True})
    return out


@dataclass(frozen=True, slots=True)
class Record:
    """Base of every JSON record (see the module docstring)."""

    _keys: tuple[str, ...] | None = field(default=None, kw_only=True, repr=False, compare=False)
    _extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True, repr=False, compare=False)
    _HINTS: ClassVar[dict[type, dict[str, Any]]] = {}

    @classmethod
    def _fields(cls) -> dict[str, Any]:
        """Field name → resolved annotation, the bookkeeping fields left out; cached per class."""
        if cls not in Record._HINTS:
            hints = typing.get_type_hints(cls)
            Record._HINTS[cls] = {f.name: hints[f.name] for f in dataclasses.fields(cls)
                                  if not f.name.startswith("_")}
        return Record._HINTS[cls]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        known = cls._fields()
        values = {k: _decode(known[k], v) for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**values, _keys=tuple(data), _extra=extra)

    def has(self, key: str) -> bool:
        """Whether the JSON this record was read from carried `key` (one built in code carries every field)."""
        return key in self._extra or key in (type(self)._fields() if self._keys is None else self._keys)

    def to_json(self) -> dict[str, Any]:
        known = type(self)._fields()
        defaults = {f.name: f for f in dataclasses.fields(self)}
        if self._keys is None:
            order = [k for k in known if not (_is_optional(defaults[k]) and _at_default(self, defaults[k]))]
        else:
            order = list(self._keys) + [k for k in known if k not in self._keys
                                        and not _at_default(self, defaults[k])]
        return {k: _encode(getattr(self, k)) if k in known else self._extra[k] for k in order}


def _is_optional(f: dataclasses.Field[Any]) -> bool:
    return bool(f.metadata.get(_OPTIONAL))


def _at_default(record: Record, f: dataclasses.Field[Any]) -> bool:
    if f.default is not dataclasses.MISSING:
        return bool(getattr(record, f.name) == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(getattr(record, f.name) == f.default_factory())
    return False


def _decode(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        return _decode(inner[0], value) if len(inner) == 1 else value
    if isinstance(hint, type) and issubclass(hint, Record) and isinstance(value, Mapping):
        return hint.from_json(value)
    if origin is tuple and isinstance(value, list):
        return tuple(_decode(args[0], v) for v in value)
    return value


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


@dataclass(frozen=True, slots=True, eq=False)
class Row(Record):
    """A table row the analysis builds: typed fields, written as the dict of its fields in declaration
    order (the CSV's and JSON's columns). It also reads by column name, as that dict does, for the callers
    that hold a table rather than a row type (tests, the Markdown writer)."""

    def __getitem__(self, column: str) -> Any:
        return getattr(self, column)

    def __eq__(self, other: object) -> bool:
        """Equal to a row of the same type with the same fields, or to the dict it writes."""
        if isinstance(other, Mapping):
            return self.to_json() == dict(other)
        if type(other) is type(self):
            return self.to_json() == other.to_json()
        return NotImplemented
