"""`orch report`: regenerate a sweep's report from its records, at any time, for finished or partial sweeps, and
log the folder to MLflow or TensorBoard after the fact. A thin layer over `orch.load` and `orch.track`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from orchestrator.cli.common import EXIT_OK, EXIT_RUN_FAILED, add_tracking_options, console, fail_input

log = logging.getLogger(__name__)

FORMAT_CHOICES = ("terminal", "md", "csv", "json", "png", "all")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "report", help="tables, plots and a Markdown report from a results folder",
        description="Read RESULTS_DIR (a folder written by `orch sweep`) and produce the scalability tables (rows: "
                    "threads per rank, columns: ranks, cells: throughput normalized to 1 rank at the fewest "
                    "threads), absolute throughput, scaling and weak-scaling efficiency, the convergence table "
                    "(epochs to target per global batch, olympic mean over seeds) with an MLPerf-RCP-style JSON, "
                    "time-to-train per layout, and hardware efficiency against the measured compute roof. Records "
                    "are only read, never changed; partial sweeps report what they have.")
    parser.add_argument("results", metavar="RESULTS_DIR", help="results folder, e.g. results/classifier")
    parser.add_argument("--format", action="append", choices=FORMAT_CHOICES, dest="formats", metavar="FORMAT",
                        help="terminal (print the tables), md, csv, json, png, or all (md+csv+json+png); "
                             "repeatable; default: terminal and all files")
    parser.add_argument("--out", metavar="DIR",
                        help="folder for the report files; default: RESULTS_DIR/report")
    add_tracking_options(parser, "upload the folder to MLflow after the fact (finished or partial): what the sweep "
                                 "did not log (a server that was down, no --mlflow), into the sweep's parent run, "
                                 "with no duplicate child; and the report's files (only those, never a link). "
                                 "Exit status 1 if it fails")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """A thin layer over `orch.load` (and `orch.track` for --mlflow / --tensorboard)."""
    from orch.api import load, track
    from orchestrator.io.store import NotAResultsFolder
    from orchestrator.io.tracking import TrackingUnavailable, choose, require
    from orchestrator.report.build import (
        FORMATS,
        REPORT_FILE,
        LinkedReportFolder,
        report_file_names,
        report_folder,
        terminal_report,
        write_report,
    )

    try:
        loaded = load(args.results)
        require(choose(None, mlflow=args.mlflow or False, tensorboard=args.tensorboard))
    except (NotAResultsFolder, TrackingUnavailable) as error:
        return fail_input(str(error))
    results = loaded.stored
    chosen = set(args.formats or ["terminal", "all"])
    if "all" in chosen:
        chosen |= set(FORMATS)
    for problem in results.errors:
        log.warning("%s", problem)
    if "terminal" in chosen:
        out = console()
        for renderable in terminal_report(results):
            out.print(renderable)
    files = [f for f in FORMATS if f in chosen]
    try:
        out_dir = report_folder(results, args.out)
    except LinkedReportFolder as error:
        return fail_input(str(error))
    paths: list[Path] = []
    if files:
        if out_dir.exists() and not out_dir.is_dir():
            return fail_input(f"--out {out_dir}: is a file, not a folder")
        try:
            paths = write_report(results, out_dir, files)
        except OSError as error:   # a read-only or full file system, a folder not ours
            where = f"--out {out_dir}" if args.out else f"the report folder {out_dir}"
            return fail_input(f"{where}: cannot write the report there ({error.strerror}); give --out DIR")
        main = out_dir / REPORT_FILE
        log.info("wrote %d file(s) to %s%s", len(paths), out_dir, f" (start with {main})" if main in paths else "")
    # Only the report's own files are uploaded: those written now, else those of its names in the folder.
    uploads = paths or [out_dir / name for name in report_file_names(results)]
    if (args.mlflow or args.tensorboard) and not track(results.path, mlflow=args.mlflow,
                                                       tensorboard=args.tensorboard, report_files=uploads):
        return EXIT_RUN_FAILED
    return EXIT_OK
