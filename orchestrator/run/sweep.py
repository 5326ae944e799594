"""`orch sweep`: execute a plan on Ray, running trials concurrently where they cannot disturb each other,
recording each as it ends.

Order of admission: the GEMM peaks (one per distinct layout, ranks × threads per rank, all its ranks at
once), the all-reduce calibration (one per link class × multi-rank count), the throughput grid, then the
convergence runs. Which trials may overlap, and where they go, is `orchestrator.core.schedule`'s rule: a
timing trial keeps its nodes (or sockets) to itself, a convergence run packs onto free cores. Each running
trial is supervised by its own driver thread; records are written by the main thread only, as trials end.
Finished trials already in the results folder are skipped, so a rerun resumes. A failed trial is a record,
never the end of the sweep; Ctrl-C stops every running trial, releases its cores and keeps everything
recorded so far (an interrupted trial leaves no record and runs again on resume).
"""

from __future__ import annotations

import os
import platform
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestrator import __version__
from orchestrator.core import records as rec
from orchestrator.core.calibration import GRADIENT_DTYPE, MESSAGE_BYTES, calibration_trials
from orchestrator.core.plan import Plan, PlannedTrial
from orchestrator.core.schedule import Admission, Region, admit_convergence, admit_timing
from orchestrator.core.schema import InvalidInput, Problem, to_plain
from orchestrator.io.backends import CCL_BINDINGS_DIST
from orchestrator.io.store import SpecChanged, append_record, prepare_folder
from orchestrator.io.sweepfile import Sweep
from orchestrator.run.comm import ONECCL_DISTS, dist_version
from orchestrator.run.job import JobKind, RankJob, init_timeout_s
from orchestrator.run.progress import SweepProgress
from orchestrator.run.recording import (
    allreduce_record,
    convergence_record,
    infeasible_record,
    peak_record,
    throughput_record,
)
from orchestrator.run.trial import NodePool, RankSpec, TrialRun, run_ranks

WORK_ROOT = Path("/tmp") / f"orch-{os.getuid()}"
ADMIT_POLL_S = 0.25    # how often the driver looks for ended trials (and, when one ended, room for others)
Item = tuple[rec.Kind, Any]   # (kind, PlannedTrial or ConvergenceRun)
MAX_ENV_NODES = 64            # environment.json lists each node's CPU verdict up to this many (topology.json has all)


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepOptions:
    results: Path            # the sweep's own folder
    rerun: bool = False
    convergence: bool = True
    json_mode: bool = False
    max_concurrent: int | None = None   # trials in flight at once; None: as many as the rules allow


@dataclass(slots=True)
class SweepSummary:
    ran: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)


def environment_info(plan: Plan, cluster_size: int) -> dict[str, Any]:
    cpu_model = next((line.split(":", 1)[1].strip() for line in _read_lines("/proc/cpuinfo")
                      if line.startswith("model name")), platform.processor())
    return {"orch": __version__, "python": platform.python_version(), "torch": dist_version("torch"),
            "torchvision": dist_version("torchvision"), "ray": dist_version("ray"),
            "oneccl_bindings_for_pytorch": dist_version(CCL_BINDINGS_DIST), "oneccl": dist_version(*ONECCL_DISTS),
            "intel_extension_for_pytorch": dist_version("intel_extension_for_pytorch"),
            "hostname": socket.gethostname(), "cpu_model": cpu_model, "ray_nodes": cluster_size,
            "backend": {"requested": plan.backend.requested, "chosen": plan.backend.chosen, "note": plan.backend.note},
            "precision": plan.precision.to_dict() if plan.precision else None,
            "cpus": [node.isa.to_dict() if node.isa else None for node in plan.topology.nodes[:MAX_ENV_NODES]],
            "started_at": rec.utc_timestamp(time.time())}


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


def _precision(params: Any) -> str:
    return getattr(params, "precision", "fp32")


class SweepRunner:
    def __init__(self, sweep: Sweep, plan: Plan, cluster, options: SweepOptions):
        # The ranks, the GEMM peaks and spec.json get the precision the plan chose, never `auto`.
        sweep = sweep.with_choice(plan.precision)
        self.sweep, self.plan, self.cluster, self.options = sweep, plan, cluster, options
        self.spec = sweep.spec
        self.backend = plan.backend.chosen
        self.workers = plan.ccl_workers
        self.summary = SweepSummary()
        self.pool: NodePool | None = None   # held while trials run (execute)

    # --- bookkeeping ----------------------------------------------------------------------------------
    def prepare(self) -> rec.Records:
        derived = {"samples_per_epoch": self.sweep.workload.samples_per_epoch(self.sweep.params),
                   "ranks": list(self.plan.ranks), "threads": list(self.plan.threads),
                   "local_batches": list(self.plan.local_batches), "workload": self.spec.workload.name,
                   "metric": self.spec.convergence.metric if self.spec.convergence else None}
        try:
            return prepare_folder(self.options.results, self.sweep.frozen_spec(), derived, self.plan.topology.to_dict(),
                                  environment_info(self.plan, len(self.cluster.nodes)))
        except SpecChanged as err:
            raise InvalidInput(f"results folder {self.options.results}", [Problem("", str(err))]) from None

    def _record(self, record: rec.Record, progress: SweepProgress, run: TrialRun | None = None) -> None:
        """Append the record; `run` is the trial that produced it (None for an infeasible point, which
        never ran and does not count towards progress)."""
        append_record(self.options.results, record)
        if record.status not in (rec.OK, rec.INFEASIBLE):
            self.summary.failed.append(f"{record.key}: {record.status} — {record.reason}")
            if run is not None:
                self._save_logs(record.key, run)
        progress.finished(record, counts=run is not None)

    def _save_logs(self, key: str, run: TrialRun) -> None:
        folder = self.options.results / "logs"
        folder.mkdir(exist_ok=True)
        for i, outcome in enumerate(run.outcomes):
            if outcome is not None and outcome.log is not None:  # an empty log is news too: the rank said nothing
                (folder / f"{key}-rank{i}.log").write_text(outcome.log)

    def _run(self, key: str, p: PlannedTrial, job: RankJob, timeout_s: float, progress: SweepProgress,
             stop: threading.Event) -> tuple[TrialRun, float]:
        started = time.time()
        workdir = f"{WORK_ROOT}/{self.spec.name}/{key}-{int(started * 1000)}"
        run = run_ranks(self.cluster, rank_specs(p), job, workdir=workdir,
                        step_timeout_s=self.spec.measure.step_timeout_s, timeout_s=timeout_s,
                        ccl_workers=self.workers, on_status=lambda status: progress.phase(key, status), stop=stop,
                        pool=self.pool)
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

    def _job(self, kind: rec.Kind, p: PlannedTrial, **extra: Any) -> RankJob:
        m = self.spec.measure
        return RankJob(kind=JobKind(kind), workload=self.spec.workload.name, params=to_plain(self.sweep.params),
                       backend=self.backend, local_batch=p.trial.local_batch, threads=p.trial.threads_per_rank,
                       warmup_steps=m.warmup_steps, timed_steps=m.timed_steps, repeats=m.repeats, data=m.data,
                       init_timeout_s=init_timeout_s(m.step_timeout_s), **extra)

    def _label(self, key: str, kind: rec.Kind, item: Any, p: PlannedTrial) -> str:
        t = p.trial
        where = f" on node(s) {', '.join(str(n) for n, _ in p.placement.per_node)}" if (
            p.placement is not None and len(self.cluster.nodes) > 1) else ""
        if kind == rec.PEAK:
            return f"{key} (GEMM peak on {t.ranks} rank(s) × {t.threads_per_rank} pinned core(s), all at once{where})"
        if kind == rec.ALLREDUCE:
            return (f"{key} (all_reduce over {t.ranks} ranks, {key.split('-')[1]}, "
                    f"{MESSAGE_BYTES[0] // 1024} KiB to {MESSAGE_BYTES[-1] // 2**20} MiB{where})")
        if kind == rec.THROUGHPUT:
            return f"{key} ({t.ranks} rank(s) × {t.threads_per_rank} thread(s), local batch {t.local_batch}{where})"
        return f"{key} (global batch {item.global_batch}, seed {item.seed}, on {t.ranks}×{t.threads_per_rank}{where})"

    def _trial(self, key: str, kind: rec.Kind, item: Any, p: PlannedTrial, progress: SweepProgress,
               stop: threading.Event) -> tuple[TrialRun, rec.Record | None]:
        """Run one trial on `p` (its admitted placement) and build its record; None when interrupted.
        Runs in a worker thread: it touches no shared state but the progress display."""
        timeout_s = self.spec.measure.timeout_s
        if kind == rec.PEAK:
            job = self._job(rec.PEAK, p, peak_precision=_precision(self.sweep.params))
        elif kind == rec.ALLREDUCE:
            job = self._job(rec.ALLREDUCE, p, peak_precision=GRADIENT_DTYPE, message_bytes=list(MESSAGE_BYTES))
        elif kind == rec.THROUGHPUT:
            job = self._job(rec.THROUGHPUT, p)
        else:
            conv = self.spec.convergence
            if conv is None:
                raise ValueError("a convergence run was planned but the spec has no convergence section")
            job = self._job(rec.CONVERGENCE, p, seed=item.seed,
                            convergence={**to_plain(conv), "global_batch": item.global_batch})
            timeout_s = conv.timeout_s
        run, started = self._run(key, p, job, timeout_s, progress, stop)
        if run.interrupted:
            return run, None
        return run, self._with_precision(self._build_record(key, kind, item, p, run, started))

    def _with_precision(self, record: rec.Record) -> rec.Record:
        """The record says which precision ran and why: in `applied` (workload trials) or `peak`."""
        choice = self.plan.precision
        if choice is None:
            return record
        applied = {**record.applied, "precision_reason": choice.reason} if record.applied is not None else None
        peak = record.peak.with_fields(precision_reason=choice.reason) if record.peak is not None else None
        return replace(record, applied=applied, peak=peak)

    def _build_record(self, key: str, kind: rec.Kind, item: Any, p: PlannedTrial, run: TrialRun,
                      started: float) -> rec.Record:
        m, topology, backend = self.spec.measure, self.plan.topology, self.backend
        if kind == rec.PEAK:
            return peak_record(key, p, run, topology=topology, started_at=started)
        if kind == rec.ALLREDUCE:
            return allreduce_record(key, key.split("-")[1], p, run, topology=topology, backend=backend,
                                    started_at=started)
        if kind == rec.THROUGHPUT:
            return throughput_record(p, run, topology=topology, backend=backend, measure=m, started_at=started)
        assert self.spec.convergence is not None  # checked in _trial, before the run
        return convergence_record(key, p, item.seed, run, topology=topology, backend=backend,
                                  spec_convergence=self.spec.convergence, started_at=started)

    # --- the sweep ------------------------------------------------------------------------------------
    def work(self, existing: rec.Records) -> list[tuple[str, tuple[rec.Kind, Any]]]:
        """(key, planned item) for everything still to run, in order: peaks, grid, convergence."""
        done = {r.key for r in existing.ok()} if not self.options.rerun else set()
        items: list[tuple[str, tuple[rec.Kind, Any]]] = []
        feasible = self.plan.feasible
        precision = _precision(self.sweep.params)
        # A layout's peak does not depend on the local batch: measure it once, on its first planned placement.
        layouts: dict[tuple[int, int], PlannedTrial] = {}
        for p in feasible if self.spec.measure.peak else ():
            layouts.setdefault((p.trial.ranks, p.trial.threads_per_rank), p)
        items += [(rec.peak_key(ranks, threads, precision), (rec.PEAK, p))
                  for (ranks, threads), p in sorted(layouts.items())]
        if self.spec.measure.allreduce:
            cons = self.spec.constraints
            counts = tuple(sorted({p.trial.ranks for p in feasible}))
            items += [(key, (rec.ALLREDUCE, p)) for key, p in calibration_trials(
                self.plan.topology, counts, hyperthreads=cons.hyperthreads, memory_headroom=cons.memory_headroom)]
        items += [(p.trial.key, (rec.THROUGHPUT, p)) for p in feasible]
        if self.options.convergence:
            items += [(rec.convergence_key(run.global_batch, run.seed), (rec.CONVERGENCE, run))
                      for run in self.plan.convergence]
        self.summary.skipped = sum(1 for key, _ in items if key in done)
        return [(key, item) for key, item in items if key not in done]

    def _admit(self, kind: rec.Kind, item: Any, taken: Region) -> Admission | None:
        """Where this trial can run now, given the regions held by running (and earlier waiting) trials."""
        p = _planned(kind, item)
        assert p.placement is not None  # planned trials are feasible ones
        if kind == rec.CONVERGENCE:
            cons = self.spec.constraints
            return admit_convergence(self.plan.topology, p.placement, p.memory_budget_mib, p.trial.ranks,
                                     p.trial.threads_per_rank, taken, hyperthreads=cons.hyperthreads,
                                     ccl_workers=self.workers, rank_memory_mib=p.rank_memory_mib,
                                     memory_headroom=cons.memory_headroom)
        return admit_timing(self.plan.topology, p.placement, p.memory_budget_mib, self.spec.measure.isolation, taken)

    def _record_infeasible(self, existing: rec.Records, progress: SweepProgress) -> None:
        recorded = existing.by_key()
        for p in self.plan.trials:
            if p.feasible:
                continue
            record = infeasible_record(p, self.backend)
            earlier = recorded.get(p.trial.key)
            if earlier is None or earlier.reason != record.reason:
                self._record(record, progress)

    def execute(self, existing: rec.Records, progress: SweepProgress,
                todo: list[tuple[str, Item]]) -> None:
        """Run `todo`, admitting each trial as soon as the rules give it room, in order (a waiting trial's
        planned region is kept from later ones, so that small trials cannot starve it). Ctrl-C stops every
        running trial and re-raises once they have released their cores."""
        self._record_infeasible(existing, progress)
        if not todo:
            return
        stop = threading.Event()
        self.pool = NodePool(self.cluster)
        try:
            problem = self.pool.reserve(self._sweep_cpus(), stop)
            if problem is not None:
                raise InvalidInput("the cluster", [Problem("", problem)])
            self._execute(todo, progress, stop)
        finally:
            self.pool.close()
            self.pool = None

    def _execute(self, todo: list[tuple[str, Item]], progress: SweepProgress, stop: threading.Event) -> None:
        pending = list(todo)
        running: dict[Future, tuple[str, Item, Region]] = {}
        limit = self.options.max_concurrent or max(1, self.plan.topology.usable_cores(True))
        pool = ThreadPoolExecutor(max_workers=min(limit, len(todo) or 1), thread_name_prefix="trial")
        try:
            ended = True   # room for a waiting trial appears only when one ends (or at the start)
            while pending or running:
                if ended or not running:
                    self._start_admitted(pending, running, limit, pool, progress, stop)
                done, _ = wait(list(running), timeout=ADMIT_POLL_S, return_when=FIRST_COMPLETED)
                ended = bool(done)
                for future in done:
                    key, _item, _region = running.pop(future)
                    self._finish(key, future, progress)
        except BaseException:
            stop.set()   # Ctrl-C (or a bug): stop every running trial; each releases its cores and ranks
            for future in list(running):
                key, _item, _region = running.pop(future)
                try:
                    self._finish(key, future, progress)
                except Exception:  # the first error is the one raised
                    pass
            raise
        finally:
            pool.shutdown(wait=True)

    def _start_admitted(self, pending: list[tuple[str, Item]], running: dict[Future, tuple[str, Item, Region]],
                        limit: int, pool: ThreadPoolExecutor, progress: SweepProgress, stop: threading.Event) -> None:
        """Start every waiting trial that fits now, in order, up to `limit` in flight."""
        taken: set[tuple[int, int]] = {cell for _k, _i, region in running.values() for cell in region}
        for entry in list(pending):
            if len(running) >= limit:
                return
            key, (kind, item) = entry
            admission = self._admit(kind, item, frozenset(taken))
            if admission is None:
                if kind != rec.CONVERGENCE:  # keep its planned region from later trials: it goes first there
                    idle = self._admit(kind, item, frozenset())
                    taken |= idle.region if idle is not None else set()
                continue
            pending.remove(entry)
            taken |= admission.region
            p = _admitted(kind, item, admission)
            progress.start_trial(key, self._label(key, kind, item, p))
            future = pool.submit(self._trial, key, kind, item, p, progress, stop)
            running[future] = (key, (kind, item), admission.region)

    def _finish(self, key: str, future: Future, progress: SweepProgress) -> None:
        """Record an ended trial (the main thread is the only writer of the results file)."""
        run, record = future.result()
        if record is None:
            progress.forget(key)
            return
        self._record(record, progress, run)
        self.summary.ran += 1


def _planned(kind: rec.Kind, item: Any) -> PlannedTrial:
    """The planned layout an item runs on: a convergence run's layout, or the planned trial itself."""
    planned: PlannedTrial = item.layout if kind == rec.CONVERGENCE else item
    return planned


def _admitted(kind: rec.Kind, item: Any, admission: Admission) -> PlannedTrial:
    """The planned trial as it will really run: on the admitted placement, with the admitted budgets."""
    return replace(_planned(kind, item), placement=admission.placement, memory_budget_mib=admission.memory_budget_mib)
