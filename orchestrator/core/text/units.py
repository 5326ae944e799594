"""Values with units, as orch reads and writes them: one form everywhere a command takes a duration or a rate
(`30m`, `2h`, `1h30m`, `250us`; `25gbit`), and durations printed in the unit that reads best. Pure.

A duration's units: d, h, m (minutes), s, ms, us; pieces add up (`1h30m`); a bare number is seconds. A rate's
units are tc's, in bits per second: bit, kbit, mbit, gbit, tbit.
"""

from __future__ import annotations

import math
import re

from orchestrator.errors import InputError

SECONDS_PER_HOUR = 3600.0
DURATION_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "min": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
RATE_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
NODE_HOURS_UNITS = ("node-h", "node-hours")
_PIECE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|us|min|d|h|m|s)?\s*", re.IGNORECASE)
DURATION_FORMS = "30m, 2h, 1h30m, 90s, 250ms (a bare number is seconds)"


def parse_duration(text: str) -> float:
    """Seconds of a duration: pieces of a number and a unit, added up; a bare number is seconds. InputError,
    with the accepted forms, for anything else (a negative or infinite one too).

    >>> parse_duration("30m"), parse_duration("1h30m"), parse_duration("250us"), parse_duration("1800")
    (1800.0, 5400.0, 0.00025, 1800.0)
    >>> parse_duration("2 days")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    orchestrator.errors.InputError: '2 days' is not a duration: give 30m, 2h, 1h30m, 90s, 250ms (...)
    """
    pieces, at = [], 0
    while at < len(text):
        match = _PIECE.match(text, at)
        if match is None or match.end() == at:
            break
        pieces.append(match)
        at = match.end()
    bare = [p for p in pieces if p[2] is None]
    if at < len(text) or not pieces or (bare and len(pieces) > 1):
        raise InputError(f"{text!r} is not a duration: give {DURATION_FORMS}")
    seconds = sum(float(p[1]) * DURATION_UNITS[(p[2] or "s").lower()] for p in pieces)
    if not math.isfinite(seconds):
        raise InputError(f"{text!r}: not a finite duration")
    return seconds


def positive_duration(text: str) -> float:
    """Seconds of a duration that must be more than zero (a timeout, a budget, a deadline).

    >>> positive_duration("2h")
    7200.0
    """
    seconds = parse_duration(text)
    if seconds <= 0:
        raise InputError(f"{text!r}: must be more than 0 seconds")
    return seconds


def parse_rate(text: str) -> float:
    """A link rate as tc writes it, in bits per second.

    >>> parse_rate("1gbit"), parse_rate("200mbit"), parse_rate("2.5Gbit")
    (1000000000.0, 200000000.0, 2500000000.0)
    """
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]+)\s*", text)
    unit = match[2].lower() if match else ""
    if match is None or unit not in RATE_UNITS or float(match[1]) <= 0:
        raise InputError(f"rate {text!r}: a positive number and one of {', '.join(RATE_UNITS)} (bits per second, "
                         "as tc writes them), e.g. 25gbit or 200mbit")
    return float(match[1]) * RATE_UNITS[unit]


def parse_node_hours(text: str) -> float:
    """Node-hours (a cluster's cost: nodes × hours), given with their unit: '200node-h', '12.5 node-hours'.

    >>> parse_node_hours("200node-h"), parse_node_hours("12.5 node-hours")
    (200.0, 12.5)
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(node-h|node-hours)\s*", text, re.IGNORECASE)
    if match is None or not float(match[1]) > 0 or not math.isfinite(float(match[1])):
        raise InputError(f"{text!r} is not a cost in node-hours: give a positive number and its unit, "
                         f"e.g. 200node-h ({' or '.join(NODE_HOURS_UNITS)})")
    return float(match[1])


def duration_unit(hours: float) -> tuple[str, float]:
    """The unit that reads best for a duration in hours, and the factor from hours to it.

    >>> duration_unit(0.0001), duration_unit(0.5), duration_unit(30.0), duration_unit(100.0)
    (('s', 3600.0), ('min', 60.0), ('h', 1.0), ('d', 0.041666666666666664))
    """
    if hours < 1 / 60:
        return "s", SECONDS_PER_HOUR
    if hours < 1:
        return "min", 60.0
    if hours < 48:
        return "h", 1.0
    return "d", 1 / 24


def human_duration(hours: float) -> str:
    """
    >>> human_duration(8.44e-05), human_duration(0.106), human_duration(7.5), human_duration(100)
    ('0.30 s', '6.36 min', '7.50 h', '4.17 d')
    """
    unit, factor = duration_unit(hours)
    return f"{hours * factor:.2f} {unit}"
