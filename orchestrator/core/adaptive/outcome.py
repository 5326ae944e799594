"""What an adaptive sweep says when it stops: the answer with its interval, the trials it measured and why,
the cells it skipped and what they would have cost; and the durations its options take. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from orchestrator.core.adaptive.answer import FASTEST, Answer, relative_text
from orchestrator.core.adaptive.policy import Candidate
from orchestrator.core.execution.eta import duration_text
from orchestrator.core.text.units import duration_unit


def answer_text(a: Answer) -> str:
    """The answer in one line, e.g. 'fastest time-to-train: 1×2×128, 11.1 s [9.9–12.4 s] (±11.2%)'.

    >>> answer_text(Answer("fastest", "h", None, 0.0, 0.0, None, 0.0, 0.0, why="no cell measured yet"))
    'no answer yet: no cell measured yet'
    """
    if a.value is None or a.layout is None:
        return f"no answer yet: {a.why}"
    if a.kind == FASTEST and a.unit == "h":
        unit, factor = duration_unit(a.value)
        high = "∞" if math.isinf(a.high) else f"{a.high * factor:.3g}"
        return (f"fastest time-to-train: {a.layout.label}, {a.value * factor:.3g} {unit} [{a.low * factor:.3g}–"
                f"{high} {unit}] ({relative_text(a.width)})")
    if a.kind == FASTEST:
        rates = [1 / v if v > 0 else math.inf for v in (a.value, a.high, a.low)]
        return (f"fastest per sample (no convergence runs): {a.layout.label}, {rates[0]:,.4g} samples/s "
                f"[{rates[1]:,.4g}–{rates[2]:,.4g}] ({relative_text(a.width)})")
    unknown = sum(1 for r in a.rows if math.isinf(r.width))
    return (f"scalability table: {len(a.rows)} layouts, the widest interval {relative_text(a.width)}"
            + (f" ({unknown} without one)" if unknown else "") + f"; fastest {a.layout.label} at {a.value:,.4g} "
            f"samples/s [{a.low:,.4g}–{a.high:,.4g}]")


@dataclass(frozen=True, slots=True)
class Measured:
    """A trial the sweep ran, and why it was chosen."""

    key: str
    reason: str


def outcome_lines(answer: Answer, stop: str, measured: Sequence[Measured], skipped: Sequence[Candidate]) -> list[str]:
    """The answer, why the sweep stopped, the trials measured and the cells skipped with their estimated cost."""
    lines = [answer_text(answer), f"stopped: {stop}", f"measured {len(measured)} trial(s):"]
    lines += [f"  {m.key}: {m.reason}" for m in measured]
    if not skipped:
        return lines + ["skipped: none"]
    seconds = sum(c.expected_s for c in skipped)
    core_s = sum(c.core_s for c in skipped)
    lines.append(f"skipped {len(skipped)} cell(s), which would have cost about {duration_text(seconds)} "
                 f"({core_s:,.0f} core-s) more:")
    lines += [f"  {c.label}: about {duration_text(c.expected_s)} ({c.core_s:,.0f} core-s)" for c in skipped]
    return lines


@dataclass(slots=True)
class AdaptiveOutcome:
    """An adaptive sweep's end: its answer, why it stopped, the trials it measured and the candidates it skipped."""

    answer: Answer
    stop: str
    measured: list[Measured] = field(default_factory=list)
    skipped: list[Candidate] = field(default_factory=list)
