"""A row of a table the profile analysis builds (the oneDNN kernels, the layers, the roofline points, the
replay, the efficiency, the projection's validation): typed fields, read by attribute, written as the dict of
its fields in declaration order (the CSV's and JSON's columns) by `JsonObject.to_json`.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.core.jsonobject import JsonObject


@dataclass(frozen=True, slots=True)
class Row(JsonObject):
    """Base of the analysis's row types (see the module docstring)."""
