"""An emulated cluster's owner without Ray, for the tests of `orch cluster down`: `python cluster_owner.py NAME
[--detach]` claims the cluster and makes its namespaces, bridge, veths and owner marks with the functions
`orch cluster up` uses (`orchestrator.run.driver.emulated`), starts a `sleep` in each node's namespace (as Ray's
daemons, in a session of its own: it outlives a SIGKILL of its owner), prints `ready` and waits for a signal.
With --detach it returns at once and the cluster stays, as `orch cluster up --detach` leaves it.

Two nodes sharing cores (no Ray: the cores are not used), on the default subnet: each cluster's addresses are
inside its own namespaces, so several side by side do not meet.
"""

from __future__ import annotations

import signal
import subprocess
import sys

from orchestrator.core.machine.emulation import ClusterRequest, plan_cluster
from orchestrator.io import netns
from orchestrator.run.driver import emulated


def main(name: str, detach: bool) -> None:
    plan = plan_cluster(ClusterRequest(nodes=2, cores_per_node=1, name=name, share_cores=True),
                        emulated.usable_cores())
    state = emulated._claim(name, detach)
    emulated._make_network(plan, state)
    for node in plan.nodes:
        proc = subprocess.Popen(netns.in_namespace(node.namespace, ["sleep", "600"]), start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        state.processes.append(proc.pid)
    state.save()
    print("ready", flush=True)
    if not detach:
        signal.pause()


if __name__ == "__main__":
    main(sys.argv[1], "--detach" in sys.argv[2:])
