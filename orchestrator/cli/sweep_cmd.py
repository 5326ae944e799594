"""`orch sweep`: run every feasible grid point as a pinned torch.distributed job on Ray."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.cli import sweep_adaptive
from orchestrator.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    RaySession,
    add_min_nodes_options,
    add_topology_option,
    console,
    fail_input,
    plan_for,
    positive_int,
    ray_session,
)
from orchestrator.constants import DEFAULT_RESULTS_ROOT, RESULTS_ROOT_ENV_VAR
from orchestrator.core.probe import PROBE_BATCHES
from orchestrator.io.lock import FolderInUse, FolderLock
from orchestrator.io.store import check_folder
from orchestrator.io.sweepfile import Sweep, load_sweep

if TYPE_CHECKING:
    from orchestrator.run.sweep import SweepSummary


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "sweep", help="run the sweep: every feasible grid point as a real distributed training job",
        description="Plan the sweep exactly as `orch plan` does (probing the workload first, as `orch probe` does, "
                    "where it declares no memory, FLOPs or epoch size and no probe is cached), then run each "
                    "feasible point as a data-parallel "
                    "torch.distributed job (oneCCL when its bindings are installed, else Gloo) with one process per "
                    "rank, pinned to its cores, its CPUs reserved through a Ray placement group. Records each trial "
                    "as it ends in RESULTS/<sweep name>/trials.jsonl, resumes a rerun where it stopped, then writes "
                    "the report (Markdown, CSV, JSON, PNG) into the results folder and prints its tables. "
                    "Exit status: 0 all trials ok (or infeasible), 1 some trial failed, 2 bad input.")
    parser.add_argument("sweep", metavar="SWEEP", help="sweep file (YAML), e.g. sweeps/retinanet.yaml")
    add_topology_option(parser)
    parser.add_argument("--address", metavar="ADDR",
                        help="join an existing Ray cluster (e.g. 10.0.0.1:6379 or 'auto'); default: $RAY_ADDRESS, "
                             "else start an embedded local Ray bound to loopback with the dashboard off")
    add_min_nodes_options(parser)
    parser.add_argument("--results", metavar="DIR",
                        help=f"results folder of this sweep; default: ${RESULTS_ROOT_ENV_VAR} or "
                             f"'{DEFAULT_RESULTS_ROOT}', plus /<sweep name>")
    parser.add_argument("--rerun", action="store_true",
                        help="run again trials already recorded as ok (default: skip them, i.e. resume)")
    parser.add_argument("--no-convergence", dest="convergence", action="store_false",
                        help="skip the convergence runs even if the sweep has a convergence section")
    parser.add_argument("--max-concurrent", metavar="N", type=positive_int, default=None,
                        help="at most N trials in flight at once (1: one after another); default: as many as the "
                             "isolation rules allow (a timing trial keeps its nodes to itself under "
                             "measure.isolation: node; convergence runs pack onto free cores)")
    parser.add_argument("--no-report", dest="report", action="store_false",
                        help="do not write the report at the end (`orch report` can write it later)")
    parser.add_argument("--json", action="store_true",
                        help="quiet, machine-readable output: one JSON record per finished trial on stdout")
    sweep_adaptive.add_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    sweep = load_sweep(args.sweep)
    if args.replay:
        return sweep_adaptive.replay(args, sweep)
    args.adaptive = sweep_adaptive.adaptive_options(args, sweep)   # a target topology is read before Ray starts
    if isinstance(args.adaptive, int):
        return args.adaptive
    file_topology = None
    if args.topology:
        from orchestrator.io.topofile import load_topology

        file_topology = load_topology(args.topology)
    results = Path(args.results) if args.results else Path(
        os.environ.get(RESULTS_ROOT_ENV_VAR, DEFAULT_RESULTS_ROOT)) / sweep.spec.name

    if args.min_nodes and not (args.address or os.environ.get("RAY_ADDRESS")):
        return fail_input("--min-nodes needs --address (or RAY_ADDRESS): an embedded Ray has one node")
    # Everything that can be bad input is checked, and the folder locked, before Ray starts: a refused sweep
    # costs nothing, and a second sweep on a folder in use never starts its own Ray on the same cores.
    lock = FolderLock(results)
    try:
        problem = _unusable_results(results) or _unsafe_work_folder()
        if problem is not None:
            return fail_input(problem)
        note = lock.acquire()
    except FolderInUse as err:
        return fail_input(str(err))
    except OSError as err:
        return fail_input(f"results folder {results}: cannot be written ({err.strerror})")
    try:
        if note is not None:
            print(f"orch: note: {note}", file=sys.stderr)   # one line, however narrow the terminal
        problem = check_folder(results)   # a corrupt spec.json or trials.jsonl to resume, found before Ray starts
        if problem is not None:
            return fail_input(problem)
        return _locked_run(args, sweep, file_topology, results)
    finally:
        lock.release()


def _unusable_results(results: Path) -> str | None:
    """Why the results folder cannot be a folder (a file is there), or None."""
    if results.exists() and not results.is_dir():
        return f"--results {results}: is a file, not a folder"
    return None


def _unsafe_work_folder() -> str | None:
    from orchestrator.io.files import WORK_ROOT, UnsafeFolder, private_folder

    try:
        private_folder(WORK_ROOT)
    except UnsafeFolder as err:
        return str(err)
    return None


def _locked_run(args: argparse.Namespace, sweep: Sweep, file_topology, results: Path) -> int:
    """The sweep on Ray, its report and its exit status, with the results folder locked. A write into the
    results folder that fails (a full disk) ends the sweep with exit status 1 and what it kept."""
    from orchestrator.io.store import ResultsNotWritten

    try:
        with ray_session(args.address, file_topology, args.topology, min_nodes=args.min_nodes,
                         nodes_timeout_s=args.nodes_timeout_s, sigterm_as_ctrl_c=True) as session:
            outcome = _run_on_ray(args, sweep, session, results)
    except ResultsNotWritten as err:
        print(f"orch: error: {err}; the sweep stopped its trials, and every trial recorded before it is kept: make "
              "room (or make the folder writable) and rerun to resume", file=sys.stderr)
        return EXIT_RUN_FAILED
    if isinstance(outcome, int):
        return outcome
    if outcome.adaptive is not None:
        sweep_adaptive.print_outcome(outcome.adaptive, args.json)
    if args.report:
        try:
            _report(results, args.json)
        except OSError as err:
            print(f"orch: error: the report could not be written into {results} ({err.strerror}); the records are "
                  "complete: `orch report` writes it once there is room", file=sys.stderr)
            return EXIT_RUN_FAILED
    return _summary(outcome)


def _run_on_ray(args: argparse.Namespace, sweep: Sweep, session: RaySession, results: Path) -> int | SweepSummary:
    """Plan against the Ray nodes and run every trial; an exit status when the sweep ends early."""
    from orchestrator.core.eta import duration_text
    from orchestrator.run.adaptive import AdaptiveRunner
    from orchestrator.run.estimate import sweep_estimate
    from orchestrator.run.progress import SweepProgress
    from orchestrator.run.sweep import SweepOptions, SweepRunner

    err = console(stderr=True)
    cluster, topology = session.cluster, session.topology
    probed = _probe(sweep, session, quiet=args.json)
    if isinstance(probed, int):
        return probed
    plan = plan_for(probed, topology, ccl_available=session.ccl_available)
    if plan.backend.error:
        return fail_input(plan.backend.error)
    if plan.precision is not None and plan.precision.error:
        return fail_input(plan.precision.error)
    options = SweepOptions(results=results, rerun=args.rerun, convergence=args.convergence, json_mode=args.json,
                           max_concurrent=args.max_concurrent)
    adaptive = args.adaptive
    runner = SweepRunner(probed, plan, cluster, options) if adaptive is None else AdaptiveRunner(
        probed, plan, cluster, options, adaptive=adaptive, ccl_available=session.ccl_available)
    existing = runner.prepare()
    todo = runner.work(existing)
    if not args.json:
        err.print(f"[bold]sweep {sweep.spec.name}[/]: {len(plan.feasible)} of {len(plan.trials)} grid points "
                  f"feasible on {topology.describe()}; backend {plan.backend.note}")
        if plan.precision is not None:
            err.print(f"precision: {plan.precision.reason}")
        err.print(f"results: {results}   ({len(todo)} trial(s) to run, {runner.summary.skipped} already done)")
    eta, basis = sweep_estimate(runner.context, todo)
    if isinstance(runner, AdaptiveRunner):
        runner.eta = eta
    if not args.json:
        err.print(f"expected time: about {duration_text(eta.total_s)} ({basis}; refined as trials finish)"
                  if eta is not None else basis)
        if adaptive is not None:
            err.print(f"{sweep_adaptive.describe(adaptive)} (the time above is every trial's)", highlight=False)
    try:
        with SweepProgress(len(todo), json_mode=args.json, eta=eta) as progress:
            runner.execute(existing, progress, todo)
        if isinstance(runner, AdaptiveRunner):
            runner.summary.adaptive = runner.conclude(todo)
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted:[/] the running trial(s) were stopped and their cores released; "
                  f"{runner.summary.ran} trial(s) finished and recorded in {results}. Rerun to resume.")
        return EXIT_INTERRUPTED
    return runner.summary


def _probe(sweep: Sweep, session: RaySession, quiet: bool) -> Sweep | int:
    """The sweep with the probe it plans with: where the workload does not declare a figure and no probe of these
    parameters is cached, one runs now, on this machine, before any trial (no Ray: run.probe). A probe that
    fails is bad input (exit 2 with the rank's error), except for a training script: it runs as it is, and a
    script that fails at a probe batch may still run the grid's own cells, so its memory stays unchecked and
    each trial records its own failure."""
    from orchestrator.run.probe import ProbeFailed, probe_for

    err = console(stderr=True)

    def started(setup, precision: str) -> None:
        if not quiet:
            err.print(f"probing workload {sweep.workload.name} first (not known yet: "
                      f"{', '.join(sweep.facts.unknown())}) in {precision}, one rank on CPU(s) "
                      f"{', '.join(map(str, setup.cpus))}: local batches {' and '.join(map(str, PROBE_BATCHES))}")

    try:
        probed = probe_for(sweep, session.topology, session.ccl_available, on_start=started)
    except ProbeFailed as failure:
        if sweep.spec.workload.script is None:
            return fail_input(str(failure))
        err.print(f"[yellow]warning:[/] {failure}; memory per rank not checked (state it with "
                  f"constraints.rank_memory_mib); the sweep goes on and each trial records how it ended")
        return sweep
    if probed.measured and not quiet and probed.sweep.probe is not None:
        err.print(f"probe: memory per rank {probed.sweep.probe.memory.text()}"
                  + (f"; not cached: {probed.cache_problem}" if probed.cache_problem else ""))
    return probed.sweep


def _report(results: Path, json_mode: bool) -> None:
    """Write the report files; print its tables unless the output is JSON."""
    from orchestrator.io.store import REPORT_DIR, load_results
    from orchestrator.report.build import REPORT_FILE, terminal_report, write_report

    paths = write_report(load_results(results), results / REPORT_DIR)
    if not json_mode:
        out = console()
        for renderable in terminal_report(load_results(results)):
            out.print(renderable)
        console(stderr=True).print(f"report: {results / REPORT_DIR / REPORT_FILE} and {len(paths) - 1} more file(s)")


def _summary(summary: SweepSummary) -> int:
    if summary.failed:
        err = console(stderr=True)
        err.print(f"[bold red]{len(summary.failed)} trial(s) did not succeed:[/]")
        for line in summary.failed:
            err.print(f"  {line}")
        return EXIT_RUN_FAILED
    return EXIT_OK
