"""`orch predict`: time-to-train for layouts, batches and clusters not run, with the model's error
measured on held-out cells beside it. Pure and fast: reads records, fits, plans; imports neither torch nor Ray.
A thin layer over `orch.predict`."""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

from orchestrator.cli.common import EXIT_OK, console, fail_input, positive_int, positive_number

log = logging.getLogger(__name__)

PIPED_WIDTH = 160


# What one prediction may be asked for: each value is a planned cluster (every layout of it predicted), so the
# lists and their values are bounded; beyond them the plan alone would take minutes.
MAX_LIST_VALUES = 32
MAX_NODES = 100_000
MAX_LOCAL_BATCH = 1 << 20


def _int_list(text: str, most: int) -> list[int]:
    shown = text if len(text) <= 40 else text[:40] + "..."
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown!r}: expected comma-separated positive integers, e.g. 1,2,4") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{shown!r}: expected comma-separated positive integers, e.g. 1,2,4")
    if len(set(values)) > MAX_LIST_VALUES:
        raise argparse.ArgumentTypeError(f"{shown!r}: {len(set(values))} values, more than {MAX_LIST_VALUES}")
    if max(values) > most:
        raise argparse.ArgumentTypeError(f"{shown!r}: {max(values)} is more than {most:,}")
    return values


def _node_list(text: str) -> list[int]:
    return _int_list(text, MAX_NODES)


def _batch_list(text: str) -> list[int]:
    return _int_list(text, MAX_LOCAL_BATCH)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "predict", help="predict throughput, epochs and time-to-train for layouts and clusters not run",
        description="Fit a step-time model (compute ⊕ all-reduce, see docs/prediction.md) to RESULTS_DIR's measured "
                    "cells and its all-reduce calibration, and an epochs-to-target model (critical batch) to its "
                    "convergence runs or an MLPerf RCP file; then, for every feasible layout of the target "
                    "topology at each node count (same constraint engine and placement as `orch plan`), predict "
                    "samples/s with an interval from held-out error, epochs, time-to-train, node-hours and runs "
                    "per day; mark the fastest per node count, the Pareto set, and the recommendation under "
                    "--deadline-h or --budget-node-h. Imports neither torch nor Ray.")
    parser.add_argument("results", metavar="RESULTS_DIR", help="results folder of a sweep, e.g. results/classifier")
    parser.add_argument("--topology", metavar="FILE",
                        help="target machine or cluster (topology file); default: the one the sweep ran on")
    parser.add_argument("--nodes", type=_node_list, metavar="LIST",
                        help=f"node counts to consider, e.g. 1,2,4,8 (at most {MAX_LIST_VALUES} values, each at most "
                             f"{MAX_NODES:,}); default: powers of two up to the target's nodes")
    parser.add_argument("--local-batch", type=_batch_list, metavar="LIST", dest="local_batch",
                        help=f"local batches to consider, e.g. 8,16 (at most {MAX_LIST_VALUES} values, each at most "
                             f"{MAX_LOCAL_BATCH:,}); default: the sweep's")
    parser.add_argument("--rcp", metavar="FILE",
                        help="MLPerf RCP JSON (rcps_<benchmark>.json, as MLCommons publishes and `orch report` "
                             "exports) as the convergence data, instead of the sweep's convergence runs")
    parser.add_argument("--samples-per-epoch", type=positive_int, metavar="N", dest="samples_per_epoch",
                        help="samples in one epoch of the training you plan; default: the sweep workload's")
    parser.add_argument("--calibration", action="append", metavar="DIR", default=[],
                        help="also use the all-reduce calibration of another results folder (e.g. a sweep run on "
                             "the target cluster); repeatable")
    limits = parser.add_mutually_exclusive_group()
    limits.add_argument("--deadline-h", type=positive_number, metavar="H", dest="deadline_h",
                        help="recommend the fewest node-hours that train within H hours")
    limits.add_argument("--budget-node-h", type=positive_number, metavar="N", dest="budget_node_h",
                        help="recommend the fastest layout within N node-hours")
    parser.add_argument("--validate", action="store_true",
                        help="print the held-out validation in full (leave one cell out, each level of ranks, "
                             "threads and local batch out, all levels but one, leave one global batch out) beside "
                             "the linear and Amdahl baselines, with what orch predict prints for the held-out cells "
                             "from the training cells alone: its error, the share inside the printed intervals and "
                             "their median width")
    parser.add_argument("--json", action="store_true",
                        help="print everything as JSON on stdout (every layout with its interval ends, flags and "
                             "notes as fields, and every warning)")
    parser.add_argument("--out", metavar="DIR",
                        help="write prediction.md, prediction.json, a CSV and a JSON per table and the PNG plots "
                             "here; without it nothing is written (a prediction is a what-if of its options, not "
                             "part of the results folder)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """A thin layer over `orch.predict`: its options, then the tables, the JSON or the files."""
    from orch.api import InputError, predict
    from orchestrator.core.plan import PlanTooLarge
    from orchestrator.io.predict_inputs import PredictInputError
    from orchestrator.report.prediction import NoFeasibleLayout, terminal_prediction, write_prediction

    try:
        report = predict(args.results, topology=args.topology, nodes=args.nodes, local_batch=args.local_batch,
                         rcp=args.rcp, samples_per_epoch=args.samples_per_epoch, calibration=args.calibration,
                         deadline_h=args.deadline_h, budget_node_h=args.budget_node_h).report
    except (InputError, PredictInputError, NoFeasibleLayout) as bad:
        return fail_input(str(bad))
    except PlanTooLarge as bad:   # a target and lists that make more layouts than one plan holds
        return fail_input(f"--nodes/--local-batch on this target: {bad}")
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
            return fail_input(f"--out {args.out}: cannot write the prediction there ({error.strerror})")
        log.info("wrote %d file(s) to %s", len(paths), args.out)
    return EXIT_OK
