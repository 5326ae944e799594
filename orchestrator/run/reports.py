"""What a rank reports of its job, one report type per job kind (`REPORTS`; `job.RankResult.report`): frozen
dataclasses that cross the rank's result file as JSON (`core.json.jsonobject`), so the driver's readers
(`run.driver.recording`, `run.driver.probe`, `run.driver.profile_run`) read fields, not keys. Part of the wire
format between the driver and the rank processes: no torch, nothing of either side.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.core.json.jsonobject import JsonObject, optional
from orchestrator.core.measured.records import EdgeSection, Kind, NoiseScaleSection
from orchestrator.core.profile.result import RankProfile


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
    train_flops_rule: str | None = optional()   # how they were counted (core.profile.flop_count); None: not counted
    ddp_wire_dtype: str | None = optional()
    ddp_wire_bucket_bytes: list[int] | None = optional()
    # each DDP bucket's ready time in a step over the last bucket's (run.rank.overlap); None for 1 rank
    ddp_bucket_ready_share: list[float] | None = optional()


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
    noise_scale: NoiseScaleSection | None = optional()   # the gradient noise scale (run.rank.noise_scale)
    edge: EdgeSection | None = optional()                # the stability edge (run.rank.edge), where probed


@dataclass(frozen=True, kw_only=True, slots=True)
class PeakReport(Report):
    """protocol.gemm_peak's report: this rank's GEMM rate, and the compute roof's primitives (run.rank.roof)."""

    precision: str
    gflops: float                # from the median matmul time
    best_gflops: float           # from the fastest
    gemm_size: int
    threads: int | None = None
    matmuls: int | None = None
    roof_by_primitive: dict[str, float] | None = optional()   # run.rank.roof: each primitive's median-call rate


@dataclass(frozen=True, kw_only=True, slots=True)
class AllreduceReport(Report):
    """protocol.allreduce_timing's report: this rank's median time per message size."""

    sizes_bytes: list[int]
    time_s: list[float]
    dtype: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeReport(Report):
    """What a probe rank measured (one local batch): run.rank.probe's report."""

    local_batch: int
    steps: int                          # training steps before the peak was read
    held_batches: int                   # distinct batches held in memory through them
    rank_peak_private_mib: float | None  # `own_peak_private_mib`; None without /proc
    library_mib: float = 0.0            # its file-backed pages (torch's libraries, ...): once per node, apart
    flops_per_step: float | None        # orch's FLOP counter on one training step
    flops_error: str | None = optional()
    flops_rule: str | None = optional()  # how they were counted (core.profile.flop_count); None: not counted
    samples_per_epoch: int | None = None
    gradient_bytes: int = 0
    gradient_dtype: str | None = None
    step_s: float | None = optional()   # the median of the training steps after the first, seconds


# The report each job kind's ranks write (the result file names it by the kind: {"throughput": {...}}): the tag
# of the result's union. A profile's is the rank's profile (run.rank.profiling.profile_rank).
REPORTS: dict[str, type[JsonObject]] = {
    Kind.THROUGHPUT: ThroughputReport,
    Kind.CONVERGENCE: ConvergenceReport,
    Kind.PEAK: PeakReport,
    Kind.ALLREDUCE: AllreduceReport,
    "profile": RankProfile,
    "probe": ProbeReport,
}
