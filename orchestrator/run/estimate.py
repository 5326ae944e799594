"""The sweep's time estimate, before its first trial: the planned work costed from the workload's FLOPs per
sample and each node's probed GEMM rate per core in the chosen precision (`orchestrator.core.eta` says how)."""

from __future__ import annotations

from typing import Any

from orchestrator.core import records as rec
from orchestrator.core.eta import (
    ALLREDUCE_S,
    PEAK_S,
    STARTUP_S,
    STEP_EFFICIENCY,
    Eta,
    Work,
    convergence_s,
    step_s,
    throughput_s,
)
from orchestrator.core.plan import Plan
from orchestrator.io.sweepfile import Sweep


def _slowest_gflops_per_core(plan: Plan, precision: str) -> float | None:
    rates = [node.isa.gflops_per_core(precision) for node in plan.topology.nodes if node.isa is not None]
    known = [r for r in rates if r]
    return min(known) if known and len(known) == len(rates) else None


def _flops_per_sample(sweep: Sweep) -> float | None:
    try:
        return sweep.workload.train_flops_per_sample(sweep.params)
    except Exception:  # an estimate is a courtesy: a workload that cannot count must not stop the sweep
        return None


def sweep_estimate(sweep: Sweep, plan: Plan, todo: list[tuple[str, tuple[rec.Kind, Any]]]) -> tuple[Eta | None, str]:
    """(the estimate, what it rests on), or (None, why there is none)."""
    precision = plan.precision.chosen if plan.precision else "fp32"
    rate = _slowest_gflops_per_core(plan, precision)
    flops = _flops_per_sample(sweep)
    needs_steps = any(kind in (rec.THROUGHPUT, rec.CONVERGENCE) for _, (kind, _) in todo)
    if needs_steps and (rate is None or flops is None):
        why = "no probed GEMM rate for every node" if rate is None else "the workload does not count its FLOPs"
        return None, f"no time estimate: {why}"
    m, conv = sweep.spec.measure, sweep.spec.convergence
    work = []
    for key, (kind, item) in todo:
        t = (item.layout if kind == rec.CONVERGENCE else item).trial
        cores = t.ranks * t.threads_per_rank
        if kind == rec.PEAK:
            work.append(Work(key, kind, STARTUP_S + PEAK_S, cores))
        elif kind == rec.ALLREDUCE:
            work.append(Work(key, kind, STARTUP_S + ALLREDUCE_S, cores))
        else:
            assert rate is not None and flops is not None   # checked above
            step = step_s(flops, t.local_batch, t.threads_per_rank, rate)
            seconds = (throughput_s(step, m.warmup_steps, m.timed_steps, m.repeats) if kind == rec.THROUGHPUT
                       else convergence_s(step, sweep.workload.samples_per_epoch(sweep.params), t.global_batch,
                                          conv.max_epochs if conv else 0.0))
            work.append(Work(key, kind, seconds, cores))
    basis = (f"{flops / 1e9:,.2f} GFLOP per sample at {STEP_EFFICIENCY:.0%} of {rate:,.1f} GFLOP/s per core "
             f"({precision}, the ISA probe)" if needs_steps and flops and rate else "start-up and fixed-length trials")
    return Eta(work, plan.topology.usable_cores(sweep.spec.constraints.hyperthreads)), basis
