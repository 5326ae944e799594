"""Registered workloads. Importing this package (and asking a workload about memory or epoch size) never
imports torch; see `workloads.base`."""

from __future__ import annotations

import importlib
from typing import Any

from orchestrator.core.schema import Problem, load
from workloads.base import RankContext, Trainer, Workload

# name -> "module:Class". Modules are imported on first use so that one workload's heavy imports never
# slow down another's, and `orch plan` stays torch-free.
REGISTRY: dict[str, str] = {
    "classifier": "workloads.classifier.workload:ClassifierWorkload",
    "chaos": "workloads.chaos.workload:ChaosWorkload",
    "retinanet": "workloads.retinanet.workload:RetinaNetWorkload",
}


class UnknownWorkload(ValueError):
    pass


def get(name: str) -> Workload:
    """The workload registered as `name`; an unknown name lists the known ones."""
    if name not in REGISTRY:
        raise UnknownWorkload(f"unknown workload {name!r}; known workloads: {', '.join(sorted(REGISTRY))}")
    module_name, class_name = REGISTRY[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:  # a broken or half-installed plug-in is reported, not a traceback
        raise UnknownWorkload(f"workload {name!r} is registered but {module_name} failed to import: {err}") from err
    return getattr(module, class_name)()


def parse_params(workload: Workload, params: dict[str, Any],
                 path: str = "workload.params") -> tuple[Any, list[Problem]]:
    """Strictly build the workload's parameter dataclass (defaults filled in)."""
    return load(workload.params_type, params, path)


__all__ = ["REGISTRY", "RankContext", "Trainer", "UnknownWorkload", "Workload", "get", "parse_params"]
