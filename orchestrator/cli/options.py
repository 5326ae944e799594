"""A subcommand's argparse options built from its options dataclass (`orchestrator.app.options`), and the
parsed arguments read back into it: a field's `Flag` gives its flag, help, metavar and parser, so a new option
is one field there. What a command adds by hand is only how it prints (`--json`, `--validate`)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict, TypeVar

from orchestrator.app.options import Flag, flag_of
from orchestrator.errors import InputError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

OptionsT = TypeVar("OptionsT", bound="DataclassInstance")


class _Argument(TypedDict, total=False):
    """The keyword arguments of `add_argument` that a `Flag` sets, typed as argparse takes them."""

    help: str
    nargs: str
    metavar: str
    action: str
    const: object
    default: object
    type: Callable[[str], object]
    choices: tuple[str, ...]
    required: bool


def add_options(parser: argparse.ArgumentParser, cls: type[DataclassInstance]) -> None:
    """One argparse option per field of `cls`, in the fields' order."""
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for field in dataclasses.fields(cls):
        flag = flag_of(field)
        target: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup = parser
        if flag.exclusive:   # one group per word, made when its first field comes (an empty group breaks --help)
            if flag.exclusive not in groups:
                groups[flag.exclusive] = parser.add_mutually_exclusive_group()
            target = groups[flag.exclusive]
        if flag.flag is None:
            target.add_argument(field.name, **_positional(flag))
        else:
            target.add_argument(flag.flag or "--" + field.name.replace("_", "-"), dest=field.name,
                                **_optional(flag, field))


def _positional(flag: Flag) -> _Argument:
    kwargs: _Argument = {"help": _escaped(flag.help)}
    if flag.remainder:
        kwargs["nargs"] = argparse.REMAINDER
    if flag.metavar and not flag.remainder:
        kwargs["metavar"] = flag.metavar
    return kwargs


def _optional(flag: Flag, field: dataclasses.Field[object]) -> _Argument:
    kwargs: _Argument = {"help": _escaped(flag.help)}
    if flag.switch is not None:   # no value: the flag sets the field
        return {**kwargs, "action": "store_const", "const": flag.switch, "default": field.default}
    if flag.metavar:
        kwargs["metavar"] = flag.metavar
    if flag.parse is not None:
        kwargs["type"] = _argparse_type(flag.parse)
    if flag.choices:
        kwargs["choices"] = flag.choices
    if flag.repeat:
        return {**kwargs, "action": "append", "default": None}
    if flag.bare is not None:
        kwargs["nargs"] = "?"
        kwargs["const"] = flag.bare
    if field.default is dataclasses.MISSING:
        return {**kwargs, "required": True}
    return {**kwargs, "default": field.default}


def _escaped(help_text: str) -> str:
    return help_text.replace("%", "%%")   # argparse formats help with %


def _argparse_type(parse: Callable[[str], object]) -> Callable[[str], object]:
    """`parse` for argparse: its InputError becomes argparse's one-line error for the option (a ValueError stays
    argparse's own "invalid <type> value"), under the parser's own name."""

    def typed(text: str) -> object:
        try:
            return parse(text)
        except InputError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    typed.__name__ = getattr(parse, "__name__", "value")
    return typed


def options_from(cls: type[OptionsT], args: argparse.Namespace) -> OptionsT:
    """The options `args` hold, as `cls` (a repeated flag's values as a tuple)."""
    values: dict[str, object] = {}
    for field in dataclasses.fields(cls):
        value = getattr(args, field.name)
        flag = flag_of(field)
        if flag.repeat or flag.remainder:
            value = tuple(value or ())
        values[field.name] = value
    return cls(**values)
