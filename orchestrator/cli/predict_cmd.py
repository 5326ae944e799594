"""`orch predict`: time-to-train for layouts, batches and clusters not run, with the model's error
measured on held-out cells beside it. Pure and fast: reads records, fits, plans; imports neither torch nor Ray.
A thin layer over `orch.predict`."""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

from orchestrator.app import predict as app_predict
from orchestrator.app.options import PredictOptions
from orchestrator.cli.common import EXIT_OK, console, examples
from orchestrator.cli.options import add_options, options_from
from orchestrator.errors import InputError

log = logging.getLogger(__name__)

PIPED_WIDTH = 160


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "predict", help="predict throughput, epochs and time-to-train for layouts and clusters not run",
        description="Fit a step-time model (compute ⊕ all-reduce, see docs/prediction.md) to RESULTS_DIR's measured "
                    "cells and its all-reduce calibration, and an epochs-to-target model (critical batch) to its "
                    "convergence runs or an MLPerf RCP file; then, for every feasible layout of the target "
                    "topology at each node count (same constraint engine and placement as `orch plan`), predict "
                    "samples/s with an interval from held-out error, epochs, time-to-train, node-hours and runs "
                    "per day; mark the fastest per node count, the Pareto set, and the recommendation under "
                    "--deadline or --budget. Imports neither torch nor Ray.",
        **examples(
                   "orch predict results/example-predict --nodes 1,2,4 --deadline 8h",
                   "orch predict results/example-predict-retinanet --topology sweeps/topologies/cluster-4x2s28c.yaml "
                   "--budget 200node-h",
                   anchor="orch-predict"))
    add_options(parser, PredictOptions)
    # What the command prints, not what it predicts: the CLI's own options (orch.predict returns everything).
    parser.add_argument("--validate", action="store_true",
                        help="print the held-out validation in full: every scheme, beside the baselines, with the "
                             "share of held-out cells inside the printed intervals")
    parser.add_argument("--json", action="store_true",
                        help="print everything as JSON on stdout (every layout with its interval ends, flags and "
                             "notes as fields, and every warning)")
    parser.add_argument("--out", metavar="DIR",
                        help="write prediction.md, prediction.json, a CSV and a JSON per table and the PNG plots "
                             "here; without it nothing is written (a prediction is a what-if of its options, not "
                             "part of the results folder)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The prediction `args` ask for, as tables, JSON or files."""
    from orchestrator.report.prediction import terminal_prediction, write_prediction

    options = options_from(PredictOptions, args)
    report = app_predict.predict(options)
    for warning in report.warnings:
        log.warning("%s", warning)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        out = console()
        if not out.is_terminal and not os.environ.get("COLUMNS"):   # a log or a pipe: no terminal to fit
            out.width = PIPED_WIDTH
        for renderable in terminal_prediction(report, full_validation=args.validate):
            out.print(renderable)
    if args.out:
        try:
            paths = write_prediction(report, Path(args.out))
        except OSError as error:
            raise InputError(f"--out {args.out}: cannot write the prediction there ({error.strerror})") from None
        log.info("wrote %d file(s) to %s", len(paths), args.out)
    return EXIT_OK
