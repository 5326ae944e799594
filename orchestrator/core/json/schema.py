"""Strict loading of plain data (parsed YAML/JSON) into frozen dataclasses.

Every problem in a document is collected, each with its key path, instead of stopping at the first one:
a user fixing a sweep file wants the whole list in one go. Field help text lives in the field's
metadata so that `--help`, docs/sweep-files.md's schema table and the error messages share one source.
A document whose keys are not names (an MLPerf RCP file's "Epochs to converge") gives its field the key
(`opt(key=...)`): the field is read from that key, and its problems name it.

    >>> @dataclasses.dataclass(frozen=True, kw_only=True)
    ... class Measure:
    ...     timed_steps: int = opt(20, "timed steps per repeat", minimum=1)
    >>> load(Measure, {"timed_steps": 0}, "measure")
    (None, [Problem(path='measure.timed_steps', message='must be >= 1, got 0', line=None)])
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from orchestrator.errors import InputError

MISSING = dataclasses.MISSING

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_T = TypeVar("_T", bound="DataclassInstance")


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with an input document."""

    path: str
    message: str
    line: int | None = None
    # the value at fault, as the document gave it (None where the key is missing): for a reader whose message is its
    # own (an RCP file's "BS must be a positive integer, got '16'")
    value: object = dataclasses.field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        where = f"{self.path or '<top>'}"
        if self.line is not None:
            where += f" (line {self.line})"
        return f"{where}: {self.message}"


class InvalidInput(InputError):
    """Bad user input: carries every problem found, for an exit status of 2 and no traceback."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n{lines}")


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """What `opt` says of a field (kept in its metadata under RULE): its help text, numeric bounds and the key it
    is read from where that is not its name."""

    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    finite: bool = True
    key: str | None = None

    def within(self, low: float, high: float) -> bool:
        """Whether every number in [low, high] keeps the bounds."""
        return ((self.minimum is None or low >= self.minimum)
                and (self.exclusive_minimum is None or low > self.exclusive_minimum)
                and (self.maximum is None or high <= self.maximum))


RULE = "orch.rule"
NO_RULE = Rule()


def rule_of(f: dataclasses.Field[object]) -> Rule:
    """The field's `Rule` (a field not made by `opt` has no help and no bounds)."""
    found = f.metadata.get(RULE, NO_RULE)
    return found if isinstance(found, Rule) else NO_RULE


def opt(default: object = MISSING, help: str = "", *, minimum: float | None = None,
        maximum: float | None = None, exclusive_minimum: float | None = None,
        finite: bool = True, factory: Any = MISSING, key: str | None = None) -> Any:
    """A dataclass field with help text and numeric bounds checked by `load`.

    `finite=False` lets the field take NaN and ±infinity (YAML `.nan`, `.inf`). By default they are
    refused: NaN compares false with every bound, so without this rule `.nan` would pass them all.
    `key` is the document's key for the field where it is not the field's name (`load` reads it, `to_plain`
    writes it).
    """
    meta = {RULE: Rule(help, minimum, maximum, exclusive_minimum, finite, key)}
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple or factory= for mutable defaults")
    if factory is not MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    if default is MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def field_help(cls: type) -> list[tuple[str, str, str]]:
    """(name, default, help) for each field of a dataclass, for docs and error messages."""
    out = []
    for f in dataclasses.fields(cls):
        if f.default is not MISSING:
            default = repr(f.default)
        elif callable(f.default_factory):
            default = repr(f.default_factory())
        else:
            default = "required"
        out.append((rule_of(f).key or f.name, default, rule_of(f).help))
    return out


def _type_name(tp: object) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (tuple, list):
        args = typing.get_args(tp)
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    return getattr(tp, "__name__", str(tp))


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# Scalars taken as they are when of exactly this type. A detailed topology holds a million CPU ids: the
# fast paths below keep loading it in seconds, not minutes.
_EXACT_SCALARS = (bool, int, float, str)


def _convert(tp: object, value: object, path: str, problems: list[Problem]) -> object:
    """Check `value` against the annotation `tp`; return the converted value or MISSING."""
    if tp in _EXACT_SCALARS and type(value) is tp:
        return value
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if tp is type(None):
        if value is None:
            return None
        problems.append(Problem(path, f"must be null, got {_show(value)}", value=value))
        return MISSING
    if origin in (typing.Union, types.UnionType):
        return _convert_union(tp, value, path, problems)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value in allowed and type(value) in {type(a) for a in allowed}:
            return value
        problems.append(Problem(path, f"must be one of {', '.join(repr(a) for a in allowed)}; got {_show(value)}",
                                value=value))
        return MISSING
    if origin is tuple or origin is list:
        (item_tp, *_rest) = typing.get_args(tp) or (Any,)
        if not isinstance(value, (list, tuple)):
            problems.append(Problem(path, f"must be a list, got {_show(value)}", value=value))
            return MISSING
        if item_tp in _EXACT_SCALARS and all(type(item) is item_tp for item in value):
            return tuple(value)
        items = []
        before = len(problems)
        for i, item in enumerate(value):
            items.append(_convert(item_tp, item, f"{path}[{i}]", problems))
        return tuple(items) if len(problems) == before else MISSING
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            problems.append(Problem(path, f"must be a mapping, got {_show(value)}", value=value))
            return MISSING
        return dict(value)
    if dataclasses.is_dataclass(tp):
        obj, sub = load(cast(type, tp), value, path)
        problems.extend(sub)
        return obj if obj is not None else MISSING
    return _convert_scalar(tp, value, path, problems)


def _convert_union(tp: object, value: object, path: str, problems: list[Problem]) -> object:
    """The first option of `A | B | None` that takes `value` without a problem."""
    options = typing.get_args(tp)
    if value is None and type(None) in options:
        return None
    real = [o for o in options if o is not type(None)]
    if len(real) == 1 and (dataclasses.is_dataclass(real[0]) or typing.get_origin(real[0]) in (tuple, list)):
        # `Section | None` given a value: report the section's own problems with their key paths,
        # not a bare "must be mapping or null".
        return _convert(real[0], value, path, problems)
    for option in options:
        if not _may_take(option, value):
            continue
        trial: list[Problem] = []
        converted = _convert(option, value, path, trial)
        if not trial:
            return converted
    problems.append(Problem(path, f"must be {_type_name(tp)}, got {_show(value)}", value=value))
    return MISSING


def _may_take(option: object, value: object) -> bool:
    """False when `value` being a list or not rules `option` out: no trial conversion bound to fail."""
    wants_list = typing.get_origin(option) in (tuple, list)
    if wants_list or option in _EXACT_SCALARS:
        return wants_list == isinstance(value, (list, tuple))
    return True


def _convert_scalar(tp: object, value: object, path: str, problems: list[Problem]) -> object:
    """bool, int, float (an int is taken as a float) and str, never a bool for a number."""
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    else:  # pragma: no cover - a programming error in a schema, not user input
        raise TypeError(f"unsupported annotation {tp!r} at {path}")
    problems.append(Problem(path, f"must be {_type_name(tp)}, got {_show(value)}", value=value))
    return MISSING


def _check_bounds(f: dataclasses.Field[object], value: object, path: str, problems: list[Problem]) -> None:
    """A field's bounds hold for its number, or for every number in its (possibly nested) lists."""
    rule = rule_of(f)
    if isinstance(value, tuple):
        if _all_within(rule, value):  # the usual case, without a key path built for every item
            return
        for i, item in enumerate(value):
            _check_bounds(f, item, f"{path}[{i}]", problems)
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    if isinstance(value, float) and rule.finite and not math.isfinite(value):
        # Before the bounds: NaN passes every one of them, and "must be >= 0, got nan" would mislead.
        problems.append(Problem(path, f"must be a finite number, got {value}", value=value))
        return
    if rule.minimum is not None and value < rule.minimum:
        problems.append(Problem(path, f"must be >= {rule.minimum}, got {value}", value=value))
    if rule.exclusive_minimum is not None and value <= rule.exclusive_minimum:
        problems.append(Problem(path, f"must be > {rule.exclusive_minimum}, got {value}", value=value))
    if rule.maximum is not None and value > rule.maximum:
        problems.append(Problem(path, f"must be <= {rule.maximum}, got {value}", value=value))


def _all_within(rule: Rule, items: tuple[object, ...]) -> bool:
    """True when `items` are plain numbers, finite where `rule` asks it, all within its bounds."""
    kinds = set(map(type, items))
    if not items or not kinds <= {int, float}:
        return False
    numbers = cast(tuple[float, ...], items)   # every item's type is int or float: `kinds` checked just above
    if float in kinds and rule.finite and not all(math.isfinite(i) for i in numbers if type(i) is float):
        return False  # min and max are meaningless with a NaN among the items: check them one by one
    return rule.within(min(numbers), max(numbers))


# A document may hold thousands of mappings of one class (the nodes of a detailed topology): resolve each
# class's string annotations once, not once per mapping.
_type_hints = functools.cache(typing.get_type_hints)


@functools.cache
def _keyed_fields(cls: type) -> dict[str, dataclasses.Field[object]]:
    """The class's fields by the document's key (a field's `opt(key=...)`, else its name), in declaration order."""
    return {rule_of(f).key or f.name: f for f in dataclasses.fields(cls)}


def load(cls: type[_T], data: object, path: str = "") -> tuple[_T | None, list[Problem]]:
    """Build `cls` from a mapping, strictly. Returns (instance or None, problems)."""
    problems: list[Problem] = []
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        return None, [Problem(path, f"must be a mapping, got {_show(data)}", value=data)]
    fields = _keyed_fields(cls)
    hints = _type_hints(cls)
    unknown = [k for k in data if k not in fields]
    for key in unknown:
        valid = ", ".join(sorted(fields))
        problems.append(Problem(_join(path, str(key)), f"unknown key; valid keys are: {valid}"))
    kwargs = {}
    for key, f in fields.items():
        sub = _join(path, key)
        if key not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                problems.append(Problem(sub, f"required ({rule_of(f).help or _type_name(hints[f.name])})"))
            continue
        before = len(problems)
        value = _convert(hints[f.name], data[key], sub, problems)
        if value is MISSING or len(problems) > before:
            continue
        _check_bounds(f, value, sub, problems)
        if len(problems) == before:
            kwargs[f.name] = value
    if problems:
        return None, problems
    try:
        return cls(**kwargs), []
    except InvalidInput as err:  # cross-field checks that name the keys at fault, relative to this mapping
        return None, [Problem(_join(path, p.path), p.message, p.line) for p in err.problems]
    except ValueError as err:  # cross-field checks in __post_init__, one message per line
        return None, [Problem(path, line) for line in str(err).splitlines() if line.strip()]


def _join(path: str, key: str) -> str:
    """`path.key`; `path[i]` for a list index and `path` itself for no key."""
    if not path or not key:
        return path or key
    return f"{path}{key}" if key.startswith("[") else f"{path}.{key}"


def to_plain(obj: object) -> Any:
    """Dataclasses and tuples to plain dicts and lists, for JSON and YAML output."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {rule_of(f).key or f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj
