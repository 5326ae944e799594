"""Helpers shared by the subcommands: exit codes, consoles, loading the inputs every command takes."""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.core.plan import Plan, PlanTooLarge, choose_backend, make_plan
from orchestrator.core.schema import InvalidInput, Problem
from orchestrator.core.topology import Topology

log = logging.getLogger(__name__)

if TYPE_CHECKING:   # rich is imported when a console is made, not when the CLI starts
    from rich.console import Console

EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 128 + signal.SIGINT    # what a shell reports for a command ended by Ctrl-C: 130
# Nodes of a batch job start within seconds of each other; minutes mean one of them failed to start Ray.
DEFAULT_NODES_TIMEOUT_S = 300.0


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


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
    """What a command that runs on Ray works with: the Ray nodes (`run.cluster.Cluster`) and the topology it
    plans against (the file's, checked against those nodes and given their CPU verdicts, or theirs)."""

    cluster: Any
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

        from orchestrator.run import cluster as ray_cluster

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


def fail_input(message: str) -> int:
    """Bad input: one paragraph on stderr, exit status 2, no traceback."""
    log.error("%s", message)
    return EXIT_BAD_INPUT


def add_topology_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", metavar="FILE",
                        help="topology file (YAML/JSON, compact or detailed form: docs/topologies.md) describing the "
                             "machine to plan for or to emulate; default: detect this machine")


def add_min_nodes_options(parser: argparse.ArgumentParser) -> None:
    """--min-nodes / --nodes-timeout-s: a job script starts the workers and the sweep together, and Ray
    nodes join one by one; without waiting, the plan would see only the nodes that joined first."""
    parser.add_argument("--min-nodes", metavar="N", type=positive_int, default=None,
                        help="with --address: wait until the Ray cluster has at least N alive nodes before "
                             "planning (a job script that starts Ray on every node sets it to the node count)")
    parser.add_argument("--nodes-timeout-s", metavar="S", type=positive_number, default=DEFAULT_NODES_TIMEOUT_S,
                        help=f"give up waiting for --min-nodes after S seconds, with exit status 2 "
                             f"(default {DEFAULT_NODES_TIMEOUT_S:g})")


def add_tracking_options(parser: argparse.ArgumentParser, mlflow_help: str) -> None:
    """--mlflow [URI] / --tensorboard (docs/tracking.md): where a sweep is logged besides its results folder."""
    parser.add_argument("--mlflow", metavar="URI", nargs="?", const=True, default=None,
                        help=f"{mlflow_help}; URI: the tracking server (http://host:5000) or store; without it, "
                             "$MLFLOW_TRACKING_URI, else MLflow's default (`orch sweep` first takes the sweep "
                             "file's tracking.mlflow; `orch report` never a results folder's: docs/trust.md). "
                             "Needs the mlflow package (pip install 'orch[tracking]')")
    parser.add_argument("--tensorboard", action="store_true",
                        help="write TensorBoard event files, one run per trial with the grid as hyperparameters, "
                             "into RESULTS/tensorboard/ (tensorboard --logdir RESULTS/tensorboard). Needs the "
                             "tensorboard package (pip install 'orch[tracking]')")


def load_topology_arg(path: str | None, *, probe_isa: bool = False) -> Topology:
    """A topology file's machine, or this one's (its bf16 verdict from a GEMM probe when `probe_isa`, which
    imports torch; else from the CPU flags)."""
    if path:
        from orchestrator.io.topofile import load_topology

        return load_topology(path)
    from orchestrator.io.detect import detect_local

    return detect_local(probe_isa=probe_isa)


def plan_for(sweep, topology: Topology, ccl_available: bool | None = None) -> Plan:
    """The single road from a sweep and a topology to what runs: `orch plan` and `orch sweep` both use it.
    The plan carries the sweep's precision as decided for `topology` (`Sweep.resolve_precision`) and the
    workload's figures with their sources (`Sweep.facts`: the sweep's probe, or the cached one, stands in
    for a figure the workload does not declare).

    `ccl_available`: whether oneCCL's bindings import where the ranks run (the sweep asks its workers);
    None: look on this machine."""
    if ccl_available is None:
        from orchestrator.io.backends import ccl_installed

        ccl_available = ccl_installed()
    resolved, precision = sweep.resolve_precision(topology)
    resolved = resolved.with_cached_probe(choose_backend(sweep.spec.backend, ccl_available).chosen)
    facts = resolved.facts
    try:
        return make_plan(sweep.spec, topology, rank_memory_mib=facts.memory.mib, ccl_available=ccl_available,
                         precision=precision, samples_per_epoch=facts.samples.value, facts=facts,
                         library_mib=facts.memory.library_mib)
    except PlanTooLarge as err:
        raise InvalidInput(f"sweep file {sweep.path}", [Problem("grid", str(err))]) from None


def positive_int(text: str) -> int:
    """argparse type: a whole number > 0, with a one-line error naming the input."""
    value = positive_number(text)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive whole number")
    return int(value)


def positive_number(text: str) -> float:
    """argparse type: a finite number > 0 (`inf` is no deadline, budget or timeout: it is refused, as NaN is).

    >>> positive_number("2.5")
    2.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite positive number")
    return value


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

    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        # None: the previous handler was not set from Python (Ray's C++ one), and cannot be put back
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
