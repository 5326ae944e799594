"""How long a sweep will take, said before its first trial starts and refined as trials finish.

A first estimate comes from what is known before anything runs: the planned trials, and a training step's
time. Where the workload's probe timed its steps on this CPU (`ProbeResult.step_s`), a step is that, and a
training rank's start-up the probe's. Otherwise the step is the workload's training FLOPs per sample at
`STEP_EFFICIENCY` of each node's GEMM rate per core in the chosen precision (the ISA probe,
`orchestrator.core.machine.isa`): a share that held on a Zen 4 (55-70% of one core's GEMM peak) and not on an
AVX2-only Zen 3 (10-37%), hence the probe; and every trial adds `STARTUP_S` of rank start-up.

A convergence run (`RunCosts`, `convergence_run_s`) is start-up, plus its training steps, plus its
evaluations, each costed by what it does rather than by a share:

    start-up + (epochs × samples per epoch ÷ global batch × step + evaluations × eval set ÷ ranks ×
                step ÷ local batch × EVAL_SAMPLE_COST) × packing

Before anything has run, epochs are `CONVERGENCE_EPOCHS_PRIOR` of the cap (epochs-to-target is what the run
measures), an evaluated sample costs `EVAL_SAMPLE_COST` of a trained one, and packing is 1. As trials finish,
each term is replaced by what this sweep measured on this CPU (`Eta.finished` with the record), so that no
constant tuned on one CPU has to hold on another:

- the step: the throughput trial of the same layout and local batch (so a 2-rank run's all-reduce and its
  ranks' sharing of cores are in it); for a layout not timed, the FLOP estimate scaled by how far the timed
  layouts were from theirs;
- start-up: the median start-up of the finished convergence runs with as many ranks (of the finished trials
  of any kind until one has finished);
- packing: a run on fewer cores than its node runs beside others (convergence runs pack), which slows it as
  much as the GEMM peak slows when every core of the node computes at once (the peak records: R × the 1-rank
  peak over the R-rank peak measured at once; 1.08 on a Zen 4 VM, about 2 where two vCPUs share a core);
- epochs: the finished seeds of the same global batch, else the nearest measured global batch's, × 1.29 per
  doubling (`EPOCHS_BATCH_EXPONENT`, measured on the committed folders), else the prior;
- evaluation: what a finished run spent beyond its steps, per evaluated sample, over a trained sample's cost.

Other kinds are scaled by what their finished trials took against their estimates (the median ratio).
Timing trials run one after another (each keeps its node to itself); convergence runs pack onto free cores as
the driver packs them (`packed_s`: in order, each one that fits started as cores free up).

Pure: the caller passes the planned work, the figures, the records and the clock's readings.

    >>> work = [Work("peak-r1-t1", "peak", 4.0, 1), Work("r1-t1-b8", "throughput", 20.0, 1),
    ...         Work("conv-a", "convergence", 100.0, 1), Work("conv-b", "convergence", 100.0, 1)]
    >>> eta = Eta(work, cores=2)
    >>> eta.remaining_s()   # 4 + 20 serial, then two 100 s runs side by side on 2 cores
    124.0
    >>> eta.finished("r1-t1-b8", 40.0)   # throughput took twice its estimate
    >>> eta.remaining_s()
    104.0
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.core.measured.records import Kind, Record, Status
from orchestrator.core.planning.probe import PROBE_BATCHES, ProbeResult
from orchestrator.core.predict.overlap import READY_STEPS

STARTUP_S = 3.0                 # rank start-up: interpreter, imports, build, rendezvous (2.5-4.5 s measured)
PEAK_S = 3.5                    # a GEMM peak: sizing, 2 warm-up matmuls, 2 s timed, barriers
ROOF_S = 4.0                    # then the compute roof (run.rank.roof): 13 windows of 0.2 s and their warm-ups (4.0 s
                                # on one busy Zen 4 core)
ALLREDUCE_S = 6.0               # a calibration: 4 KiB to 64 MiB, 3 blocks each
STEP_EFFICIENCY = 0.53          # a training step's FLOP rate over the probe's GEMM rate on the same cores: 0.6
                                # with torch's count, × 13.04 ÷ 14.76 now that a convolution's padded taps are not
                                # counted (the default RetinaNet's step, benchmarks/recount_flops.py)
CONVERGENCE_EPOCHS_PRIOR = 0.5  # share of max_epochs a convergence run is costed at before one has finished
# Epochs-to-target grow with the global batch: × 2^0.36 = 1.29 per doubling, the median of the 16 doublings in the
# committed results folders (1.00 to 1.68; none fell). Epochs are the workload's, not the CPU's. A global batch
# no finished run has measured is costed at the nearest measured one's epochs scaled so.
EPOCHS_BATCH_EXPONENT = 0.36
EVAL_SHARE = 0.1                # evaluation's time over training's, where the eval set's size is not known
# An evaluated sample's time over a trained one's, until a finished run measures it: a forward pass is about a
# third of a training step's FLOPs, but detection's post-processing and scoring are not FLOPs (the default
# RetinaNet measured 0.36 with bf16 evaluation and 0.56 in fp32 on a Zen 4, docs/costs.md).
EVAL_SAMPLE_COST = 0.5
# Kinds whose trials pack onto free cores beside each other (run.driver.kinds: their items do not hold a region while
# waiting); every other kind is a timing trial, which keeps its region to itself, so their times add up.
PACKED_KINDS = ("convergence",)


@dataclass(frozen=True, slots=True)
class Shape:
    """The layout of a trial that trains."""

    ranks: int
    threads: int
    local_batch: int

    @property
    def global_batch(self) -> int:
        return self.ranks * self.local_batch


@dataclass(frozen=True, slots=True)
class Work:
    """One planned trial: its key, kind, first estimate in seconds and cores held; for a trial that trains,
    its layout and its step's first estimate (what measured steps replace)."""

    key: str
    kind: str
    estimate_s: float
    cores: int
    shape: Shape | None = None
    step_s: float | None = None


@dataclass(frozen=True, slots=True)
class RunCosts:
    """What every convergence run of the sweep shares: the data, the epoch cap, how often and on how many
    samples it evaluates, and the cores of a node (a run on fewer packs beside others)."""

    samples_per_epoch: int
    max_epochs: float
    eval_every_epochs: float
    eval_samples: int | None        # the eval set's size; None: evaluation costed as EVAL_SHARE of training
    node_cores: int


def step_s(flops_per_sample: float, local_batch: int, threads: int, gflops_per_core: float) -> float:
    """One training step of one rank: its FLOPs at STEP_EFFICIENCY of the GEMM rate of its cores.

    >>> round(step_s(14.8e9, 8, 1, 100.0), 2)
    2.23
    """
    return flops_per_sample * local_batch / (STEP_EFFICIENCY * gflops_per_core * 1e9 * threads)


# Steps a throughput rank runs after timing (run.rank.protocol): one under the FLOP counter; with DDP also the
# all-reduce check's two backward passes and the steps that note when DDP's buckets became ready (run.rank.overlap).
AFTER_TIMING_STEPS = 1
AFTER_TIMING_STEPS_DDP = AFTER_TIMING_STEPS + 2 + READY_STEPS


def throughput_s(step: float, warmup_steps: int, timed_steps: int, repeats: int,
                 startup_s: float = STARTUP_S, *, ranks: int = 1) -> float:
    """A throughput trial: start-up, its warm-up and timed steps, and the steps after timing.

    >>> throughput_s(0.5, 3, 12, 3, 2.0), throughput_s(0.5, 3, 12, 3, 2.0, ranks=2)
    (22.0, 24.5)
    """
    after = AFTER_TIMING_STEPS_DDP if ranks > 1 else AFTER_TIMING_STEPS
    return startup_s + step * (warmup_steps + timed_steps * repeats + after)


def convergence_s(step: float, samples_per_epoch: int, global_batch: int, max_epochs: float,
                  startup_s: float = STARTUP_S) -> float:
    """A convergence run when nothing but its step is known: the prior epochs, evaluation as a share."""
    steps = CONVERGENCE_EPOCHS_PRIOR * max_epochs * samples_per_epoch / global_batch
    return startup_s + step * steps * (1 + EVAL_SHARE)


@dataclass(frozen=True, slots=True)
class ProbedSteps:
    """What a probe timed on one CPU, as the first estimate uses it: a rank's step per layout, a training rank's
    start-up (STARTUP_S where the probe did not say), and the text of both."""

    probe: ProbeResult
    cpu: str
    startup_s: float
    text: str

    def step_s(self, local_batch: int, threads: int) -> float:
        step = self.probe.step_s(local_batch, threads, self.cpu)
        assert step is not None   # `probed_steps` made it only where the probe timed steps on this CPU
        return step


def probed_steps(probe: ProbeResult | None, cpu: str) -> ProbedSteps | None:
    """The probe's timed steps and start-up on `cpu` (`CpuIsa.identity`); None where it timed no step, or ran
    on another CPU (a step time is the CPU's, not the workload's)."""
    largest = max(PROBE_BATCHES)
    if probe is None or (timed := probe.step_s(largest, probe.threads, cpu)) is None:
        return None
    startup = probe.startup_s(cpu)
    return ProbedSteps(probe, cpu, startup or STARTUP_S,
                       f"steps the probe timed on this CPU ({timed:.3g} s at local batch {largest} on "
                       f"{probe.threads} thread(s)), affine in the batch and linear in threads; a training rank's "
                       + (f"start-up {startup:.1f} s (the probe's)" if startup else f"start-up {STARTUP_S:g} s"))


def convergence_run_s(costs: RunCosts, shape: Shape, step: float, *, epochs: float, startup_s: float = STARTUP_S,
                      packing: float = 1.0, eval_sample_cost: float = EVAL_SAMPLE_COST) -> float:
    """A convergence run of `epochs` epochs: start-up, its steps, its evaluations (every eval_every_epochs, the
    eval set shared by the ranks, each sample at `eval_sample_cost` of a trained sample), slowed by `packing`.

    >>> costs = RunCosts(samples_per_epoch=256, max_epochs=10, eval_every_epochs=0.5, eval_samples=32, node_cores=2)
    >>> # 5 epochs of 32 steps of 0.4 s; 10 evaluations of 32 samples at half of 0.05 s; 3 s start-up
    >>> convergence_run_s(costs, Shape(1, 1, 8), 0.4, epochs=5.0)
    75.0
    """
    train = epochs * costs.samples_per_epoch / shape.global_batch * step
    if costs.eval_samples is None:
        evaluation = train * EVAL_SHARE
    else:
        evaluations = math.floor(epochs / costs.eval_every_epochs + 1e-9) or 1
        evaluation = evaluations * costs.eval_samples / shape.ranks * step / shape.local_batch * eval_sample_cost
    return startup_s + (train + evaluation) * packing


def packing_of(peaks: Mapping[tuple[int, int], float]) -> float:
    """How much slower one core computes while every core of its node computes: R × the 1-rank, 1-thread GEMM
    peak over the R-rank one measured at once, R the most 1-thread ranks measured (1 without both).

    >>> packing_of({(1, 1): 100.0, (2, 1): 185.0}), packing_of({(1, 1): 100.0})
    (1.0810810810810811, 1.0)
    """
    alone = peaks.get((1, 1))
    together = max(((r, g) for (r, t), g in peaks.items() if t == 1 and r > 1), default=None)
    if not alone or together is None or together[1] <= 0:
        return 1.0
    return max(1.0, together[0] * alone / together[1])


def packed_s(waiting: Sequence[tuple[float, int]], cores: int,
             in_flight: Sequence[tuple[float, int]] = ()) -> float:
    """When the last of the packed runs ends: `waiting` (seconds, cores), in order, started as the driver starts
    them (whenever cores free up, every waiting run that fits, in order, the ones that do not fit skipped), after
    the runs `in_flight` (seconds left, cores). Core-seconds over cores would be the bound of a perfect packing:
    a 1-core run alone leaves the other core idle while the 2-core runs after it wait (the default sweep's last
    global-batch-8 seed before its global-batch-16 runs), which made the "left" estimate 32% short midway.

    >>> packed_s([(100.0, 1), (100.0, 1)], 2)                # side by side
    100.0
    >>> packed_s([(100.0, 1), (100.0, 1), (100.0, 1), (50.0, 2)], 2)   # the third alone, then the 2-core one
    250.0
    >>> packed_s([(50.0, 2)], 2, in_flight=[(30.0, 1)])       # it waits for the run in flight
    80.0
    """
    running = [(end, min(c, cores)) for end, c in in_flight]
    pending = [(s, min(c, cores)) for s, c in waiting]
    now = 0.0
    while True:
        free = cores - sum(c for _, c in running)
        for job in list(pending):
            if job[1] <= free:
                running.append((now + job[0], job[1]))
                free -= job[1]
                pending.remove(job)
        if not running:
            return now
        now = min(end for end, _ in running)
        running = [(end, c) for end, c in running if end > now]


class Eta:
    """The remaining time of a sweep: first estimates, refined by what finished trials measured."""

    def __init__(self, work: Sequence[Work], cores: int, costs: RunCosts | None = None,
                 startup_s: float = STARTUP_S):
        self.work = {w.key: w for w in work}
        self.cores = max(1, cores)
        self.costs = costs
        self.startup_s = startup_s   # a training rank's start-up until a finished trial measures one
        self.ratios: dict[str, list[float]] = {}
        self.done: set[str] = set()
        self.measured = Measured(startup_s)

    def finished(self, key: str, wall_s: float, record: Record | None = None) -> None:
        w = self.work.get(key)
        if record is not None:
            self.measured.add(record, self)
        if w is None or key in self.done:
            return
        self.done.add(key)
        if w.estimate_s > 0 and wall_s > 0:
            self.ratios.setdefault(w.kind, []).append(wall_s / w.estimate_s)

    def expected_s(self, w: Work) -> float:
        if w.kind == Kind.CONVERGENCE and self.costs is not None and w.shape is not None and w.step_s is not None:
            return self.measured.convergence_s(w, self.costs)
        ratios = self.ratios.get(w.kind)
        return w.estimate_s * (statistics.median(ratios) if ratios else 1.0)

    def remaining_s(self, running_s: Mapping[str, float] | None = None) -> float:
        """Seconds until the last trial ends; `running_s`: elapsed seconds of each trial in flight."""
        running = running_s or {}
        elapsed = {k: running.get(k, 0.0) for k in self.work if k not in self.done}
        left = {k: max(0.0, self.expected_s(self.work[k]) - s) for k, s in elapsed.items()}
        timing = sum(s for k, s in left.items() if self.work[k].kind not in PACKED_KINDS)
        packed = [(s, self.work[k].cores, elapsed[k] > 0) for k, s in left.items() if self.work[k].kind in PACKED_KINDS]
        if not packed:
            return timing
        in_flight = [(s, c) for s, c, started in packed if started]
        waiting = [(s, c) for s, c, started in packed if not started]
        return timing + packed_s(waiting, self.cores, in_flight)

    @property
    def total_s(self) -> float:
        return Eta(list(self.work.values()), self.cores, self.costs, self.startup_s).remaining_s()


class Measured:
    """What the finished trials measured that a convergence run's cost rests on (the module says how)."""

    def __init__(self, startup_s: float = STARTUP_S) -> None:
        self.startup_prior_s = startup_s
        self.steps: dict[Shape, float] = {}            # a timed layout's step, seconds
        self.step_ratios: list[float] = []             # measured step ÷ its FLOP estimate
        self.startups: dict[tuple[str, int], list[float]] = {}   # start-up seconds by (kind, ranks)
        self.peaks: dict[tuple[int, int], float] = {}  # GEMM peak GFLOP/s by (ranks, threads), measured at once
        self.epochs: dict[int, list[float]] = {}       # epochs run by global batch
        self.eval_costs: list[float] = []              # an evaluated sample's time ÷ a trained one's

    def add(self, r: Record, eta: Eta) -> None:
        if r.status != Status.OK:
            return
        if r.startup_s and r.ranks:
            self.startups.setdefault((r.kind, r.ranks), []).append(r.startup_s)
        if r.kind == Kind.PEAK and r.peak is not None and (r.peak.concurrent or (r.ranks or 1) == 1):
            self.peaks[(r.ranks or 1, r.threads_per_rank or 1)] = r.peak.gflops
        elif r.kind == Kind.THROUGHPUT and r.throughput is not None and r.ranks and r.local_batch:
            shape = Shape(r.ranks, r.threads_per_rank or 1, r.local_batch)
            self.steps[shape] = shape.global_batch / r.throughput.samples_per_s
            planned = next((w for w in eta.work.values() if w.shape == shape and w.step_s), None)
            if planned is not None and planned.step_s:
                self.step_ratios.append(self.steps[shape] / planned.step_s)
        elif r.kind == Kind.CONVERGENCE and r.convergence is not None and eta.costs is not None:
            self._convergence(r, eta.costs)

    def _convergence(self, r: Record, costs: RunCosts) -> None:
        c = r.convergence
        if c is None or c.epochs_run is None:
            return
        shape = Shape(r.ranks or 1, r.threads_per_rank or 1, r.local_batch or 1)
        self.epochs.setdefault(shape.global_batch, []).append(c.epochs_run)
        step = self.steps.get(shape)
        if step is None or c.train_s is None or not costs.eval_samples or not c.curve:
            return
        packing = self.packing if shape.ranks * shape.threads < costs.node_cores else 1.0
        evaluated = len(c.curve) * costs.eval_samples / shape.ranks
        beyond = c.train_s - c.epochs_run * costs.samples_per_epoch / shape.global_batch * step * packing
        self.eval_costs.append(max(0.0, beyond / packing / (evaluated * step / shape.local_batch)))

    @property
    def packing(self) -> float:
        return packing_of(self.peaks)

    def step_of(self, w: Work) -> float:
        assert w.shape is not None and w.step_s is not None
        if w.shape in self.steps:
            return self.steps[w.shape]
        return w.step_s * (statistics.median(self.step_ratios) if self.step_ratios else 1.0)

    def startup_of(self, kind: str, ranks: int) -> float:
        """The median start-up of finished trials of this kind with as many ranks, else of this kind, else of any
        kind with as many ranks (a convergence run builds its data and starts beside packed neighbours: its
        start-up is its own), else the prior (the probe's start-up where it measured one, else STARTUP_S)."""
        for match in (lambda k, r: (k, r) == (kind, ranks), lambda k, r: k == kind, lambda k, r: r == ranks):
            found = [s for (k, r), values in self.startups.items() if match(k, r) for s in values]
            if found:
                return statistics.median(found)
        return self.startup_prior_s

    def epochs_of(self, global_batch: int, prior: float) -> float:
        """The finished seeds' mean at this global batch; else the nearest measured global batch's, scaled by
        EPOCHS_BATCH_EXPONENT; else the prior.

        >>> m = Measured()
        >>> m.epochs[8] = [5.0, 5.5]
        >>> m.epochs_of(8, 5.0), round(m.epochs_of(16, 5.0), 2), m.epochs_of(4, 5.0) < 5.25
        (5.25, 6.74, True)
        """
        if global_batch in self.epochs:
            return statistics.fmean(self.epochs[global_batch])
        if not self.epochs:
            return prior
        nearest = min(self.epochs, key=lambda gb: abs(math.log(global_batch / gb)))
        growth: float = (global_batch / nearest) ** EPOCHS_BATCH_EXPONENT
        return statistics.fmean(self.epochs[nearest]) * growth

    def convergence_s(self, w: Work, costs: RunCosts) -> float:
        assert w.shape is not None
        epochs = self.epochs_of(w.shape.global_batch, CONVERGENCE_EPOCHS_PRIOR * costs.max_epochs)
        packing = self.packing if w.cores < costs.node_cores else 1.0
        cost = statistics.median(self.eval_costs) if self.eval_costs else EVAL_SAMPLE_COST
        return convergence_run_s(costs, w.shape, self.step_of(w), epochs=min(epochs, costs.max_epochs),
                                 startup_s=self.startup_of(w.kind, w.shape.ranks), packing=packing,
                                 eval_sample_cost=cost)


@dataclass(frozen=True, slots=True)
class Replayed:
    """A finished sweep replayed through the estimate: what it said before the first trial, what the trials took
    (first start to last end), and after each trial ended (elapsed, estimated remaining, actual remaining)."""

    first_s: float
    actual_s: float
    points: tuple[tuple[float, float, float], ...]

    @property
    def first_error(self) -> float:
        """The first estimate over the actual time, less 1 (< 0: short)."""
        return self.first_s / self.actual_s - 1 if self.actual_s > 0 else math.nan


def replay(work: Sequence[Work], cores: int, costs: RunCosts | None,
           finished: Sequence[tuple[float, float, Record]], startup_s: float = STARTUP_S) -> Replayed:
    """The estimate of a sweep run again over its records: `finished` holds (start, wall seconds, record) of
    each trial, its start in seconds on any common clock. At every trial's end the estimate is told, as the
    live sweep tells it, and asked what is left with the trials then in flight counted down.

    >>> w = [Work("a", "throughput", 10.0, 1), Work("b", "throughput", 10.0, 1)]
    >>> r = replay(w, 1, None, [(0.0, 20.0, Record(kind="throughput", key="a", status="ok")),
    ...                         (20.0, 20.0, Record(kind="throughput", key="b", status="ok"))])
    >>> r.first_s, r.actual_s, r.points[0]       # after a took twice its estimate, b is expected at 20 s
    (20.0, 40.0, (20.0, 20.0, 20.0))
    """
    eta = Eta(work, cores, costs, startup_s)
    first = eta.total_s
    if not finished:
        return Replayed(first, 0.0, ())
    start = min(s for s, _, _ in finished)
    end = max(s + w for s, w, _ in finished)
    points = []
    for s, w, record in sorted(finished, key=lambda f: f[0] + f[1]):
        now = s + w
        eta.finished(record.key, w, record)
        running = {r.key: now - s0 for s0, w0, r in finished if s0 < now < s0 + w0}
        points.append((now - start, eta.remaining_s(running), end - now))
    return Replayed(first, end - start, tuple(points))


def duration_text(seconds: float) -> str:
    """'45 s', '8 min 10 s', '2 h 05 min'.

    >>> duration_text(490), duration_text(7500), duration_text(42.4)
    ('8 min 10 s', '2 h 05 min', '42 s')
    """
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
