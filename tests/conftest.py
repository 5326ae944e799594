"""Record builders shared by the core, run and report tests: the smallest valid records (every key present, as
`orchestrator.core.records.make_record` makes them) carrying just the numbers a test computes by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from orchestrator.core import records as rec


def tp(ranks, threads, batch, samples_per_s, *, cv=0.01, flops=None):
    return rec.make_record(kind="throughput", key=f"r{ranks}-t{threads}-b{batch}", status="ok", ranks=ranks,
                           threads_per_rank=threads, local_batch=batch, global_batch=ranks * batch,
                           throughput={"samples_per_s": samples_per_s, "cv": cv, "train_flops_per_sample": flops})


def infeasible(ranks, threads, batch, *messages):
    return rec.make_record(kind="throughput", key=f"r{ranks}-t{threads}-b{batch}", status="infeasible",
                           ranks=ranks, threads_per_rank=threads, local_batch=batch, global_batch=ranks * batch,
                           reasons=[{"code": "cores", "message": m} for m in messages])


def bad(ranks, threads, batch, status, reason=None):
    return rec.make_record(kind="throughput", key=f"r{ranks}-t{threads}-b{batch}", status=status, ranks=ranks,
                           threads_per_rank=threads, local_batch=batch, global_batch=ranks * batch, reason=reason)


def conv(global_batch, seed, epochs, *, max_epochs=10.0, status="ok", reason=None, layout=None, lr=0.1):
    """`epochs=None`: the seed ran to max_epochs without reaching the target."""
    ranks, threads, batch = layout or (1, 1, global_batch)
    return rec.make_record(
        kind="convergence", key=f"conv-g{global_batch}-s{seed}", status=status, ranks=ranks,
        threads_per_rank=threads, local_batch=batch, global_batch=global_batch, seed=seed, reason=reason,
        convergence={"metric": "accuracy", "target": 0.9, "converged": epochs is not None,
                     "epochs_to_target": epochs, "max_epochs": max_epochs, "lr_rule": "linear", "base_lr": 0.1,
                     "base_batch": 32, "lr": lr, "warmup_epochs": 1.0})


def peak(threads, gflops, precision="fp32"):
    return rec.make_record(kind="peak", key=f"peak-t{threads}-{precision}", status="ok", ranks=1,
                           threads_per_rank=threads, peak={"precision": precision, "gflops": gflops, "gemm_size": 4096})


def peak_at_once(ranks, threads, per_rank_gflops, precision="fp32"):
    """A layout's peak as orch now records it: every rank's GEMM rate while all of them ran at once."""
    return rec.make_record(kind="peak", key=f"peak-r{ranks}-t{threads}-{precision}", status="ok", ranks=ranks,
                           threads_per_rank=threads,
                           peak={"precision": precision, "gflops": sum(per_rank_gflops),
                                 "best_gflops": sum(per_rank_gflops) * 1.02, "gemm_size": 2048,
                                 "per_rank_gflops": list(per_rank_gflops), "concurrent": True})


@pytest.fixture
def make():
    return SimpleNamespace(tp=tp, infeasible=infeasible, bad=bad, conv=conv, peak=peak, peak_at_once=peak_at_once)


def texts(table):
    """{(row label, column): cell text} for compact assertions."""
    return {(label, col): cell.text for label, cells in table.rows for col, cell in zip(table.columns, cells)}


@pytest.fixture
def cell_texts():
    return texts
