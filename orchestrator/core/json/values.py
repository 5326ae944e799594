"""What JSON holds, as types: the records, reports, specs and caches orch writes and reads are JSON, so a value
read from one is a `JsonValue` (to be narrowed before use), not `Any` (which would let a typo through).

`JsonMapping` and `JsonReadable` are the read-only views: a `Mapping` or `Sequence` is covariant in its values,
so a `dict[str, float]` or a `list[int]` is one, where a `dict[str, JsonValue]` would not accept it.

The aliases are types at run time too, so a dataclass's fields declared with them resolve:

    >>> import typing
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Cached:
    ...     params: JsonDict
    >>> typing.get_origin(typing.get_type_hints(Cached)["params"])
    <class 'dict'>
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ForwardRef, TypeAlias

JsonScalar: TypeAlias = None | bool | int | float | str

if TYPE_CHECKING:
    JsonValue: TypeAlias = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
    JsonReadable: TypeAlias = JsonScalar | Sequence["JsonReadable"] | Mapping[str, "JsonReadable"]
else:
    # The same, with forward references that name their module, so that typing.get_type_hints resolves them
    # on a dataclass in any module (the schema and JsonObject readers read fields' types that way).
    def _here(name):
        return ForwardRef(name, module=__name__)

    JsonValue = JsonScalar | list[_here("JsonValue")] | dict[str, _here("JsonValue")]
    JsonReadable = JsonScalar | Sequence[_here("JsonReadable")] | Mapping[str, _here("JsonReadable")]

JsonDict: TypeAlias = dict[str, JsonValue]
JsonMapping: TypeAlias = Mapping[str, JsonValue]


def differing(a: JsonMapping, b: JsonMapping) -> list[tuple[str, JsonValue, JsonValue]]:
    """Every key whose value differs between two mappings (a workload's parameters, as predicted and as measured),
    in key order: (key, a's value, b's value), None where one lacks the key.

    >>> differing({"hidden": 1024, "depth": 2}, {"hidden": 512, "depth": 2, "bias": True})
    [('bias', None, True), ('hidden', 1024, 512)]
    """
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
