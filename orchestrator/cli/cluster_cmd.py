"""`orch cluster up|down|status|exec`: a cluster emulated on this machine (network namespaces, shaped links, a
Ray node in each), for `orch sweep --address` to run on unchanged."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from typing import TYPE_CHECKING

from orchestrator.app import cluster as app_cluster
from orchestrator.app.options import ClusterDownOptions, ClusterExecOptions, ClusterUpOptions
from orchestrator.cli.common import EXIT_OK, examples
from orchestrator.cli.options import add_options, options_from
from orchestrator.core.machine.emulation import rate_words

if TYPE_CHECKING:
    from orchestrator.core.machine.emulation import CommandEnd
    from orchestrator.run.driver.emulated import Running

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "cluster", help="emulate a cluster on this machine: network namespaces, shaped links, a Ray node in each",
        description="Cut this machine into N nodes, each a network namespace with its own address on a private "
                    "bridge, its own cores and a link shaped with tc, and start a real Ray node in each, for "
                    "`orch sweep --address` to run on unchanged. Needs root, `ip` and `tc` (exit 2 naming what is "
                    "missing). See docs/clusters.md#emulate-your-cluster.",
        **examples(
                   "orch cluster up --nodes 2 --cores-per-node 1 --rate 1gbit --detach",
                   "orch cluster exec -- ray status",
                   anchor="orch-cluster"))
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser(
        "up", help="make the nodes and links, start Ray, measure each link",
        description="Make the cluster and keep it until Ctrl-C (or SIGTERM), or, with a command after --, run the "
                    "command in the head's namespace and remove the cluster when it ends (its exit status is "
                    "orch's; 128 + N, and said, when signal N killed it). Prints each node, the link as shaped "
                    "and as measured (a bulk transfer per link and direction), and the address for `orch sweep "
                    "--address`.",
        **examples("orch cluster up --nodes 2 --cores-per-node 1 --rate 1gbit --latency 1ms --detach",
                   "orch cluster up --nodes 2 --cores-per-node 1 -- orch sweep sweeps/classifier.yaml --address auto",
                   anchor="orch-cluster"))
    add_options(up, ClusterUpOptions)
    up.add_argument("--json", action="store_true", help="print the cluster (nodes, link, measures) as JSON")
    down = actions.add_parser(
        "down", help="remove the emulated clusters whose owner is gone; a live one by --name or --all",
        description="Remove what a killed `orch cluster up` left (its processes, namespaces, temp dir and state "
                    "file), and namespaces no state file lists and no live owner marked. A cluster whose owner "
                    "lives, or that was detached, is left and said, with its owner's pid, unless named with "
                    "--name or with --all.",
        **examples("orch cluster down", "orch cluster down --name c", "orch cluster down --all",
                   anchor="orch-cluster"))
    add_options(down, ClusterDownOptions)
    status = actions.add_parser("status", help="the emulated clusters: nodes, links, owner, leftovers",
                                **examples("orch cluster status", "orch cluster status --json", anchor="orch-cluster"))
    status.add_argument("--json", action="store_true", help="print JSON")
    exec_ = actions.add_parser("exec", help="run a command in the head's namespace, with the cluster's Ray token",
                               **examples("orch cluster exec -- ray status",
                                          "orch cluster exec -- orch sweep sweeps/classifier.yaml --address "
                                          "10.77.0.1:6379 --min-nodes 2", anchor="orch-cluster"))
    add_options(exec_, ClusterExecOptions)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    app_cluster.check_requirements()
    return {"up": _up, "down": _down, "status": _status, "exec": _exec}[args.action](args)


def _up(args: argparse.Namespace) -> int:
    options = options_from(ClusterUpOptions, args)
    command = app_cluster.command_of(options.command)
    with app_cluster.up(options) as running:
        _print_up(running, args.json, command)
        if options.detach:
            return EXIT_OK
        return _ended("orch cluster up", app_cluster.run_or_wait(running, command))


def _ended(who: str, end: CommandEnd) -> int:
    """The command's exit status as orch's; a signal that killed it said (128 + N alone says nothing)."""
    if (words := end.words()) is not None:
        log.error("%s: %s", who, words)
    return end.exit_status


def _print_up(running: Running, as_json: bool, command: tuple[str, ...]) -> None:
    state, plan = running.state, running.plan
    if as_json:
        print(json.dumps({"name": state.name, "head_address": plan.head_address, "link": state.link,
                          "nodes": state.nodes, "measured": state.measured, "state_file": str(state.path)}))
        return
    out = _Plain()
    out.print(f"cluster {state.name}: {len(plan.nodes)} node(s) × {plan.request.cores_per_node} core(s); link "
              f"{state.link}" + ("; nodes SHARE cores (--share-cores): no throughput figure is to be trusted"
                                 if plan.shared_cores else ""))
    for node in plan.nodes:
        role = "Ray head" if node.is_head else "Ray worker"
        out.print(f"  n{node.index}  {node.namespace:<12} {node.address:<15} cpus {','.join(map(str, node.cpus))}"
                  f"  {role}")
    if running.measured:
        out.print("measured, one TCP stream per link and direction: "
                  + ", ".join(m.words() for m in running.measured))
    out.print(f"Ray head: {plan.head_address}")
    if not command:
        out.print(f"  orch cluster exec --name {state.name} -- orch sweep SWEEP --address {plan.head_address} "
                  f"--min-nodes {len(plan.nodes)}")
        out.print("Ctrl-C tears it down" if not state.detached else
                  f"detached: `orch cluster down --name {state.name}` tears it down")


def _down(args: argparse.Namespace) -> int:
    options = options_from(ClusterDownOptions, args)
    done = app_cluster.down(options)
    out = _Plain()
    if not done.removed:
        out.print("nothing to remove" + ("" if done.kept else ": no emulated cluster" +
                                         (f" named {options.name!r}" if options.name else "")))
    for line in (*done.removed, *done.kept):
        out.print(line)
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    clusters, stray = app_cluster.status()
    if args.json:
        print(json.dumps({"clusters": [dataclasses.asdict(c) for c in clusters], "unlisted_namespaces": list(stray)}))
        return EXIT_OK
    out = _Plain()
    if not clusters and not stray:
        out.print("no emulated cluster")
    for c in clusters:
        rates = ", ".join(rate_words(b) for b in c.measured_bits_per_s) or "not measured"
        out.print(f"cluster {c.name}: owner {c.owner}; link {c.link}; measured {rates}")
        for n in c.nodes:
            out.print(f"  n{n.index}  {n.namespace:<12} {n.address:<15} cpus "
                      f"{','.join(map(str, n.cpus))}  {n.processes} process(es)")
    if stray:
        out.print(f"namespaces no state file lists (`orch cluster down` removes those no live owner marked): "
                  f"{', '.join(stray)}")
    return EXIT_OK


def _exec(args: argparse.Namespace) -> int:
    return _ended("orch cluster exec", app_cluster.exec_in_head(options_from(ClusterExecOptions, args)))


__all__ = ["add_parser", "run"]


class _Plain:
    """Lines as they are (rich would wrap them at 80 columns off a terminal, splitting an address)."""

    @staticmethod
    def print(line: str) -> None:
        print(line, flush=True)
