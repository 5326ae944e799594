"""The trial kinds a sweep runs, one module each, named after its record kind (core.records.Kind):
the driver's `WorkItem` subclass (`ITEM`), the rank's entry (`run_rank(job, progress, clock) -> result
sections`) and the progress display's line for an ok record (`describe(record) -> str`). `records.Kind` is
the registry: a new kind is a new value there and its module here.

Modules are imported by name, on use: the rank process imports only its own kind's (a rank's start-up is
timed; see rank_main.StartupClock), and a kind module imports no Ray.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from orchestrator.core.records import Kind

if TYPE_CHECKING:
    from orchestrator.run.kinds.base import WorkItem


def kind_module(kind: str) -> ModuleType:
    """The module of the kind (or job kind: `profile`) named `kind`."""
    return importlib.import_module(f"{__name__}.{kind}")


def item_types() -> list[type[WorkItem]]:
    """Every kind's work-item class, in admission order."""
    items: list[type[WorkItem]] = [kind_module(kind).ITEM for kind in Kind]
    return sorted(items, key=lambda item: item.ORDER)
