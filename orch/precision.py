"""Decide a workload's `precision: auto` on this machine, for a trainer built outside a sweep.

A sweep decides `auto` once for all its ranks (bf16 where every node computes it natively, else fp32: the
plan's precision), so a rank's trainer never sees `auto`. Whatever builds a trainer without a sweep (a test,
a benchmark, a notebook calling `workload.build`) decides it first, here, on this process's CPU:

    params = orch.decide_precision(params)   # precision: auto -> fp32 or bf16
    trainer = workload.build(params, ctx)

It is a module of its own, outside `orch.workload`, because deciding reads /proc/cpuinfo and times a small
bf16 GEMM against fp32 (about 0.1 s, `orchestrator.io.isa`): a side effect the public workload door, which a
rank imports, does not have.
"""

from __future__ import annotations

from typing import TypeVar

from orchestrator.io.isa import decided_here

P = TypeVar("P")


def decide_precision(params: P) -> P:
    """`params` with `precision: auto` decided on this machine's CPU, as a sweep decides it for its nodes: bf16
    where this CPU computes bf16 natively (its bf16 GEMM at least as fast as fp32's), else fp32, and fp32
    where the parameters themselves rule bf16 out (the RetinaNet below 96 px). Parameters with an explicit
    precision, or with no `precision` field, come back unchanged.

    Needed only to build a trainer outside a sweep: a trainer given `auto` refuses it."""
    decided: P = decided_here(params)
    return decided
