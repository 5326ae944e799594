"""Helpers shared by the subcommands: exit codes, consoles, loading the inputs every command takes."""

from __future__ import annotations

import argparse
import signal
import sys

from orchestrator.core.plan import Plan, PlanTooLarge, make_plan
from orchestrator.core.schema import InvalidInput, Problem
from orchestrator.core.topology import Topology

EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 128 + signal.SIGINT    # what a shell reports for a command ended by Ctrl-C: 130


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def fail_input(message: str) -> int:
    """Bad input: one paragraph on stderr, exit status 2, no traceback."""
    print(f"orch: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def add_topology_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", metavar="FILE",
                        help="topology file (YAML/JSON, compact or detailed form, see README) describing the "
                             "machine to plan for or to emulate; default: detect this machine")


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
    The plan carries the sweep's precision as decided for `topology` (`Sweep.resolve_precision`).

    `ccl_available`: whether oneCCL's bindings import where the ranks run (the sweep asks its workers);
    None: look on this machine."""
    if ccl_available is None:
        from orchestrator.io.backends import ccl_installed

        ccl_available = ccl_installed()
    resolved, precision = sweep.resolve_precision(topology)
    try:
        return make_plan(sweep.spec, topology, rank_memory_mib=resolved.rank_memory_mib, ccl_available=ccl_available,
                         precision=precision)
    except PlanTooLarge as err:
        raise InvalidInput(f"sweep file {sweep.path}", [Problem("grid", str(err))]) from None


def positive_int(text: str) -> int:
    """argparse type: a whole number > 0, with a one-line error naming the input."""
    value = positive_number(text)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive whole number")
    return int(value)


def positive_number(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number")
    return value
