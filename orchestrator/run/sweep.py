"""`orch sweep`: execute a plan on Ray, trial by trial, recording each as it ends.

Order: the GEMM peaks (one per distinct layout, ranks × threads per rank, all its ranks at once), the
all-reduce calibration (one per link class × multi-rank count), the throughput grid, then the convergence
runs. Finished trials already in the results folder are skipped, so a rerun resumes. A failed trial is a
record, never the end of the sweep; Ctrl-C stops the running trial, releases its cores and keeps everything
recorded so far.
"""

from __future__ import annotations

import os
import platform
import socket
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from orchestrator import __version__
from orchestrator.core import records as rec
from orchestrator.core.calibration import GRADIENT_DTYPE, MESSAGE_BYTES, calibration_trials
from orchestrator.core.plan import Plan, PlannedTrial
from orchestrator.core.schema import InvalidInput, Problem, to_plain
from orchestrator.io.store import SpecChanged, append_record, prepare_folder
from orchestrator.io.sweepfile import Sweep
from orchestrator.run.job import JobKind, RankJob
from orchestrator.run.progress import SweepProgress
from orchestrator.run.recording import (
    allreduce_record,
    convergence_record,
    infeasible_record,
    peak_record,
    throughput_record,
)
from orchestrator.run.trial import RankSpec, TrialRun, run_ranks

WORK_ROOT = Path("/tmp") / f"orch-{os.getuid()}"


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepOptions:
    results: Path            # the sweep's own folder
    rerun: bool = False
    convergence: bool = True
    json_mode: bool = False


@dataclass(slots=True)
class SweepSummary:
    ran: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)


def environment_info(plan: Plan, cluster_size: int) -> dict[str, Any]:
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    cpu_model = next((line.split(":", 1)[1].strip() for line in _read_lines("/proc/cpuinfo")
                      if line.startswith("model name")), platform.processor())
    return {"orch": __version__, "python": platform.python_version(), "torch": version("torch"),
            "torchvision": version("torchvision"), "ray": version("ray"),
            "oneccl_bindings_for_pytorch": version("oneccl_bindings_for_pytorch"),
            "intel_extension_for_pytorch": version("intel_extension_for_pytorch"),
            "hostname": socket.gethostname(), "cpu_model": cpu_model, "ray_nodes": cluster_size,
            "backend": {"requested": plan.backend.requested, "chosen": plan.backend.chosen, "note": plan.backend.note},
            "started_at": rec.utc_timestamp(time.time())}


def _read_lines(path: str) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except OSError:
        return []


def _rank_specs(p: PlannedTrial) -> list[RankSpec]:
    if p.placement is None:
        raise ValueError(f"{p.trial.key} is infeasible: it has no placement to run on")
    budgets = p.memory_budget_mib
    return [RankSpec(r.rank, r.local_rank, r.node, r.cpus, r.ccl_cpus, r.numa_nodes, budgets[r.rank])
            for r in p.placement.ranks]


def _precision(params: Any) -> str:
    return getattr(params, "precision", "fp32")


class SweepRunner:
    def __init__(self, sweep: Sweep, plan: Plan, cluster, options: SweepOptions):
        self.sweep, self.plan, self.cluster, self.options = sweep, plan, cluster, options
        self.spec = sweep.spec
        self.backend = plan.backend.chosen
        self.workers = plan.ccl_workers
        self.summary = SweepSummary()

    # --- bookkeeping ----------------------------------------------------------------------------------
    def prepare(self) -> list[dict[str, Any]]:
        derived = {"samples_per_epoch": self.sweep.workload.samples_per_epoch(self.sweep.params),
                   "ranks": list(self.plan.ranks), "threads": list(self.plan.threads),
                   "local_batches": list(self.plan.local_batches), "workload": self.spec.workload.name,
                   "metric": self.spec.convergence.metric if self.spec.convergence else None}
        try:
            return prepare_folder(self.options.results, self.sweep.frozen_spec(), derived, self.plan.topology.to_dict(),
                                  environment_info(self.plan, len(self.cluster.nodes)))
        except SpecChanged as err:
            raise InvalidInput(f"results folder {self.options.results}", [Problem("", str(err))]) from None

    def _record(self, record: dict[str, Any], progress: SweepProgress, run: TrialRun | None = None) -> None:
        """Append the record; `run` is the trial that produced it (None for an infeasible point, which
        never ran and does not count towards progress)."""
        append_record(self.options.results, record)
        if record["status"] not in (rec.OK, rec.INFEASIBLE):
            self.summary.failed.append(f"{record['key']}: {record['status']} — {record.get('reason')}")
            if run is not None:
                self._save_logs(record["key"], run)
        progress.finished(record, counts=run is not None)

    def _save_logs(self, key: str, run: TrialRun) -> None:
        folder = self.options.results / "logs"
        folder.mkdir(exist_ok=True)
        for i, outcome in enumerate(run.outcomes):
            if outcome is not None and outcome.log is not None:  # an empty log is news too: the rank said nothing
                (folder / f"{key}-rank{i}.log").write_text(outcome.log)

    def _run(self, key: str, p: PlannedTrial, job: RankJob, timeout_s: float, step_timeout_s: float,
             progress: SweepProgress) -> tuple[TrialRun, float]:
        started = time.time()
        workdir = f"{WORK_ROOT}/{self.spec.name}/{key}-{int(started * 1000)}"
        run = run_ranks(self.cluster, _rank_specs(p), job, workdir=workdir, step_timeout_s=step_timeout_s,
                        timeout_s=timeout_s, ccl_workers=self.workers, on_status=progress.phase)
        return run, started

    def _job(self, kind: rec.Kind, p: PlannedTrial, **extra: Any) -> RankJob:
        m = self.spec.measure
        return RankJob(kind=JobKind(kind), workload=self.spec.workload.name, params=to_plain(self.sweep.params),
                       backend=self.backend, local_batch=p.trial.local_batch, threads=p.trial.threads_per_rank,
                       warmup_steps=m.warmup_steps, timed_steps=m.timed_steps, repeats=m.repeats, data=m.data,
                       # torch.distributed's own timeout (rendezvous and collectives) is kept well above the
                       # watchdog's, so that a hang is judged by one clock, ours, and reported as timeout.
                       init_timeout_s=2 * m.step_timeout_s + 30, **extra)

    def _allreduce(self, key: str, item: PlannedTrial, progress: SweepProgress) -> tuple[TrialRun, dict[str, Any]]:
        """One all-reduce calibration trial: every message size over this placement's ranks."""
        m = self.spec.measure
        link = key.split("-")[1]
        progress.start_trial(f"{key} (all_reduce over {item.trial.ranks} ranks, {link}, "
                             f"{MESSAGE_BYTES[0] // 1024} KiB to {MESSAGE_BYTES[-1] // 2**20} MiB)")
        job = self._job(rec.ALLREDUCE, item, peak_precision=GRADIENT_DTYPE, message_bytes=list(MESSAGE_BYTES))
        run, started = self._run(key, item, job, m.timeout_s, m.step_timeout_s, progress)
        return run, allreduce_record(key, link, item, run, topology=self.plan.topology, backend=self.backend,
                                     started_at=started)

    # --- the sweep ------------------------------------------------------------------------------------
    def work(self, existing: list[dict[str, Any]]) -> list[tuple[str, tuple[rec.Kind, Any]]]:
        """(key, planned item) for everything still to run, in order: peaks, grid, convergence."""
        done = {r["key"] for r in existing if r["status"] == rec.OK and not self.options.rerun}
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
            items += [(f"conv-{run.key}", (rec.CONVERGENCE, run)) for run in self.plan.convergence]
        self.summary.skipped = sum(1 for key, _ in items if key in done)
        return [(key, item) for key, item in items if key not in done]

    def execute(self, existing: list[dict[str, Any]], progress: SweepProgress,
                todo: list[tuple[str, tuple[rec.Kind, Any]]]) -> None:
        recorded = {r["key"]: r for r in existing}
        for p in self.plan.trials:
            if p.feasible:
                continue
            record = infeasible_record(p, self.backend)
            if recorded.get(p.trial.key, {}).get("reason") != record["reason"]:
                self._record(record, progress)
        m = self.spec.measure
        for key, (kind, item) in todo:
            if kind == rec.PEAK:
                progress.start_trial(f"{key} (GEMM peak on {item.trial.ranks} rank(s) × "
                                     f"{item.trial.threads_per_rank} pinned core(s), all at once)")
                job = self._job(rec.PEAK, item, peak_precision=_precision(self.sweep.params))
                run, started = self._run(key, item, job, m.timeout_s, m.step_timeout_s, progress)
                record = peak_record(key, item, run, topology=self.plan.topology, started_at=started)
            elif kind == rec.ALLREDUCE:
                run, record = self._allreduce(key, item, progress)
            elif kind == rec.THROUGHPUT:
                t = item.trial
                progress.start_trial(f"{key} ({t.ranks} rank(s) × {t.threads_per_rank} thread(s), local batch "
                                     f"{t.local_batch})")
                run, started = self._run(key, item, self._job(rec.THROUGHPUT, item), m.timeout_s, m.step_timeout_s,
                                         progress)
                record = throughput_record(item, run, topology=self.plan.topology, backend=self.backend, measure=m,
                                           started_at=started)
            else:
                conv = self.spec.convergence
                if conv is None:
                    raise ValueError("a convergence run was planned but the spec has no convergence section")
                layout = item.layout
                progress.start_trial(f"{key} (global batch {item.global_batch}, seed {item.seed}, on "
                                     f"{layout.trial.ranks}×{layout.trial.threads_per_rank})")
                job = self._job(rec.CONVERGENCE, layout, seed=item.seed,
                                convergence={**to_plain(conv), "global_batch": item.global_batch})
                run, started = self._run(key, layout, job, conv.timeout_s, m.step_timeout_s, progress)
                record = convergence_record(key, layout, item.seed, run, topology=self.plan.topology,
                                            backend=self.backend, spec_convergence=conv, started_at=started)
            self._record(record, progress, run)
            self.summary.ran += 1

