"""`orch cluster up|down|status|exec`: a cluster emulated on this machine (network namespaces, shaped links, a
Ray node in each), for `orch sweep --address` to run on unchanged. Needs root, `ip` and `tc`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.app.options import ClusterDownOptions, ClusterExecOptions, ClusterUpOptions
from orchestrator.core.machine.emulation import ClusterRequest, CommandEnd, LinkMeasure
from orchestrator.errors import InputError, RunFailed

if TYPE_CHECKING:   # the run layer: imported when a cluster is made
    from orchestrator.run.driver.emulated import Running, Teardown


def check_requirements() -> None:
    """InputError naming what `orch cluster` needs and this machine lacks (root, `ip`, `tc`)."""
    from orchestrator.io.netns import missing_requirements

    missing = missing_requirements()
    if missing:
        raise InputError(f"orch cluster needs {', '.join(missing)}: missing here")


def command_of(words: tuple[str, ...]) -> tuple[str, ...]:
    """The command after `--` (argparse keeps the `--` of a remainder)."""
    return words[1:] if words[:1] == ("--",) else words


@contextmanager
def up(options: ClusterUpOptions) -> Iterator[Running]:
    """The cluster made and Ray started in each node, each link measured; removed when the block ends unless
    `options.detach`. InputError for a request that cannot be made here; ClusterError (a RunFailed) when it
    could not come up, after removing everything it made."""
    from orchestrator.run.driver import emulated

    if command_of(options.command) and options.detach:
        raise InputError("orch cluster up: --detach or a command after --, not both")
    names = {f.name for f in dataclasses.fields(ClusterRequest)}
    given = {name: getattr(options, name) for name in names if hasattr(options, name)}
    try:
        running = emulated.up(ClusterRequest(**given), detached=options.detach)
    except InputError as err:
        raise InputError(f"orch cluster up: {err}") from None
    except (emulated.ClusterError, OSError) as err:
        raise RunFailed(f"orch cluster up: {err} (everything it made is removed)") from None
    if options.detach:
        yield running
        return
    with emulated.torn_down_on_signals(running):
        yield running


def run_or_wait(running: Running, command: tuple[str, ...]) -> CommandEnd:
    """Run `command` in the head's namespace (how it ended), or, with none, keep the cluster until a signal."""
    from orchestrator.run.driver import emulated

    if command:
        return emulated.run_in_head(running, list(command))
    emulated.wait_for_signal()
    return CommandEnd(0)


def down(options: ClusterDownOptions) -> Teardown:
    """What was removed and what was left alone, in words: bare, the clusters whose owner is gone; by name, that
    one; with `all_clusters`, every one."""
    from orchestrator.run.driver import emulated

    if options.name is not None and options.all_clusters:
        raise InputError("orch cluster down: --name or --all, not both")
    return emulated.down(name=options.name, every=options.all_clusters)


@dataclass(frozen=True, slots=True)
class NodeStatus:
    index: int
    namespace: str
    address: str
    cpus: tuple[int, ...]
    processes: int   # processes alive in its namespace


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """One emulated cluster as its state file says, with who owns it and what runs in it."""

    name: str
    head_address: str
    owner: str       # "alive", "detached" or "gone (leftovers)"
    link: str
    nodes: tuple[NodeStatus, ...]
    measured_bits_per_s: tuple[float, ...]


def status() -> tuple[tuple[ClusterStatus, ...], tuple[str, ...]]:
    """(every emulated cluster, the namespaces of orch's that no state file lists)."""
    from orchestrator.io import netns

    states = netns.saved_states()
    listed = {ns for s in states for ns in s.namespaces}
    stray = tuple(ns for ns in netns.cluster_namespaces() if ns not in listed)
    rows = []
    for s in states:
        nodes = tuple(NodeStatus(n["index"], n["namespace"], n["address"], tuple(n["cpus"]),
                                 len(netns.namespace_pids(n["namespace"]))) for n in s.nodes)
        rows.append(ClusterStatus(
            s.name, s.head_address or (f"{s.nodes[0]['address']}" if s.nodes else ""),
            "detached" if s.detached else ("alive" if s.owner_alive() else "gone (leftovers)"), s.link, nodes,
            tuple(LinkMeasure(**m).bits_per_s for m in s.measured)))
    return tuple(rows), stray


def exec_in_head(options: ClusterExecOptions) -> CommandEnd:
    """`options.command` run in the head's namespace of a cluster that is up: how it ended."""
    from orchestrator.io import netns
    from orchestrator.run.driver import emulated

    command = command_of(options.command)
    if not command:
        raise InputError("orch cluster exec: give the command after --")
    state = next((s for s in netns.saved_states() if s.name == options.name), None)
    if state is None or not state.nodes or state.nodes[0]["namespace"] not in netns.namespaces():
        raise InputError(f"orch cluster exec: no emulated cluster {options.name!r} is up (`orch cluster status`)")
    return emulated.run_in_head(state, list(command))
