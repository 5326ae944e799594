"""`orch sweep`'s adaptive side: its options (the sweep file's `adaptive` section, `--budget`,
`--target-width`, `--full`), `--replay FOLDER` (the policy against a folder measured in full, no Ray), and
what an adaptive sweep prints when it stops."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.cli.common import EXIT_OK, console, fail_input, positive_number
from orchestrator.core.adaptive.answer import AdaptiveOptions, Answer, relative_text
from orchestrator.core.adaptive.outcome import Measured, outcome_lines, parse_duration
from orchestrator.core.schema import InvalidInput
from orchestrator.io.sweepfile import Sweep

if TYPE_CHECKING:   # the run layer imports Ray: only a sweep that runs pays for it
    from orchestrator.run.adaptive import AdaptiveOutcome


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget", metavar="DURATION", type=_duration,
                        help="run adaptively (docs/adaptive.md) and stop before a trial that would not fit in "
                             "DURATION of wall-clock time from the start (1800, 30m, 2h, 1h30m); overrides "
                             "adaptive.budget_s")
    parser.add_argument("--target-width", metavar="W", type=positive_number,
                        help="run adaptively and stop once the answer's interval is this narrow: (high - low) / "
                             "answer, so 0.2 is about ±10%%; overrides adaptive.target_rel_width")
    parser.add_argument("--full", action="store_true",
                        help="run every feasible trial even if the sweep file has an adaptive section")
    parser.add_argument("--replay", metavar="FOLDER",
                        help="no trial runs: replay the adaptive policy against FOLDER, a results folder measured "
                             "in full, reading each chosen trial's record as if measured now; print each choice and "
                             "where it would have stopped")


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def adaptive_options(sweep: Sweep, *, budget_s: float | None = None, target_width: float | None = None,
                     full: bool = False) -> AdaptiveOptions | None:
    """The adaptive options of `sweep` (its `adaptive` section, overridden by `budget_s` and `target_width`), or
    None for a full sweep. Raises ValueError for a target topology that cannot be read or has too few nodes."""
    section = sweep.spec.adaptive
    if full or (section is None and budget_s is None and target_width is None):
        return None
    budget = budget_s if budget_s is not None else (section.budget_s if section else None)
    width = target_width if target_width is not None else (section.target_rel_width if section else None)
    if section is None:
        return AdaptiveOptions(budget_s=budget, target_width=width)
    topology = None
    if section.target_topology:
        from orchestrator.io.topofile import load_topology

        try:
            topology = load_topology(section.target_topology)
        except InvalidInput as err:
            raise ValueError(f"adaptive.target_topology: {err}") from None
        if section.nodes > len(topology.nodes):
            raise ValueError(f"adaptive.nodes({section.nodes}) > the {len(topology.nodes)} node(s) of "
                             f"{section.target_topology}")
    return AdaptiveOptions(section.question, budget, width, topology, section.nodes)


def describe(options: AdaptiveOptions) -> str:
    """One line: what the adaptive sweep answers and when it stops."""
    from orchestrator.core.eta import duration_text

    stops = [f"budget {duration_text(options.budget_s)}" if options.budget_s else "",
             f"target width {options.target_width:g}" if options.target_width else ""]
    target = " on the target topology" if options.target_topology is not None else ""
    return (f"adaptive: {options.question}{target}; one trial at a time, chosen by what it teaches per "
            f"core-second; stops at {', '.join(s for s in stops if s) or 'nothing left to teach'}")


def print_outcome(outcome: AdaptiveOutcome, json_mode: bool) -> None:
    """The answer, the stop, the trials measured and the cells skipped, with what they would have cost."""
    if json_mode:
        print(json.dumps({"adaptive": {"answer": _answer_json(outcome.answer), "stop": outcome.stop,
                                       "measured": [m.key for m in outcome.measured],
                                       "skipped": [{"key": c.key, "expected_s": round(c.expected_s, 3),
                                                    "core_s": round(c.core_s, 3)} for c in outcome.skipped]}}),
              flush=True)
        return
    _say("adaptive sweep:", *outcome_lines(outcome.answer, outcome.stop, outcome.measured, outcome.skipped))


def _say(*lines: str) -> None:
    """Lines wrapped between words at the terminal's width (rich), so that none is cut or runs past it."""
    out = console()
    for line in lines:
        out.print(line, markup=False, highlight=False)


def _answer_json(a: Answer) -> dict[str, object]:
    def num(x: float | None) -> float | None:
        return None if x is None or math.isinf(x) else x
    return {"question": a.kind, "unit": a.unit, "value": a.value, "low": num(a.low), "high": num(a.high),
            "width": num(a.width), "layout": a.layout.label if a.layout else None, "why": a.why or None}


def replay(args: argparse.Namespace, sweep: Sweep) -> int:
    """`orch sweep SWEEP --replay FOLDER`: the adaptive policy (this sweep's question and stops) against FOLDER."""
    from orchestrator.core.adaptive import replay as rp
    from orchestrator.core.adaptive.answer import FASTEST
    from orchestrator.io.store import NotAResultsFolder, load_results

    try:
        options = adaptive_options(sweep, budget_s=args.budget, target_width=args.target_width,
                                   full=args.full) or AdaptiveOptions()
    except ValueError as err:
        return fail_input(str(err))
    if options.target_topology is not None:
        return fail_input("--replay answers over the folder's own grid: adaptive.target_topology does not apply")
    try:
        res = load_results(Path(args.replay))
    except NotAResultsFolder as err:
        return fail_input(str(err))
    s = rp.setting_of(res.sweep_spec, res.derived.samples_per_epoch, res.topology, res.environment)
    if not rp.measured_items(res.records):
        return fail_input(f"{args.replay}: no ok throughput or convergence record to replay")
    q = rp.question_of(res.records, options.question or FASTEST, s)
    t = rp.replay(res.records, q, s, rp.adaptive_policy(options.target_width, options.budget_s), rp.ADAPTIVE)
    _say(*(f"[{st.trials}] {st.key} ({st.core_s:,.0f} core-s so far, as recorded): answer "
           f"{relative_text(st.answer.width)}" for st in t.steps[1:]))
    measured = [Measured(st.key, st.reason) for st in t.steps[1:]]
    _say(f"adaptive sweep, replayed on {args.replay} (no trial ran):",
         *outcome_lines(t.steps[-1].answer, t.stop, measured, t.skipped))
    return EXIT_OK
