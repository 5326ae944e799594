"""The plan as tables (rows threads per rank, columns ranks, one per local batch) and as plain data.

>>> from orchestrator.core.planning.plan import make_plan
>>> from orchestrator.core.planning.spec import parse_spec
>>> from orchestrator.core.machine.topology import topology_from_data
>>> box, _ = topology_from_data({"name": "box", "sockets": 2, "cores_per_socket": 4, "memory_gib": 16})
>>> spec, _ = parse_spec({"name": "s", "workload": {"name": "classifier"},
...                       "grid": {"ranks": [1, 2], "threads_per_rank": [4, 8], "local_batch": [16]}})
>>> (table,) = plan_tables(make_plan(spec, box, rank_memory_mib=lambda batch: 1000.0, ccl_available=False))
>>> [(threads, [cell.text for cell in cells]) for threads, cells in table.rows]
[('4', ['run', 'run']), ('8', ['– a', '– a,b'])]
>>> print(table.footnotes[0])
a: a rank would span sockets: 8 threads > 4 physical cores (hyperthreads not counted) per socket
"""

from __future__ import annotations

from orchestrator.core.json.values import JsonReadable
from orchestrator.core.machine.placement import Placement
from orchestrator.core.machine.topology import Topology
from orchestrator.core.planning.facts import PROBE, SWEEP, WORKLOAD, WorkloadFacts
from orchestrator.core.planning.plan import Plan, PlannedTrial
from orchestrator.core.text.table import DASH, INFEASIBLE, Cell, Footnotes, Table, grid_table


def placement_to_list(placement: Placement | None, topology: Topology) -> list[dict[str, JsonReadable]]:
    if placement is None:
        return []
    return [{"rank": r.rank, "local_rank": r.local_rank, "node": r.node, "node_name": topology.nodes[r.node].name,
             "socket": r.socket, "numa_nodes": list(r.numa_nodes), "cpus": list(r.cpus),
             "ccl_cpus": list(r.ccl_cpus)} for r in placement.ranks]


def plan_tables(plan: Plan) -> list[Table]:
    """One table per local batch. A feasible cell reads 'run' (with the node count when it needs more
    than one node); an infeasible one reads '– a,b' with the reasons as footnotes."""
    tables = []
    for batch in plan.local_batches:
        notes = Footnotes()

        def cell(ranks: int, threads: int, batch: int = batch, notes: Footnotes = notes) -> Cell:
            p = plan.cell(ranks, threads, batch)
            if p.placement is not None:
                nodes = p.placement.nodes_used
                return Cell("run" if nodes == 1 else f"run ({nodes} nodes)")
            return Cell(f"{DASH} {notes.letters([r.note for r in p.reasons])}", mark=INFEASIBLE)

        first = plan.cell(plan.ranks[0], plan.threads[0], batch)
        need = (_need_text(first.rank_memory_mib, first.library_mib, _memory_origin(plan)) if plan.memory_known
                else "Memory per rank not known yet: not checked.")
        tables.append(grid_table(
            name=f"plan-b{batch}", title=f"Plan, local batch {batch} (global batch = ranks × {batch})",
            caption=f"{need} 'run': the point fits and will be measured.",
            ranks=plan.ranks, threads=plan.threads, cell=cell, notes=notes))
    return tables


def _need_text(rank_mib: float, library_mib: float, origin: str) -> str:
    """The caption's memory: each rank's own, and the libraries the node holds once (where counted).

    >>> _need_text(420.0, 353.0, " (measured by the probe)")
    'Each rank needs ~420 MiB of its own (measured by the probe), + 353 MiB of libraries once per node.'
    """
    if library_mib <= 0:
        return f"Each rank needs ~{rank_mib:,.0f} MiB{origin}."
    return (f"Each rank needs ~{rank_mib:,.0f} MiB of its own{origin}, + {library_mib:,.0f} MiB of libraries once "
            "per node.")


ORIGIN_WORDS = {SWEEP: "constraints.rank_memory_mib", WORKLOAD: "the workload’s formula",
                PROBE: "measured by the probe"}


def _memory_origin(plan: Plan) -> str:
    """' (measured by the probe)', for the caption; empty for a plan made without its facts."""
    origin = plan.facts.memory.origin if plan.facts is not None else None
    return f" ({ORIGIN_WORDS[origin]})" if origin in ORIGIN_WORDS else ""


def facts_to_dict(facts: WorkloadFacts | None) -> dict[str, JsonReadable] | None:
    """Each figure's origin and source (values the plan's trials hold: memory; or that are known without
    evaluating a workload's declaration)."""
    if facts is None:
        return None
    return {"memory": {"origin": facts.memory.origin, "source": facts.memory.source},
            "flops_per_sample": {"origin": facts.flops.origin, "source": facts.flops.source},
            "samples_per_epoch": {"origin": facts.samples.origin, "source": facts.samples.source,
                                  "value": facts.samples.value},
            "probe_key": facts.probe.key if facts.probe is not None else None}


def plan_to_dict(plan: Plan) -> dict[str, JsonReadable]:
    def trial_dict(p: PlannedTrial) -> dict[str, JsonReadable]:
        return {"key": p.trial.key, **p.trial.layout(), "feasible": p.feasible,
                "reasons": [r.to_dict() for r in p.reasons],
                "rank_memory_mib": p.rank_memory_mib, "library_mib": p.library_mib,
                "memory_budget_mib": list(p.memory_budget_mib),
                "placement": placement_to_list(p.placement, plan.topology)}

    return {
        "sweep": plan.spec.name,
        "workload": plan.spec.workload.name,
        "topology": plan.topology.to_dict(),
        "backend": {"requested": plan.backend.requested, "chosen": plan.backend.chosen, "note": plan.backend.note,
                    "error": plan.backend.error},
        "precision": plan.precision.to_dict() if plan.precision else None,
        "facts": facts_to_dict(plan.facts),
        "axes": {"ranks": list(plan.ranks), "threads_per_rank": list(plan.threads),
                 "local_batch": list(plan.local_batches)},
        "trials": [trial_dict(p) for p in plan.trials],
        "convergence": [{"key": run.key, "global_batch": run.global_batch, "seed": run.seed,
                         "layout": trial_dict(run.layout)} for run in plan.convergence],
    }
