"""What a sweep knows of its workload for planning, and where each figure came from: one rank's memory per
local batch, the training FLOPs per sample, the training samples per epoch.

One rule, in one place: the sweep file's own figure first (`constraints.rank_memory_mib`), then the workload's
declaration (a hand-written formula stays allowed), then the probe's measurement (`orchestrator.core.planning.probe`),
else unknown, said so. The plan, the time estimate, spec.json's `derived` and the reports read figures and
sources from here, never from the workload or the probe directly.

    >>> facts = workload_facts(declared_memory=lambda b: 400.0 + b, declared_samples=8192, precision="fp32")
    >>> facts.memory.mib(16), facts.memory.source, facts.samples.source
    (416.0, 'the workload’s formula (memory_estimate_mib)', 'the workload’s samples_per_epoch: 8,192')
    >>> facts.flops.source
    'not known yet: no probe has run for these parameters in fp32'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from orchestrator.core.planning.probe import ProbeResult

T = TypeVar("T", int, float)

# Where a figure came from.
Origin = Literal["sweep", "workload", "probe", "unknown"]
SWEEP: Origin = "sweep"
WORKLOAD: Origin = "workload"
PROBE: Origin = "probe"
UNKNOWN: Origin = "unknown"


def not_probed(precision: str) -> str:
    return f"not known yet: no probe has run for these parameters in {precision}"


# A training script (`workload: {script: ...}`) runs as it is: the probe runs it as one rank for its memory (and
# its FLOPs where it reports them); its epoch size is only ever the sweep file's.
SCRIPT_UNKNOWN = ("not known: the sweep file may give it (constraints.rank_memory_mib, workload.flops_per_sample, "
                  "workload.samples_per_epoch), or the script report it (orch.script.flops)")


@dataclass(frozen=True, slots=True)
class MemoryFact:
    """One rank's peak private memory per local batch, MiB, and the libraries a node holds once for its ranks
    (`library_mib`). The libraries are the probe's measurement wherever a probe of these parameters has run: a
    workload's formula counts a rank's own memory (orch's were calibrated on two ranks, which share the
    libraries' pages), so the probe's libraries stand beside it. A figure the sweep file states is all there is:
    no libraries beside it."""

    origin: Origin
    source: str
    formula: Callable[[int], float | None] | None = field(default=None, compare=False, repr=False)
    library_mib: float = 0.0

    @property
    def library_source(self) -> str:
        """Where the libraries' figure comes from, for `orch plan` (empty where none is counted)."""
        if not self.library_mib:
            return ""
        return f"{self.library_mib:,.0f} MiB, once per node, measured by the probe (its file-backed pages)"

    def mib(self, local_batch: int) -> float | None:
        """The figure at `local_batch`; None where it is not known."""
        return None if self.formula is None else self.formula(local_batch)

    def need_mib(self, local_batch: int) -> float:
        """What the memory rule checks: the figure, or 0 where it is not known (the rule then passes every
        layout, and the plan says memory was not checked)."""
        mib = self.mib(local_batch)
        return 0.0 if mib is None else mib


@dataclass(frozen=True, slots=True)
class Fact(Generic[T]):
    """A figure of the workload with its source. The workload's declaration, when it may give one, is
    evaluated on first use only (a workload may import torch to count its own FLOPs: `orch plan` must not);
    where it gives none after all, the probe's figure stands in."""

    declared: Callable[[], T | None] | None   # the workload's own figure; None: it declares none
    declared_source: str
    probed: T | None
    probed_source: str
    _evaluated: list[T | None] = field(default_factory=list, compare=False, repr=False)

    def _declared_value(self) -> T | None:
        if self.declared is None:
            return None
        if not self._evaluated:
            self._evaluated.append(self.declared())
        return self._evaluated[0]

    @property
    def value(self) -> T | None:
        declared = self._declared_value()
        return declared if declared is not None else self.probed

    def _declares(self) -> bool:
        """Whether the workload's figure stands, without evaluating it when that has not happened yet."""
        return self.declared is not None and (not self._evaluated or self._evaluated[0] is not None)

    @property
    def origin(self) -> Origin:
        if self._declares():
            return WORKLOAD
        return PROBE if self.probed is not None else UNKNOWN

    @property
    def source(self) -> str:
        return self.declared_source if self._declares() else self.probed_source


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    memory: MemoryFact
    flops: Fact[float]      # training FLOPs per sample (forward and backward)
    samples: Fact[int]      # training samples per epoch, all ranks together
    probe: ProbeResult | None = None
    probeable: bool = True  # False for a training script, which orch cannot probe

    def unknown(self) -> list[str]:
        """The figures not known (without evaluating a declaration not yet evaluated)."""
        named = (("memory per rank", self.memory.origin), ("FLOPs per sample", self.flops.origin),
                 ("samples per epoch", self.samples.origin))
        return [name for name, origin in named if origin == UNKNOWN]

    def needs_probe(self) -> bool:
        """Whether a probe would tell something not known: no probe yet and a figure missing (the workload's
        declarations evaluated: call it where importing torch is fine)."""
        self.flops.value, self.samples.value   # noqa: B018  (evaluates the declarations)
        return self.probeable and self.probe is None and bool(self.unknown())

    def sources(self) -> dict[str, str]:
        """Each figure's source, for spec.json's `derived` and `orch plan --json`."""
        return {"memory": self.memory.source, "flops_per_sample": self.flops.source,
                "samples_per_epoch": self.samples.source}


def workload_facts(*, precision: str, sweep_memory_mib: float | None = None,
                   declared_memory: Callable[[int], float | None] | None = None,
                   declared_flops: Callable[[], float | None] | None = None, declared_samples: int | None = None,
                   probe: ProbeResult | None = None, script: bool = False) -> WorkloadFacts:
    """The facts of a sweep: `sweep_memory_mib` (its constraints.rank_memory_mib), the workload's declarations
    (None where it declares none: `declared_memory` per local batch, `declared_flops` evaluated on first use),
    and the probe of these parameters in `precision`, if one has run. With `script`, the declarations are the
    sweep file's figures for its training script; the probe (the script run as one rank) gives its memory.

    >>> facts = workload_facts(precision="fp32", declared_samples=60000, sweep_memory_mib=900.0, script=True)
    >>> facts.samples.source, facts.needs_probe()
    ('the sweep file’s workload.samples_per_epoch: 60,000', False)
    >>> workload_facts(precision="fp32", declared_samples=60000, script=True).needs_probe()   # its memory is not known
    True
    """
    if script:
        return _script_facts(sweep_memory_mib, declared_flops, declared_samples, probe)
    waiting = not_probed(precision)
    if sweep_memory_mib is not None:
        mib = sweep_memory_mib
        memory = MemoryFact(SWEEP, f"constraints.rank_memory_mib in the sweep file: {mib:,.0f} MiB", lambda b: mib)
    elif declared_memory is not None:
        memory = MemoryFact(WORKLOAD, "the workload’s formula (memory_estimate_mib)", declared_memory,
                            probe.memory.libraries_mib if probe is not None else 0.0)
    elif probe is not None:
        memory = MemoryFact(PROBE, probe.memory.text(), probe.memory.mib, probe.memory.libraries_mib)
    else:
        memory = MemoryFact(UNKNOWN, waiting)
    flops: Fact[float] = Fact(declared_flops, "the workload’s train_flops_per_sample",
                              probe.flops_per_sample if probe else None, probe.flops_source if probe else waiting)
    samples: Fact[int] = Fact((lambda: declared_samples) if declared_samples is not None else None,
                              f"the workload’s samples_per_epoch: {declared_samples or 0:,}",
                              probe.samples_per_epoch if probe else None, probe.samples_source if probe else waiting)
    return WorkloadFacts(memory, flops, samples, probe)


def _script_facts(sweep_memory_mib: float | None, declared_flops: Callable[[], float | None] | None,
                  declared_samples: int | None, probe: ProbeResult | None) -> WorkloadFacts:
    if sweep_memory_mib is not None:
        mib = sweep_memory_mib
        memory = MemoryFact(SWEEP, f"constraints.rank_memory_mib in the sweep file: {mib:,.0f} MiB", lambda b: mib)
    elif probe is not None:
        memory = MemoryFact(PROBE, probe.memory.text(), probe.memory.mib, probe.memory.libraries_mib)
    else:
        memory = MemoryFact(UNKNOWN, "not known yet: the script has not been probed (`orch probe` runs it as one rank)")
    flops: Fact[float] = Fact(declared_flops, "the sweep file’s workload.flops_per_sample",
                              probe.flops_per_sample if probe else None,
                              probe.flops_source if probe else SCRIPT_UNKNOWN)
    samples: Fact[int] = Fact((lambda: declared_samples) if declared_samples is not None else None,
                              f"the sweep file’s workload.samples_per_epoch: {declared_samples or 0:,}", None,
                              SCRIPT_UNKNOWN)
    # Probed for its memory only: its epoch size (and FLOPs, unless it reports them) no probe can tell.
    return WorkloadFacts(memory, flops, samples, probe, probeable=memory.origin != SWEEP)


def recorded_memory(points: dict[int, float], source: str, library_mib: float = 0.0) -> MemoryFact:
    """One rank's memory from the figures a results folder recorded at some local batches (spec.json's
    `derived.memory_mib`, or the records' planned `memory.estimate_mib`), never from the workload's code:
    exact at a recorded batch, linear between two, and beyond the ends along the nearest two (the built-in
    workloads' formulas and the probe's fit are affine in the batch, so that is exact for them); unknown
    (None) elsewhere when only one batch was recorded.

    >>> fact = recorded_memory({8: 800.0, 16: 864.0}, "the records")
    >>> fact.mib(8), fact.mib(12), fact.mib(32), fact.origin
    (800.0, 832.0, 992.0, 'sweep')
    >>> recorded_memory({8: 800.0}, "the records").mib(16) is None
    True
    """
    known = sorted((b, v) for b, v in points.items() if v > 0)
    if not known:
        return MemoryFact(UNKNOWN, f"not known: {source} holds no memory figure")

    def mib(local_batch: int) -> float | None:
        exact = next((v for b, v in known if b == local_batch), None)
        if exact is not None or len(known) < 2:
            return exact
        later = next((i for i, (b, _) in enumerate(known) if b > local_batch), len(known))
        i = min(max(later, 1), len(known) - 1)   # the pair around it, or the nearest pair at an end
        (b0, v0), (b1, v1) = known[i - 1], known[i]
        return max(0.0, v0 + (v1 - v0) * (local_batch - b0) / (b1 - b0))

    return MemoryFact(SWEEP, source, mib, library_mib)
