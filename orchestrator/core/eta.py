"""How long a sweep will take, said before its first trial starts and refined as trials finish.

A first estimate comes from what is known before anything runs: the workload's training FLOPs per sample,
each node's GEMM rate per core in the chosen precision (the ISA probe, `orchestrator.core.isa`), and the
planned trials. A training step is costed at `STEP_EFFICIENCY` of that GEMM rate on the rank's cores (the
default sweep's steps ran at 55-70% of one core's GEMM peak); every trial adds `STARTUP_S` of rank start-up.
A convergence run is costed at `CONVERGENCE_EPOCHS_PRIOR` of its epoch cap until the first one finishes:
epochs-to-target is what it measures, so nothing knows it before.

As trials finish, each kind's estimates are scaled by what its finished trials really took against their
estimates (the median ratio), so the remaining time converges on the machine's own pace. Timing trials run
one after another (each keeps its node to itself); convergence runs pack onto free cores, so their time is
their core-seconds over the cores, and never less than the longest one.

Pure: the caller passes the planned work, the figures and the clock's readings.

    >>> work = [Work("peak-r1-t1", "peak", 4.0, 1), Work("r1-t1-b8", "throughput", 20.0, 1),
    ...         Work("conv-a", "convergence", 100.0, 1), Work("conv-b", "convergence", 100.0, 1)]
    >>> eta = Eta(work, cores=2)
    >>> eta.remaining_s()   # 4 + 20 serial, then two 100 s runs side by side on 2 cores
    124.0
    >>> eta.finished("r1-t1-b8", 40.0)   # throughput took twice its estimate
    >>> eta.remaining_s()
    104.0
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

STARTUP_S = 3.0                 # rank start-up: interpreter, imports, build, rendezvous (2.5-4.5 s measured)
PEAK_S = 3.5                    # a GEMM peak: sizing, 2 warm-up matmuls, 2 s timed, barriers
ALLREDUCE_S = 6.0               # a calibration: 4 KiB to 64 MiB, 3 blocks each
STEP_EFFICIENCY = 0.6           # a training step's FLOP rate over the probe's GEMM rate on the same cores
CONVERGENCE_EPOCHS_PRIOR = 0.5  # share of max_epochs a convergence run is costed at before one has finished
EVAL_SHARE = 0.1                # evaluation's time over training's in a convergence run
# Kinds whose trials pack onto free cores beside each other (run.kinds: their items do not hold a region while
# waiting); every other kind is a timing trial, which keeps its region to itself, so their times add up.
PACKED_KINDS = ("convergence",)


@dataclass(frozen=True, slots=True)
class Work:
    """One planned trial: its key, kind, first estimate in seconds and cores held."""

    key: str
    kind: str
    estimate_s: float
    cores: int


def step_s(flops_per_sample: float, local_batch: int, threads: int, gflops_per_core: float) -> float:
    """One training step of one rank: its FLOPs at STEP_EFFICIENCY of the GEMM rate of its cores.

    >>> round(step_s(14.8e9, 8, 1, 100.0), 2)
    1.97
    """
    return flops_per_sample * local_batch / (STEP_EFFICIENCY * gflops_per_core * 1e9 * threads)


def throughput_s(step: float, warmup_steps: int, timed_steps: int, repeats: int) -> float:
    return STARTUP_S + step * (warmup_steps + timed_steps * repeats)


def convergence_s(step: float, samples_per_epoch: int, global_batch: int, max_epochs: float) -> float:
    steps = CONVERGENCE_EPOCHS_PRIOR * max_epochs * samples_per_epoch / global_batch
    return STARTUP_S + step * steps * (1 + EVAL_SHARE)


class Eta:
    """The remaining time of a sweep: first estimates, scaled per kind by what finished trials took."""

    def __init__(self, work: Sequence[Work], cores: int):
        self.work = {w.key: w for w in work}
        self.cores = max(1, cores)
        self.ratios: dict[str, list[float]] = {}
        self.done: set[str] = set()

    def finished(self, key: str, wall_s: float) -> None:
        w = self.work.get(key)
        if w is None or key in self.done:
            return
        self.done.add(key)
        if w.estimate_s > 0 and wall_s > 0:
            self.ratios.setdefault(w.kind, []).append(wall_s / w.estimate_s)

    def expected_s(self, w: Work) -> float:
        ratios = self.ratios.get(w.kind)
        return w.estimate_s * (statistics.median(ratios) if ratios else 1.0)

    def remaining_s(self, running_s: Mapping[str, float] | None = None) -> float:
        """Seconds until the last trial ends; `running_s`: elapsed seconds of each trial in flight."""
        running_s = running_s or {}
        left = {k: max(0.0, self.expected_s(w) - running_s.get(k, 0.0))
                for k, w in self.work.items() if k not in self.done}
        timing = sum(s for k, s in left.items() if self.work[k].kind not in PACKED_KINDS)
        packed = [(s, self.work[k].cores) for k, s in left.items() if self.work[k].kind in PACKED_KINDS]
        if not packed:
            return timing
        return timing + max(max(s for s, _ in packed), sum(s * c for s, c in packed) / self.cores)

    @property
    def total_s(self) -> float:
        return Eta(list(self.work.values()), self.cores).remaining_s()


def duration_text(seconds: float) -> str:
    """'45 s', '8 min 10 s', '2 h 05 min'.

    >>> duration_text(490), duration_text(7500), duration_text(42.4)
    ('8 min 10 s', '2 h 05 min', '42 s')
    """
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
