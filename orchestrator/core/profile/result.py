"""A profiled target as `orch profile` saves it (`profile-result.json` in each target's folder): the run's
facts and every rank's profile, as typed JSON objects (core/jsonobject: read and written back byte for byte).

    target = ProfiledTarget.from_json(json.loads(path.read_text()))
    target.results[0].onednn.shapes[0].time_ms

Every field has a default so that results written before a section existed still load; what a check needs
and an old result lacks reads as its default (an empty tuple, None), and the checks say so where it
matters (a rank without a peak is not checked against a roof).

>>> target = as_target({"label": "1x2x8", "ranks": 1, "threads": 2, "status": "ok",
...                     "placement": [{"rank": 0, "cpus": [1, 0]}]})
>>> target.runs, target.rank_cpus(), target.results     # older results: absent sections read as defaults
(1, {0: [0, 1]}, ())
>>> target.to_json()                                    # and it writes back only what it read
{'label': '1x2x8', 'ranks': 1, 'threads': 2, 'status': 'ok', 'placement': [{'rank': 0, 'cpus': [1, 0]}]}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from orchestrator.core.json.jsonobject import JsonObject, optional
from orchestrator.core.json.values import JsonMapping, JsonReadable
from orchestrator.core.profile.levels import LevelRoof
from orchestrator.core.profile.onednn_verbose import KindTotal, ShapeTotal


@dataclass(frozen=True, slots=True)
class OnednnSummary(JsonObject):
    """The verbose pass's oneDNN log, aggregated: per kind × direction × kernel and per distinct problem."""

    log: str = ""                         # the rank's log file, gzipped, beside the result
    problems: tuple[str, ...] = ()        # lines that could not be read (the first 20)
    executions: int = 0
    totals: tuple[KindTotal, ...] = ()
    shapes: tuple[ShapeTotal, ...] = ()


@dataclass(frozen=True, slots=True)
class OpRow(JsonObject):
    """One operator (by input shape) of the profiler pass, per step."""

    op: str = ""
    calls_per_step: float = 0.0
    self_ms_per_step: float = 0.0
    total_ms_per_step: float = 0.0
    input_shapes: str = ""
    gflop_per_step: float = 0.0


@dataclass(frozen=True, slots=True)
class CoverageJson(JsonObject):
    """core/profile/events.Coverage as saved: named + allreduce_wait + other = step (ms per step)."""

    step_ms: float = 0.0
    named_ms: float = 0.0
    other_ms: float = 0.0
    allreduce_wait_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class LayerRow(JsonObject):
    """core/profile/events.LayerTime as saved (ms per step)."""

    layer: str = ""
    forward_ms: float = 0.0
    backward_ms: float = 0.0

    @property
    def total_ms(self) -> float:
        return self.forward_ms + self.backward_ms


@dataclass(frozen=True, slots=True)
class ProfilerSummary(JsonObject):
    """The torch.profiler pass: its step times, operator table, coverage, layers and trace file."""

    step_ms: tuple[float, ...] = ()
    ops: tuple[OpRow, ...] = ()
    coverage: CoverageJson = field(default_factory=CoverageJson)
    layers: tuple[LayerRow, ...] = ()
    trace: str = ""


@dataclass(frozen=True, slots=True)
class Peak(JsonObject):
    """The compute roof measured on the rank's cores after training: the best of the GEMM peak and run.rank.roof's
    GEMMs and convolutions (run.rank.profiling.compute_peak)."""

    precision: str | None = None
    gflops: float = 0.0                  # the roof: max(gemm_gflops, conv_gflops)
    best_gflops: float | None = None     # the fastest GEMM (the peak's own noise: best ÷ median)
    gemm_size: int | None = None
    threads: int | None = None
    matmuls: int | None = None
    gemm_gflops: float | None = None     # the median GEMM
    conv_gflops: float | None = None     # the fastest convolution of the roof's
    roof_by_primitive: Mapping[str, float] | None = optional()   # run.rank.roof's primitives, fastest call each

    @property
    def gemm(self) -> float:
        """The median GEMM's GFLOP/s (results written before it was apart: the roof)."""
        return self.gflops if self.gemm_gflops is None else self.gemm_gflops


@dataclass(frozen=True, slots=True)
class ReplayRow(JsonObject):
    """One logged problem replayed alone (run/profile_replay); the keys a result written before the layouts
    were recorded lacks are None, and the match to the logged problem ignores them."""

    kind: str = ""
    direction: str = ""
    problem: str = ""
    dtype: str = ""
    layout: str | None = None
    dst_dtype: str | None = None
    dst_layout: str | None = None
    isolated_ms: float | None = None       # median of the replay's calls; None: not replayed (see note)
    isolated_min_ms: float | None = None   # its fastest call
    runs: int | None = None
    call_ms: float | None = None
    implementation: str | None = None      # the kernel the replay ran (None before the replay captured it)
    note: str | None = None

    @property
    def match_key(self) -> tuple[str | None, ...]:
        """The keys of onednn_verbose.shape_key, None where this row does not carry one."""
        return (self.kind, self.direction, self.problem, self.dtype, self.layout, self.dst_dtype, self.dst_layout)


@dataclass(frozen=True, slots=True)
class ReplaySetting(JsonObject):
    """Where the replay ran: its threads and the CPUs it could run on."""

    threads: int = 0
    cpus: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CacheRoof(JsonObject):
    """The bandwidth roof of one memory level on the rank's cores (core/profile/levels, run/profile_replay):
    a working set up to `fits_bytes` sits at this level (DRAM: 0, no limit); `gbs` None where only the
    compute roof bounds it (L1); `triad_bytes` the working set that measured it."""

    level: str = ""
    fits_bytes: int = 0
    gbs: float | None = None
    triad_bytes: int = 0

    def roof(self) -> LevelRoof:
        return LevelRoof(self.level, self.fits_bytes, self.gbs)


@dataclass(frozen=True, slots=True)
class RankProfile(JsonObject):
    """One rank's profile (run/rank/profiling.profile_rank): the plain, verbose and profiler passes, then what
    it measured alone on its cores (peak, bandwidth, replay). Step times in ms."""

    plain_step_ms: tuple[float, ...] = ()
    verbose_step_ms: tuple[float, ...] = ()
    steps: int = 1
    plain_cpu_share: float | None = None       # CPU time ÷ wall time ÷ threads in that pass
    verbose_cpu_share: float | None = None
    profiler_cpu_share: float | None = None
    onednn: OnednnSummary = field(default_factory=OnednnSummary)
    profiler: ProfilerSummary = field(default_factory=ProfilerSummary)
    peak: Peak | None = None
    stream_triad_gbs: float = 0.0
    replay: tuple[ReplayRow, ...] = ()
    replay_setting: ReplaySetting | None = None
    level_roofs: tuple[CacheRoof, ...] | None = optional()   # absent before roofs per level: DRAM's alone

    def cpu_shares(self) -> tuple[tuple[str, float | None], ...]:
        """(pass, share) for the plain, verbose and profiler passes."""
        return (("plain", self.plain_cpu_share), ("verbose", self.verbose_cpu_share),
                ("profiler", self.profiler_cpu_share))


@dataclass(frozen=True, slots=True)
class RankPlacement(JsonObject):
    rank: int = 0
    cpus: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ProfiledTarget(JsonObject):
    """One profiled target (variant × layout): how it ran and every rank's profile, rank order."""

    label: str = ""
    variant: str = ""
    ranks: int = 0
    threads: int = 0
    local_batch: int = 0
    status: str = ""                          # ok | failed | timeout ...
    reason: str | None = None
    wall_s: float = 0.0
    backend: str = ""
    params: JsonMapping = field(default_factory=dict)
    placement: tuple[RankPlacement, ...] = ()
    applied: JsonMapping | None = None
    observed_cpus: tuple[list[int] | None, ...] = ()       # each rank's CPU masks as it read them (None: not read)
    results: tuple[RankProfile, ...] = ()
    log_tail: str | None = optional()     # a failed run's log
    passes: int | None = optional()       # runs it took (a disturbed run is repeated)
    disturbed_passes: tuple[tuple[str, ...], ...] | None = optional()

    @property
    def runs(self) -> int:
        return 1 if self.passes is None else self.passes

    def rank_cpus(self) -> dict[int, list[int]]:
        """Each placed rank's CPUs, sorted."""
        return {p.rank: sorted(p.cpus) for p in self.placement}


def as_target(target: ProfiledTarget | Mapping[str, JsonReadable]) -> ProfiledTarget:
    """A target as read from its JSON, or already typed: callers holding plain data (a test's hand-made
    result, a benchmark's loaded file) pass it as is."""
    return target if isinstance(target, ProfiledTarget) else ProfiledTarget.from_json(target)
