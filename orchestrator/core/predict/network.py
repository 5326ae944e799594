"""The link between nodes, for a layout whose ring crosses it: from the cross-node calibration where one exists,
else from the target topology's statement (`network: {bandwidth_gbit_per_s, latency_us}`), and how far either
may be off. Pure.

A stated link becomes a ring's α and β: α = the stated latency plus the software's own per-step cost (the
fastest calibrated class's α: Gloo's overhead on loopback), β = the slower of the wire (8 ÷ bandwidth) and the
software's per-byte cost (that class's β: the copies and the reduction). How far it may be off:

- calibrated: the fit's own held-out error, leave one calibration point out (at the message sizes DDP's
  buckets have), both ways;
- stated: a link never beats its rate, and Gloo over TCP was assumed to get at least `STATED_EFFICIENCY_LOW` of
  it (an assumption, said on every row: in issue 42's hand trial Gloo's all-reduce got about 0.95 of a tbf rate
  on emulated links; a real NIC's single TCP stream per peer may give less).

In a training step a calibrated all-reduce costs ρ times more than alone (`step`: Gloo's thread shares the rank's
cores with the backward pass). Over a slow link that extra is the CPU's part only: the wire's time is not slowed by
sharing cores, but the copies and reductions are, and are not hidden behind the wire. So a step's all-reduce across
nodes is the ring alone plus (ρ − 1) × the ring at the software's speed (on one node, where the two are one ring,
ρ × the ring, as before), and on the bounds: at least the ring alone at the link's fast end, at most the ring at
its slow end plus ρ × the software's (a rank's whole share of the CPU work). Either is added to a rank's compute:
on emulated links at 10, 1 and 0.2 Gbit/s (benchmarks/bench_emulated_cluster.py, docs/clusters.md) a step took its
compute plus the whole all-reduce, none of it hidden behind the backward pass.

>>> from orchestrator.core.predict.comm import LinkFit
>>> loop = LinkFit("socket", 1e-4, 1e-10, 8, 0.02)          # 80 Gbit/s, 100 µs per step
>>> f = stated_fit(NodeLink(1e9, 5e-5), {"socket": loop})
>>> round(f.alpha_s * 1e6), round(8 / f.beta_s_per_byte / 1e9, 3)
(150, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.core.machine.topology import NodeLink
from orchestrator.core.predict.comm import LINK_CLASSES, NODES, LinkFit, Sample, fit_link

STATED_EFFICIENCY_LOW = 0.5
# Calibration points below this size do not enter the held-out error: DDP's smallest bucket is its first, 1 MiB
# (a last bucket may be smaller), and a 4 KiB all-reduce's relative noise says nothing about a 25 MiB one.
HELD_OUT_MIN_BYTES = 1 << 20
CALIBRATED, STATED = "calibrated", "stated"


@dataclass(frozen=True, slots=True)
class NodeLinkCost:
    """How a ring across nodes is costed: the link's fit, how far its time may be off each way (factors on the ring's
    time: `fast` ≤ 1 ≤ `slow`), the software's own fit (the fastest calibrated class, None without one) and the
    note every row across nodes carries."""

    fit: LinkFit
    fast: float
    slow: float
    software: LinkFit | None
    source: str
    note: str

    def ring_s(self, ranks: int, buckets: Sequence[int]) -> float:
        return self.fit.step_s(ranks, buckets)

    def software_s(self, ranks: int, buckets: Sequence[int]) -> float:
        return self.software.step_s(ranks, buckets) if self.software is not None else 0.0

    def in_step_s(self, ranks: int, buckets: Sequence[int], rho: float) -> float:
        """The all-reduce's cost inside a step (central): alone, plus what sharing the cores adds to its CPU part."""
        return self.ring_s(ranks, buckets) + max(rho - 1.0, 0.0) * self.software_s(ranks, buckets)

    def bounds_s(self, ranks: int, buckets: Sequence[int], rho: float) -> tuple[float, float]:
        """(least, most) the all-reduce costs a step: alone at the link's fast end; at its slow end plus ρ × the
        software's part."""
        ring = self.ring_s(ranks, buckets)
        return ring * self.fast, ring * self.slow + max(rho, 1.0) * self.software_s(ranks, buckets)


def software_fit(fits: Mapping[str, LinkFit]) -> LinkFit | None:
    """The fastest calibrated class within a node (loopback: the software's own cost per step and per byte)."""
    return next((fits[c] for c in LINK_CLASSES if c in fits and c != NODES), None)


def stated_fit(link: NodeLink, fits: Mapping[str, LinkFit]) -> LinkFit:
    """The ring's α and β from a stated link and the software's cost (`software_fit`, where calibrated)."""
    software = software_fit(fits)
    wire_beta = 8 / link.bandwidth_bits_per_s
    alpha = (link.latency_s or 0.0) + (software.alpha_s if software is not None else 0.0)
    beta = max(wire_beta, software.beta_s_per_byte) if software is not None else wire_beta
    return LinkFit(NODES, max(alpha, 1e-9), beta, 0, 0.0)


def held_out_error(samples: Sequence[Sample], link: str = NODES,
                   min_bytes: int = HELD_OUT_MIN_BYTES) -> float | None:
    """The largest |log(predicted ÷ measured)| of the link's α-β fit over its points of at least `min_bytes`, each
    predicted by a fit to the others (leave one out); None with fewer than 3 points (2 parameters)."""
    points = [s for s in samples if s.link == link]
    if len(points) < 3:
        return None
    worst = None
    for i, held in enumerate(points):
        if held.message_bytes < min_bytes:
            continue
        fit = fit_link(link, points[:i] + points[i + 1:])
        error = abs(math.log(fit.allreduce_s(held.ranks, held.message_bytes) / held.time_s))
        worst = error if worst is None else max(worst, error)
    return worst


def node_link_cost(fits: Mapping[str, LinkFit], held_out: float | None, stated: NodeLink | None) -> NodeLinkCost | None:
    """The node link's cost: the calibration where one exists (the statement said beside it), else the statement;
    None with neither (the layout then borrows a stand-in class, as before)."""
    software = software_fit(fits)
    calibrated = fits.get(NODES)
    if calibrated is not None:
        error = held_out if held_out is not None else calibrated.rms_log_error
        beside = f"; the topology file states {stated.words()}" if stated is not None else ""
        why = "its held-out error" if held_out is not None else "the fit's own rms error (too few points to hold out)"
        note = (f"links across nodes: the cross-node calibration, {8 / calibrated.beta_s_per_byte / 1e9:.3g} Gbit/s "
                f"and {calibrated.alpha_s * 1e6:.0f} µs per step, ±{math.expm1(error) * 100:.0f}% ({why}){beside}")
        return NodeLinkCost(calibrated, math.exp(-error), math.exp(error), software, CALIBRATED, note)
    if stated is None:
        return None
    fit = stated_fit(stated, fits)
    software_words = (f" and the software's own cost per step and byte (the {software.link} calibration's)"
                      if software is not None else "")
    note = (f"links across nodes costed from the topology file's statement, {stated.words()}{software_words}: no "
            f"cross-node calibration; assumed to give Gloo {STATED_EFFICIENCY_LOW:.0%}–100% of its rate")
    return NodeLinkCost(fit, 1.0, 1 / STATED_EFFICIENCY_LOW, software, STATED, note)
