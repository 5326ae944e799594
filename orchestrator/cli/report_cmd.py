"""`orch report`: regenerate a sweep's report from its records, at any time, for finished or partial sweeps, and
log the folder to MLflow, TensorBoard or any tracker after the fact. A thin layer over `orchestrator.app.report`."""

from __future__ import annotations

import argparse
import logging

from orchestrator.app import report as app_report
from orchestrator.app.options import ReportOptions
from orchestrator.cli.common import EXIT_OK, EXIT_RUN_FAILED, console, examples
from orchestrator.cli.options import add_options, options_from

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "report", help="tables, plots and a Markdown report from a results folder",
        description="Read RESULTS_DIR (a folder written by `orch sweep`) and produce the scalability tables (rows: "
                    "threads per rank, columns: ranks, cells: throughput normalized to 1 rank at the fewest "
                    "threads), absolute throughput, scaling and weak-scaling efficiency, the convergence table "
                    "(epochs to target per global batch, olympic mean over seeds) with an MLPerf-RCP-style JSON, "
                    "time-to-train per layout, and hardware efficiency against the measured compute roof. Records "
                    "are only read, never changed; partial sweeps report what they have.",
        **examples(
                   "orch report results/example-classifier",
                   "orch report results/example-classifier --format md --mlflow-uri http://127.0.0.1:5000",
                   anchor="orch-report"))
    add_options(parser, ReportOptions)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The folder read, its warnings and tables shown, the files written, the trackers' upload."""
    from orchestrator.report.build import REPORT_FILE, terminal_report

    options = options_from(ReportOptions, args)
    results = app_report.load(options.results)
    app_report.check_trackers(options)
    for problem in results.errors:
        log.warning("%s", problem)
    data = app_report.analyzed(results)   # the models fitted once, for the terminal, the files and the trackers
    if "terminal" in app_report.formats_of(options):
        out = console()
        for renderable in terminal_report(results, data):
            out.print(renderable)
    written = app_report.write(options, results, data)
    if written.formats:
        main = written.out_dir / REPORT_FILE
        log.info("wrote %d file(s) to %s%s", len(written.paths), written.out_dir,
                 f" (start with {main})" if main in written.paths else "")
    tracked = app_report.track_written(options, results, data, written)
    return EXIT_RUN_FAILED if tracked is False else EXIT_OK
