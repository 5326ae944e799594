"""orch from a notebook or a script: the functions behind `orch plan`, `orch sweep`, `orch report` and
`orch predict`, returning typed results instead of printing them. The commands are thin layers over these
functions, so both give the same answers.

    import orch

    plan = orch.plan("sweeps/classifier.yaml")            # orch plan: no Ray, no rank (imports the workload)
    plan.to_frame()                                        # one row per grid point, feasible or why not
    results = orch.sweep("sweeps/classifier.yaml", mlflow="http://127.0.0.1:5000")   # orch sweep
    results = orch.load("results/classifier")              # a folder written earlier, finished or partial
    df = results.to_frame()                                # one row per record, typed columns
    df[df.kind == "throughput"].pivot_table(index="threads_per_rank", columns="ranks", values="samples_per_s")
    results.tables()["scalability-b32"]                    # the report's tables, as DataFrames
    orch.predict("results/classifier", nodes=[1, 2, 4]).to_frame()                   # orch predict

Bad input raises a ValueError subclass whose message is what the command prints before exiting with status 2
(`orch.InputError` for the checks made here; a sweep file's problems are listed all at once). Ctrl-C (a
notebook's interrupt) stops a sweep's running trials, keeps what was recorded and re-raises
KeyboardInterrupt; calling `orch.sweep` again resumes. docs/python-api.md has the details.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orch.results import Plan, Prediction, Results, SweepSummary
from orchestrator.core.probe import PROBE_BATCHES

if TYPE_CHECKING:
    from orchestrator.cli.common import RaySession
    from orchestrator.core.topology import Topology
    from orchestrator.io.sweepfile import Sweep
    from orchestrator.io.tracking import Tracking
    from orchestrator.run.sweep import SweepSummary as DriverSummary

__all__ = ["InputError", "ReportNotWritten", "load", "plan", "predict", "results_folder", "sweep", "track"]

log = logging.getLogger(__name__)
DEFAULT_NODES_TIMEOUT_S = 300.0   # as `orch sweep --nodes-timeout-s` (orchestrator.cli.common)


class InputError(ValueError):
    """Bad input said in one line: the command prints it and exits with status 2."""


class ReportNotWritten(RuntimeError):
    """The sweep ran and its records are complete, but its report could not be written (a full disk): the
    command exits with status 1; `orch report` writes it once there is room."""


def plan(sweep: str | Path, *, topology: str | Path | None = None) -> Plan:
    """`orch plan`: the sweep file's grid checked against a machine (a topology file, default: this one).
    Starts no Ray, no rank and no torch, but imports the workload's module and calls its factory, as `orch sweep`
    does (a sweep file is code: docs/trust.md). `Plan.errors` says why `orch sweep` would refuse it."""
    from orchestrator.cli.common import plan_for
    from orchestrator.io.sweepfile import load_sweep
    from orchestrator.io.topofile import planned_machine

    loaded = load_sweep(sweep)
    return Plan(plan_for(loaded, planned_machine(topology)), Path(sweep))



def load(folder: str | Path) -> Results:
    """A results folder written by `orch sweep`, finished or partial (what `orch report` reads)."""
    from orchestrator.io.store import load_results

    log.debug("reading the results folder %s", folder)
    return Results(load_results(folder))


def results_folder(sweep_name: str) -> Path:
    """Where a sweep's results go without `results=`: $ORCH_RESULTS (default `results`) / the sweep's name."""
    from orchestrator.constants import DEFAULT_RESULTS_ROOT, RESULTS_ROOT_ENV_VAR

    return Path(os.environ.get(RESULTS_ROOT_ENV_VAR, DEFAULT_RESULTS_ROOT)) / sweep_name


@dataclass(frozen=True, kw_only=True, slots=True)
class _SweepArgs:
    """`orch.sweep`'s keyword arguments (its docstring says what each does)."""

    topology: str | None = None
    results: Path | None = None
    address: str | None = None
    min_nodes: int | None = None
    nodes_timeout_s: float = DEFAULT_NODES_TIMEOUT_S
    rerun: bool = False
    convergence: bool = True
    max_concurrent: int | None = None
    report: bool = True
    mlflow: str | bool | None = None
    tensorboard: bool | None = None
    json_lines: bool = False
    budget_s: float | None = None
    target_width: float | None = None
    full: bool = False


def sweep(sweep: str | Path, *, topology: str | Path | None = None, results: str | Path | None = None,
          address: str | None = None, min_nodes: int | None = None,
          nodes_timeout_s: float = DEFAULT_NODES_TIMEOUT_S, rerun: bool = False, convergence: bool = True,
          max_concurrent: int | None = None, report: bool = True, mlflow: str | bool | None = None,
          tensorboard: bool | None = None, json_lines: bool = False, budget_s: float | None = None,
          target_width: float | None = None, full: bool = False) -> Results:
    """`orch sweep`: run every feasible grid point of the sweep file as a pinned torch.distributed job on Ray,
    recording each trial as it ends into `results` (default: `results_folder(name)`), resuming what a folder
    holds already (`rerun=True` runs recorded trials again), then writing the report (`report=False`: not).

    - `topology`: a topology file to plan against (checked against the Ray nodes); default: the nodes' own.
    - `address`: join that Ray cluster (default: $RAY_ADDRESS, else an embedded Ray on loopback; a notebook's
      own `ray.init()` is used as it is); `min_nodes`: wait until it has that many nodes.
    - `convergence=False` skips the convergence runs; `max_concurrent` caps the trials in flight.
    - `mlflow`: log to MLflow as the sweep runs: a tracking URI, True (the sweep file's URI, else MLflow's
      default), False (not even when the sweep file says so), None (as the sweep file says).
      `tensorboard`: write TensorBoard event files into RESULTS/tensorboard (None: as the sweep file says).
      A tracking server that is down fails nothing: it is said once, and `orch.track` catches up later.
    - `json_lines`: no live display; one JSON record per finished trial on stdout (`orch sweep --json`).
    - `budget_s`, `target_width`: run adaptively (docs/adaptive.md), one trial at a time chosen by what it
      teaches per core-second, stopping before a trial that would end after `budget_s` seconds from the start
      or once the answer's interval is `target_width` narrow (overriding the sweep file's `adaptive` section);
      `full=True` runs every feasible trial even where the sweep file has an `adaptive` section.

    Returns the folder's results, with `summary` saying what this call ran and which trials failed."""
    options = _SweepArgs(topology=str(topology) if topology else None, results=Path(results) if results else None,
                         address=address, min_nodes=min_nodes, nodes_timeout_s=nodes_timeout_s, rerun=rerun,
                         convergence=convergence, max_concurrent=max_concurrent, report=report, mlflow=mlflow,
                         tensorboard=tensorboard, json_lines=json_lines, budget_s=budget_s,
                         target_width=target_width, full=full)
    return _SweepCall(sweep, options).run()


def track(folder: str | Path, *, mlflow: str | bool | None = None, tensorboard: bool = False,
          report_dir: str | Path | None = None,
          report_files: Sequence[str | Path] | None = None) -> bool:
    """Log a finished or partial results folder after the fact (`orch report --mlflow / --tensorboard`): what
    a sweep could not log as it ran (a server that was down, no tracking asked for), into the same MLflow
    parent run and TensorBoard folder, duplicating nothing; and the report's files: `report_files`, else those
    of `report_dir` (default RESULTS/report) that `orch report` writes, each a regular file, never a link.
    `mlflow`: a tracking URI, or True for $MLFLOW_TRACKING_URI (else MLflow's default); never the URI the
    folder's spec.json names, which is printed as a hint (docs/trust.md). True when every tracker logged
    everything; a failure is said as a warning."""
    from orchestrator.io.store import REPORT_DIR
    from orchestrator.io.tracking import End, after_the_fact, open_tracking
    from orchestrator.report.build import report_file_names

    results = load(folder)
    choice, hint = after_the_fact(results.spec.get("tracking"), mlflow=mlflow, tensorboard=tensorboard)
    if not choice.wanted:
        raise InputError("nothing to log to: give mlflow (a tracking URI, or True) or tensorboard=True")
    if hint is not None:
        log.warning("%s", hint)
    tracking = open_tracking(choice, results.path, results.name, live=False)
    if report_files is None:
        report = Path(report_dir) if report_dir else results.path / REPORT_DIR
        named = report_dir is not None   # a link the user names is theirs; the folder's own report/ must not be one
        files = ([report / name for name in report_file_names(results.stored)]
                 if named or not report.is_symlink() else [])
    else:
        files = [Path(f) for f in report_files]
    tracking.open(results.stored)
    tracking.finish(results.stored, files, End.REPORT)
    return tracking.ok


class _SweepCall:
    """One `orch.sweep` call: checks that cost nothing first, then Ray, the driver, the report, the trackers."""

    def __init__(self, path: str | Path, options: _SweepArgs):
        from orchestrator.cli.sweep_adaptive import adaptive_options
        from orchestrator.io.sweepfile import load_sweep

        self.options = options
        self.sweep: Sweep = load_sweep(path)
        self.folder = options.results or results_folder(self.sweep.spec.name)
        self.report_files: tuple[Path, ...] = ()
        try:   # a target topology is read before Ray starts
            self.adaptive = adaptive_options(self.sweep, budget_s=options.budget_s, target_width=options.target_width,
                                             full=options.full)
        except ValueError as err:
            raise InputError(str(err)) from None

    def run(self) -> Results:
        """Everything that can be bad input is checked, and the folder locked, before Ray starts: a refused
        sweep costs nothing, and a second sweep on a folder in use never starts its own Ray on the same cores.
        A write into the results folder that fails (a full disk) raises io.store's ResultsNotWritten once the
        running trials are stopped; every record written before it is kept."""
        from orchestrator.io.lock import FolderInUse, FolderLock
        from orchestrator.io.store import check_folder
        from orchestrator.io.tracking import choose, open_tracking

        o = self.options
        file_topology = None
        if o.topology:
            from orchestrator.io.topofile import load_topology

            file_topology = load_topology(o.topology)
        if o.min_nodes and not (o.address or os.environ.get("RAY_ADDRESS")):
            raise InputError("--min-nodes needs --address (or RAY_ADDRESS): an embedded Ray has one node")
        choice = choose(self.sweep.spec.tracking, mlflow=o.mlflow, tensorboard=o.tensorboard)
        tracking = open_tracking(choice, self.folder, self.sweep.spec.name, live=True)   # no package: before Ray
        lock = FolderLock(self.folder)
        try:
            problem = _unusable_results(self.folder) or _unsafe_work_folder()
            if problem is not None:
                raise InputError(problem)
            note = lock.acquire()
        except FolderInUse as err:
            raise InputError(str(err)) from None
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

    def _locked(self, file_topology: Topology | None, tracking: Tracking) -> Results:
        """The sweep on Ray, its report and its trackers' end, with the results folder locked."""
        from orchestrator.cli.common import ray_session
        from orchestrator.io.tracking import End

        o = self.options
        with ray_session(o.address, file_topology, o.topology, min_nodes=o.min_nodes,
                         nodes_timeout_s=o.nodes_timeout_s, sigterm_as_ctrl_c=True) as session:
            summary = self._on_ray(session, tracking)
        files: tuple[Path, ...] = ()
        unwritten = None
        if o.report:
            try:
                files = tuple(load(self.folder).write_report())
            except OSError as err:
                unwritten = ReportNotWritten(f"the report could not be written into {self.folder} ({err.strerror}); "
                                             "the records are complete: `orch report` writes it once there is room")
        final = load(self.folder)
        tracking.finish(final.stored, files, End.FINISHED)
        if unwritten is not None:
            raise unwritten
        return Results(final.stored, SweepSummary(summary.ran, summary.skipped, tuple(summary.failed), files,
                                                   summary.adaptive))

    def _on_ray(self, session: RaySession, tracking: Tracking) -> DriverSummary:
        """Plan against the Ray nodes and run every trial: the driver's summary. Ctrl-C stops the running
        trials, says what was kept and re-raises."""
        from orchestrator.cli.common import console, plan_for
        from orchestrator.cli.sweep_adaptive import describe
        from orchestrator.core.eta import duration_text
        from orchestrator.io.store import load_results
        from orchestrator.io.tracking import End
        from orchestrator.run.adaptive import AdaptiveRunner
        from orchestrator.run.estimate import sweep_estimate
        from orchestrator.run.progress import SweepProgress
        from orchestrator.run.sweep import SweepOptions as DriverOptions
        from orchestrator.run.sweep import SweepRunner

        o = self.options
        err = console(stderr=True)
        cluster, topology = session.cluster, session.topology
        sweep = self._probed(session)
        plan_ = plan_for(sweep, topology, ccl_available=session.ccl_available)
        if plan_.backend.error:
            raise InputError(plan_.backend.error)
        if plan_.precision is not None and plan_.precision.error:
            raise InputError(plan_.precision.error)
        options = DriverOptions(results=self.folder, rerun=o.rerun, convergence=o.convergence, json_mode=o.json_lines,
                                max_concurrent=o.max_concurrent, on_record=(tracking.record,))
        runner = SweepRunner(sweep, plan_, cluster, options) if self.adaptive is None else AdaptiveRunner(
            sweep, plan_, cluster, options, adaptive=self.adaptive, ccl_available=session.ccl_available)
        existing = runner.prepare()
        tracking.open(load_results(self.folder))
        todo = runner.work(existing)
        if not o.json_lines:
            err.print(f"[bold]sweep {sweep.spec.name}[/]: {len(plan_.feasible)} of {len(plan_.trials)} grid points "
                      f"feasible on {topology.describe()}; backend {plan_.backend.note}")
            if plan_.precision is not None:
                err.print(f"precision: {plan_.precision.reason}")
            err.print(f"results: {self.folder}   ({len(todo)} trial(s) to run, {runner.summary.skipped} already done)")
        eta, basis = sweep_estimate(runner.context, todo)
        if isinstance(runner, AdaptiveRunner):
            runner.eta = eta
        if not o.json_lines:
            err.print(f"expected time: about {duration_text(eta.total_s)} ({basis}; refined as trials finish)"
                      if eta is not None else basis)
            if self.adaptive is not None:
                err.print(f"{describe(self.adaptive)} (the time above is every trial's)", highlight=False)
        try:
            with SweepProgress(len(todo), json_mode=o.json_lines, eta=eta) as progress:
                runner.execute(existing, progress, todo)
            if isinstance(runner, AdaptiveRunner):
                runner.summary.adaptive = runner.conclude(todo)
        except BaseException as stopped:   # Ctrl-C, or the sweep ended early: its run in a tracker says so
            if isinstance(stopped, KeyboardInterrupt):
                log.warning("interrupted: the running trial(s) were stopped and their cores released; %d trial(s) "
                            "finished and recorded in %s. Rerun to resume.", runner.summary.ran, self.folder)
            tracking.finish(load_results(self.folder), (), End.INTERRUPTED)
            raise
        return runner.summary

    def _probed(self, session: RaySession) -> Sweep:
        """The sweep with the probe it plans with: where the workload does not declare a figure (or the sweep
        says `measure.probe: always`) and no probe of these parameters is cached (with a step timed on this CPU),
        one runs now, on this machine, before any trial (no Ray: run.probe). A probe that fails is bad input,
        with the rank's error, except for a training script: it runs as it is, and a script that fails at a
        probe batch may still run the grid's own cells, so its memory stays unchecked and each trial records
        its own failure."""
        from orchestrator.cli.common import console
        from orchestrator.run.probe import ProbeFailed, probe_for

        err, quiet, sweep = console(stderr=True), self.options.json_lines, self.sweep

        def started(setup: Any, precision: str) -> None:
            if not quiet:
                err.print(_probe_note(sweep, setup, precision))

        try:
            probed = probe_for(sweep, session.topology, session.ccl_available, on_start=started)
        except ProbeFailed as failure:
            if sweep.spec.workload.script is None:
                raise InputError(str(failure)) from None
            log.warning("%s; memory per rank not checked (state it with constraints.rank_memory_mib); the sweep goes "
                        "on and each trial records how it ended", failure)
            return sweep
        if probed.measured and not quiet and probed.sweep.probe is not None:
            probe = probed.sweep.probe
            largest = probe.points[-1]   # the points are in batch order
            err.print(f"probe: memory per rank {probe.memory.text()}"
                      + (f"; a step {largest.step_s:.3g} s at local batch {largest.local_batch} on {probe.threads} "
                         "thread(s)" if largest.step_s is not None else "")
                      + (f"; not cached: {probed.cache_problem}" if probed.cache_problem else ""))
        return probed.sweep


def _probe_note(sweep: Sweep, setup: Any, precision: str) -> str:
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


@dataclass(frozen=True, kw_only=True, slots=True)
class _PredictArgs:
    """What `orch predict` reads besides the folder (orchestrator.io.predict_inputs reads these names)."""

    results: str
    topology: str | None = None
    nodes: list[int] | None = None
    local_batch: list[int] | None = None
    rcp: str | None = None
    samples_per_epoch: int | None = None
    calibration: list[str] = field(default_factory=list)
    deadline_h: float | None = None
    budget_node_h: float | None = None


def predict(folder: str | Path, *, topology: str | Path | None = None, nodes: Sequence[int] | None = None,
            local_batch: Sequence[int] | None = None, rcp: str | Path | None = None,
            samples_per_epoch: int | None = None, calibration: Sequence[str | Path] = (),
            deadline_h: float | None = None, budget_node_h: float | None = None) -> Prediction:
    """`orch predict`: fit the step-time and epochs models to a results folder and predict every feasible
    layout of `topology` (default: the machine the sweep ran on) at each of `nodes`, for each of `local_batch`
    (default: the sweep's), with intervals from held-out error; `rcp` (an MLPerf RCP file) stands in for the
    convergence runs; `calibration` adds other folders' all-reduce timings; `deadline_h` or `budget_node_h`
    picks the recommendation. Imports neither torch nor Ray."""
    from orchestrator.io.predict_inputs import load_inputs
    from orchestrator.report.prediction import prediction_report

    for name, values in (("nodes", nodes), ("local_batch", local_batch)):
        if values is not None and (not values or any(int(v) != v or v <= 0 for v in values)):
            raise InputError(f"{name}={list(values)}: expected positive whole numbers")
    for name, value in (("deadline_h", deadline_h), ("budget_node_h", budget_node_h)):
        if value is not None and not value > 0:
            raise InputError(f"{name}={value}: expected a positive number")
    if deadline_h is not None and budget_node_h is not None:
        raise InputError("give deadline_h or budget_node_h, not both")
    options = _PredictArgs(results=str(folder), topology=str(topology) if topology else None,
                           nodes=[int(v) for v in nodes] if nodes else None,
                           local_batch=[int(v) for v in local_batch] if local_batch else None,
                           rcp=str(rcp) if rcp else None, samples_per_epoch=samples_per_epoch,
                           calibration=[str(c) for c in calibration], deadline_h=deadline_h,
                           budget_node_h=budget_node_h)
    return Prediction(prediction_report(load_inputs(options)))
