"""What a rank reports of its job, section by section (`job.RankResult`'s throughput, convergence, peak and
allreduce): frozen dataclasses that cross the rank's result file as JSON (`core.jsonobject`), so the
driver's recording (`run.recording`) reads fields, not keys. No torch: the driver imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.core.jsonobject import JsonObject, optional
from orchestrator.core.records import NoiseScaleSection


@dataclass(frozen=True, kw_only=True, slots=True)
class Report(JsonObject):
    """A section of a rank's result, read by its fields."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ThroughputReport(Report):
    """protocol.measure_throughput's report, with what DDP put on the wire (ddp.wire_sizes)."""

    allreduce_check: dict[str, list[float]] | None = None   # {local_grad_sums, synced_grad_sums}; None for 1 rank
    gradient_bytes: int | None = None
    gradient_dtype: str | None = None
    ddp_bucket_bytes: list[int] | None = None    # DDP's own buckets, in the gradients' dtype
    repeat_s: list[float]                        # this rank's wall time per timed repeat
    step_ms_median: float
    step_ms_p90: float
    data_wait_s: float | None                    # waiting for batches in the timed region; None: not seen (a script)
    timed_s: float
    train_flops_per_sample: float | None = None
    train_flops_rule: str | None = optional()   # how they were counted (core.flop_count); None: not counted
    ddp_wire_dtype: str | None = optional()
    ddp_wire_bucket_bytes: list[int] | None = optional()


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergenceReport(Report):
    """protocol.train_to_target's report."""

    converged: bool
    epochs_to_target: float | None        # None when the target was not reached
    epochs_run: float
    steps_per_epoch: int
    curve: list[list[float]]              # [[epoch, metric]]
    lr: float | None                      # the last learning rate set
    train_s: float
    noise_scale: NoiseScaleSection | None = optional()   # the gradient noise scale (run.noise_scale)


@dataclass(frozen=True, kw_only=True, slots=True)
class PeakReport(Report):
    """protocol.gemm_peak's report: this rank's GEMM rate, and the compute roof's primitives (run.roof)."""

    precision: str
    gflops: float                # from the median matmul time
    best_gflops: float           # from the fastest
    gemm_size: int
    threads: int | None = None
    matmuls: int | None = None
    roof_by_primitive: dict[str, float] | None = optional()   # run.roof: each primitive's median-call rate


@dataclass(frozen=True, kw_only=True, slots=True)
class AllreduceReport(Report):
    """protocol.allreduce_timing's report: this rank's median time per message size."""

    sizes_bytes: list[int]
    time_s: list[float]
    dtype: str
