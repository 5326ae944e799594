"""`orch sweep`: run every feasible grid point as a pinned torch.distributed job on Ray."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from orchestrator.cli.common import (EXIT_OK, EXIT_RUN_FAILED, add_topology_option, console,
                                     fail_input, plan_for)
from orchestrator.constants import (DEFAULT_RESULTS_ROOT, EMBEDDED_RAY_ENV, RAY_LOOPBACK_ENV_VAR,
                                   RAY_LOOPBACK_VALUE, RESULTS_ROOT_ENV_VAR)
from orchestrator.io.sweepfile import load_sweep


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "sweep", help="run the sweep: every feasible grid point as a real distributed training job",
        description="Plan the sweep exactly as `orch plan` does, then run each feasible point as a data-parallel "
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
    parser.add_argument("--results", metavar="DIR",
                        help=f"results folder of this sweep; default: ${RESULTS_ROOT_ENV_VAR} or "
                             f"'{DEFAULT_RESULTS_ROOT}', plus /<sweep name>")
    parser.add_argument("--rerun", action="store_true",
                        help="run again trials already recorded as ok (default: skip them, i.e. resume)")
    parser.add_argument("--no-convergence", dest="convergence", action="store_false",
                        help="skip the convergence runs even if the sweep has a convergence section")
    parser.add_argument("--no-report", dest="report", action="store_false",
                        help="do not write the report at the end (`orch report` can write it later)")
    parser.add_argument("--json", action="store_true",
                        help="quiet, machine-readable output: one JSON record per finished trial on stdout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    sweep = load_sweep(args.sweep)
    file_topology = None
    if args.topology:
        from orchestrator.io.topofile import load_topology

        file_topology = load_topology(args.topology)
    results = Path(args.results) if args.results else Path(
        os.environ.get(RESULTS_ROOT_ENV_VAR, DEFAULT_RESULTS_ROOT)) / sweep.spec.name

    if not (args.address or os.environ.get("RAY_ADDRESS")):
        # An embedded Ray serves this machine only: keep every server it starts on loopback, and keep its
        # background work off the cores being measured.
        for name, value in {RAY_LOOPBACK_ENV_VAR: RAY_LOOPBACK_VALUE, **EMBEDDED_RAY_ENV}.items():
            os.environ.setdefault(name, value)
    # Ray and torch are imported only here: planning and bad-input paths stay fast.
    import ray

    from orchestrator.run import cluster as ray_cluster
    from orchestrator.run.progress import SweepProgress
    from orchestrator.run.sweep import SweepOptions, SweepRunner, write_reports

    err = console(stderr=True)
    started_ray = ray_cluster.connect(args.address)
    try:
        cluster = ray_cluster.discover()
        if file_topology is not None:
            ray_cluster.check_topology_fits(file_topology, cluster, args.topology)
            topology = file_topology
        else:
            topology = ray_cluster.detected_topology(cluster)
        used = cluster.nodes[:len(topology.nodes)]
        plan = plan_for(sweep, topology, ccl_available=all(n.ccl_installed for n in used))
        if plan.backend.error:
            return fail_input(plan.backend.error)
        options = SweepOptions(results=results, rerun=args.rerun, convergence=args.convergence, json_mode=args.json)
        runner = SweepRunner(sweep, plan, cluster, options)
        existing = runner.prepare()
        todo = runner.work(existing)
        if not args.json:
            err.print(f"[bold]sweep {sweep.spec.name}[/]: {len(plan.feasible)} of {len(plan.trials)} grid points "
                      f"feasible on {topology.describe()}; backend {plan.backend.note}")
            err.print(f"results: {results}   ({len(todo)} trial(s) to run, {runner.summary.skipped} already done)")
        try:
            with SweepProgress(len(todo), json_mode=args.json) as progress:
                runner.execute(existing, progress, todo)
        except KeyboardInterrupt:
            err.print(f"[yellow]interrupted:[/] the running trial was stopped and its cores released; "
                      f"{runner.summary.ran} trial(s) finished and recorded in {results}. Rerun to resume.")
            return 130
    finally:
        if started_ray:
            ray.shutdown()
    if args.report:
        paths = write_reports(results)
        if not args.json:
            from orchestrator.report.build import terminal_report
            from orchestrator.io.store import load_results

            out = console()
            for renderable in terminal_report(load_results(results)):
                out.print(renderable)
            err.print(f"report: {results / 'report' / 'report.md'} and {len(paths) - 1} more file(s)")
    if runner.summary.failed:
        err.print(f"[bold red]{len(runner.summary.failed)} trial(s) did not succeed:[/]")
        for line in runner.summary.failed:
            err.print(f"  {line}")
        return EXIT_RUN_FAILED
    return EXIT_OK
