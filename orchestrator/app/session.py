"""Ray for the commands that run on it, one way: the embedded Ray's environment for the command's length, Ray
started (or joined at an address), the nodes waited for and found, the topology settled, SIGTERM handled as
Ctrl-C where asked, and Ray shut down afterwards if this command started it."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

from orchestrator.app.options import DEFAULT_NODES_TIMEOUT_S
from orchestrator.core.machine.topology import Topology

if TYPE_CHECKING:   # the run layer imports Ray: a command that runs on it imports it when it starts
    from orchestrator.run.driver.cluster import Cluster

log = logging.getLogger(__name__)


@contextlib.contextmanager
def embedded_ray_environment(address: str | None) -> Iterator[None]:
    """Without an address (nor RAY_ADDRESS) orch starts an embedded Ray that serves this machine only: every
    server it starts on loopback, its background work off the cores being measured. Ray reads these settings
    from the environment of the process that starts it, and its processes inherit them, so they are set for the
    command's length and removed afterwards: left behind in a notebook or a test run, the loopback setting
    (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0) would stop a later `ray start` from forming a multi-node cluster."""
    from orchestrator.constants import EMBEDDED_RAY_ENV, RAY_LOOPBACK_ENV_VAR, RAY_LOOPBACK_VALUE

    for line in _preset_ray_notes(address):
        log.warning("%s", line)
    added = []
    if not (address or os.environ.get("RAY_ADDRESS")):
        for name, value in {RAY_LOOPBACK_ENV_VAR: RAY_LOOPBACK_VALUE, **EMBEDDED_RAY_ENV}.items():
            if name not in os.environ:
                os.environ[name] = value
                added.append(name)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _preset_ray_notes(address: str | None) -> list[str]:
    """One line for each setting already in the environment that changes where orch's Ray listens or which
    Ray it joins, which the user may not know is set (a shell profile, a job's environment)."""
    from orchestrator.constants import RAY_LOOPBACK_ENV_VAR, RAY_LOOPBACK_VALUE

    notes = []
    preset = os.environ.get("RAY_ADDRESS")
    if preset and not address:
        notes.append(f"RAY_ADDRESS={preset} is set: joining that Ray cluster instead of starting an embedded one "
                     "(unset it for a Ray of this machine alone)")
    loopback = os.environ.get(RAY_LOOPBACK_ENV_VAR)
    if not (address or preset) and loopback is not None and loopback != RAY_LOOPBACK_VALUE:
        notes.append(f"{RAY_LOOPBACK_ENV_VAR}={loopback} is set: the embedded Ray listens on this machine's "
                     "network address, not on loopback only (unset it to keep it on loopback)")
    return notes


@dataclass(frozen=True)
class RaySession:
    """What a command that runs on Ray works with: the Ray nodes (`run.driver.cluster.Cluster`) and the topology it
    plans against (the file's, checked against those nodes and given their CPU verdicts, or theirs)."""

    cluster: Cluster
    topology: Topology

    @property
    def ccl_available(self) -> bool:
        """oneCCL's bindings import on every node the topology uses."""
        return all(n.ccl_installed for n in self.cluster.nodes[:len(self.topology.nodes)])


@contextlib.contextmanager
def ray_session(address: str | None, file_topology: Topology | None, topology_path: str | None, *,
                min_nodes: int | None = None, nodes_timeout_s: float = DEFAULT_NODES_TIMEOUT_S,
                sigterm_as_ctrl_c: bool = False) -> Iterator[RaySession]:
    """Every command that runs on Ray, one way: the embedded Ray's environment for the command's length, Ray
    started (or joined at `address`), `min_nodes` waited for, the nodes discovered and the topology settled,
    and Ray shut down afterwards if this command started it. With `sigterm_as_ctrl_c`, SIGTERM (scancel, a
    time limit, a deleted pod) ends the work as Ctrl-C does; installed after ray.init, which puts its own
    SIGTERM handler in place."""
    with embedded_ray_environment(address):
        import ray

        from orchestrator.run.driver import cluster as ray_cluster

        started_ray = ray_cluster.connect(address)
        try:
            with sigterm_as_interrupt() if sigterm_as_ctrl_c else contextlib.nullcontext():
                if min_nodes:
                    ray_cluster.wait_for_nodes(min_nodes, nodes_timeout_s)
                cluster = ray_cluster.discover()
                if file_topology is not None:
                    ray_cluster.check_topology_fits(file_topology, cluster, topology_path or "the topology file")
                    topology = ray_cluster.with_node_isa(file_topology, cluster)
                else:
                    topology = ray_cluster.detected_topology(cluster)
                yield RaySession(cluster, topology)
        finally:
            if started_ray:
                ray.shutdown()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM is handled as Ctrl-C: a KeyboardInterrupt in the main thread.

    A batch scheduler stops a job with SIGTERM (`scancel`, a time limit, a Kubernetes pod deleted), and
    Python's default for SIGTERM ends the process at once: no `finally`, no message, running trials left to
    the reaper. As an interrupt, the sweep stops its running trials and says what it kept, as after Ctrl-C.
    Further SIGTERMs are ignored once the first arrived: SLURM signals every process of a cancelled job and
    a job script may forward the signal too, and a second interrupt would cut the clean-up short.
    Outside the main thread (a test calling `main` from a thread) signals cannot be handled: nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        # None: the previous handler was not set from Python (Ray's C++ one), and cannot be put back
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
