"""`orch score`: a saved prediction (`orch predict --out DIR`) scored against results folders measured later. A thin
layer over `orch.score`."""

from __future__ import annotations

import argparse
import json

from orchestrator.app import score as app_score
from orchestrator.app.options import ScoreOptions
from orchestrator.cli.common import EXIT_OK, console, examples
from orchestrator.cli.options import add_options, options_from


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "score", help="score a saved prediction against results folders measured later",
        description="Match the layouts and global batches a saved prediction (PREDICTION: the prediction.json "
                    "`orch predict --out DIR` wrote, or DIR) predicted with those RESULTS_DIR measured; print per "
                    "row measured, predicted, interval, error and whether it fell inside, and per axis (threads, "
                    "ranks, nodes, local batch, epochs, convergence) the median and largest |error|, coverage and "
                    "interval width beside the naive baselines. A folder of another workload, other parameters, "
                    "precision or machine is refused (exit 2). See docs/validation.md.",
        **examples("orch score plans/cluster results/example-predict",
                   "orch score plans/cluster/prediction.json results/example-predict --json", anchor="orch-score"))
    add_options(parser, ScoreOptions)
    parser.add_argument("--json", action="store_true", help="print the scores as JSON on stdout")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from orchestrator.report.score import score_dict, terminal_score

    report = app_score.score_prediction(options_from(ScoreOptions, args))
    if args.json:
        print(json.dumps(score_dict(report), indent=2))
        return EXIT_OK
    out = console()
    for renderable in terminal_score(report):
        out.print(renderable)
    return EXIT_OK
