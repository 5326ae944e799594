"""What `orch sweep` prints of an adaptive sweep: the outcome when it stops (`orchestrator.app.sweep`), and
`--replay FOLDER`'s choices and stop (`orchestrator.app.adaptive.replay`)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from orchestrator.cli.common import console
from orchestrator.core.adaptive.answer import Answer, relative_text
from orchestrator.core.adaptive.outcome import outcome_lines

if TYPE_CHECKING:   # the run layer imports Ray: only a sweep that runs pays for it
    from orchestrator.app.adaptive import Replayed
    from orchestrator.core.adaptive.outcome import AdaptiveOutcome


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


def print_replay(replayed: Replayed) -> None:
    """Each choice of the replayed policy (with the core-seconds spent so far), then where it stopped."""
    t = replayed.trajectory
    _say(*(f"[{st.trials}] {st.key} ({st.core_s:,.0f} core-s so far, as recorded): answer "
           f"{relative_text(st.answer.width)}" for st in t.steps[1:]))
    _say(f"adaptive sweep, replayed on {replayed.folder} (no trial ran):",
         *outcome_lines(t.steps[-1].answer, t.stop, replayed.measured, t.skipped))
