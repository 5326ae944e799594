"""The sweep's time estimate, before its first trial: the planned work costed from the steps the probe timed on
this CPU where it timed them, else from the workload's FLOPs per sample (`Sweep.facts`: the workload's own, or the
probe's count) and each node's probed GEMM rate per core in the chosen precision (`core.execution.eta` says how);
what each trial costs is its kind's (`WorkItem.estimated_s`), but a convergence run's, which is costed by its
start-up, steps and evaluations (`eta.convergence_run_s`) and refined from what the sweep measures."""

from __future__ import annotations

from orchestrator.core.execution.eta import (
    CONVERGENCE_EPOCHS_PRIOR,
    STARTUP_S,
    STEP_EFFICIENCY,
    Eta,
    ProbedSteps,
    RunCosts,
    Shape,
    Work,
    convergence_run_s,
    probed_steps,
    step_s,
)
from orchestrator.core.measured.records import Kind
from orchestrator.core.planning.facts import PROBE, WORKLOAD
from orchestrator.core.planning.plan import Plan
from orchestrator.core.planning.probe import flop_text
from orchestrator.core.planning.trial import Trial
from orchestrator.run.driver.kinds.base import SweepContext, WorkItem


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
    eval_samples: object = getattr(sweep.params, "test_samples", None)
    node = ctx.plan.topology.nodes[0]
    return RunCosts(samples, float(conv.max_epochs),
                    float(conv.eval_every_epochs), eval_samples if isinstance(eval_samples, int) else None,
                    node.usable_cores(ctx.spec.constraints.hyperthreads))


def _probed_steps(ctx: SweepContext) -> ProbedSteps | None:
    """The probe's timed steps (`eta.probed_steps`) where every node of the plan has the CPU it ran on."""
    nodes = ctx.plan.topology.nodes
    cpus = {node.isa.identity for node in nodes if node.isa is not None}
    if len(cpus) != 1 or any(node.isa is None for node in nodes):
        return None
    return probed_steps(ctx.sweep.probe, cpus.pop())


def sweep_estimate(ctx: SweepContext, todo: list[WorkItem]) -> tuple[Eta | None, str]:
    """(the estimate, what it rests on), or (None, why there is none). A step is the probe's timed one where
    the probe timed steps on this CPU (`measure.probe: always` makes sure of it), else its FLOPs at
    STEP_EFFICIENCY of the probed GEMM rate: a fixed share that holds on one CPU and not another."""
    sweep, plan = ctx.sweep, ctx.plan
    precision = plan.precision.chosen if plan.precision else "fp32"
    rate = _slowest_gflops_per_core(plan, precision)
    flops = sweep.facts.flops.value
    needs_steps = any(item.trains for item in todo)
    probed = _probed_steps(ctx)
    if needs_steps and probed is None and (rate is None or flops is None):
        why = ("no probed GEMM rate for every node" if rate is None else
               "the sweep file gives no workload.flops_per_sample for the script" if sweep.spec.workload.script else
               f"no FLOPs per sample ({sweep.facts.flops.source})")
        return None, f"no time estimate: {why}"

    def step_of(t: Trial) -> float:
        if probed is not None:
            return probed.step_s(t.local_batch, t.threads_per_rank)
        assert rate is not None and flops is not None   # checked above, for every item that trains
        return step_s(flops, t.local_batch, t.threads_per_rank, rate)

    costs = run_costs(ctx)
    startup = probed.startup_s if probed is not None else STARTUP_S
    work = []
    for item in todo:
        t = item.planned.trial
        shape = Shape(t.ranks, t.threads_per_rank, t.local_batch) if item.trains else None
        step = step_of(t) if item.trains else None
        estimate = item.estimated_s(ctx, step_of, startup)
        if item.KIND == Kind.CONVERGENCE and costs is not None and shape is not None and step is not None:
            estimate = convergence_run_s(costs, shape, step, epochs=CONVERGENCE_EPOCHS_PRIOR * costs.max_epochs,
                                         startup_s=startup)
        work.append(Work(item.key, item.KIND, estimate, t.ranks * t.threads_per_rank, shape, step))
    origin = "the sweep file’s" if sweep.spec.workload.script else FLOPS_ORIGIN.get(sweep.facts.flops.origin, "")
    if not needs_steps:
        basis = "start-up and fixed-length trials"
    elif probed is not None:
        basis = probed.text
    else:
        basis = (f"{flop_text(flops or 0)} per sample ({origin}) at "
                 f"{STEP_EFFICIENCY:.0%} of {rate or 0:,.1f} GFLOP/s per core ({precision}, the ISA probe)")
    return Eta(work, plan.topology.usable_cores(sweep.spec.constraints.hyperthreads), costs, startup), basis
