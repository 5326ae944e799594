"""orch's own errors: every error orch raises on purpose is an `OrchError`, of one of two kinds.

- `InputError`: bad input (a file that does not load, an option out of range, a folder that is not a results
  folder, a package that tracking needs and is not installed). Said in one paragraph; the CLI exits with
  status 2 and prints no traceback. It is a `ValueError` too, as the bad-input errors always were.
- `RunFailed`: the input was good but the run could not finish (a full disk, an emulated cluster that did not
  come up, a rank that did not start). The CLI exits with status 1. It is a `RuntimeError` too.

Anything else that escapes is a bug in orch and shows its traceback. The specific classes (the store's
`NotAResultsFolder`, a sweep file's `InvalidInput`, ...) subclass one of the two where they are defined, so a
caller catches `orch.OrchError` for everything, `orch.InputError` for bad input, or one class by name.

This module imports nothing: the pure core, the public doors (`orch.workload`, `orch.script`) and every
layer raise these.
"""

from __future__ import annotations

__all__ = ["InputError", "OrchError", "RunFailed"]


class OrchError(Exception):
    """Every error orch raises on purpose (never a bug's): an `InputError` or a `RunFailed`."""


class InputError(OrchError, ValueError):
    """Bad input said in one paragraph: the command prints it and exits with status 2, no traceback."""


class RunFailed(OrchError, RuntimeError):
    """A run that could not finish though its input was good: the command prints it and exits with status 1."""
