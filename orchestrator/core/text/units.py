"""Values with units, as orch reads and writes them: durations in the unit that reads best. Pure."""

from __future__ import annotations

SECONDS_PER_HOUR = 3600.0


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
