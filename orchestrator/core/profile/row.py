"""A row of a table the profile analysis builds (the oneDNN kernels, the layers, the roofline points, the
replay, the efficiency, the projection's validation): typed fields, written as the dict of its fields in
declaration order (the CSV's and JSON's columns) by `JsonObject.to_json`.

It also reads by column name and compares equal to the dict it writes, as the dict rows it replaced did:
the callers that hold a table rather than a row type (the Markdown writer, the tests) read it that way.
The analysis itself reads attributes.

>>> from orchestrator.core.profile.analysis import KernelRow
>>> row = KernelRow(kind="convolution", direction="forward", implementation="brg:avx512_core", calls_per_step=12.0,
...                 ms_per_step=3.5, share_of_step=0.41)
>>> row["ms_per_step"], row == row.to_json(), list(row.to_json())[:3]
(3.5, True, ['kind', 'direction', 'implementation'])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.core.jsonobject import JsonObject


@dataclass(frozen=True, slots=True, eq=False)
class Row(JsonObject):
    """Base of the analysis's row types (see the module docstring)."""

    def __getitem__(self, column: str) -> Any:
        return getattr(self, column)

    def __eq__(self, other: object) -> bool:
        """Equal to a row of the same type with the same fields, or to the dict it writes."""
        if isinstance(other, Mapping):
            return self.to_json() == dict(other)
        if type(other) is type(self):
            return self.to_json() == other.to_json()
        return NotImplemented

