"""`orch sweep`: run every feasible grid point as a pinned torch.distributed job on Ray. A thin layer over
`orch.sweep` (orch/api.py), which does the work."""

from __future__ import annotations

import argparse
import logging

from orchestrator.cli import sweep_adaptive
from orchestrator.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN_FAILED,
    add_min_nodes_options,
    add_topology_option,
    add_tracking_options,
    console,
    fail_input,
    positive_int,
)
from orchestrator.constants import DEFAULT_RESULTS_ROOT, RESULTS_ROOT_ENV_VAR

log = logging.getLogger(__name__)


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
    add_tracking_options(parser, "log the sweep to MLflow as it runs: a parent run for the sweep, a child run per "
                                 "trial")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """A thin layer over `orch.sweep`: its options, then the report's tables and the exit status."""
    from orch.api import InputError, ReportNotWritten, sweep
    from orchestrator.io.store import REPORT_DIR, ResultsNotWritten
    from orchestrator.io.tracking import TrackingUnavailable
    from orchestrator.report.build import REPORT_FILE, terminal_report

    if args.replay:
        from orchestrator.io.sweepfile import load_sweep

        return sweep_adaptive.replay(args, load_sweep(args.sweep))
    try:
        results = sweep(args.sweep, topology=args.topology, results=args.results, address=args.address,
                        min_nodes=args.min_nodes, nodes_timeout_s=args.nodes_timeout_s, rerun=args.rerun,
                        convergence=args.convergence, max_concurrent=args.max_concurrent, report=args.report,
                        mlflow=args.mlflow, tensorboard=args.tensorboard or None, json_lines=args.json,
                        budget_s=args.budget, target_width=args.target_width, full=args.full)
    except (InputError, TrackingUnavailable) as err:
        return fail_input(str(err))
    except KeyboardInterrupt:   # orch.sweep said what it kept
        return EXIT_INTERRUPTED
    except ResultsNotWritten as err:   # a full disk: the sweep stopped, what it recorded is kept
        log.error("%s; the sweep stopped its trials, and every trial recorded before it is kept: make room (or make "
                  "the folder writable) and rerun to resume", err)
        return EXIT_RUN_FAILED
    except ReportNotWritten as err:
        log.error("%s", err)
        return EXIT_RUN_FAILED
    summary = results.summary
    assert summary is not None   # orch.sweep always says what it ran
    if summary.adaptive is not None:
        sweep_adaptive.print_outcome(summary.adaptive, args.json)
    if summary.report_files and not args.json:
        out = console()
        for renderable in terminal_report(results.stored):
            out.print(renderable)
        log.info("report: %s and %d more file(s)", results.path / REPORT_DIR / REPORT_FILE,
                 len(summary.report_files) - 1)
    return _summary(summary.failed)


def _summary(failed: tuple[str, ...]) -> int:
    if failed:
        log.error("%d trial(s) did not succeed:\n%s", len(failed), "\n".join(f"  {line}" for line in failed))
        return EXIT_RUN_FAILED
    return EXIT_OK
