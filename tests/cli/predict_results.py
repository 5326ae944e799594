"""A results folder on disk whose records come from a known step-time model (and known epochs), so that
`orch predict` can be tested end to end through `main(argv)` without running a sweep."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from orchestrator.core.execution.calibration import calibration_key
from orchestrator.core.machine.topology import CompactTopology, build_compact
from orchestrator.core.measured import records as rec
from orchestrator.core.planning.trial import Trial
from orchestrator.core.predict import comm
from orchestrator.core.predict.epochs import critical_batch_epochs
from orchestrator.core.predict.step import Layout, StepModel
from orchestrator.io.store import append_record, write_json
from orchestrator.io.sweepfile import load_sweep

PARAMS = {"a_s": 1e-3, "c_s": 2e-4, "sigma": 0.1, "sigma_a": 0.5, "kappa": 0.0, "mu": 0.05, "rho": 1.2,
          "gamma": 1.3}
ALPHA_S, BETA_S_PER_BYTE = 30e-6, 0.5e-9
GRADIENT_BYTES = 3 * 2**20


def model() -> StepModel:
    link = comm.LinkFit("socket", ALPHA_S, BETA_S_PER_BYTE, 8, 0.0)
    return StepModel(PARAMS, {"socket": link}, tuple(comm.ddp_buckets(GRADIENT_BYTES)))


def _placement(ranks: int, threads: int) -> tuple[rec.PlacementEntry, ...]:
    return tuple(rec.PlacementEntry(rank=i, local_rank=i, node=0, node_name="n0", socket=0, numa_nodes=[0],
                                    cpus=list(range(i * threads, (i + 1) * threads)), ccl_cpus=[])
                 for i in range(ranks))


def write_results(folder: Path, *, layouts: list[tuple[int, int, int]], convergence: bool = True,
                  params: dict | None = None, links: dict[str, tuple[float, float]] | None = None,
                  gradient_bytes: int = GRADIENT_BYTES, epochs_truth: tuple[float, float] = (1.5, 64.0),
                  seed_factors: tuple[float, ...] = (0.95, 1.0, 1.05),
                  global_batches: tuple[int, ...] = (8, 16, 32, 64), peak_gflops: float | None = None,
                  b_simple: float | None = None, sqrt_rule: tuple[float, int, float] | None = None) -> Path:
    """A results folder written with the production writers (records.Record, store.append_record and store.write_json) whose
    throughput comes from a known step model (`params`, `links`: link class → (α s, β s/byte)) and whose
    epochs are E_min·(1 + B/B_crit) × each seed factor; with `peak_gflops`, a 1-rank 1-thread fp32 GEMM peak;
    with `b_simple`, every convergence run measured that gradient noise scale (±20%); with `sqrt_rule`
    (base_lr, base_batch, c), the runs recorded the square-root learning-rate rule and their epochs are c·√B instead
    (its k = 0 limit) × each seed factor."""
    links = links or {"socket": (ALPHA_S, BETA_S_PER_BYTE)}
    sweep_file = folder / "synthetic.yaml"
    sweep_file.write_text(textwrap.dedent("""
        name: synthetic
        workload: {name: classifier, params: {hidden: 64}}
        grid: {ranks: [1, 2], threads_per_rank: [1, 2], local_batch: [8, 16, 32, 64, 128]}
        """))
    sweep = load_sweep(sweep_file)
    results = folder / "results"
    results.mkdir()
    topology = build_compact(CompactTopology(nodes=1, sockets=1, cores_per_socket=4, threads_per_core=1,
                                             memory_gib=16))
    write_json(results / "spec.json", {"spec": sweep.frozen_spec(), "derived": {
        "samples_per_epoch": 8192, "ranks": [1, 2], "threads": [1, 2], "local_batches": [8, 16, 32, 64, 128],
        "workload": "classifier", "metric": "accuracy",
        # as a sweep records it (run.driver.sweep): the memory a reader predicts with, never asking the workload
        "memory_mib": {str(b): sweep.facts.memory.mib(b) for b in (1, 8, 16, 32, 64, 128, 256)}}})
    write_json(results / "topology.json", topology.to_dict())
    write_json(results / "environment.json", {"backend": {"chosen": "gloo"}, "cpu_model": "Test CPU"})
    m = StepModel(params or PARAMS, {k: comm.LinkFit(k, a, b, 8, 0.0) for k, (a, b) in links.items()},
                  tuple(comm.ddp_buckets(gradient_bytes)))
    records: list[rec.Record] = []
    for ranks, threads, batch in layouts:
        lay = Layout(ranks, threads, batch, 1, ranks, "socket" if ranks > 1 else None)
        rate = m.samples_per_s(lay)
        records.append(rec.Record(
            kind=rec.Kind.THROUGHPUT, key=Trial(ranks, threads, batch).key, status=rec.Status.OK, ranks=ranks,
            threads_per_rank=threads, local_batch=batch, global_batch=ranks * batch, backend="gloo",
            placement=_placement(ranks, threads),
            throughput=rec.ThroughputSection(samples_per_s=rate, cv=0.01, gradient_bytes=gradient_bytes,
                                             ddp_bucket_bytes=None)))
    sizes = [4096 * 4**k for k in range(8)]
    for link, (alpha, beta) in links.items():
        for n in (2, 4) if link == "nodes" else (2,):
            records.append(rec.Record(
                kind=rec.Kind.ALLREDUCE, key=calibration_key(link, n, "fp32"), status=rec.Status.OK, ranks=n, threads_per_rank=1,
                placement=_placement(n, 1),
                allreduce=rec.AllreduceSection(link=link, ranks=n, dtype="fp32", algorithm="ring", sizes_bytes=sizes,
                                               time_s=[comm.ring_allreduce_s(n, s, alpha, beta) for s in sizes])))
    if peak_gflops is not None:
        records.append(rec.Record(
            kind=rec.Kind.PEAK, key=rec.peak_key(1, 1, "fp32"), status=rec.Status.OK, ranks=1, threads_per_rank=1,
            placement=_placement(1, 1), peak=rec.PeakSection(precision="fp32", gemm_size=2048, gflops=peak_gflops,
                                                             concurrent=True)))
    if convergence:
        for g in global_batches:
            for seed, f in enumerate(seed_factors):
                epochs = critical_batch_epochs(g, *epochs_truth) * f
                section = rec.ConvergenceSection(metric="accuracy", target=0.9, converged=True,
                                                 epochs_to_target=epochs, max_epochs=20)
                if sqrt_rule is not None:
                    base_lr, base_batch, c = sqrt_rule
                    section = section.with_fields(epochs_to_target=c * g ** 0.5 * f, lr_rule="sqrt", base_lr=base_lr,
                                                  base_batch=base_batch, lr=base_lr * (g / base_batch) ** 0.5)
                if b_simple is not None:
                    section = section.with_fields(noise_scale=rec.NoiseScaleSection(
                        b_simple=b_simple * f, low=b_simple * f / 1.2, high=b_simple * f * 1.2, method="ddp"))
                records.append(rec.Record(
                    kind=rec.Kind.CONVERGENCE, key=rec.convergence_key(g, seed), status=rec.Status.OK, seed=seed, ranks=1,
                    threads_per_rank=1, local_batch=g, global_batch=g, backend="gloo", convergence=section))
    for record in records:
        append_record(results, record)
    return results


def rcp_file(folder: Path, entries: dict) -> Path:
    path = folder / "rcps_test.json"
    path.write_text(json.dumps(entries))
    return path
