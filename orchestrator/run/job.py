"""What a rank process is asked to do, and how it reports progress and its result: the wire format between the
driver's side of run/ (the launcher writes the job file and reads the progress and result files) and the rank's
side (run.rank, which does the opposite), with run.reports.

No torch, no Ray, nothing of either side: both import it.
"""

from __future__ import annotations

import json
import time
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from orchestrator.core.json.jsonobject import JsonObject
from orchestrator.core.measured.records import CommunicationSection, Kind
from orchestrator.core.planning.lr import LrSchedule
from orchestrator.io.files import read_nofollow, write_atomic
from orchestrator.run.reports import REPORTS, AllreduceReport, ConvergenceReport, PeakReport, ThroughputReport

if TYPE_CHECKING:
    from orchestrator.core.planning.spec import ConvergenceSpec, MeasureSpec

R = TypeVar("R", bound=JsonObject)
D = TypeVar("D")


class Phase(StrEnum):
    """Phases a rank reports, in order. The driver shows them; the watchdog judges start-up (`STARTUP_PHASES`)
    by its own budget, and every later phase by its steps."""

    STARTING = "starting"
    BUILDING = "building"
    WARMUP = "warm-up"
    TIMING = "timing"
    TRAINING = "training"
    EVALUATING = "evaluating"
    DONE = "done"


# Start-up: from the process's creation until every rank holds its model. It is one long stretch with no
# steps to show for itself (importing torch, the rendezvous, building the model), so the watchdog gives it a
# budget of its own (measure.startup_timeout_s) rather than reading a slow start as a hang.
STARTUP_PHASES = frozenset({Phase.STARTING, Phase.BUILDING})


# What a rank process is asked to do: one of the record kinds (core.measured.records.Kind, the one list of them), a
# profile (`orch profile`, whose output is a profile folder, not a trial record) or a probe (`orch probe`: one
# rank's memory, FLOPs and epoch size, cached and kept beside the records, not one of them).
PROFILE: Final = "profile"
PROBE: Final = "probe"
JobKind = Kind | Literal["profile", "probe"]
JOB_ONLY_KINDS: tuple[JobKind, ...] = (PROFILE, PROBE)


def job_kind(value: str) -> JobKind:
    """The job kind named `value` (as written in a job file)."""
    if value == PROFILE:
        return PROFILE
    return PROBE if value == PROBE else Kind(value)


def init_timeout_s(step_timeout_s: float, startup_timeout_s: float) -> float:
    """torch.distributed's own timeout (rendezvous and collectives) for a job whose watchdog allows
    `step_timeout_s` without progress and `startup_timeout_s` of start-up: kept well above both (a rank that
    joined the rendezvous waits there for a peer still importing torch), so that a hang is judged by one clock,
    the watchdog's, and reported as a timeout rather than as a collective's error.

    >>> init_timeout_s(8, 600)
    1230
    """
    return 2 * max(step_timeout_s, startup_timeout_s) + 30


@dataclass(frozen=True, kw_only=True, slots=True)
class Steps:
    """The timed protocol's steps (run.rank.protocol.measure_throughput), from the spec's measure section:
    `warmup` untimed steps, then `repeats` windows of `timed` steps, on batches held in memory or streamed."""

    warmup: int
    timed: int
    repeats: int
    data: str = "memory"

    @staticmethod
    def of(measure: MeasureSpec) -> Steps:
        """The steps the spec's measure section (core.planning.spec.MeasureSpec) asks for."""
        return Steps(warmup=measure.warmup_steps, timed=measure.timed_steps, repeats=measure.repeats,
                     data=measure.data)


@dataclass(frozen=True, kw_only=True, slots=True)
class ThroughputTask:
    """Kind throughput: time the training step."""

    kind: Literal[Kind.THROUGHPUT] = Kind.THROUGHPUT
    steps: Steps


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergenceSettings:
    """What a convergence run's ranks need of the spec's convergence section, plus the run's global batch."""

    metric: str
    target: float
    max_epochs: float
    eval_every_epochs: float
    lr_rule: str
    base_lr: float
    base_batch: int
    warmup_epochs: float
    global_batch: int
    edge: str = "none"          # the edge probe this run makes: core.predict.edge.AUTO, FULL or OFF ("none")

    @staticmethod
    def of(section: ConvergenceSpec, global_batch: int, seed: int | None = None) -> ConvergenceSettings:
        """From the spec's convergence section (core.planning.spec.ConvergenceSpec) for one global batch and seed:
        the edge is probed on every seed in mode full, on the first seed in mode auto."""
        probed = section.edge == "full" or (section.edge == "auto" and (seed is None or seed == section.seeds[0]))
        return ConvergenceSettings(**{f.name: getattr(section, f.name) for f in fields(ConvergenceSettings)
                                      if f.name not in ("global_batch", "edge")}, global_batch=global_batch,
                                   edge=section.edge if probed else "none")

    @property
    def schedule(self) -> LrSchedule:
        return LrSchedule(rule=self.lr_rule, base_lr=self.base_lr, base_batch=self.base_batch,
                          global_batch=self.global_batch, warmup_epochs=self.warmup_epochs)


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergenceTask:
    """Kind convergence: train from scratch to the target (run.rank.protocol.train_to_target)."""

    kind: Literal[Kind.CONVERGENCE] = Kind.CONVERGENCE
    settings: ConvergenceSettings


@dataclass(frozen=True, kw_only=True, slots=True)
class PeakTask:
    """Kind peak: the GEMM and memory roofs (run.rank.peak) in the sweep's precision."""

    kind: Literal[Kind.PEAK] = Kind.PEAK
    precision: str


@dataclass(frozen=True, kw_only=True, slots=True)
class AllreduceTask:
    """Kind allreduce: time an allreduce of each message size, in the gradients' dtype (run.rank.allreduce)."""

    kind: Literal[Kind.ALLREDUCE] = Kind.ALLREDUCE
    message_bytes: list[int]
    precision: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileTask:
    """A profile (`orch profile`, run.rank.profiling): `warmup_steps`, then `steps` profiled per pass, written to
    `out_dir`, and whether each primitive is replayed alone."""

    kind: Literal["profile"] = PROFILE
    warmup_steps: int
    steps: int
    out_dir: str
    replay: bool = True
    replay_budget_s: float = 60.0   # the replay of every distinct primitive stops after this long


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeTask:
    """The probe (`orch probe`, run.rank.probe): one rank's memory, FLOPs and step, over a short timed run."""

    kind: Literal["probe"] = PROBE
    steps: Steps


# What a rank is asked to do: a union tagged by its `kind` (a record kind, a profile or a probe). Each kind's
# rank entry (run.rank's table) asks for its own member (RankJob.task_as); the file says which one it is.
Task = ThroughputTask | ConvergenceTask | PeakTask | AllreduceTask | ProfileTask | ProbeTask
T = TypeVar("T", ThroughputTask, ConvergenceTask, PeakTask, AllreduceTask, ProfileTask, ProbeTask)


def _task_types() -> dict[str, type[Task]]:
    """The union's members by the `kind` each one's default says: a member added to `Task` is read back with
    no other edit."""
    members: tuple[type[Task], ...] = typing.get_args(Task)
    return {str(next(f.default for f in fields(m) if f.name == "kind")): m for m in members}


def _built(cls: type[D], data: Mapping[str, object]) -> D:
    """A dataclass from its `asdict` form, its dataclass-typed fields (a task's steps, its settings) likewise."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in fields(cls):   # type: ignore[arg-type]   # D: a member of Task, or one of their sections
        if f.name in data:
            value, hint = data[f.name], hints[f.name]
            nested = isinstance(hint, type) and is_dataclass(hint)
            values[f.name] = _built(hint, value) if nested and isinstance(value, Mapping) else value
    return cls(**values)


def task_from_json(data: Mapping[str, object]) -> Task:
    """The task written as `data` (RankJob.to_json), read back as its kind's member of `Task`."""
    kind = str(data.get("kind"))
    member = _task_types().get(kind)
    if member is None:
        raise ValueError(f"a job of an unknown kind {kind!r}; known: {', '.join(_task_types())}")
    return _built(member, {**data, "kind": job_kind(kind)})


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptSettings:
    """A script trial's rank: the script run as it is (orchestrator.run.rank.script), with its arguments filled
    in for the trial, where it runs, and what its reporter (orch.script) needs of the sweep."""

    path: str                       # absolute
    args: list[str]                 # placeholders filled (core.planning.script)
    sha256: str                     # the rank checks that the script it runs is the one planned
    sources: str | None = None      # and that the Python files of its folder are (io.files.python_sources_sha256)
    cwd: str                        # the sweep file's folder: relative paths in args mean what they say there
    env: dict[str, str] = field(default_factory=dict)   # the placeholders' values: ORCH_LOCAL_BATCH, ...
    flops_per_sample: float | None = None   # stated in the sweep file
    lr: float | None = None                 # {lr}: the rate for the trial's global batch
    metric: str | None = None               # convergence: the metric, its target and the epoch cap
    target: float | None = None
    max_epochs: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RankJob:
    """Everything one rank process needs, written as JSON next to its log: what every rank has (the workload,
    its place in the trial) and its kind's task. A script's trial (`script`) is a throughput, convergence or
    probe task run by the script rather than by the kind's own loop: the program is orthogonal to the task."""

    task: Task
    workload: str | None           # the installed workload, by name; None: a script's trial (its script runs)
    params: dict[str, Any]
    backend: str                   # gloo | ccl
    local_batch: int
    seed: int = 0
    threads: int = 1
    progress_path: str = ""
    result_path: str = ""
    init_timeout_s: float = 300.0
    script: ScriptSettings | None = None         # a script's trial: its ranks run the script, not a kind's run_rank

    @property
    def kind(self) -> JobKind:
        """The task's kind: names its rank-side entry (run.rank's table) and its report (run.reports)."""
        return self.task.kind

    def task_as(self, member: type[T]) -> T:
        """The task, as the member its kind's rank entry expects; any other is a programming error."""
        if not isinstance(self.task, member):
            raise ValueError(f"a {self.kind} job is not a {member.__name__}")
        return self.task

    def steps(self) -> Steps:
        """The timed steps of a throughput or probe job (a script's reporter times both alike)."""
        if not isinstance(self.task, ThroughputTask | ProbeTask):
            raise ValueError(f"a {self.kind} job has no timed steps")
        return self.task.steps

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> RankJob:
        data = json.loads(text)
        script = data.pop("script", None)
        return RankJob(**{**data, "task": task_from_json(data["task"])},
                       script=ScriptSettings(**script) if script is not None else None)


@dataclass(frozen=True, kw_only=True, slots=True)
class RankOutput:
    """What a kind's rank entry (run.rank.<kind>.run_rank) did: its report (`reports.REPORTS[kind]`) and the
    result's sections it filled; the rank's entry (run.rank.main) adds where and how long it ran."""

    report: JsonObject
    communication: CommunicationSection | None = None   # run.comm.communication_report: backend, version, CCL
    build_s: float | None = None                        # building the model and optimizer (training jobs)
    applied: dict[str, str] | None = None               # optimizations that took effect, as the workload says


@dataclass(frozen=True, kw_only=True, slots=True)
class RankResult:
    """What a rank reports when it has finished its job: written by the rank (run.rank.main) as JSON in
    its result file, read back by its launcher and turned into the trial's record (run.driver.recording).
    The sections are the protocols' own reports (run.reports), read back typed."""

    rank: int
    pid: int
    threads: int                              # torch's intra-op threads, as the rank saw them
    affinity: dict[str, list[int]]            # CPU masks read from the OS: {threads, main_thread}
    run_s: float                              # from the job's start in the rank to its result
    build_s: float | None = None              # building the model and optimizer (training jobs)
    applied: dict[str, str] | None = None     # optimizations that took effect, as the workload says
    ready_at: float | None = None             # time.time() when every rank was ready to step (run.rank.main)
    started_at: float | None = None           # time.time() when the rank's process was created (/proc, 10 ms)
    # Where this rank's start-up went, in order: seconds per phase from its process's creation to ready_at
    # (run.rank.process.StartupClock names the phases). The driver's share is what precedes started_at.
    startup_breakdown_s: dict[str, float] | None = None
    # The job's kind, and that kind's report (run.reports.REPORTS[kind]: protocol.measure_throughput's, gemm_peak's,
    # profiling.profile_rank's, ...), typed. In the result file the report is written under the kind's name
    # ({"throughput": {...}}), so the file says which type to read it back as: a union tagged by the kind.
    kind: JobKind | None = None
    report: JsonObject | None = None
    communication: CommunicationSection | None = None  # run.comm.communication_report: backend, version, CCL settings

    def to_json(self) -> str:
        data = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name not in ("kind", "report")}
        if self.kind is not None and self.report is not None:
            data[str(self.kind)] = self.report.to_json()
        return json.dumps(data)

    @staticmethod
    def from_json(text: str) -> RankResult:
        """The result a rank wrote; its report is read as its kind's type (run.reports.REPORTS)."""
        data = json.loads(text)
        named = [name for name in (*map(str, Kind), *JOB_ONLY_KINDS) if name in data]
        kind = job_kind(named[0]) if named else None
        report = REPORTS[kind].from_json(data.pop(kind)) if kind is not None else None
        communication = data.pop("communication", None)
        return RankResult(**data, kind=kind, report=report, communication=None if communication is None
                          else CommunicationSection.from_json(communication))

    def report_of(self, kind: type[R]) -> R | None:
        """The report, if it is a `kind` (what a trial of that kind's ranks report), else None."""
        return self.report if isinstance(self.report, kind) else None

    # The built-in kinds' reports by name, for the driver's readers (run.driver.recording) and the tests.
    @property
    def throughput(self) -> ThroughputReport | None:
        return self.report_of(ThroughputReport)

    @property
    def convergence(self) -> ConvergenceReport | None:
        return self.report_of(ConvergenceReport)

    @property
    def peak(self) -> PeakReport | None:
        return self.report_of(PeakReport)

    @property
    def allreduce(self) -> AllreduceReport | None:
        return self.report_of(AllreduceReport)


def _plain(value: Any) -> Any:
    return value.to_json() if isinstance(value, JsonObject) else value


@dataclass(slots=True)
class RankProgress:
    """A rank's progress, as it reports it: rewritten atomically at most every `ProgressWriter.MIN_INTERVAL_S`
    (how the rank ended is the launcher's `rank_end.RankStatus`; how the trial ended, `records.Status`)."""

    phase: Phase = Phase.STARTING
    step: int = 0            # training steps done so far (all phases), the watchdog's heartbeat
    repeat: int = 0          # timing repeat in progress (1-based) or epoch in convergence runs
    of: int = 0              # repeats in all, or max epochs
    t: float = field(default_factory=time.time)
    metric: float | None = None
    stage: str = ""          # during start-up: the last start-up stage finished (run.rank.process.StartupClock's laps)
    error: str | None = None  # what the rank raised when it failed ("WorkloadError: ..."), for the trial's reason


class ProgressWriter:
    """Cheap enough to call every step: it only touches the file when the phase changes or at most every
    MIN_INTERVAL_S, so the timed region pays one clock read per step."""

    MIN_INTERVAL_S = 0.5

    def __init__(self, path: str):
        self.path = path
        self.progress = RankProgress()
        self._last_write = 0.0

    def update(self, *, force: bool = False, **changes: Any) -> None:
        phase_changed = "phase" in changes and changes["phase"] != self.progress.phase
        for key, value in changes.items():
            setattr(self.progress, key, value)
        now = time.monotonic()
        if self.path and (force or phase_changed or now - self._last_write >= self.MIN_INTERVAL_S):
            self.progress.t = time.time()
            write_atomic(self.path, json.dumps(asdict(self.progress)), durable=False)   # not worth a disk flush
            self._last_write = now

    def step(self, **changes: Any) -> None:
        self.update(step=self.progress.step + 1, **changes)


def read_progress(path: str | Path) -> RankProgress | None:
    """The rank's last progress report, or None while there is none (or it cannot be read; a link is never
    followed)."""
    try:
        data = json.loads(read_nofollow(path))
        return RankProgress(**{**data, "phase": Phase(data.get("phase", Phase.STARTING))})
    except (OSError, ValueError, TypeError, AttributeError):
        return None
