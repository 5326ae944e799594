"""The driver's half of the trial kinds a sweep runs, one module each, named after its record kind
(core.measured.records.Kind): its `WorkItem` subclass (`ITEM`) and the progress display's line for an ok record
(`describe(record) -> str`). `records.Kind` is the registry: a new kind is a new value there, its module here,
and its rank half in run.rank (which this side never imports: the rank process is another program).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from orchestrator.core.measured.records import Kind

if TYPE_CHECKING:
    from orchestrator.run.driver.kinds.base import WorkItem


def kind_module(kind: str) -> ModuleType:
    """The driver module of the record kind named `kind`."""
    return importlib.import_module(f"{__name__}.{kind}")


def item_types() -> list[type[WorkItem]]:
    """Every kind's work-item class, in admission order."""
    items: list[type[WorkItem]] = [kind_module(kind).ITEM for kind in Kind]
    return sorted(items, key=lambda item: item.ORDER)
