"""A row of a table the profile analysis builds (the oneDNN kernels, the layers, the roofline points, the
replay, the efficiency, the projection's validation): typed fields, read by attribute, written as the dict of
its fields in declaration order (the CSV's and JSON's columns) by `JsonObject.to_json`.

>>> from orchestrator.core.profile.analysis import KernelRow
>>> row = KernelRow(kind="convolution", direction="forward", implementation="brg:avx512_core", calls_per_step=12.0,
...                 ms_per_step=3.5, share_of_step=0.41)
>>> row.ms_per_step, list(row.to_json())[:3]
(3.5, ['kind', 'direction', 'implementation'])
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.core.json.jsonobject import JsonObject


@dataclass(frozen=True, slots=True)
class Row(JsonObject):
    """Base of the analysis's row types (see the module docstring)."""
