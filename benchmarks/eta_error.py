"""How far the sweep's own time estimate was from what its trials took, recomputed from any results folder.

    .venv/bin/python benchmarks/eta_error.py RESULTS_DIR [RESULTS_DIR ...] [--trials]

For each folder, the work the sweep ran is rebuilt from its records (every trial that ran, with its kind,
layout and the time it took), costed as `orch sweep` costs it before its first trial (`orchestrator.core.execution.eta`,
the step from the probe's timed steps where probe.json has them for the folder's CPU, else from the workload's
FLOPs per sample — the throughput records keep them — at `STEP_EFFICIENCY` of the
probed GEMM rate per core, which environment.json keeps since orch 0.2; an older folder's 1-rank, 1-thread
GEMM peak stands in, and the line says so), and replayed: after each trial ends, the estimate is told what
the record measured, as the live sweep tells it, and asked what is left. Printed per folder:

- the CPU (environment.json), the precision, the trials by kind;
- the first estimate against the trials' wall time (first start to last end), and its error;
- per kind, the summed first estimates against the summed wall times;
- the refined estimate's error a quarter, half and three quarters of the way through;
- with --trials, each convergence run's first estimate and what the model says once the throughput
  trials and peaks before it have been measured, against its wall time.

Run it on a fresh folder from each CPU (an AVX2-only one and an AVX-512 one) to quote the estimate's error on
both. Pure arithmetic on the records: the figures do not depend on the machine it runs on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _rate(results: Any, precision: str) -> tuple[float | None, str]:
    """GFLOP/s per core the first estimate used: the probe in environment.json, else the 1×1 GEMM peak."""
    from orchestrator.core.measured.peaks import peak_index

    for cpu in results.environment.cpu_isas():
        value = cpu.bf16_gflops if precision == "bf16" else cpu.fp32_gflops
        if value:
            return float(value), "the ISA probe"
    peak = peak_index(results.records).one_rank.get((1, precision))
    return (peak, "no probe recorded: the 1-rank, 1-thread GEMM peak stands in (larger GEMM, faster)") if peak \
        else (None, "no probe and no peak")


def _probed_steps(path: Path, results: Any) -> Any:
    """The probe's timed steps the live sweep costed its trials by (`eta.probed_steps`, from probe.json), where
    the probe timed them on the folder's CPU (environment.json); None otherwise."""
    from orchestrator.core.execution import eta
    from orchestrator.core.machine.isa import CpuIsa
    from orchestrator.io.probe_cache import PROBE_FILE, read_probe

    cpus = results.environment.cpus
    if not cpus or not cpus[0]:
        return None
    return eta.probed_steps(read_probe(path / PROBE_FILE), CpuIsa.from_dict(cpus[0]).identity)


def rebuild(path: Path) -> tuple[Any, str]:
    """The folder's work, run costs and finished trials, and a line about the CPU and what the estimate rests
    on; raises SystemExit with the reason when the folder cannot be replayed."""
    from orchestrator.core.execution import eta
    from orchestrator.core.measured.records import Kind, Status
    from orchestrator.io.store import load_results

    results = load_results(path)
    env, spec = results.environment, results.spec
    params = spec.workload.params
    precision = str(env.precision_chosen or params.get("precision") or "fp32")
    precision = precision if precision in ("fp32", "bf16") else "fp32"
    rate, rate_how = _rate(results, precision)
    ran = [r for r in results.records if r.wall_s and r.started_at and r.status != Status.INFEASIBLE]
    flops = next((r.throughput.train_flops_per_sample for r in ran if r.throughput is not None
                  and r.throughput.train_flops_per_sample), None)
    probed = _probed_steps(path, results)
    if probed is None and (rate is None or flops is None):
        raise SystemExit(f"{path}: no estimate to replay ({rate_how if rate is None else 'no FLOPs per sample'})")

    def step_of(local_batch: int, threads: int) -> float:
        if probed is not None:
            return probed.step_s(local_batch, threads)
        assert rate is not None and flops is not None
        return eta.step_s(flops, local_batch, threads, rate)
    measure, conv = spec.measure, spec.convergence
    derived = results.derived
    nodes = results.topology.nodes if results.topology is not None else ()
    cores = sum(len(s.cores) for n in nodes for s in n.sockets)
    node_cores = sum(len(s.cores) for s in nodes[0].sockets) if nodes else 0
    costs = None if conv is None else eta.RunCosts(
        int(derived.samples_per_epoch or 0), conv.max_epochs, conv.eval_every_epochs,
        params.get("test_samples") if isinstance(params.get("test_samples"), int) else None, node_cores)
    startup = probed.startup_s if probed is not None else eta.STARTUP_S
    work = []
    for r in ran:
        threads = r.threads_per_rank or 1
        shape = eta.Shape(r.ranks or 1, threads, r.local_batch) if r.local_batch else None
        step = step_of(r.local_batch, threads) if r.local_batch else None
        if r.kind == Kind.THROUGHPUT and step is not None:
            estimate = eta.throughput_s(step, measure.warmup_steps, measure.timed_steps, measure.repeats, startup)
        elif r.kind == Kind.CONVERGENCE and costs is not None and shape is not None and step is not None:
            estimate = eta.convergence_run_s(costs, shape, step, epochs=eta.CONVERGENCE_EPOCHS_PRIOR * costs.max_epochs,
                                             startup_s=startup)
        else:
            roofed = r.peak is not None and bool(r.peak.roof_gflops)    # a peak that measured the roof too
            estimate = eta.STARTUP_S + (eta.PEAK_S + (eta.ROOF_S if roofed else 0.0) if r.kind == Kind.PEAK
                                        else eta.ALLREDUCE_S)
        work.append(eta.Work(r.key, r.kind, estimate, (r.ranks or 1) * threads, shape, step))
    finished = [(_seconds(r.started_at), float(r.wall_s), r) for r in ran]
    about = f"{env.cpu_model or 'CPU not recorded'}, {precision}; " + (
        probed.text if probed is not None else
        f"{(flops or 0) / 1e9:,.3g} GFLOP per sample at {eta.STEP_EFFICIENCY:.0%} of {rate or 0:,.1f} GFLOP/s per "
        f"core ({rate_how})")
    return (work, max(cores, 1), costs, finished, startup), about


def report(path: Path, trials: bool) -> list[str]:
    from orchestrator.core.execution import eta

    (work, cores, costs, finished, startup), about = rebuild(path)
    replayed = eta.replay(work, cores, costs, finished, startup)
    lines = [f"## {path}", f"- {about}",
             f"- {len(finished)} trials: " + ", ".join(f"{sum(w.kind == k for w in work)} {k}" for k in
                                                      dict.fromkeys(w.kind for w in work)),
             f"- first estimate {eta.duration_text(replayed.first_s)} against {eta.duration_text(replayed.actual_s)} "
             f"of trials: {replayed.first_error:+.1%}"]
    walls = {r.key: w for _, w, r in finished}
    for kind in dict.fromkeys(w.kind for w in work):
        estimated = sum(w.estimate_s for w in work if w.kind == kind)
        took = sum(walls[w.key] for w in work if w.kind == kind)
        lines.append(f"- {kind}: estimated {estimated:,.0f} s, took {took:,.0f} s ({estimated / took - 1:+.1%})")
    for share in (0.25, 0.5, 0.75):
        at = next((p for p in replayed.points if p[0] >= share * replayed.actual_s), None)
        if at is not None and at[2] > 0:
            lines.append(f"- {share:.0%} of the way ({eta.duration_text(at[0])} in): about "
                         f"{eta.duration_text(at[1])} left, {eta.duration_text(at[2])} were ({at[1] / at[2] - 1:+.1%})")
    if trials and costs is not None:
        lines += _convergence_lines(work, cores, costs, finished, startup)
    return lines


def _convergence_lines(work: list[Any], cores: int, costs: Any, finished: list[Any], startup: float) -> list[str]:
    """Each convergence run's cost model checked at its own epochs (what the run measures, not the CPU), with
    what the estimate knew when the run started (the steps of the throughput trials, start-ups, peaks, and the
    evaluation cost of the runs finished before it), against its wall time; the priors alone beside it."""
    from orchestrator.core.execution import eta
    from orchestrator.core.measured.records import Kind

    model = eta.Eta(work, cores, costs, startup)
    ends = sorted(finished, key=lambda f: f[0] + f[1])
    out, errors, priors = [], [], []
    for start, wall, r in sorted(finished, key=lambda f: f[0]):
        for s, w, done in ends:
            if s + w <= start and done.key not in model.done:
                model.finished(done.key, w, done)
        if r.kind != Kind.CONVERGENCE or r.convergence is None or r.convergence.epochs_run is None:
            continue
        w = next(x for x in work if x.key == r.key)
        m, epochs = model.measured, r.convergence.epochs_run
        cost = statistics.median(m.eval_costs) if m.eval_costs else eta.EVAL_SAMPLE_COST
        measured = eta.convergence_run_s(costs, w.shape, m.step_of(w), epochs=epochs, eval_sample_cost=cost,
                                         startup_s=m.startup_of(w.kind, w.shape.ranks),
                                         packing=m.packing if w.cores < costs.node_cores else 1.0)
        prior = eta.convergence_run_s(costs, w.shape, w.step_s, epochs=epochs, startup_s=startup)
        errors.append(measured / wall - 1)
        priors.append(prior / wall - 1)
        out.append(f"  - {r.key} ({r.ranks}×{r.threads_per_rank}×{r.local_batch}, {epochs:g} epochs): "
                   f"{measured:,.1f} s with the measured terms, {prior:,.1f} s with the priors, took {wall:,.1f} s "
                   f"({measured / wall - 1:+.1%}, {prior / wall - 1:+.1%})")
    if errors:
        out.insert(0, f"- convergence runs at their own epochs, cost model with the terms measured before each: "
                      f"median error {statistics.median(errors):+.1%}, worst {max(errors, key=abs):+.1%}; with the "
                      f"priors alone: median {statistics.median(priors):+.1%}, worst {max(priors, key=abs):+.1%}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="results folders")
    parser.add_argument("--trials", action="store_true", help="each convergence run's estimates")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    for path in args.folders:
        try:
            print("\n".join(report(path, args.trials)))
        except SystemExit as why:
            print(f"## {path}\n- {why}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
