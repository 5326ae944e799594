"""A subcommand's argparse options built from its options dataclass (`orchestrator.app.options`), and the
parsed arguments read back into it: a field's `Flag` gives its flag, help, metavar and parser, so a new option
is one field there. What a command adds by hand is only how it prints (`--json`, `--validate`).

Two conventions hold for every command: a value never hides in the next word of a flag that also stands alone
(`--mlflow` alone, `--mlflow-uri URI` or `--mlflow=URI` with a value: `orch sweep --mlflow SWEEP` reads SWEEP as
the sweep file), and an old spelling of a flag still works and says once what replaces it (`--deadline-h 8`:
use `--deadline 8h`)."""

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
            continue
        name = flag.flag or "--" + field.name.replace("_", "-")
        target.add_argument(name, dest=field.name, **_optional(flag, field))
        if flag.bare is not None:   # the value, when there is one, only as --NAME-uri URI or --NAME=URI
            target.add_argument(f"{name}-uri", dest=field.name, help=argparse.SUPPRESS, metavar=flag.metavar)
            EQUALS_FORMS[name] = f"{name}-uri"
        for alias in flag.aliases:
            parse = alias.parse or flag.parse or str
            target.add_argument(alias.flag, dest=field.name, help=argparse.SUPPRESS, action=_OldSpelling,
                                new=f"{name} {flag.metavar}" if flag.metavar else name,
                                type=_argparse_type(parse))


def _positional(flag: Flag) -> _Argument:
    kwargs: _Argument = {"help": _escaped(flag.help)}
    if flag.remainder:
        kwargs["nargs"] = argparse.REMAINDER
    elif flag.repeat:            # a positional given one or more times: `orch score PREDICTION DIR [DIR ...]`
        kwargs["nargs"] = "+"
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
    if flag.bare is not None:   # alone: the field's `bare` value; its value comes through --NAME-uri
        return {"help": kwargs["help"], "action": "store_const", "const": flag.bare, "default": field.default}
    if field.default is dataclasses.MISSING:
        return {**kwargs, "required": True}
    return {**kwargs, "default": field.default}


# --NAME=VALUE for a flag that also stands alone: the form its value takes in argv (`expand_equals`).
EQUALS_FORMS: dict[str, str] = {}


def expand_equals(argv: list[str]) -> list[str]:
    """argv with `--mlflow=URI` read as `--mlflow-uri URI` (argparse gives a flag that stands alone no value),
    up to a `--` (what follows it is another command's).

    >>> EQUALS_FORMS["--mlflow"] = "--mlflow-uri"
    >>> expand_equals(["sweep", "s.yaml", "--mlflow=http://h:5000", "--", "x", "--mlflow=y"])
    ['sweep', 's.yaml', '--mlflow-uri', 'http://h:5000', '--', 'x', '--mlflow=y']
    """
    out: list[str] = []
    for i, word in enumerate(argv):
        if word == "--":
            return out + argv[i:]
        flag, equals, value = word.partition("=")
        out += [EQUALS_FORMS[flag], value] if equals and flag in EQUALS_FORMS else [word]
    return out


class _OldSpelling(argparse.Action):
    """An old spelling of a flag: stores its value as the new one would, and is said once (`old_spellings`)."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: object):
        super().__init__(option_strings, dest, **kwargs)   # type: ignore[arg-type]   # argparse's own keywords
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        said: list[str] = namespace.__dict__.setdefault(OLD_SPELLINGS, [])
        line = f"{option_string} is an old spelling: use {self.new} (docs/commands.md); it goes in the next release"
        if line not in said:
            said.append(line)


OLD_SPELLINGS = "old_spellings"   # the namespace's list of what the old spellings given say (cli.main logs it)


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
