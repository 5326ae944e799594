"""All-reduce time: the α-β model of a ring, fitted per link class to the sweep's calibration records.

A ring all-reduce of `m` bytes over `n` ranks is a reduce-scatter and an all-gather, each of n−1 steps
that move m/n bytes (Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations
in MPICH", IJHPCA 2005; Patarasuk & Yuan 2009):

    t(n, m) = 2(n−1)·α + 2(n−1)/n · m · β

α is the per-step latency (s), β the inverse bandwidth (s/byte). Gloo's all-reduce for CPU tensors is a
ring; oneCCL switches algorithms by message size, so with ccl the fitted α and β are effective values over
the calibrated sizes. A ring is as slow as its slowest link, so a layout is costed with the slowest link
class it uses: within one socket < across sockets < across nodes (`LINK_CLASSES`).

DDP does not all-reduce the gradient as one message: it packs gradients into buckets (the first capped at
1 MiB, the rest at `bucket_cap_mb`, 25 MiB by default) and all-reduces each bucket
(torch/nn/parallel/distributed.py: `_DEFAULT_FIRST_BUCKET_BYTES`, `bucket_cap_mb`). A step's
communication is the sum over its buckets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orchestrator.core.measured.records import Kind, Record, Records
from orchestrator.core.predict.lsq import numeric_jacobian, solve

SOCKET, SOCKETS, NODES = "socket", "sockets", "nodes"
LINK_CLASSES = (SOCKET, SOCKETS, NODES)      # slowest last
DDP_FIRST_BUCKET_BYTES = 1024 * 1024         # torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES
DDP_BUCKET_CAP_BYTES = 25 * 1024 * 1024      # DistributedDataParallel(bucket_cap_mb=25)

# Bounds of the fit, wide enough for any CPU interconnect: latency 10 ns..1 s per step, bandwidth
# 1 MB/s..10 TB/s.
ALPHA_BOUNDS_S = (1e-8, 1.0)
BETA_BOUNDS_S_PER_BYTE = (1e-13, 1e-6)


def ring_allreduce_s(ranks: int, message_bytes: float, alpha_s: float, beta_s_per_byte: float) -> float:
    """Time of one ring all-reduce; 0 for a single rank (nothing to reduce).

    >>> ring_allreduce_s(2, 1e6, 1e-5, 1e-9)       # 2·1·1e-5 + 2·1/2·1e6·1e-9
    0.00102
    >>> ring_allreduce_s(4, 1e6, 1e-5, 1e-9)       # 6e-5 + 1.5e-3
    0.00156
    >>> ring_allreduce_s(1, 1e6, 1e-5, 1e-9)
    0.0
    """
    if ranks <= 1:
        return 0.0
    steps = 2 * (ranks - 1)
    return steps * alpha_s + steps / ranks * message_bytes * beta_s_per_byte


def ddp_buckets(gradient_bytes: int, *, first_bytes: int = DDP_FIRST_BUCKET_BYTES,
                cap_bytes: int = DDP_BUCKET_CAP_BYTES) -> list[int]:
    """Bucket sizes DDP would make for this many gradient bytes (parameter boundaries ignored: a bucket
    closes at the first parameter that crosses the cap, so real buckets are slightly larger and fewer).

    >>> ddp_buckets(512 * 1024)
    [524288]
    >>> [b // 2**20 for b in ddp_buckets(60 * 2**20)]
    [1, 25, 25, 9]
    """
    if gradient_bytes <= 0:
        return []
    buckets = [min(gradient_bytes, first_bytes)]
    left = gradient_bytes - buckets[0]
    while left > 0:
        buckets.append(min(left, cap_bytes))
        left -= buckets[-1]
    return buckets


@dataclass(frozen=True, slots=True)
class LinkFit:
    """α and β of one link class, with the fit's quality on its own points."""

    link: str
    alpha_s: float
    beta_s_per_byte: float
    points: int
    rms_log_error: float          # root-mean-square of log(model/measured) over the points

    @property
    def bandwidth_gb_per_s(self) -> float:
        return 1e-9 / self.beta_s_per_byte

    def allreduce_s(self, ranks: int, message_bytes: float) -> float:
        return ring_allreduce_s(ranks, message_bytes, self.alpha_s, self.beta_s_per_byte)

    def step_s(self, ranks: int, buckets: Sequence[int]) -> float:
        """Communication of one training step: one all-reduce per DDP bucket."""
        return sum(self.allreduce_s(ranks, b) for b in buckets)


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured point: `ranks` ranks over a `link` class all-reduce `message_bytes` in `time_s`."""

    link: str
    ranks: int
    message_bytes: float
    time_s: float


def samples_from_records(records: Iterable[Record]) -> list[Sample]:
    """The calibration points of every ok all-reduce record."""
    out = []
    for r in Records.of(records).ok(Kind.ALLREDUCE):
        section = r.allreduce
        if section is None:
            continue
        for size, t in zip(section.sizes_bytes, section.time_s):
            if t > 0:
                out.append(Sample(section.link, int(section.ranks), float(size), float(t)))
    return out


def fit_link(link: str, samples: Sequence[Sample]) -> LinkFit:
    """Bounded least squares of log t over the samples of one link class (log space: the sizes span four
    decades, and relative error is what matters at every size)."""
    pts = [s for s in samples if s.link == link]
    if not pts:
        raise ValueError(f"no calibration points for link class {link!r}")
    n = np.array([p.ranks for p in pts], dtype=float)
    m = np.array([p.message_bytes for p in pts])
    t = np.array([p.time_s for p in pts])

    def residuals(theta: np.ndarray) -> np.ndarray:
        alpha, beta = np.exp(theta)
        model = 2 * (n - 1) * alpha + 2 * (n - 1) / n * m * beta
        out: np.ndarray = np.log(model) - np.log(t)
        return out

    lower = np.log([ALPHA_BOUNDS_S[0], BETA_BOUNDS_S_PER_BYTE[0]])
    upper = np.log([ALPHA_BOUNDS_S[1], BETA_BOUNDS_S_PER_BYTE[1]])
    start = np.clip(np.log([max(t.min() / 2, 1e-7), max(t.max() / m.max(), 1e-12)]), lower, upper)
    result = solve(residuals, numeric_jacobian(residuals), start, lower, upper)
    alpha, beta = (float(v) for v in np.exp(result.x))
    rms = float(math.sqrt(np.mean(result.fun ** 2)))
    return LinkFit(link, alpha, beta, len(pts), rms)


def fit_links(samples: Sequence[Sample]) -> dict[str, LinkFit]:
    """One fit per link class that has calibration points."""
    return {link: fit_link(link, samples) for link in LINK_CLASSES if any(s.link == link for s in samples)}


def link_for(link: str, fits: Mapping[str, LinkFit]) -> tuple[LinkFit | None, str]:
    """The fit to cost a layout whose slowest link is `link`, and a note when it is a stand-in: an
    uncalibrated class borrows the slowest calibrated class faster than it (optimistic, so said), or, with
    none faster, the fastest calibrated class slower than it (pessimistic, so said): never zero when some
    class was calibrated."""
    if link in fits:
        return fits[link], ""
    at = LINK_CLASSES.index(link)
    faster = [c for c in reversed(LINK_CLASSES[:at]) if c in fits]
    slower = [c for c in LINK_CLASSES[at + 1:] if c in fits]
    if faster or slower:
        stand_in = fits[(faster or slower)[0]]
        return stand_in, (f"links {_LINK_WORDS[link]} were not calibrated: costed as links "
                          f"{_LINK_WORDS[stand_in.link]} ({'optimistic' if faster else 'pessimistic'})")
    return None, f"no all-reduce calibration for links {_LINK_WORDS[link]}: communication not modelled"


def stand_in_direction(link: str, fits: Mapping[str, LinkFit]) -> int:
    """+1 when `link` is costed with a faster class (optimistic), −1 with a slower one, 0 when calibrated or
    not modelled at all."""
    fit, _ = link_for(link, fits)
    if fit is None or fit.link == link:
        return 0
    return 1 if LINK_CLASSES.index(fit.link) < LINK_CLASSES.index(link) else -1


_LINK_WORDS = {SOCKET: "within a socket", SOCKETS: "across sockets", NODES: "across nodes"}


def link_words(link: str) -> str:
    return _LINK_WORDS[link]
