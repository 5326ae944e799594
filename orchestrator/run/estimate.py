"""The sweep's time estimate, before its first trial: the planned work costed from the workload's FLOPs per
sample and each node's probed GEMM rate per core in the chosen precision (`orchestrator.core.eta` says how);
what each trial costs is its kind's (`WorkItem.estimated_s`)."""

from __future__ import annotations

from orchestrator.core.eta import STEP_EFFICIENCY, Eta, Work, step_s
from orchestrator.core.grid import Trial
from orchestrator.core.plan import Plan
from orchestrator.io.sweepfile import Sweep
from orchestrator.run.kinds.base import SweepContext, WorkItem


def _slowest_gflops_per_core(plan: Plan, precision: str) -> float | None:
    rates = [node.isa.gflops_per_core(precision) for node in plan.topology.nodes if node.isa is not None]
    known = [r for r in rates if r]
    return min(known) if known and len(known) == len(rates) else None


def _flops_per_sample(sweep: Sweep) -> float | None:
    try:
        return sweep.workload.train_flops_per_sample(sweep.params)
    except Exception:  # an estimate is a courtesy: a workload that cannot count must not stop the sweep
        return None


def sweep_estimate(ctx: SweepContext, todo: list[WorkItem]) -> tuple[Eta | None, str]:
    """(the estimate, what it rests on), or (None, why there is none)."""
    sweep, plan = ctx.sweep, ctx.plan
    precision = plan.precision.chosen if plan.precision else "fp32"
    rate = _slowest_gflops_per_core(plan, precision)
    flops = _flops_per_sample(sweep)
    needs_steps = any(item.trains for item in todo)
    if needs_steps and (rate is None or flops is None):
        why = ("no probed GEMM rate for every node" if rate is None else
               "the sweep file gives no workload.flops_per_sample for the script" if sweep.spec.workload.script else
               "the workload does not count its FLOPs")
        return None, f"no time estimate: {why}"

    def step_of(t: Trial) -> float:
        assert rate is not None and flops is not None   # checked above, for every item that trains
        return step_s(flops, t.local_batch, t.threads_per_rank, rate)

    work = [Work(item.key, item.KIND, item.estimated_s(ctx, step_of),
                 item.planned.trial.ranks * item.planned.trial.threads_per_rank) for item in todo]
    basis = (f"{flops / 1e9:,.2f} GFLOP per sample at {STEP_EFFICIENCY:.0%} of {rate:,.1f} GFLOP/s per core "
             f"({precision}, the ISA probe)" if needs_steps and flops and rate else "start-up and fixed-length trials")
    return Eta(work, plan.topology.usable_cores(sweep.spec.constraints.hyperthreads)), basis
