"""Which optional accelerating libraries are usable here. `ccl_installed` reads package metadata only
(importing oneCCL's bindings would import torch, and `orch plan` must stay torch-free); `ccl_import_problem`,
asked on each node before a sweep, imports them in a fresh process, so that `backend: auto` picks ccl only
where the bindings really import."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from importlib import metadata

from orchestrator.core.planning.plan import CCL_MODULE

CCL_BINDINGS_DIST = "oneccl-bind-pt"   # the distribution that installs CCL_MODULE
# Importing torch and the bindings takes seconds; a minute means something is wrong with the environment.
CCL_IMPORT_TIMEOUT_S = 60.0
_IMPORT_CHECK = ("import torch.distributed as dist, oneccl_bindings_for_pytorch; "
                 "assert dist.is_backend_available('ccl'), 'the ccl backend did not register'")


def module_installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def release(version: str) -> str:
    """'2.8.0+cpu' -> '2.8': the part that a torch-ccl build and torch must share (one tag per torch release)."""
    return ".".join(version.split("+")[0].split(".")[:2])


def ccl_unavailable_reason() -> str | None:
    """Why the bindings cannot be used here, from metadata alone, or None when they may be."""
    if not module_installed(CCL_MODULE):
        return f"{CCL_MODULE} is not installed"
    try:
        bindings, torch = metadata.version(CCL_BINDINGS_DIST), metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None   # on the path without its metadata (a source tree): only importing it can tell
    if release(bindings) != release(torch):
        return f"{CCL_MODULE} {bindings} is built for torch {release(bindings)}, this is torch {torch}"
    return None


def ccl_installed() -> bool:
    return ccl_unavailable_reason() is None


def ccl_import_problem(timeout_s: float = CCL_IMPORT_TIMEOUT_S) -> str | None:
    """None when the bindings import in a fresh process of this interpreter and register the ccl backend;
    else why not, with the import's last line of error."""
    reason = ccl_unavailable_reason()
    if reason is not None:
        return reason
    try:
        done = subprocess.run([sys.executable, "-c", _IMPORT_CHECK], capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"importing {CCL_MODULE} took more than {timeout_s:.0f} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"{CCL_MODULE} does not import: {last}"
    return None
