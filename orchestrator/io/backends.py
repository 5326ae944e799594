"""Which optional accelerating libraries are installed, found without importing them (importing oneCCL's
bindings would import torch, and `orch plan` must stay torch-free)."""

from __future__ import annotations

import importlib.util

from orchestrator.core.plan import CCL_MODULE


def module_installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def ccl_installed() -> bool:
    return module_installed(CCL_MODULE)
