"""A training script's arguments: the grid's values filled into `{placeholders}`, and the same values as
environment variables (pure).

A sweep that names a script (`workload: {script: train.py, args: [...]}`) runs it as it is, one process per
rank; what differs from trial to trial reaches it through its arguments and its environment:

    >>> fill_args(("--batch-size", "{local_batch}", "--name", "r{ranks}-b{local_batch}"),
    ...           {"local_batch": "8", "ranks": "2"})
    ['--batch-size', '8', '--name', 'r2-b8']
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence

# Every placeholder a script's arguments may use, with what it is (docs/own-script.md lists them).
PLACEHOLDERS: dict[str, str] = {
    "local_batch": "samples per rank per step (the grid's local batch)",
    "global_batch": "samples per step over all ranks (ranks × local batch)",
    "threads": "threads (cores) per rank",
    "ranks": "data-parallel ranks (WORLD_SIZE)",
    "seed": "the run's seed (0 for a throughput trial; each convergence seed in turn)",
    "lr": "the learning rate for the trial's global batch: convergence.base_lr scaled by convergence.lr_rule",
    "max_epochs": "convergence.max_epochs, rounded up: train at least this long (orch ends the script sooner)",
}
# Placeholders that need the sweep's convergence section.
NEEDS_CONVERGENCE = ("lr", "max_epochs")
ENV_PREFIX = "ORCH_"


def env_name(placeholder: str) -> str:
    """The environment variable that carries a placeholder's value too.

    >>> env_name("local_batch")
    'ORCH_LOCAL_BATCH'
    """
    return ENV_PREFIX + placeholder.upper()


def placeholders_in(arg: str) -> list[str]:
    """The placeholder names `arg` uses, in order ('{{' and '}}' are literal braces). Raises ValueError on a
    malformed one (an unclosed brace, a format spec or conversion).

    >>> placeholders_in("--out=run-{seed}-{{x}}")
    ['seed']
    """
    names = []
    for _literal, name, spec, conversion in string.Formatter().parse(arg):
        if name is None:
            continue
        if spec or conversion:
            raise ValueError(f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}: "
                             "a placeholder is a bare name such as {local_batch}")
        names.append(name)
    return names


def arg_problems(args: Sequence[str]) -> list[str]:
    """What is wrong with a script's arguments' placeholders, one line per problem (`args[i]: ...`).

    >>> print(arg_problems(["--bs", "{batch}"])[0][:58])
    args[1]: unknown placeholder {batch}; valid: {local_batch}
    """
    problems = []
    valid = ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)
    for index, arg in enumerate(args):
        try:
            names = placeholders_in(arg)
        except ValueError as err:
            problems.append(f"args[{index}]: {err}")
            continue
        problems += [f"args[{index}]: unknown placeholder {{{name}}}; valid: {valid} ('{{{{' and '}}}}' for "
                     "literal braces)" for name in names if name not in PLACEHOLDERS]
    return problems


def convergence_problems(args: Sequence[str]) -> list[str]:
    """The placeholders that need a convergence section, for a sweep without one.

    >>> for line in convergence_problems(["--lr", "{lr}", "--epochs", "{max_epochs}"]):
    ...     print(line)
    args[1]: {lr} needs a convergence section (it is computed from it)
    args[3]: {max_epochs} needs a convergence section (it is computed from it)
    """
    problems = []
    for index, arg in enumerate(args):
        try:
            names = placeholders_in(arg)
        except ValueError:
            continue   # arg_problems reports it
        problems += [f"args[{index}]: {{{name}}} needs a convergence section (it is computed from it)"
                     for name in names if name in NEEDS_CONVERGENCE]
    return problems


def fill_args(args: Iterable[str], values: Mapping[str, str]) -> list[str]:
    """The arguments with every placeholder replaced by its value (checked by `arg_problems` first: a
    placeholder without a value is a KeyError)."""
    return [arg.format_map(values) for arg in args]


def trial_values(*, ranks: int, threads: int, local_batch: int, seed: int, lr: float | None,
                 max_epochs: float | None) -> dict[str, str]:
    """Each placeholder's value for one trial, as text; {lr} and {max_epochs} only where they are known.

    >>> trial_values(ranks=2, threads=1, local_batch=8, seed=0, lr=0.0125, max_epochs=2.5)["max_epochs"]
    '3'
    """
    values = {"local_batch": str(local_batch), "global_batch": str(ranks * local_batch), "threads": str(threads),
              "ranks": str(ranks), "seed": str(seed)}
    if lr is not None:
        values["lr"] = f"{lr:.6g}"
    if max_epochs is not None:
        values["max_epochs"] = str(-int(-max_epochs // 1))
    return values


def environment(values: Mapping[str, str]) -> dict[str, str]:
    """The values as environment variables.

    >>> environment({"local_batch": "8"})
    {'ORCH_LOCAL_BATCH': '8'}
    """
    return {env_name(name): value for name, value in values.items()}
