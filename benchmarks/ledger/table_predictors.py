"""Predictions of tables that are not results folders (public measurements), by orch's own models: the functions a
ledger case of `type: table` names. Each takes the case's input table (JSON) and returns rows to save:
{what, label, axes, doublings, predicted, low, high, baselines, note}.

`ring_from_smallest` — a Gloo all-reduce table (time per message size, per node count, per link setting): fit the
ring's α and β (`orchestrator.core.predict.comm`, Thakur, Rabenseifner & Gropp 2005) to the smallest node count's
rows of each setting, and predict the larger node counts. Its interval comes from what the smallest node count
cannot tell apart. Its time splits into a part that grows with the ranks and a part that does not, in any
proportion the two message sizes allow. The ring reads α as per-hop latency, paid 2(n−1) times, and β as the
bytes' 2(n−1)/n share: the central value. If all of it were a per-call cost that does not grow, the time would
stay what the smallest node count took: the low end (more nodes never make a ring faster). The high end is as far
above the central value, in log, as the low end is below it: nothing measured bounds it, so it mirrors the one
bound that exists. The baseline: the smallest node count's time, unchanged.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrator.core.predict.comm import ring_allreduce_s  # noqa: E402

Rows = list[dict[str, object]]


def _ring_fit(points: list[tuple[int, float, float]]) -> tuple[float, float]:
    """α, β of t = 2(n−1)α + 2(n−1)/n·m·β through (n, bytes, seconds) points of one node count (least squares,
    α and β ≥ 0)."""
    import numpy as np

    a = np.array([[2 * (n - 1), 2 * (n - 1) / n * m] for n, m, _ in points])
    t = np.array([s for _, _, s in points])
    (alpha, beta), *_ = np.linalg.lstsq(a, t, rcond=None)
    if alpha < 0:       # the bandwidth term alone
        alpha, beta = 0.0, float(np.dot(a[:, 1], t) / np.dot(a[:, 1], a[:, 1]))
    return float(alpha), float(max(beta, 0.0))


def ring_from_smallest(table: dict) -> Rows:
    """Every row to predict (a row without "ms") from the measured rows (with "ms") of the smallest node count of
    its setting."""
    measured = [r for r in table["rows"] if "ms" in r]
    smallest = min(r["nodes"] for r in measured)
    out: Rows = []
    for r in (r for r in table["rows"] if "ms" not in r):
        base = [b for b in measured if b["setting"] == r["setting"] and b["nodes"] == smallest]
        alpha, beta = _ring_fit([(b["nodes"], float(b["bytes"]), b["ms"] / 1e3) for b in base])
        n, m = r["nodes"], float(r["bytes"])
        central = ring_allreduce_s(n, m, alpha, beta)
        base_ms = next(b["ms"] for b in base if b["bytes"] == r["bytes"])
        low = min(central, base_ms / 1e3)
        out.append({"what": "all-reduce ms", "label": r["label"], "axes": ["nodes"],
                    "doublings": round(math.log2(n / smallest), 6), "predicted": central * 1e3,
                    "low": low * 1e3, "high": central * central / low * 1e3,
                    "baselines": {"same_as_smallest": base_ms},
                    "note": f"α {alpha * 1e6:.0f} µs, {8 / beta / 1e9:.2f} Gbit/s effective, fitted to {smallest} "
                            "nodes"})
    return out


def stated_p2p(table: dict) -> Rows:
    """One transfer of m bytes between two hosts over a stated link, as orch costs a stated link
    (`network.stated_fit`: the latency, then the bytes at the rate × Gloo's efficiency; no software figure of those
    hosts): central, and the fast and slow ends. The baseline: the stated rate at 100%, the latency once."""
    from orchestrator.core.machine.topology import NodeLink
    from orchestrator.core.predict.network import stated_fit

    out: Rows = []
    for r in table["rows"]:
        link = NodeLink(r["rate_gbit"] * 1e9, r["delay_ms"] / 1e3 if r["delay_ms"] else None)
        m = float(r["bytes"])
        central, fast, slow = (f.alpha_s + m * f.beta_s_per_byte for f in
                               (stated_fit(link, {}, end) for end in ("central", "fast", "slow")))
        naive = r["delay_ms"] / 1e3 + m * 8 / (r["rate_gbit"] * 1e9)
        out.append({"what": "transfer ms", "label": r["label"], "axes": ["links"], "doublings": 0.0,
                    "predicted": central * 1e3, "low": fast * 1e3, "high": slow * 1e3,
                    "baselines": {"stated_rate": naive * 1e3}, "note": "the statement alone: rate and delay"})
    return out


TABLE_PREDICTORS: dict[str, Callable[[dict], Rows]] = {"ring_from_smallest": ring_from_smallest,
                                                        "stated_p2p": stated_p2p}
