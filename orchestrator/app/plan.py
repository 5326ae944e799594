"""`orch plan` / `orch.plan`: the dry run. A sweep file's grid checked against a machine (a topology file,
default: this one), without Ray, a rank or torch; it imports the workload's module and calls its factory, as
the sweep will (a sweep file is code: docs/trust.md). `plan_for` is the single road from a sweep and a topology
to what runs: the sweep and the profile plan with it too."""

from __future__ import annotations

import logging

from orchestrator.app.options import PlanOptions
from orchestrator.core.json.schema import InvalidInput, Problem
from orchestrator.core.machine.topology import Topology
from orchestrator.core.planning.plan import Plan, PlanTooLarge, choose_backend, make_plan
from orchestrator.io.sweepfile import Sweep, load_sweep

log = logging.getLogger(__name__)


def plan(options: PlanOptions) -> Plan:
    """The plan `orch plan` shows and `orch sweep` would run on this machine (or the topology file's); its
    `backend.error` and `precision.error` say why a sweep would be refused."""
    from orchestrator.io.topofile import planned_machine

    loaded = load_sweep(options.sweep)
    return plan_for(loaded, planned_machine(options.topology))


def plan_for(sweep: Sweep, topology: Topology, ccl_available: bool | None = None) -> Plan:
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


def load_topology_arg(path: str | None, *, probe_isa: bool = False) -> Topology:
    """A topology file's machine, or this one's (its bf16 verdict from a GEMM probe when `probe_isa`, which
    imports torch; else from the CPU flags)."""
    if path:
        from orchestrator.io.topofile import load_topology

        return load_topology(path)
    from orchestrator.io.detect import detect_local

    return detect_local(probe_isa=probe_isa)
