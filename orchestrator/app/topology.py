"""`orch topology`: the machine model planning uses, of this machine (its bf16 verdict from a GEMM probe), of a
topology file, or of every node of a Ray cluster, each detected on that node itself."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.app.options import TopologyOptions
from orchestrator.app.plan import load_topology_arg
from orchestrator.core.machine.topology import Topology

if TYPE_CHECKING:   # the run layer imports Ray: imported when a cluster is asked
    from orchestrator.run.driver.cluster import Cluster


@dataclass(frozen=True, slots=True)
class Shown:
    """The topology, and the Ray nodes it was detected on (None: this machine or a file)."""

    topology: Topology
    cluster: Cluster | None = None


def topology(options: TopologyOptions) -> Shown:
    """The machine `options` name: a Ray cluster's nodes (`address`), a file (`topology`), else this one."""
    if options.address:
        found, cluster = _cluster_topology(options)
        return Shown(found, cluster)
    return Shown(load_topology_arg(options.topology, probe_isa=True))


def _cluster_topology(options: TopologyOptions) -> tuple[Topology, Cluster]:
    """Join the Ray cluster at `address`, describe each node there, and leave it as it was."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from orchestrator.run.driver import cluster as ray_cluster

    joined = ray_cluster.connect(options.address)
    try:
        if options.min_nodes:
            ray_cluster.wait_for_nodes(options.min_nodes, options.nodes_timeout_s)
        cluster = ray_cluster.discover()
    finally:
        if joined:
            ray.shutdown()
    return ray_cluster.detected_topology(cluster), cluster
