"""`RxTxB` layout strings for `orch profile`: ranks × threads per rank × local batch.

    >>> parse_layout("2x1x8")
    Trial(ranks=2, threads_per_rank=1, local_batch=8)
"""

from __future__ import annotations

import re

from orchestrator.core.planning.trial import Trial
from orchestrator.errors import InputError

_LAYOUT = re.compile(r"^\s*(\d+)\s*[x×]\s*(\d+)\s*[x×]\s*(\d+)\s*$")


def parse_layout(text: str) -> Trial:
    """Raises InputError naming the expected form."""
    match = _LAYOUT.match(text)
    if not match:
        raise InputError(f"layout {text!r} is not RxTxB (ranks x threads per rank x local batch, e.g. 1x2x8)")
    ranks, threads, batch = (int(g) for g in match.groups())
    zero = [name for name, v in (("ranks", ranks), ("threads per rank", threads), ("local batch", batch)) if v < 1]
    if zero:
        raise InputError(f"layout {text!r}: {', '.join(zero)} must be >= 1")
    return Trial(ranks, threads, batch)


def layout_label(trial: Trial) -> str:
    """'2x1x8': the folder and column name of a profiled layout."""
    return f"{trial.ranks}x{trial.threads_per_rank}x{trial.local_batch}"
