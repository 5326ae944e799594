"""`orch plan`: the dry run. Shows which grid points will run and why the others cannot, without starting
Ray, a rank or torch. It does run the sweep file's code: it imports the workload's module and calls its factory
(its parameters, metrics and memory formula are declared there), as `orch sweep` does; a script is only read and
hashed (docs/trust.md). `orch sweep` executes exactly this plan. A thin layer over `orchestrator.app.plan`."""

from __future__ import annotations

import argparse
import json
import logging
from typing import TYPE_CHECKING

from orchestrator.app import plan as app_plan
from orchestrator.app.options import PlanOptions
from orchestrator.cli.common import EXIT_BAD_INPUT, EXIT_OK, console, examples
from orchestrator.cli.options import add_options, options_from
from orchestrator.core.planning.facts import PROBE, UNKNOWN, WorkloadFacts
from orchestrator.core.planning.plan import Plan
from orchestrator.core.planning.probe import PROBE_BATCHES
from orchestrator.core.planning.view import plan_tables
from orchestrator.report.render import to_rich

if TYPE_CHECKING:   # rich is imported when a plan is rendered
    from rich.console import Group

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "plan", help="dry run: which grid points fit the machine, where their ranks go, and why not",
        description="Expand the sweep's ranks × threads-per-rank × local-batch grid against a topology and check "
                    "every point: a rank must fit inside one socket, ranks × threads must fit the cores (per node "
                    "and overall), ranks must pack into sockets, and every rank must fit its memory budget. Prints "
                    "one table per local batch (rows: threads per rank, columns: ranks) and the convergence runs. "
                    "Starts no Ray, no rank and no torch, but it runs the sweep file's code: it imports the "
                    "workload's module and calls its factory (its parameters, metrics and memory formula are "
                    "declared there), as `orch sweep` does; a training script is only read and hashed, never run. "
                    "Plan only sweep files whose workload you trust (docs/trust.md).",
        **examples(
                   "orch plan sweeps/classifier.yaml",
                   "orch plan sweeps/retinanet-table3.yaml --topology sweeps/topologies/xeon-2s28c-smt.yaml",
                   anchor="orch-plan"))
    add_options(parser, PlanOptions)
    parser.add_argument("--json", action="store_true",
                        help="print every point with its placement (node, socket, NUMA node, CPU ids) and reasons "
                             "as JSON")
    parser.set_defaults(run=run)


def facts_lines(facts: WorkloadFacts | None, sweep_path: str) -> list[str]:
    """Where memory per rank, FLOPs per sample and samples per epoch come from; what is not known yet, and how
    to measure it."""
    if facts is None:
        return []
    named = (("memory per rank", facts.memory.origin, facts.memory.source),
             ("FLOPs per sample", facts.flops.origin, facts.flops.source),
             ("samples per epoch", facts.samples.origin, facts.samples.source))
    waiting = facts.probe is None and facts.probeable
    lines = [f"{name}: {source}" for name, origin, source in named if not (waiting and origin == UNKNOWN)]
    if facts.memory.library_source and facts.memory.origin != PROBE:   # the probe's own source text says them
        lines.insert(1, f"libraries: {facts.memory.library_source}")
    unknown = [(name, source) for name, origin, source in named if waiting and origin == UNKNOWN]
    if unknown:
        lines.append(f"{', '.join(name for name, _ in unknown)}: {unknown[0][1]}. `orch probe {sweep_path}` measures "
                     f"them with one rank on this machine (local batches {' and '.join(map(str, PROBE_BATCHES))}, a "
                     "process each); `orch sweep` runs it first.")
    return lines


def render_plan(plan: Plan, sweep_path: str = "SWEEP") -> Group:
    from rich.console import Group
    from rich.text import Text

    spec = plan.spec
    what = (f"script {spec.workload.script} {' '.join(spec.workload.arg_texts)}".rstrip()
            if spec.workload.script is not None else f"workload {spec.workload.name}")
    parts = [Text(f"sweep {spec.name}: {what}", style="bold"),
             Text(f"topology: {plan.topology.describe()}   [{plan.topology.source}]"),
             Text(f"backend: {plan.backend.note}")]
    if plan.precision is not None:
        parts.append(Text(f"precision: {plan.precision.reason}"))
    parts += [Text(line) for line in facts_lines(plan.facts, sweep_path)]
    for table in plan_tables(plan):
        parts += [Text(""), to_rich(table)]
    if plan.convergence:
        parts.append(Text("\nconvergence runs (one per global batch and seed, on the cheapest feasible layout):"))
        by_batch: dict[int, list[int]] = {}
        layouts = {}
        for run in plan.convergence:
            by_batch.setdefault(run.global_batch, []).append(run.seed)
            layouts[run.global_batch] = run.layout.trial
        for batch, seeds in by_batch.items():
            t = layouts[batch]
            parts.append(Text(f"  global batch {batch}: {t.ranks} rank(s) × {t.threads_per_rank} thread(s), "
                              f"local batch {t.local_batch}; seeds {', '.join(map(str, seeds))}"))
    elif spec.convergence is not None:
        parts.append(Text("\nno convergence runs: no grid point is feasible"))
    feasible = len(plan.feasible)
    parts.append(Text(f"\n{feasible} of {len(plan.trials)} grid points will run"
                      + (f"; {len(plan.convergence)} convergence run(s)" if plan.convergence else ""),
                      style="bold"))
    return Group(*parts)


def run(args: argparse.Namespace) -> int:
    from orchestrator.core.planning.view import plan_to_dict

    options = options_from(PlanOptions, args)
    plan = app_plan.plan(options)
    if args.json:
        print(json.dumps(plan_to_dict(plan), indent=2))
    else:
        console().print(render_plan(plan, options.sweep))
    for error in plan.errors:
        log.error("%s", error)
    return EXIT_BAD_INPUT if plan.errors else EXIT_OK
