"""The link between nodes, for a layout whose ring crosses it: from the cross-node calibration where one exists,
else from the target topology's statement (`network: {bandwidth_gbit_per_s, latency_us}`), and how far either
may be off. Pure.

A ring's all-reduce across hosts is two things: the wire (the stated rate and latency) and the software (Gloo's
copies and reductions, and its per-step overhead, on the rank's own cores: the fastest class calibrated within a
node, `software_fit`). They are kept apart, so that a stated link moves a prediction wherever the wire is the slower:

- central: α = the latency plus the software's step, β = the slower of the wire at Gloo's central efficiency and the
  software (Gloo pipelines a ring's chunks: sending one while reducing another);
- fast end: the wire alone at Gloo's highest measured efficiency (on separate hosts the software has cores of its
  own, and may hide behind the wire entirely);
- slow end: the wire at Gloo's lowest measured efficiency plus the software, not overlapped.

Gloo's efficiency, the share of a stated rate its all-reduce gets, is measured, not assumed (`GLOO_EFFICIENCY`).

Calibrated: the fit's own held-out error, leave one calibration point out (at the message sizes DDP's buckets
have), both ways.

In a training step a calibrated all-reduce costs ρ times more than alone (`step`: Gloo's thread shares the rank's
cores with the backward pass). Over a slow link that extra is the CPU's part only: the wire's time is not slowed by
sharing cores, but the copies and reductions are. So a step's all-reduce across nodes is the ring alone plus (ρ − 1)
× the ring at the software's speed, and on the bounds: at least the ring at the link's fast end, at most the ring
at its slow end plus ρ × the software's.

>>> from orchestrator.core.predict.comm import LinkFit
>>> loop = LinkFit("socket", 1e-4, 1e-10, 8, 0.02)          # 80 Gbit/s, 100 µs per step
>>> f = stated_fit(NodeLink(1e9, 5e-5), {"socket": loop})   # the wire at 1 Gbit/s × Gloo's central efficiency
>>> round(f.alpha_s * 1e6), round(8 / f.beta_s_per_byte / 1e9, 3)
(150, 0.693)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.core.machine.topology import NodeLink
from orchestrator.core.predict.comm import LINK_CLASSES, NODES, LinkFit, Sample, fit_link

# The share of a stated rate Gloo's all-reduce got, measured (the lowest and the highest; the central value is their
# geometric middle): 0.96-0.985 over veth links shaped by tbf at 1 Gbit/s and 200 Mbit/s between namespaces of one
# host (results/emulated-retinanet and emulated-torchvision, summary.json's fitted rates); 0.55-0.68 between AWS
# hosts whose links netem shaped to 5, 2 and 1 Gbit/s with 1-10 ms of delay, and 0.49 of the default network's
# nominal 10 Gbit/s (BinhangYuan/tc_cluster_setting, results/allreduce.md, the ring fitted to its 4-host rows).
GLOO_EFFICIENCY = (0.49, 0.98)
# Calibration points below this size do not enter the held-out error: DDP's smallest bucket is its first, 1 MiB
# (a last bucket may be smaller), and a 4 KiB all-reduce's relative noise says nothing about a 25 MiB one.
HELD_OUT_MIN_BYTES = 1 << 20
CALIBRATED, STATED = "calibrated", "stated"


@dataclass(frozen=True, slots=True)
class NodeLinkCost:
    """How a ring across nodes is costed: the link's central fit and its fast and slow ends, the software's own fit
    (the fastest calibrated class, None without one) and the note every row across nodes carries."""

    fit: LinkFit
    fast_fit: LinkFit
    slow_fit: LinkFit
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
        return (self.fast_fit.step_s(ranks, buckets),
                self.slow_fit.step_s(ranks, buckets) + max(rho, 1.0) * self.software_s(ranks, buckets))


def _scaled(fit: LinkFit, factor: float) -> LinkFit:
    return LinkFit(fit.link, fit.alpha_s * factor, fit.beta_s_per_byte * factor, fit.points, fit.rms_log_error)


def software_fit(fits: Mapping[str, LinkFit]) -> LinkFit | None:
    """The fastest calibrated class within a node (loopback: the software's own cost per step and per byte)."""
    return next((fits[c] for c in LINK_CLASSES if c in fits and c != NODES), None)


def stated_fit(link: NodeLink, fits: Mapping[str, LinkFit], end: str = "central") -> LinkFit:
    """The ring's α and β from a stated link and the software's cost (`software_fit`, where calibrated), at Gloo's
    central efficiency, or at the interval's `end` ("fast": the wire alone at the highest measured efficiency;
    "slow": the wire at the lowest plus the software, not overlapped)."""
    software = software_fit(fits)
    low, high = GLOO_EFFICIENCY
    efficiency = {"central": (low * high) ** 0.5, "fast": high, "slow": low}[end]
    wire_beta = 8 / (link.bandwidth_bits_per_s * efficiency)
    latency = link.latency_s or 0.0
    if software is None or end == "fast":
        return LinkFit(NODES, max(latency, 1e-9), wire_beta, 0, 0.0)
    if end == "slow":
        return LinkFit(NODES, max(latency + software.alpha_s, 1e-9), wire_beta + software.beta_s_per_byte, 0, 0.0)
    return LinkFit(NODES, max(latency + software.alpha_s, 1e-9), max(wire_beta, software.beta_s_per_byte), 0, 0.0)


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
        return NodeLinkCost(calibrated, _scaled(calibrated, math.exp(-error)), _scaled(calibrated, math.exp(error)),
                            software, CALIBRATED, note)
    if stated is None:
        return None
    software_words = (f"; the software's own cost per step and byte is the {software.link} calibration's, apart from "
                      "the wire" if software is not None else "")
    low, high = GLOO_EFFICIENCY
    note = (f"links across nodes costed from the topology file's statement, {stated.words()}{software_words}: no "
            f"cross-node calibration; Gloo's all-reduce assumed to get {low:.0%}-{high:.0%} of the rate, as measured "
            f"(centrally {(low * high) ** 0.5:.0%})")
    return NodeLinkCost(stated_fit(stated, fits), stated_fit(stated, fits, "fast"), stated_fit(stated, fits, "slow"),
                        software, STATED, note)
