"""The sweep's time estimate, before its first trial: the planned work costed from the workload's FLOPs per
sample (`Sweep.facts`: the workload's own, or the probe's count) and each node's probed GEMM rate per core in the
chosen precision (`orchestrator.core.eta` says how);
what each trial costs is its kind's (`WorkItem.estimated_s`), but a convergence run's, which is costed by its
start-up, steps and evaluations (`eta.convergence_run_s`) and refined from what the sweep measures."""

from __future__ import annotations

from typing import Any

from orchestrator.core.eta import (
    CONVERGENCE_EPOCHS_PRIOR,
    STEP_EFFICIENCY,
    Eta,
    RunCosts,
    Shape,
    Work,
    convergence_run_s,
    step_s,
)
from orchestrator.core.facts import PROBE, WORKLOAD
from orchestrator.core.grid import Trial
from orchestrator.core.plan import Plan
from orchestrator.core.probe import flop_text
from orchestrator.core.records import Kind
from orchestrator.run.kinds.base import SweepContext, WorkItem


def _slowest_gflops_per_core(plan: Plan, precision: str) -> float | None:
    rates = [node.isa.gflops_per_core(precision) for node in plan.topology.nodes if node.isa is not None]
    known = [r for r in rates if r]
    return min(known) if known and len(known) == len(rates) else None


FLOPS_ORIGIN = {WORKLOAD: "the workload’s", PROBE: "counted by the probe"}


def run_costs(ctx: SweepContext) -> RunCosts | None:
    """What the sweep's convergence runs share; None without a convergence section. The eval set's size is the
    workload's `test_samples` parameter where it has one (both built-in workloads do)."""
    conv, sweep = ctx.spec.convergence, ctx.sweep
    samples = sweep.facts.samples.value
    if conv is None or samples is None:   # no epoch size known: the runs are costed by their prior alone
        return None
    eval_samples: Any = getattr(sweep.params, "test_samples", None)
    node = ctx.plan.topology.nodes[0]
    return RunCosts(samples, float(conv.max_epochs),
                    float(conv.eval_every_epochs), eval_samples if isinstance(eval_samples, int) else None,
                    node.usable_cores(ctx.spec.constraints.hyperthreads))


def sweep_estimate(ctx: SweepContext, todo: list[WorkItem]) -> tuple[Eta | None, str]:
    """(the estimate, what it rests on), or (None, why there is none)."""
    sweep, plan = ctx.sweep, ctx.plan
    precision = plan.precision.chosen if plan.precision else "fp32"
    rate = _slowest_gflops_per_core(plan, precision)
    flops = sweep.facts.flops.value
    needs_steps = any(item.trains for item in todo)
    if needs_steps and (rate is None or flops is None):
        why = ("no probed GEMM rate for every node" if rate is None else
               "the sweep file gives no workload.flops_per_sample for the script" if sweep.spec.workload.script else
               f"no FLOPs per sample ({sweep.facts.flops.source})")
        return None, f"no time estimate: {why}"

    def step_of(t: Trial) -> float:
        assert rate is not None and flops is not None   # checked above, for every item that trains
        return step_s(flops, t.local_batch, t.threads_per_rank, rate)

    costs = run_costs(ctx)
    work = []
    for item in todo:
        t = item.planned.trial
        shape = Shape(t.ranks, t.threads_per_rank, t.local_batch) if item.trains else None
        step = step_of(t) if item.trains else None
        estimate = item.estimated_s(ctx, step_of)
        if item.KIND == Kind.CONVERGENCE and costs is not None and shape is not None and step is not None:
            estimate = convergence_run_s(costs, shape, step, epochs=CONVERGENCE_EPOCHS_PRIOR * costs.max_epochs)
        work.append(Work(item.key, item.KIND, estimate, t.ranks * t.threads_per_rank, shape, step))
    origin = "the sweep file’s" if sweep.spec.workload.script else FLOPS_ORIGIN.get(sweep.facts.flops.origin, "")
    basis = (f"{flop_text(flops)} per sample ({origin}) at "
             f"{STEP_EFFICIENCY:.0%} of {rate:,.1f} GFLOP/s per core ({precision}, the ISA probe)"
             if needs_steps and flops and rate else "start-up and fixed-length trials")
    return Eta(work, plan.topology.usable_cores(sweep.spec.constraints.hyperthreads), costs), basis
