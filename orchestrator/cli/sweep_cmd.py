"""`orch sweep`: run every feasible grid point as a pinned torch.distributed job on Ray. A thin layer over
`orchestrator.app.sweep`, which does the work: its options from argv, then what it says as it goes, the adaptive
outcome, the report's tables and the exit status."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from orchestrator.app.options import SweepOptions
from orchestrator.cli import sweep_adaptive
from orchestrator.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, console, examples, print_notice
from orchestrator.cli.options import add_options, options_from

if TYPE_CHECKING:
    from orchestrator.app.notices import Notice
    from orchestrator.cli.progress import JsonProgress, LiveProgress
    from orchestrator.core.execution.eta import Eta

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "sweep", help="run the sweep: every feasible grid point as a real distributed training job",
        description="Plan the sweep exactly as `orch plan` does (probing the workload first, as `orch probe` does, "
                    "where it declares no memory, FLOPs or epoch size and no probe is cached), then run each "
                    "feasible point as a data-parallel "
                    "torch.distributed job (oneCCL when its bindings are installed, else Gloo) with one process per "
                    "rank, pinned to its cores, its CPUs reserved through a Ray placement group. Records each trial "
                    "as it ends in RESULTS/<sweep name>/trials.jsonl, resumes a rerun where it stopped, then writes "
                    "the report (Markdown, CSV, JSON, PNG) into the results folder and prints its tables. "
                    "Exit status: 0 all trials ok (or infeasible), 1 some trial failed, 2 bad input.",
        **examples(
                   "orch sweep sweeps/classifier.yaml --topology sweeps/topologies/emulated-2s1c.yaml",
                   "orch sweep sweeps/retinanet.yaml --budget 30m --mlflow",
                   anchor="orch-sweep"))
    add_options(parser, SweepOptions)
    parser.add_argument("--json", action="store_true",
                        help="quiet, machine-readable output: one JSON record per finished trial on stdout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The sweep `args` describe (or `--replay`), then the report's tables and the exit status."""
    from orchestrator.app import sweep as app_sweep
    from orchestrator.io.store import REPORT_DIR
    from orchestrator.report.build import REPORT_FILE, terminal_report

    options = options_from(SweepOptions, args)
    if options.replay:
        from orchestrator.app.adaptive import replay
        from orchestrator.io.sweepfile import load_sweep

        sweep_adaptive.print_replay(replay(options.replay, options, load_sweep(options.sweep)))
        return EXIT_OK
    err = console(stderr=True)
    try:
        swept = app_sweep.sweep(options, _quiet if args.json else lambda notice: print_notice(notice, err),
                                _json if args.json else _live)
    except KeyboardInterrupt:   # the sweep said what it kept
        return EXIT_INTERRUPTED
    summary = swept.summary
    if summary.adaptive is not None:
        sweep_adaptive.print_outcome(summary.adaptive, args.json)
    if swept.report is not None and summary.report_files and not args.json:
        out = console()
        for renderable in terminal_report(swept.results, swept.report):
            out.print(renderable)
        log.info("report: %s and %d more file(s)", swept.results.path / REPORT_DIR / REPORT_FILE,
                 len(summary.report_files) - 1)
    return _summary(summary.failed)


def _quiet(notice: Notice) -> None:
    """--json: what the sweep says as it goes is not printed (stdout is its records'; errors still are)."""


def _live(total: int, eta: Eta | None) -> LiveProgress:
    from orchestrator.cli.progress import LiveProgress

    return LiveProgress(total, eta=eta)


def _json(total: int, eta: Eta | None) -> JsonProgress:
    from orchestrator.cli.progress import JsonProgress

    return JsonProgress()


def _summary(failed: tuple[str, ...]) -> int:
    if failed:
        log.error("%d trial(s) did not succeed:\n%s", len(failed), "\n".join(f"  {line}" for line in failed))
        return EXIT_RUN_FAILED
    return EXIT_OK
