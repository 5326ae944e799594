"""The communication backend as a rank really ran it: which one, its version, and oneCCL's settings as the
rank's process had them. Reported by every rank (run.rank_main) and kept in each trial's record."""

from __future__ import annotations

import os
from importlib import metadata
from typing import Any

# oneCCL's settings that decide how it ran: rank_environment (run.launcher) sets the CCL_ ones; libfabric's
# (FI_*) are recorded where a user set them.
CCL_ENV_KEYS = ("CCL_WORKER_COUNT", "CCL_WORKER_AFFINITY", "CCL_ATL_TRANSPORT", "CCL_ATL_SHM", "CCL_YIELD",
                "CCL_LOCAL_RANK", "CCL_LOCAL_SIZE", "CCL_PROCESS_LAUNCHER", "FI_PROVIDER", "FI_PROVIDER_PATH")
# Distributions that install oneCCL's runtime (libccl.so), CPU-only first.
ONECCL_DISTS = ("oneccl-cpu", "oneccl")


def dist_version(*names: str) -> str | None:
    """The first of these installed distributions' version, or None."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def communication_report(backend: str) -> dict[str, Any]:
    """What this rank communicated with, e.g. {"backend": "ccl", "version": "2.8.0+cpu", "oneccl":
    "2022.1.2", "env": {"CCL_WORKER_COUNT": "1", ...}}; for gloo the version is torch's (gloo ships in it)."""
    if backend != "ccl":
        return {"backend": backend, "version": dist_version("torch"), "oneccl": None, "env": {}}
    import oneccl_bindings_for_pytorch as ccl

    return {"backend": "ccl", "version": ccl.__version__, "oneccl": dist_version(*ONECCL_DISTS),
            "env": {key: os.environ[key] for key in CCL_ENV_KEYS if key in os.environ}}
