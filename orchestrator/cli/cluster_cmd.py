"""`orch cluster up|down|status|exec`: a cluster emulated on this machine (network namespaces, shaped links, a
Ray node in each), for `orch sweep --address` to run on unchanged."""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from orchestrator.cli.common import EXIT_BAD_INPUT, EXIT_OK, EXIT_RUN_FAILED, fail_input, positive_int
from orchestrator.core.emulation import (
    DEFAULT_NAME,
    DEFAULT_RAY_PORT,
    DEFAULT_SUBNET,
    ClusterRequest,
    LinkMeasure,
    parse_duration,
    parse_rate,
    rate_words,
)

log = logging.getLogger(__name__)


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "cluster", help="emulate a cluster on this machine: network namespaces, shaped links, a Ray node in each",
        description="Cut this machine into N nodes, each a network namespace with its own address on a private "
                    "bridge, its own cores and a link shaped with tc, and start a real Ray node in each, for "
                    "`orch sweep --address` to run on unchanged. Needs root, `ip` and `tc` (exit 2 naming what is "
                    "missing). See docs/clusters.md#emulate-your-cluster.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser(
        "up", help="make the nodes and links, start Ray, measure each link",
        description="Make the cluster and keep it until Ctrl-C (or SIGTERM), or, with a command after --, run the "
                    "command in the head's namespace and remove the cluster when it ends (its exit status is "
                    "orch's). Prints each node, the link as shaped and as measured (a bulk transfer per link and "
                    "direction), and the address for `orch sweep --address`.")
    up.add_argument("--nodes", type=positive_int, required=True, metavar="N", help="Ray nodes (the first is the head)")
    up.add_argument("--cores-per-node", type=positive_int, required=True, metavar="C", dest="cores_per_node",
                    help="physical cores per node, with their hardware threads, disjoint")
    up.add_argument("--rate", type=_rate, metavar="RATE",
                    help="each node's link, both ways, in tc's units: 25gbit, 1gbit, 200mbit (default: unshaped)")
    up.add_argument("--latency", type=_latency, default=0.0, metavar="TIME",
                    help="one-way node-to-node latency (1ms, 250us), where the kernel has netem; said when not")
    up.add_argument("--name", default=DEFAULT_NAME, help=f"the cluster's name (namespaces orch-NAME-*; default "
                                                         f"{DEFAULT_NAME})")
    up.add_argument("--subnet", default=DEFAULT_SUBNET, help=f"private IPv4 network of the nodes (default "
                                                             f"{DEFAULT_SUBNET})")
    up.add_argument("--port", type=positive_int, default=DEFAULT_RAY_PORT, help="the Ray head's port")
    up.add_argument("--share-cores", action="store_true", dest="share_cores",
                    help="let nodes share cores when there are too few (an all-reduce calibration on a slow link; "
                         "never for throughput)")
    up.add_argument("--detach", action="store_true",
                    help="leave the cluster up and return; `orch cluster down` removes it")
    up.add_argument("--json", action="store_true", help="print the cluster (nodes, link, measures) as JSON")
    up.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD...: run in the head's namespace, then tear down")
    down = actions.add_parser("down", help="remove an emulated cluster, or every one (leftovers of a killed owner too)")
    down.add_argument("--name", help="only this cluster (default: every cluster orch emulated)")
    status = actions.add_parser("status", help="the emulated clusters: nodes, links, owner, leftovers")
    status.add_argument("--json", action="store_true", help="print JSON")
    exec_ = actions.add_parser("exec", help="run a command in the head's namespace, with the cluster's Ray token",
                               description="e.g. orch cluster exec -- orch sweep SWEEP --address 10.77.0.1:6379 "
                                           "--min-nodes 2")
    exec_.add_argument("--name", default=DEFAULT_NAME, help=f"the cluster (default {DEFAULT_NAME})")
    exec_.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD...")
    parser.set_defaults(run=run)


def _rate(text: str) -> float:
    try:
        return parse_rate(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _latency(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _command(words: list[str]) -> list[str]:
    return words[1:] if words[:1] == ["--"] else words


def run(args: argparse.Namespace) -> int:
    from orchestrator.io.netns import missing_requirements

    missing = missing_requirements()
    if missing:
        return fail_input(f"orch cluster needs {', '.join(missing)}: missing here")
    return {"up": _up, "down": _down, "status": _status, "exec": _exec}[args.action](args)


def _up(args: argparse.Namespace) -> int:
    from orchestrator.run import emulated

    command = _command(args.command)
    if command and args.detach:
        return fail_input("orch cluster up: --detach or a command after --, not both")
    try:
        request = ClusterRequest(nodes=args.nodes, cores_per_node=args.cores_per_node, rate_bits_per_s=args.rate,
                                 latency_s=args.latency, name=args.name, subnet=args.subnet, ray_port=args.port,
                                 share_cores=args.share_cores)
        running = emulated.up(request, detached=args.detach)
    except ValueError as err:
        return fail_input(f"orch cluster up: {err}")
    except (emulated.ClusterError, OSError) as err:
        log.error("orch cluster up: %s (everything it made is removed)", err)
        return EXIT_RUN_FAILED
    _print_up(running, args.json, command)
    if args.detach:
        return EXIT_OK
    with emulated.torn_down_on_signals(running):
        if command:
            return emulated.run_in_head(running, command)
        emulated.wait_for_signal()
    return EXIT_OK


def _print_up(running, as_json: bool, command: list[str]) -> None:
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
    from orchestrator.run import emulated

    removed = emulated.down(name=args.name)
    out = _Plain()
    out.print("\n".join(removed) if removed else "nothing to remove: no emulated cluster" +
              (f" named {args.name!r}" if args.name else ""))
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from orchestrator.io import netns

    states = netns.saved_states()
    listed = {ns for s in states for ns in s.namespaces}
    stray = [ns for ns in netns.cluster_namespaces() if ns not in listed]
    rows: list[dict[str, Any]] = []
    for s in states:
        measured = [LinkMeasure(**m) for m in s.measured]
        rows.append({"name": s.name, "head_address": s.head_address or (f"{s.nodes[0]['address']}" if s.nodes else ""),
                     "owner": "detached" if s.detached else ("alive" if s.owner_alive() else "gone (leftovers)"),
                     "link": s.link, "nodes": [{**n, "processes": len(netns.namespace_pids(n["namespace"]))}
                                               for n in s.nodes],
                     "measured_bits_per_s": [m.bits_per_s for m in measured]})
    if args.json:
        print(json.dumps({"clusters": rows, "unlisted_namespaces": stray}))
        return EXIT_OK
    out = _Plain()
    if not rows and not stray:
        out.print("no emulated cluster")
    for row in rows:
        rates = ", ".join(rate_words(b) for b in row["measured_bits_per_s"]) or "not measured"
        out.print(f"cluster {row['name']}: owner {row['owner']}; link {row['link']}; measured {rates}")
        for n in row["nodes"]:
            out.print(f"  n{n['index']}  {n['namespace']:<12} {n['address']:<15} cpus "
                      f"{','.join(map(str, n['cpus']))}  {n['processes']} process(es)")
    if stray:
        out.print(f"namespaces no state file lists (`orch cluster down` removes them): {', '.join(stray)}")
    return EXIT_OK


def _exec(args: argparse.Namespace) -> int:
    from orchestrator.io import netns
    from orchestrator.run import emulated

    command = _command(args.command)
    if not command:
        return fail_input("orch cluster exec: give the command after --")
    state = next((s for s in netns.saved_states() if s.name == args.name), None)
    if state is None or not state.nodes or state.nodes[0]["namespace"] not in netns.namespaces():
        return fail_input(f"orch cluster exec: no emulated cluster {args.name!r} is up (`orch cluster status`)")
    return emulated.run_in_head(state, command)


__all__ = ["add_parser", "run", "EXIT_BAD_INPUT"]


class _Plain:
    """Lines as they are (rich would wrap them at 80 columns off a terminal, splitting an address)."""

    @staticmethod
    def print(line: str) -> None:
        print(line, flush=True)
