"""`orch sweep`: execute a plan on Ray, running trials concurrently where they cannot disturb each other,
recording each as it ends.

Order of admission: the GEMM peaks (one per distinct layout, ranks × threads per rank, all its ranks at
once), the all-reduce calibration (one per link class × multi-rank count), the throughput grid, then the
convergence runs. Which trials may overlap, and where they go, is `orchestrator.core.execution.schedule`'s rule: a
timing trial keeps its nodes (or sockets) to itself, a convergence run packs onto free cores. Each running
trial is supervised by its own driver thread; records are written by the main thread only, as trials end.
Finished trials already in the results folder are skipped, so a rerun resumes. A failed trial is a record,
never the end of the sweep; Ctrl-C stops every running trial, releases its cores and keeps everything
recorded so far (an interrupted trial leaves no record and runs again on resume).
"""

from __future__ import annotations

import errno
import platform
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import __version__
from orchestrator.core.execution.schedule import Region
from orchestrator.core.json.schema import InvalidInput, Problem
from orchestrator.core.measured import records as rec
from orchestrator.core.measured.environment import BackendRecord, Environment, PrecisionRecord
from orchestrator.core.planning.plan import Plan, PlannedTrial
from orchestrator.io.backends import CCL_BINDINGS_DIST
from orchestrator.io.files import WORK_ROOT, write_atomic  # WORK_ROOT: each rank's files, private (io.files)
from orchestrator.io.probe_cache import PROBE_FILE
from orchestrator.io.store import (
    LOGS_DIR,
    ResultsNotWritten,
    SpecChanged,
    append_record,
    prepare_folder,
    write_json,
)
from orchestrator.io.sweepfile import Sweep
from orchestrator.run.comm import ONECCL_DISTS, dist_version
from orchestrator.run.driver.events import SweepEvents
from orchestrator.run.driver.kinds import item_types
from orchestrator.run.driver.kinds.base import SweepContext, WorkItem
from orchestrator.run.driver.recording import infeasible_record
from orchestrator.run.driver.trial import NodePool, RankSpec, TrialRun, run_ranks
from orchestrator.run.job import RankJob

if TYPE_CHECKING:
    from orchestrator.core.adaptive.outcome import AdaptiveOutcome
    from orchestrator.core.execution.eta import Eta

ADMIT_POLL_S = 0.25    # how often the driver looks for ended trials (and, when one ended, room for others)
MAX_ENV_NODES = 64            # environment.json lists each node's CPU verdict up to this many (topology.json has all)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunnerOptions:
    results: Path            # the sweep's own folder
    rerun: bool = False
    convergence: bool = True
    max_concurrent: int | None = None   # trials in flight at once; None: as many as the rules allow
    # Called with each record right after it is appended (in the main thread, which alone writes records):
    # how a sweep is logged elsewhere (io.tracking's `Tracking.record`, which never raises and only queues).
    on_record: tuple[Callable[[rec.Record], None], ...] = ()


@dataclass(slots=True)
class RunnerSummary:
    ran: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)
    adaptive: AdaptiveOutcome | None = None     # an adaptive sweep's answer and stop


def environment_info(plan: Plan, cluster_size: int) -> Environment:
    """What this sweep runs with (its results folder's environment.json)."""
    cpu_model = next((line.split(":", 1)[1].strip() for line in _read_lines("/proc/cpuinfo")
                      if line.startswith("model name")), platform.processor())
    backend = plan.backend
    return Environment(
        orch=__version__, python=platform.python_version(), torch=dist_version("torch"),
        torchvision=dist_version("torchvision"), ray=dist_version("ray"),
        oneccl_bindings_for_pytorch=dist_version(CCL_BINDINGS_DIST), oneccl=dist_version(*ONECCL_DISTS),
        intel_extension_for_pytorch=dist_version("intel_extension_for_pytorch"),
        hostname=socket.gethostname(), cpu_model=cpu_model, ray_nodes=cluster_size,
        backend=BackendRecord(requested=backend.requested, chosen=backend.chosen, note=backend.note),
        precision=PrecisionRecord.of(plan.precision) if plan.precision else None,
        cpus=tuple(node.isa.to_dict() if node.isa else None for node in plan.topology.nodes[:MAX_ENV_NODES]),
        started_at=rec.utc_timestamp(time.time()))


def _read_lines(path: str) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except OSError:
        return []


def rank_specs(p: PlannedTrial) -> list[RankSpec]:
    if p.placement is None:
        raise ValueError(f"{p.trial.key} is infeasible: it has no placement to run on")
    budgets = p.memory_budget_mib
    return [RankSpec(r.rank, r.local_rank, r.node, r.cpus, r.ccl_cpus, r.numa_nodes, budgets[r.rank])
            for r in p.placement.ranks]


class SweepRunner:
    def __init__(self, sweep: Sweep, plan: Plan, cluster, options: RunnerOptions):
        # The ranks, the GEMM peaks and spec.json get the precision the plan chose, never `auto`; the facts, the
        # probe the plan was made with.
        sweep = sweep.with_choice(plan.precision).with_probe(plan.facts.probe if plan.facts is not None else None)
        self.sweep, self.plan, self.cluster, self.options = sweep, plan, cluster, options
        self.spec = sweep.spec
        self.summary = RunnerSummary()
        self.pool: NodePool | None = None   # held while trials run (execute)
        self.context = SweepContext(sweep, plan, len(cluster.nodes), convergence=options.convergence)
        # The sweep's time estimate (core.execution.eta), refined here as each trial's record comes in: what the
        # progress shows as time left, and what an adaptive runner costs its candidates by.
        self.eta: Eta | None = None

    # --- bookkeeping ----------------------------------------------------------------------------------
    def prepare(self) -> rec.Records:
        """Open the results folder: spec.json (its `derived` with each planning figure's source), the topology,
        the environment, and the probe the sweep planned with (probe.json), if any; the records already there."""
        facts = self.sweep.facts
        derived = {"samples_per_epoch": facts.samples.value,
                   "ranks": list(self.plan.ranks), "threads": list(self.plan.threads),
                   "local_batches": list(self.plan.local_batches), "workload": self.sweep.workload.name,
                   "metric": self.spec.convergence.metric if self.spec.convergence else None,
                   "train_flops_per_sample": facts.flops.value, "sources": facts.sources(),
                   "memory_mib": self._memory_points(), "library_mib": facts.memory.library_mib or None}
        try:
            records = prepare_folder(self.options.results, self.sweep.frozen_spec(), derived,
                                     self.plan.topology.to_dict(), environment_info(self.plan, len(self.cluster.nodes)))
        except SpecChanged as err:
            raise InvalidInput(f"results folder {self.options.results}", [Problem("", str(err))]) from None
        if facts.probe is not None:
            write_json(self.options.results / PROBE_FILE, facts.probe.to_json())
        return records

    def _memory_points(self) -> dict[str, float] | None:
        """One rank's planned memory at the grid's local batches, at 1 and at twice the largest (spec.json's
        `derived.memory_mib`): what a reader of the folder predicts memory from, without the workload's code."""
        batches = sorted({1, *self.plan.local_batches, 2 * max(self.plan.local_batches)})
        cons = self.spec.constraints.rank_memory_mib
        points = {str(b): cons if cons is not None else self.sweep.facts.memory.mib(b) for b in batches}
        known = {b: float(v) for b, v in points.items() if v is not None}
        return known or None

    def _record(self, record: rec.Record, events: SweepEvents, run: TrialRun | None = None) -> None:
        """Append the record; `run` is the trial that produced it (None for an infeasible point, which
        never ran and does not count towards progress)."""
        append_record(self.options.results, record)
        for hook in self.options.on_record:
            hook(record)
        if run is not None and self.eta is not None and isinstance(record.wall_s, (int, float)):
            self.eta.finished(record.key, record.wall_s, record)   # the measured terms refine it
        if record.status not in (rec.Status.OK, rec.Status.INFEASIBLE):
            self.summary.failed.append(f"{record.key}: {record.status} — {record.reason}")
            if run is not None:
                folder = self._save_logs(record.key, run)
                events.note(f"{record.key}: {record.status}; its ranks' logs are in {folder}/{record.key}-rank*.log")
        events.finished(record.key, record, counts=run is not None)

    def _save_logs(self, key: str, run: TrialRun) -> Path:
        """A failed trial's rank logs in RESULTS/logs, each written atomically and never through a link (a
        resumed folder may hold links someone else put there; `orch sweep` refuses a logs/ that is one)."""
        folder = self.options.results / LOGS_DIR
        try:
            folder.mkdir(exist_ok=True)
            if folder.is_symlink():
                raise OSError(errno.ELOOP, "a link, not a folder of the results folder's own")
            for i, outcome in enumerate(run.outcomes):
                if outcome is not None and outcome.log is not None:  # an empty log is news too: the rank said nothing
                    write_atomic(folder / f"{key}-rank{i}.log", outcome.log, durable=False)
        except OSError as err:
            raise ResultsNotWritten(f"{folder}: the logs of {key} cannot be written ({err.strerror})") from None
        return folder

    def _run(self, key: str, p: PlannedTrial, job: RankJob, timeout_s: float, events: SweepEvents,
             stop: threading.Event) -> tuple[TrialRun, float]:
        started = time.time()
        workdir = f"{WORK_ROOT}/{self.spec.name}/{key}-{int(started * 1000)}"
        run = run_ranks(self.cluster, rank_specs(p), job, workdir=workdir,
                        step_timeout_s=self.spec.measure.step_timeout_s,
                        startup_timeout_s=self.spec.measure.startup_timeout_s, timeout_s=timeout_s,
                        ccl_workers=self.context.workers, on_status=lambda status: events.phase(key, status),
                        stop=stop, pool=self.pool)
        return run, started

    def _sweep_cpus(self) -> dict[int, float]:
        """What the sweep reserves on each Ray node: every CPU the topology gives that node (SMT siblings too,
        as a rank holds whole cores), or as many as Ray offers there if fewer."""
        cpus = {}
        for index, node in enumerate(self.plan.topology.nodes):
            offered = self.cluster.nodes[index].ray_cpus
            count = float(node.usable_cores(hyperthreads=True))
            cpus[index] = min(offered, count) if offered > 0 else count
        return cpus

    def _trial(self, item: WorkItem, p: PlannedTrial, events: SweepEvents,
               stop: threading.Event) -> tuple[TrialRun, rec.Record | None]:
        """Run one trial on `p` (its admitted placement) and build its record; None when interrupted.
        Runs in a worker thread: it touches no shared state but the events (thread-safe)."""
        job = item.job(self.context, p)
        run, started = self._run(item.key, p, job, item.timeout_s(self.context), events, stop)
        if run.interrupted:
            return run, None
        return run, self._with_precision(item.record(self.context, p, run, started))

    def _with_precision(self, record: rec.Record) -> rec.Record:
        """The record says which precision ran and why: in `applied` (workload trials) or `peak`."""
        choice = self.plan.precision
        if choice is None:
            return record
        applied = {**record.applied, "precision_reason": choice.reason} if record.applied is not None else None
        peak = record.peak.with_fields(precision_reason=choice.reason) if record.peak is not None else None
        return replace(record, applied=applied, peak=peak)

    def chosen_why(self, key: str) -> str | None:
        """Why the trial `key` was chosen: a full sweep runs every trial (an adaptive one says)."""
        return None

    # --- the sweep ------------------------------------------------------------------------------------
    def work(self, existing: rec.Records) -> list[WorkItem]:
        """Everything still to run, in order: peaks, calibration, grid, convergence (each kind's ORDER)."""
        done = {r.key for r in existing.ok()} if not self.options.rerun else set()
        items = [item for kind in item_types() for item in kind.plan_items(self.context)]
        self.summary.skipped = sum(1 for item in items if item.key in done)
        return [item for item in items if item.key not in done]

    def _record_infeasible(self, existing: rec.Records, events: SweepEvents) -> None:
        recorded = existing.by_key()
        for p in self.plan.trials:
            if p.feasible:
                continue
            record = infeasible_record(p, self.context.backend)
            earlier = recorded.get(p.trial.key)
            if earlier is None or earlier.reason != record.reason:
                self._record(record, events)

    def execute(self, existing: rec.Records, events: SweepEvents, todo: list[WorkItem]) -> None:
        """Run `todo`, admitting each trial as soon as the rules give it room, in order (a waiting trial's
        planned region is kept from later ones, so that small trials cannot starve it). Ctrl-C stops every
        running trial and re-raises once they have released their cores."""
        self._record_infeasible(existing, events)
        if not todo:
            return
        stop = threading.Event()
        self.pool = NodePool(self.cluster)
        try:
            problem = self.pool.reserve(self._sweep_cpus(), stop)
            if problem is not None:
                raise InvalidInput("the cluster", [Problem("", problem)])
            self._execute(todo, events, stop)
        finally:
            self.pool.close()
            self.pool = None

    def _execute(self, todo: list[WorkItem], events: SweepEvents, stop: threading.Event) -> None:
        pending = list(todo)
        running: dict[Future, tuple[WorkItem, Region]] = {}
        limit = self.options.max_concurrent or max(1, self.plan.topology.usable_cores(True))
        pool = ThreadPoolExecutor(max_workers=min(limit, len(todo) or 1), thread_name_prefix="trial")
        try:
            ended = True   # room for a waiting trial appears only when one ends (or at the start)
            while pending or running:
                if ended or not running:
                    self._start_admitted(pending, running, limit, pool, events, stop)
                done, _ = wait(list(running), timeout=ADMIT_POLL_S, return_when=FIRST_COMPLETED)
                ended = bool(done)
                for future in done:
                    item, _region = running.pop(future)
                    self._finish(item.key, future, events)
        except BaseException:
            stop.set()   # Ctrl-C (or a bug): stop every running trial; each releases its cores and ranks
            for future in list(running):
                item, _region = running.pop(future)
                try:
                    self._finish(item.key, future, events)
                except Exception:  # the first error is the one raised
                    pass
            raise
        finally:
            pool.shutdown(wait=True)

    def _start_admitted(self, pending: list[WorkItem], running: dict[Future, tuple[WorkItem, Region]],
                        limit: int, pool: ThreadPoolExecutor, events: SweepEvents, stop: threading.Event) -> None:
        """Start every waiting trial that fits now, in order, up to `limit` in flight."""
        taken: set[tuple[int, int]] = {cell for _item, region in running.values() for cell in region}
        for item in list(pending):
            if len(running) >= limit:
                return
            admission = item.admit(self.context, frozenset(taken))
            if admission is None:
                if item.holds_while_waiting:  # keep its planned region from later trials: it goes first there
                    idle = item.admit(self.context, frozenset())
                    taken |= idle.region if idle is not None else set()
                continue
            pending.remove(item)
            taken |= admission.region
            p = item.admitted(admission)
            events.started(item.key, item.label(self.context, p), self.chosen_why(item.key))
            future = pool.submit(self._trial, item, p, events, stop)
            running[future] = (item, admission.region)

    def _finish(self, key: str, future: Future, events: SweepEvents) -> None:
        """Record an ended trial (the main thread is the only writer of the results file)."""
        run, record = future.result()
        if record is None:   # interrupted: no record, it runs again on resume
            events.finished(key, None, counts=False)
            return
        self._record(record, events, run)
        self.summary.ran += 1

