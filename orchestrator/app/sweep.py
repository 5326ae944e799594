"""`orch sweep` / `orch.sweep`: every feasible grid point of a sweep file run as a pinned torch.distributed job
on Ray, recorded as each trial ends into its results folder (resuming what the folder holds), then the report
and the trackers' end. Everything that can be bad input is checked, and the folder locked, before Ray starts.

What it says as it goes (what runs where, the probe, the time it expects) are `Notice`s; each trial's start, phase
and end are the driver's events (run.driver.events), shown by whatever the door hands in (the CLI: its live
display or `--json`'s lines) or, by default, said as notices too (a finished trial, a note: never a console). How it
ends is the `Swept` it returns (the folder read back and what this call ran) or an `OrchError`: `InputError` before
anything ran, `ResultsNotWritten` (a full disk: what was recorded is kept), `ReportNotWritten`. Ctrl-C stops
the running trials, says what was kept and re-raises KeyboardInterrupt."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.app.notices import Notice, Notify
from orchestrator.app.options import SweepOptions
from orchestrator.core.planning.probe import PROBE_BATCHES
from orchestrator.errors import InputError, RunFailed
from orchestrator.io.store import Results as StoredResults
from orchestrator.io.sweepfile import Sweep, load_sweep

if TYPE_CHECKING:   # the run layer imports Ray: only a sweep that runs pays for it
    from orchestrator.app.session import RaySession
    from orchestrator.core.adaptive.answer import AdaptiveOptions
    from orchestrator.core.adaptive.outcome import AdaptiveOutcome
    from orchestrator.core.execution.eta import Eta
    from orchestrator.core.machine.topology import Topology
    from orchestrator.core.measured.records import Record
    from orchestrator.io.tracking import Tracking
    from orchestrator.report.data import ReportData
    from orchestrator.run.driver.events import SweepEvents
    from orchestrator.run.job import RankProgress

    # What shows a sweep's trials as they run: made with the number of trials to run and the time estimate, and
    # entered around them (a live display opens and closes its screen).
    ProgressFactory = Callable[[int, Eta | None], AbstractContextManager[SweepEvents]]
    from orchestrator.run.driver.kinds.base import WorkItem
    from orchestrator.run.driver.probe import ProbeSetup
    from orchestrator.run.driver.sweep import RunnerSummary, SweepRunner

log = logging.getLogger(__name__)


class ReportNotWritten(RunFailed):
    """The sweep ran and its records are complete, but its report could not be written (a full disk): the
    command exits with status 1; `orch report` writes it once there is room."""


@dataclass(frozen=True, slots=True)
class SweepSummary:
    """What one `orch.sweep` call ran (the folder may hold more: records of earlier runs)."""

    ran: int
    skipped: int                 # already recorded as ok, so not run again (a resume)
    failed: tuple[str, ...]      # 'key: status — reason' of each trial of this run that did not end ok
    report_files: tuple[Path, ...] = ()   # the report's files, when the call wrote the report
    adaptive: AdaptiveOutcome | None = None   # an adaptive sweep's answer, its stop, what it measured and skipped


@dataclass(frozen=True, slots=True)
class Swept:
    """A sweep that ended: its folder read back, what this call ran, and what its report shows (None with
    `report=False`): the report's files were written from it, and the CLI prints its tables without a second fit."""

    results: StoredResults
    summary: SweepSummary
    report: ReportData | None = None


def results_folder(sweep_name: str) -> Path:
    """Where a sweep's results go without `results=`: $ORCH_RESULTS (default `results`) / the sweep's name."""
    from orchestrator.constants import DEFAULT_RESULTS_ROOT, RESULTS_ROOT_ENV_VAR

    return Path(os.environ.get(RESULTS_ROOT_ENV_VAR, DEFAULT_RESULTS_ROOT)) / sweep_name


def sweep(options: SweepOptions, notify: Notify, progress: ProgressFactory | None = None) -> Swept:
    """Run the sweep `options` describe (its docstring and docs/commands.md say what each option does). `notify`
    hears what the sweep says; `progress(total, eta)` makes the context that shows its trials' events (default:
    each finished trial and note as a notice too, through `notify`)."""
    return _SweepCall(options, notify, progress or (lambda total, _eta: NoticedProgress(notify, total))).run()


class NoticedProgress:
    """A sweep's events without a display (the Python API's): each finished trial and each note is a `Notice`
    through `notify` ('[3/10] r2-t1-b8: ok: 312.4 samples/s'; logged at INFO by default), the rest (starts,
    phases, infeasible points, interrupted trials) at DEBUG. Prints nothing itself."""

    def __init__(self, notify: Notify, total: int):
        self.notify, self.total, self.done = notify, total, 0

    def __enter__(self) -> NoticedProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def started(self, key: str, label: str, chosen: str | None) -> None:
        log.debug("%s: started%s", label, f" (chosen: {chosen})" if chosen else "")

    def phase(self, key: str, progress: RankProgress | None) -> None:
        return None   # polled every few seconds: too many for a log; the records say how each trial went

    def finished(self, key: str, record: Record | None, *, counts: bool) -> None:
        from orchestrator.run.driver.events import describe

        if record is None or not counts:
            log.debug("%s: %s", key, "interrupted" if record is None else f"{record.status}: {describe(record)}")
            return
        self.done += 1
        what = describe(record)
        self.notify(Notice(f"[{self.done}/{self.total}] {key}: {record.status}{': ' + what if what else ''}"))

    def note(self, message: str) -> None:
        self.notify(Notice(message))


class _SweepCall:
    """One sweep: checks that cost nothing first, then Ray, the driver, the report, the trackers."""

    def __init__(self, options: SweepOptions, notify: Notify, progress: ProgressFactory):
        from orchestrator.app.adaptive import adaptive_options

        self.options = options
        self.notify, self.progress = notify, progress
        self.sweep: Sweep = load_sweep(options.sweep)
        self.folder = Path(options.results) if options.results else results_folder(self.sweep.spec.name)
        # a target topology is read before Ray starts
        self.adaptive: AdaptiveOptions | None = adaptive_options(self.sweep, options)

    def run(self) -> Swept:
        """Everything that can be bad input is checked, and the folder locked, before Ray starts: a refused
        sweep costs nothing, and a second sweep on a folder in use never starts its own Ray on the same cores.
        A write into the results folder that fails (a full disk) raises io.store's ResultsNotWritten once the
        running trials are stopped; every record written before it is kept."""
        from orchestrator.io.lock import FolderLock
        from orchestrator.io.store import check_folder
        from orchestrator.io.tracking import choose, open_tracking

        o = self.options
        file_topology = None
        if o.topology:
            from orchestrator.io.topofile import load_topology

            file_topology = load_topology(o.topology)
        if o.min_nodes and not (o.address or os.environ.get("RAY_ADDRESS")):
            raise InputError("--min-nodes needs --address (or RAY_ADDRESS): an embedded Ray has one node")
        choice = choose(self.sweep.spec.tracking, mlflow=o.mlflow, tensorboard=o.tensorboard, others=o.trackers)
        tracking = open_tracking(choice, self.folder, self.sweep.spec.name, live=True)   # no package: before Ray
        lock = FolderLock(self.folder)
        try:
            problem = _unusable_results(self.folder) or _unsafe_work_folder()
            if problem is not None:
                raise InputError(problem)
            note = lock.acquire()
        except OSError as err:
            raise InputError(f"results folder {self.folder}: cannot be written ({err.strerror})") from None
        try:
            if note is not None:
                log.warning("%s", note)
            problem = check_folder(self.folder)   # a corrupt spec.json or trials.jsonl to resume, before Ray starts
            if problem is not None:
                raise InputError(problem)
            return self._locked(file_topology, tracking)
        finally:
            lock.release()

    def _locked(self, file_topology: Topology | None, tracking: Tracking) -> Swept:
        """The sweep on Ray, its report and its trackers' end, with the results folder locked."""
        from orchestrator.app.report import analyzed, load
        from orchestrator.app.session import ray_session
        from orchestrator.io.store import ResultsNotWritten
        from orchestrator.io.tracking import End
        from orchestrator.report.build import FORMATS, report_folder, write_report

        o = self.options
        try:
            with ray_session(o.address, file_topology, o.topology, min_nodes=o.min_nodes,
                             nodes_timeout_s=o.nodes_timeout_s, sigterm_as_ctrl_c=True) as session:
                summary = self._on_ray(session, tracking)
        except ResultsNotWritten as err:   # a full disk: the sweep stopped, what it recorded is kept
            raise ResultsNotWritten(f"{err}; the sweep stopped its trials, and every trial recorded before it is "
                                    "kept: make room (or make the folder writable) and rerun to resume") from err
        files: tuple[Path, ...] = ()
        unwritten = None
        final = load(str(self.folder))
        data = analyzed(final) if o.report else None
        if data is not None:
            try:
                files = tuple(write_report(final, data, report_folder(final, None), FORMATS))
            except OSError as err:
                unwritten = ReportNotWritten(f"the report could not be written into {self.folder} ({err.strerror}); "
                                             "the records are complete: `orch report` writes it once there is room")
        tracking.finish(final, files, End.FINISHED)
        if unwritten is not None:
            raise unwritten
        return Swept(final, SweepSummary(summary.ran, summary.skipped, tuple(summary.failed), files,
                                         summary.adaptive), data)

    def _on_ray(self, session: RaySession, tracking: Tracking) -> RunnerSummary:
        """Plan against the Ray nodes and run every trial: the driver's summary. Ctrl-C stops the running
        trials, says what was kept and re-raises."""
        from orchestrator.app.plan import plan_for
        from orchestrator.io.store import load_results
        from orchestrator.io.tracking import End
        from orchestrator.run.driver.adaptive import AdaptiveRunner
        from orchestrator.run.driver.sweep import RunnerOptions, SweepRunner

        o = self.options
        sweep = self._probed(session)
        plan_ = plan_for(sweep, session.topology, ccl_available=session.ccl_available)
        if plan_.backend.error:
            raise InputError(plan_.backend.error)
        if plan_.precision is not None and plan_.precision.error:
            raise InputError(plan_.precision.error)
        options = RunnerOptions(results=self.folder, rerun=o.rerun, convergence=o.convergence,
                                max_concurrent=o.max_concurrent, on_record=(tracking.record,))
        runner = SweepRunner(sweep, plan_, session.cluster, options) if self.adaptive is None else AdaptiveRunner(
            sweep, plan_, session.cluster, options, adaptive=self.adaptive, ccl_available=session.ccl_available)
        existing = runner.prepare()
        tracking.open(load_results(self.folder))
        todo = runner.work(existing)
        self.notify(Notice(f"{len(plan_.feasible)} of {len(plan_.trials)} grid points feasible on "
                           f"{session.topology.describe()}; backend {plan_.backend.note}",
                           heading=f"sweep {sweep.spec.name}"))
        if plan_.precision is not None:
            self.notify(Notice(f"precision: {plan_.precision.reason}"))
        self.notify(Notice(f"results: {self.folder}   ({len(todo)} trial(s) to run, {runner.summary.skipped} "
                           "already done)"))
        eta = self._estimate(runner, todo)
        try:
            with self.progress(len(todo), eta) as events:
                runner.execute(existing, events, todo)
            if isinstance(runner, AdaptiveRunner):
                runner.summary.adaptive = runner.conclude(todo)
        except BaseException as stopped:   # Ctrl-C, or the sweep ended early: its run in a tracker says so
            if isinstance(stopped, KeyboardInterrupt):
                log.warning("interrupted: the running trial(s) were stopped and their cores released; %d trial(s) "
                            "finished and recorded in %s. Rerun to resume.", runner.summary.ran, self.folder)
            tracking.finish(load_results(self.folder), (), End.INTERRUPTED)
            raise
        return runner.summary

    def _estimate(self, runner: SweepRunner, todo: list[WorkItem]) -> Eta | None:
        """The time estimate before the first trial (said, and handed to the live display and an adaptive
        runner, which refine or budget with it)."""
        from orchestrator.app.adaptive import describe
        from orchestrator.core.execution.eta import duration_text
        from orchestrator.run.driver.estimate import sweep_estimate

        eta, basis = sweep_estimate(runner.context, todo)
        runner.eta = eta   # refined by the runner as each trial's record comes in
        self.notify(Notice(f"expected time: about {duration_text(eta.total_s)} ({basis}; refined as trials "
                           "finish)" if eta is not None else basis))
        if self.adaptive is not None:
            self.notify(Notice(f"{describe(self.adaptive)} (the time above is every trial's)"))
        return eta

    def _probed(self, session: RaySession) -> Sweep:
        """The sweep with the probe it plans with: where the workload does not declare a figure (or the sweep
        says `measure.probe: always`) and no probe of these parameters is cached (with a step timed on this CPU),
        one runs now, on this machine, before any trial (no Ray: run.driver.probe). A probe that fails is bad input,
        with the rank's error, except for a training script: it runs as it is, and a script that fails at a
        probe batch may still run the grid's own cells, so its memory stays unchecked and each trial records
        its own failure."""
        from orchestrator.run.driver.probe import ProbeFailed, probe_for

        sweep = self.sweep

        def started(setup: ProbeSetup, precision: str) -> None:
            self.notify(Notice(_probe_note(sweep, setup, precision)))

        try:
            probed = probe_for(sweep, session.topology, session.ccl_available, on_start=started)
        except ProbeFailed as failure:
            if sweep.spec.workload.script is None:
                raise
            log.warning("%s; memory per rank not checked (state it with constraints.rank_memory_mib); the sweep goes "
                        "on and each trial records how it ended", failure)
            return sweep
        if probed.measured and probed.sweep.probe is not None:
            probe = probed.sweep.probe
            largest = probe.points[-1]   # the points are in batch order
            self.notify(Notice(f"probe: memory per rank {probe.memory.text()}"
                               + (f"; a step {largest.step_s:.3g} s at local batch {largest.local_batch} on "
                                  f"{probe.threads} thread(s)" if largest.step_s is not None else "")
                               + (f"; not cached: {probed.cache_problem}" if probed.cache_problem else "")))
        result: Sweep = probed.sweep
        return result


def _probe_note(sweep: Sweep, setup: ProbeSetup, precision: str) -> str:
    unknown = sweep.facts.unknown()
    why = (f"not known yet: {', '.join(unknown)}" if unknown else
           "measure.probe: always, for its step time on this CPU, which the time estimate rests on")
    return (f"probing workload {sweep.workload.name} first ({why}) in "
            f"{precision}, one rank on CPU(s) {', '.join(map(str, setup.cpus))}: local batches "
            f"{' and '.join(map(str, PROBE_BATCHES))}")


def _unusable_results(results: Path) -> str | None:
    """Why the results folder cannot be used (a file is there, or its report folder is a link that the report at
    the end would write through), or None."""
    from orchestrator.io.store import LOGS_DIR, REPORT_DIR

    if results.exists() and not results.is_dir():
        return f"--results {results}: is a file, not a folder"
    for name in (REPORT_DIR, LOGS_DIR):
        if (results / name).is_symlink():
            return (f"{results / name} is a link: orch writes a sweep's {name} only into a folder of the results "
                    "folder's own; remove the link (or give another --results folder)")
    return None


def _unsafe_work_folder() -> str | None:
    from orchestrator.io.files import WORK_ROOT, UnsafeFolder, private_folder

    try:
        private_folder(WORK_ROOT)
    except UnsafeFolder as err:
        return str(err)
    return None
