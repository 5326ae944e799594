"""The memory probe's result: what one rank of a workload measured at two small local batches, and the figures
drawn from it (peak private memory affine in the batch with a stated margin, and the libraries' pages a node
holds once; training FLOPs per sample; samples per epoch), each with the text that says where it came from.

Memory is measured and planned in two parts (`orchestrator.run.procmem`): each rank's **private** memory (its
resident set less its file-backed pages: what it allocates, which no other process shares or changes), and the
**libraries** (its file-backed pages: torch's and the interpreter's, a few hundred MiB), which the ranks of a
node share and the node holds once. A probe of format 1 measured a rank alone's unique memory, libraries in it
(`MemoryModel.library_mib`, of the intercept); it still reads, and plans as it did.

The probe runs one rank without DDP (`orchestrator.run.driver.probe`), so the memory model adds what DDP holds beside
the gradients at two ranks or more: its gradient buckets, one more fp32-sized copy of the gradients (none when
the gradients are views into the buckets, half a copy more for a 16-bit communication hook's compressed copy;
`orch.workload.ddp_gradient_copies` counts them, minus the gradients themselves, which the probe measured).
The buckets are counted at one rank too, where orch does not wrap DDP, as the built-in formulas count them:
a rank of one is overstated by that much, never understated.

    >>> m = fit_memory((2, 8), (820.0, 868.0), ddp_mib=45.0, margin=0.15, node_library_mib=330.0)
    >>> m.intercept_mib, m.slope_mib, round(m.mib(64)), m.libraries_mib
    (804.0, 8.0, 1565, 330.0)
    >>> print(m.text())
    probe at batches 2 and 8: 804 + 8·b MiB private per rank, + 45 MiB for DDP’s gradient buckets, ...
    >>> m.text().endswith("+ 15% margin; + 330 MiB of libraries once per node")
    True

Pure: no torch, no processes, no clock (the caller passes the time of measurement as text).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.core.json.jsonobject import JsonObject, optional
from orchestrator.core.json.values import JsonDict

# The probe's method: a cached result of another format is measured again. 2: private memory and the libraries
# apart (1: a rank alone's unique memory, the libraries in it).
PROBE_FORMAT = 2
# Two local batches, each in a process of its own (a process's high-water mark never falls). 2, not 1: a batch of
# one takes other paths in some models (batch norm refuses one value per channel in training). 8, not 4: the
# slope is the difference of two peaks divided by the batch gap, so a gap of 6 divides the peaks' jitter (a few
# MiB of allocator and library pages) three times less than a gap of 2, at the cost of a step of 8 samples.
PROBE_BATCHES = (2, 8)
# Training steps per probe process: the first creates the optimizer's state and oneDNN's primitives, the
# second is the steady state; the others show that nothing still grows, and time a step: the median of the four
# after the first (two were too few: one step still warming moved a batch-2 step from 0.45 s to 0.71 s).
PROBE_STEPS = 5
# Added on top of the fitted peak: allocator fragmentation at larger batches, the collectives' buffers at more
# ranks, and what a few steps do not show. benchmarks/validate_probe.py measures how much of it is used.
MEMORY_MARGIN = 0.15
# Batches a throughput trial holds in memory before timing (run.rank.protocol.measure_throughput), at most: part of
# its peak, so the probe holds as many.
MAX_HELD_BATCHES = 16


def held_batches(data: str, warmup_steps: int, timed_steps: int) -> int:
    """Distinct batches a throughput trial prepares before timing (data: memory), which stay in memory
    through it: as many as it steps, at most MAX_HELD_BATCHES; none ahead with data: stream.

    >>> held_batches("memory", 3, 10), held_batches("memory", 5, 40), held_batches("stream", 3, 10)
    (13, 16, 0)
    """
    if data != "memory":
        return 0
    return max(1, min(MAX_HELD_BATCHES, warmup_steps + timed_steps))


def flop_text(flops: float) -> str:
    """FLOPs with the largest unit that keeps a figure of at least 1.

    >>> flop_text(8.18e9), flop_text(1408.0), flop_text(12.0)
    ('8.18 GFLOP', '1.41 kFLOP', '12 FLOP')
    """
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.3g} FLOP"


def _number(value: float) -> str:
    """A MiB figure as the source text prints it: whole MiB from 10 up, three significant digits below."""
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.3g}"


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryModel(JsonObject):
    """One rank's peak private memory: (intercept + slope·local batch + DDP's buckets) × (1 + margin), MiB; and
    the libraries' pages, which a node holds once whatever its number of ranks (`libraries_mib`)."""

    batches: tuple[int, ...]          # the local batches measured
    peak_mib: tuple[float, ...]       # the peak measured at each (private; format 1: unique)
    intercept_mib: float
    slope_mib: float                  # per sample of local batch
    ddp_mib: float                    # DDP's gradient buckets (and a 16-bit hook's copy), not in the measurement
    margin: float                     # the fraction added on top
    notes: tuple[str, ...] = ()       # what the fit had to decide (a slope taken as 0)
    library_mib: float = 0.0          # format 1: of the intercept, the libraries counted for every rank
    node_library_mib: float | None = optional()   # the libraries' pages, apart: once per node (format 2)

    def mib(self, local_batch: int) -> float:
        """One rank's own share at `local_batch`: what each rank of a node adds to it."""
        return (self.intercept_mib + self.slope_mib * local_batch + self.ddp_mib) * (1 + self.margin)

    @property
    def libraries_mib(self) -> float:
        """What a node holds once for its ranks, beside their `mib` each (0 for a format-1 model, whose ranks
        count the libraries in their own figure)."""
        return self.node_library_mib or 0.0

    def text(self) -> str:
        """Where the figure comes from, as `orch plan` and the results say it."""
        measured = " and ".join(map(str, self.batches))
        text = (f"probe at batches {measured}: {_number(self.intercept_mib)} + {_number(self.slope_mib)}·b MiB"
                + (" private per rank" if self.node_library_mib is not None else "")
                + (f" ({_number(self.library_mib)} MiB of it libraries, as for a rank alone on its node)"
                   if self.library_mib else "")
                + (f", + {_number(self.ddp_mib)} MiB for DDP’s gradient buckets" if self.ddp_mib else "")
                + f", + {self.margin:.0%} margin")
        text += "".join(f" ({note})" for note in self.notes)
        if self.node_library_mib:
            text += f"; + {_number(self.node_library_mib)} MiB of libraries once per node"
        return text


def fit_memory(batches: Sequence[int], peaks_mib: Sequence[float], *, ddp_mib: float,
               margin: float = MEMORY_MARGIN, library_mib: float = 0.0,
               node_library_mib: float | None = None) -> MemoryModel:
    """The least-squares line through (batch, peak) (exact through two points). A peak that fell as the batch
    grew is jitter, not a negative cost per sample: the slope is then 0, the intercept the largest peak, and
    a note says so. Raises ValueError for fewer than two distinct batches or a peak that is not a number.

    >>> m = fit_memory((2, 8), (500.0, 497.0), ddp_mib=0.0)
    >>> m.slope_mib, m.notes
    (0.0, ('the peak fell by 3 MiB from batch 2 to 8: jitter, slope taken as 0',))
    """
    if len(batches) != len(peaks_mib) or len(set(batches)) < 2:
        raise ValueError(f"a memory fit needs peaks at two distinct batches or more, got batches {list(batches)} "
                         f"and peaks {list(peaks_mib)}")
    if not all(math.isfinite(p) and p > 0 for p in peaks_mib):
        raise ValueError(f"peak memory must be positive numbers, got {list(peaks_mib)}")
    n = len(batches)
    mean_b, mean_m = sum(batches) / n, sum(peaks_mib) / n
    slope = (sum((b - mean_b) * (m - mean_m) for b, m in zip(batches, peaks_mib, strict=True))
             / sum((b - mean_b) ** 2 for b in batches))
    notes: tuple[str, ...] = ()
    if slope < 0:
        drop = peaks_mib[batches.index(min(batches))] - peaks_mib[batches.index(max(batches))]
        notes = (f"the peak fell by {_number(drop)} MiB from batch {min(batches)} to {max(batches)}: jitter, "
                 "slope taken as 0",)
        return MemoryModel(batches=tuple(batches), peak_mib=tuple(peaks_mib), intercept_mib=max(peaks_mib),
                           slope_mib=0.0, ddp_mib=ddp_mib, margin=margin, notes=notes, library_mib=library_mib,
                           node_library_mib=node_library_mib)
    return MemoryModel(batches=tuple(batches), peak_mib=tuple(peaks_mib), intercept_mib=mean_m - slope * mean_b,
                       slope_mib=slope, ddp_mib=ddp_mib, margin=margin, library_mib=library_mib,
                       node_library_mib=node_library_mib)


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbePoint(JsonObject):
    """What one probe process measured at one local batch. Format 2 writes the private figures; a point of
    format 1 has the unique-memory ones (`*_uss_mib`, the libraries counted in) instead."""

    local_batch: int
    peak_private_mib: float | None = optional()          # the figure fitted: the rank's own, else the launcher's
    rank_peak_private_mib: float | None = optional()     # the rank's own: its high-water mark less its files' pages
    watched_peak_private_mib: float | None = optional()  # the launcher's watch, as in a sweep's records
    library_mib: float = 0.0             # its file-backed pages (the libraries), apart (format 1: in the peak)
    peak_uss_mib: float | None = optional()              # format 1: a rank alone's unique memory
    rank_peak_uss_mib: float | None = optional()
    watched_peak_uss_mib: float | None = optional()
    flops_per_step: float | None         # orch's FLOP counter on one training step
    flops_error: str | None = optional()  # why counting failed
    flops_rule: str | None = optional()   # how they were counted (core.profile.flop_count); absent: torch's own formula
    samples_per_epoch: int | None = None  # Trainer.samples_per_epoch()
    gradient_bytes: int = 0              # the trained parameters' gradients
    wall_s: float = 0.0
    step_s: float | None = optional()    # a steady training step (the median of those after the first), seconds
    startup_s: float | None = optional()  # from its launch to its first step (imports, build), seconds

    @property
    def peak_mib(self) -> float:
        """The figure fitted: the private peak (format 1: the unique one)."""
        peak = self.peak_private_mib if self.peak_private_mib is not None else self.peak_uss_mib
        return peak if peak is not None else 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeResult(JsonObject):
    """A probe of one workload, parameters, precision and torch version (what `key` hashes, see `probe_key`)."""

    format: int
    key: str
    workload: str                   # the reference the ranks find it by
    code: str                       # a fingerprint of the file that defines it (an edit invalidates the probe)
    params: JsonDict                # with the precision chosen
    precision: str
    torch: str
    backend: str
    held_batches: int               # batches held in memory as a throughput trial holds them
    threads: int
    measured_at: str
    points: tuple[ProbePoint, ...]
    ddp_copies: float               # gradient-sized copies DDP adds (orch.workload.ddp_gradient_copies − 1)
    memory: MemoryModel
    flops_per_sample: float | None
    flops_source: str
    samples_per_epoch: int | None
    samples_source: str
    cpu: str | None = optional()    # the CPU's model name where it ran: its step times hold for that CPU only
    flops_rule: str | None = optional()   # how flops_per_sample was counted (core.profile.flop_count); absent: torch's

    def startup_s(self, cpu: str) -> float | None:
        """A rank's start-up on `cpu` (launch to first step: imports, the model's build), the mean of the probe's
        processes; None where none said, or on another CPU."""
        said = [p.startup_s for p in self.points if p.startup_s is not None and p.startup_s > 0]
        return sum(said) / len(said) if said and self.cpu and cpu == self.cpu else None

    def step_s(self, local_batch: int, threads: int, cpu: str) -> float | None:
        """One rank's training step at `local_batch` on `threads` threads of `cpu`, from the steps the probe
        timed; None where it timed none, or ran on another CPU (a step time is the CPU's, not the workload's).

        Affine in the batch through the timed points (a step has a fixed part: optimizer, launches, the
        parameters' traffic; a peak-to-peak line never falls: a slope below 0 is jitter, taken as 0). Linear in
        threads from the probe's own: the probe ran every core of its socket at once, so its per-core rate is
        the rate of cores that all compute, as convergence runs packed side by side do; a layout with fewer
        threads alone is faster than that, by its thread scaling, which only its own trial measures.

        """
        timed = [(p.local_batch, p.step_s) for p in self.points if p.step_s is not None and p.step_s > 0]
        if not timed or not self.cpu or cpu != self.cpu:
            return None
        (b0, s0), (b1, s1) = min(timed), max(timed)
        slope = max(0.0, (s1 - s0) / (b1 - b0)) if b1 > b0 else s0 / b0   # one batch timed: proportional
        at_batch = max(s0 + slope * (local_batch - b0), s0 * min(1.0, local_batch / b0))
        return at_batch * self.threads / max(1, threads)


@dataclass(frozen=True, kw_only=True, slots=True)
class _KeyFields(JsonObject):
    """What a probe depends on, as `probe_key` hashes it (io.probe_cache.probe_key_fields writes it): the fields a
    result keeps. Its other keys (the batches, the steps, the FLOP rule) are in the hash only."""

    format: int
    workload: str
    code: str
    params: JsonDict
    precision: str
    torch: str
    backend: str
    held_batches: int


def probe_key(fields: Mapping[str, object]) -> str:
    """The cache key of a probe: a hash of what changes its result (format, workload and its code, parameters,
    precision, torch, backend, held batches), in canonical JSON.

    >>> probe_key({"format": 1, "workload": "w"}) == probe_key({"workload": "w", "format": 1})
    True
    """
    text = json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _flops(points: Sequence[ProbePoint]) -> tuple[float | None, str]:
    """FLOPs per sample from the largest batch's counted step, with its source; None with the reason."""
    largest = max(points, key=lambda p: p.local_batch)
    if largest.flops_per_step is None:
        return None, ("not counted: orch's FLOP counter (torch's) failed on a training step "
                      f"({largest.flops_error or 'no reason given'})")
    if largest.flops_per_step <= 0:
        return None, ("not counted: orch's FLOP counter (torch's) found no matmul or convolution in a training step "
                      "(it counts only those); give the workload's train_flops_per_sample")
    per_sample = largest.flops_per_step / largest.local_batch
    return per_sample, (f"counted by orch's FLOP counter (torch's, convolutions over the taps inside the input) on a "
                        f"training step at local batch {largest.local_batch} in the probe: {flop_text(per_sample)} "
                        "per sample")


def _samples(points: Sequence[ProbePoint]) -> tuple[int | None, str]:
    counts = {p.samples_per_epoch for p in points}
    if len(counts) > 1:
        return None, f"not known: the probe's trainers disagreed ({sorted(c or 0 for c in counts)})"
    count = counts.pop()
    if count is None:
        return None, "not known: the workload's trainer does not say (Trainer.samples_per_epoch returned None)"
    return count, f"the train split's length in the probe (Trainer.samples_per_epoch): {count:,}"


def probe_result(key_fields: Mapping[str, object], points: Sequence[ProbePoint], *, threads: int, measured_at: str,
                 ddp_copies: float, margin: float = MEMORY_MARGIN, cpu: str | None = None) -> ProbeResult:
    """The result of a probe from its points: memory fitted (DDP's copies of the measured gradient bytes
    added), FLOPs from the largest batch's count, samples per epoch from the trainer. `key_fields` are what
    `probe_key` hashes, kept in the result; `cpu`: the model name of the CPU it ran on."""
    ordered = sorted(points, key=lambda p: p.local_batch)
    gradient_mib = max(p.gradient_bytes for p in ordered) / 2**20
    memory = fit_memory([p.local_batch for p in ordered], [p.peak_mib for p in ordered],
                        ddp_mib=ddp_copies * gradient_mib, margin=margin,
                        node_library_mib=max(p.library_mib for p in ordered))
    flops, flops_source = _flops(ordered)
    samples, samples_source = _samples(ordered)
    f = _KeyFields.from_json(key_fields)
    return ProbeResult(format=f.format, key=probe_key(key_fields), workload=f.workload, code=f.code,
                       params=dict(f.params), precision=f.precision, torch=f.torch,
                       backend=f.backend, held_batches=f.held_batches, threads=threads,
                       measured_at=measured_at, points=tuple(ordered), ddp_copies=ddp_copies, memory=memory,
                       flops_per_sample=flops, flops_source=flops_source, samples_per_epoch=samples,
                       samples_source=samples_source, cpu=cpu or None,
                       flops_rule=max(ordered, key=lambda p: p.local_batch).flops_rule if flops else None)
