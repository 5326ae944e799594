"""Layer-wise forward/backward time and step coverage from profiler events (plain data, no torch).

The rank wraps every module's forward in a profiler range `module::<path>` (and a workload may mark its
own regions, `region::<name>`, e.g. the focal loss). Forward time of a region is its range minus the
ranges nested inside it (so regions add up without double counting). Backward time comes from
autograd's bookkeeping: every forward op recorded under grad mode carries a sequence number, and the
backward node it created runs as `autograd::engine::evaluate_function: <Node>` with the same number; the
backward time of a region is the time of the backward nodes created by the forward ops inside it.

    >>> evs = [Event(0, "ProfilerStep#1", 0, 100, None, -1), Event(1, "module::fc", 10, 40, 0, -1),
    ...        Event(2, "aten::addmm", 12, 38, 1, 7),
    ...        Event(3, "autograd::engine::evaluate_function: AddmmBackward0", 50, 90, 0, 7)]
    >>> [(r.name, r.forward_ms, r.backward_ms) for r in layer_times(evs, steps=1)]
    [('fc', 0.03, 0.04)]
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

MODULE_PREFIX = "module::"
REGION_PREFIX = "region::"
STEP_PREFIX = "ProfilerStep"   # torch names them ProfilerStep#N; its event list shows ProfilerStep*
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
UNATTRIBUTED_BACKWARD = "(backward of no recorded forward op)"
DDP_REDUCER_PREFIX = "torch.distributed.ddp.reducer::"


@dataclass(frozen=True, slots=True)
class Event:
    """One profiler range on the training thread; times in microseconds."""

    id: int
    name: str
    start_us: float
    end_us: float
    parent: int | None
    seq: int             # autograd sequence number, -1 when none
    annotation: bool = False   # a record_function range (torch's is_user_annotation), not an operator

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True, slots=True)
class LayerTime:
    name: str
    forward_ms: float    # per step, exclusive of nested regions
    backward_ms: float   # per step

    @property
    def total_ms(self) -> float:
        return self.forward_ms + self.backward_ms


@dataclass(frozen=True, slots=True)
class Coverage:
    """named_ms + wait_ms + other_ms = step_ms."""

    step_ms: float        # mean wall time of a profiled step
    named_ms: float       # per step, time inside named ops (aten, autograd nodes, collectives, ...)
    other_ms: float       # per step, Python and framework time between ops (shown as "other")
    wait_ms: float = 0.0  # per step, DDP's wait for gradient all-reduces, inferred from where a gap sits

    @property
    def named_share(self) -> float:
        """Share of the profiled step inside ops the profiler recorded; the inferred wait is not in it."""
        return self.named_ms / self.step_ms if self.step_ms else 0.0

    @property
    def attributed_share(self) -> float:
        """Named ops plus the inferred all-reduce wait: an upper bound, labelled as inferred wherever shown."""
        return (self.named_ms + self.wait_ms) / self.step_ms if self.step_ms else 0.0


def region_name(name: str) -> str | None:
    for prefix in (MODULE_PREFIX, REGION_PREFIX):
        if name.startswith(prefix):
            return name[len(prefix):]
    return None


def _innermost_region(event: Event, by_id: dict[int, Event]) -> str | None:
    parent = event.parent
    while parent is not None:
        up = by_id[parent]
        region = region_name(up.name)
        if region is not None:
            return region
        parent = up.parent
    return None


def layer_times(events: Iterable[Event], steps: int) -> list[LayerTime]:
    """Per-step forward and backward time per region, largest total first. Backward nodes whose forward
    op was not seen (ran outside every region, or the graph was built before profiling) are one row."""
    if steps < 1:
        raise ValueError(f"steps({steps}) must be >= 1")
    evs = list(events)
    by_id = {e.id: e for e in evs}
    forward: defaultdict[str, float] = defaultdict(float)
    backward: defaultdict[str, float] = defaultdict(float)
    owner: dict[int, str] = {}
    nested: defaultdict[int, float] = defaultdict(float)
    for e in evs:
        if e.parent is not None and region_name(e.name) is not None:
            nested[e.parent] += e.duration_us
    for e in evs:
        region = region_name(e.name)
        if region is not None:
            forward[region] += e.duration_us - nested[e.id]
        elif e.seq >= 0 and not e.name.startswith(BACKWARD_PREFIX):
            found = _innermost_region(e, by_id)
            if found is not None:
                owner.setdefault(e.seq, found)
    for e in evs:
        if e.name.startswith(BACKWARD_PREFIX) and not _inside_backward(e, by_id):
            target = owner[e.seq] if e.seq in owner else UNATTRIBUTED_BACKWARD
            backward[target] += e.duration_us
    names = set(forward) | set(backward)
    rows = [LayerTime(n, round(forward[n] / steps / 1e3, 6), round(backward[n] / steps / 1e3, 6)) for n in names]
    return sorted(rows, key=lambda r: (-r.total_ms, r.name))


def _inside_backward(event: Event, by_id: dict[int, Event]) -> bool:
    """A backward node run from inside another one (a nested engine call) is counted by its outer node."""
    parent = event.parent
    while parent is not None:
        if by_id[parent].name.startswith(BACKWARD_PREFIX):
            return True
        parent = by_id[parent].parent
    return False


def _is_range(e: Event) -> bool:
    """A range whose own (self) time is Python or framework code, not an op: the step markers, our module
    and region ranges, and any other record_function range (`Optimizer.step#AdamW.step`,
    `DistributedDataParallel.forward`). Counting its self time as a named op would credit Python to ops."""
    return e.annotation or e.name.startswith(STEP_PREFIX) or region_name(e.name) is not None


def coverage(events: Iterable[Event]) -> Coverage:
    """How much of the profiled steps' wall time sits inside named ops. The gaps are the self time of the
    step ranges and of every record_function range (Python between ops), reported as "other" — except a gap
    that directly follows one of DDP's bucket copies (`torch.distributed.ddp.reducer::...`) inside the
    step: there DDP's reducer waits for the next bucket's all-reduce, an event no profiler range marks,
    so it is reported apart as the all-reduce wait (inferred from its position)."""
    evs = list(events)
    steps = [e for e in evs if e.name.startswith(STEP_PREFIX)]
    if not steps:
        raise ValueError("no ProfilerStep# range among the events: the profiled steps were not marked")
    wall = sum(e.duration_us for e in steps)
    children: defaultdict[int, list[Event]] = defaultdict(list)
    for e in evs:
        if e.parent is not None:
            children[e.parent].append(e)
    gaps = wait = 0.0
    for e in evs:
        if not _is_range(e):
            continue
        kids = sorted(children[e.id], key=lambda c: c.start_us)
        gaps += max(0.0, e.duration_us - sum(c.duration_us for c in kids))
        for before, after in zip(kids, kids[1:]):
            if before.name.startswith(DDP_REDUCER_PREFIX):
                wait += max(0.0, after.start_us - before.end_us)
    n = len(steps)
    return Coverage(step_ms=wall / n / 1e3, named_ms=(wall - gaps) / n / 1e3, other_ms=(gaps - wait) / n / 1e3,
                    wait_ms=wait / n / 1e3)
