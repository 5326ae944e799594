"""The communication backend as a rank really ran it: which one, its version, and oneCCL's settings as the
rank's process had them. Reported by every rank (run.rank.main) and kept in each trial's record."""

from __future__ import annotations

import os
from importlib import metadata
from typing import NotRequired, TypedDict

# oneCCL's settings that decide how it ran: rank_environment (run.driver.launcher) sets the CCL_ ones; libfabric's
# (FI_*) are recorded where a user set them.
CCL_ENV_KEYS = ("CCL_WORKER_COUNT", "CCL_WORKER_AFFINITY", "CCL_ATL_TRANSPORT", "CCL_ATL_SHM", "CCL_YIELD",
                "CCL_LOCAL_RANK", "CCL_LOCAL_SIZE", "CCL_PROCESS_LAUNCHER", "CCL_KVS_IFACE", "FI_TCP_IFACE",
                "FI_PROVIDER", "FI_PROVIDER_PATH")
# The interface Gloo bound to (run.driver.launcher.interface_settings), recorded for either backend.
GLOO_ENV_KEYS = ("GLOO_SOCKET_IFNAME",)
# Distributions that install oneCCL's runtime (libccl.so), CPU-only first.
ONECCL_DISTS = ("oneccl-cpu", "oneccl")


class CommunicationJson(TypedDict):
    """`communication_report`'s object (core.measured.records.CommunicationSection reads it)."""

    backend: str
    version: str | None
    oneccl: str | None
    env: dict[str, str]
    worker_threads_on_cpu: NotRequired[dict[str, int] | None]   # ccl only


def dist_version(*names: str) -> str | None:
    """The first of these installed distributions' version, or None."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def communication_report(backend: str) -> CommunicationJson:
    """What this rank communicated with, e.g. {"backend": "ccl", "version": "2.8.0+cpu", "oneccl":
    "2022.1.2", "env": {"CCL_WORKER_COUNT": "1", ...}}; for gloo the version is torch's (gloo ships in it)."""
    if backend != "ccl":
        return {"backend": backend, "version": dist_version("torch"), "oneccl": None,
                "env": {key: os.environ[key] for key in GLOO_ENV_KEYS if key in os.environ}}
    import oneccl_bindings_for_pytorch as ccl

    return {"backend": "ccl", "version": ccl.__version__, "oneccl": dist_version(*ONECCL_DISTS),
            "env": {key: os.environ[key] for key in (*CCL_ENV_KEYS, *GLOO_ENV_KEYS) if key in os.environ},
            "worker_threads_on_cpu": worker_threads_on_cpu()}


def my_worker_cpus(env: dict[str, str]) -> list[int]:
    """This rank's slice of CCL_WORKER_AFFINITY, as oneCCL takes it (CCL_WORKER_COUNT per CCL_LOCAL_RANK).

    >>> my_worker_cpus({"CCL_WORKER_AFFINITY": "6,7,14,15", "CCL_WORKER_COUNT": "2", "CCL_LOCAL_RANK": "1"})
    [14, 15]
    """
    cpus = [int(c) for c in env.get("CCL_WORKER_AFFINITY", "").split(",") if c.strip().isdigit()]
    count, local = int(env.get("CCL_WORKER_COUNT", "1")), int(env.get("CCL_LOCAL_RANK", "0"))
    return cpus[local * count:(local + 1) * count]


def worker_threads_on_cpu() -> dict[str, int] | None:
    """For each of this rank's oneCCL worker cores, how many of the process's threads are bound to that core
    alone: read from the OS, the evidence that oneCCL pinned its worker there (1 each). None where a worker
    shares a compute core (ccl_workers 0), whose OpenMP thread is bound there too."""
    mine = my_worker_cpus(dict(os.environ))
    compute = {int(c) for c in os.environ.get("OMP_PLACES", "").replace("{", "").replace("}", "").split(",") if c}
    if not mine or compute & set(mine):
        return None
    counts = dict.fromkeys(mine, 0)
    for mask in thread_cpu_masks():
        if len(mask) == 1 and next(iter(mask)) in counts:
            counts[next(iter(mask))] += 1
    return {str(cpu): n for cpu, n in counts.items()}


def thread_cpu_masks() -> list[set[int]]:
    """The CPU mask of every live thread of this process, read from the OS (OpenMP's workers, oneCCL's and
    gloo's threads included): what a rank could really run on, whatever it was asked for. Kept in this light
    module because the rank's record (run.rank.main), its oneCCL worker check and the profile replay read them."""
    masks = []
    for tid in os.listdir("/proc/self/task"):
        try:
            masks.append(os.sched_getaffinity(int(tid)))
        except OSError:   # the thread ended while we looked
            continue
    return masks
