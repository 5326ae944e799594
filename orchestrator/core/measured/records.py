"""Trial records: one JSON object per line in `results/<sweep>/trials.jsonl`, with fixed keys.

A record is a `Record`, its sections frozen dataclasses (`ThroughputSection`, ...), read and written by one
generic `from_json`/`to_json` pair (`orchestrator.core.json.jsonobject`): a line read and written back is the same
bytes, the keys an older orch did not write stay absent and keys this one does not know are kept. A record
built here has every key in `RECORD_KEYS` (null where it does not apply), so readers never guess; they ask
the `Records` collection (`ok(kind)`, `by_key()`, `by_trial()`, ...) and read fields, never keys.
Parsing is pure and forgiving: `parse_lines` returns (records, errors) and skips a torn last line (a
crash mid-write) instead of raising, as mlperf_logging's reader does.

Kinds and their sections:

- ``throughput``: one grid point. ``throughput``, ``memory`` and ``placement`` are set when status is ok.
- ``convergence``: one seed of one global batch trained to the target. ``convergence`` is set.
- ``peak``: a layout's measured GEMM peak: its ``ranks`` ranks of ``threads_per_rank`` cores each, all running
  the GEMM at once, pinned as in the trial (``peak.concurrent``). Records written before that hold one
  rank's peak for ``threads_per_rank`` cores, without ``concurrent``; readers treat them as such.
- ``allreduce``: the all-reduce calibration of ``ranks`` ranks over one link class. ``allreduce`` is set.

A trial an adaptive sweep chose also has ``choice``: {reason, expected_shrink, estimated_core_s, width_before}.

Section layouts (units in the names):

    throughput: {samples_per_s, samples_per_s_repeats[], cv, timed_s_repeats[], warmup_steps, timed_steps,
                 repeats, step_ms_median[rank], step_ms_p90[rank], data_wait_share, train_flops_per_sample,
                 train_flops_rule (how they were counted: valid-taps or stated; absent in records older than
                 the field, whose count was torch's own, every convolution tap in the padding included),
                 gradient_bytes, ddp_bucket_bytes[] (null for one rank; in the gradients' dtype),
                 ddp_wire_dtype, ddp_wire_bucket_bytes[] (what each bucket's all-reduce moves: half of it with
                 a 16-bit ddp_comm_hook; null for one rank and in records older than the fields),
                 ddp_bucket_ready_share[] (each bucket's ready time in a step over the last bucket's, for the
                 all-reduce's overlap with the backward pass; null for one rank and in older records)}
    memory:     {peak_private_mib[rank], shared_mib[rank], budget_mib[rank], estimate_mib, library_mib}
                (private: resident less file-backed pages, which other processes do not change; shared: the
                file-backed pages, the libraries, which a node holds once; older records: {peak_uss_mib[rank],
                budget_mib[rank], estimate_mib}, unique memory, which fell whenever another process shared the
                libraries)
    convergence:{metric, target, converged, epochs_to_target, max_epochs, epochs_run, curve[[epoch, value]],
                 lr_rule, base_lr, base_batch, lr, warmup_epochs, train_s, noise_scale (the gradient noise
                 scale: {b_simple, low, high, at_epoch, method, small_batch, big_batch, steps, ema_decay, g2,
                 trace, epochs[[epoch, b_simple, low, high]]}; absent in older records)}
    peak:       {precision, gflops, best_gflops, gemm_size, per_rank_gflops[rank], concurrent}
                (gflops: the sum over ranks of each one's median-matmul rate; older records: {precision,
                gflops, gemm_size} of one rank)
    allreduce:  {link, ranks, dtype, algorithm, sizes_bytes[], time_s[size] (slowest rank's median)}
    placement:  [{rank, local_rank, node, node_name, socket, numa_nodes[], cpus[], ccl_cpus[]}], and once a
                rank ran: {pin, pid, observed_cpus, observed_main_thread_cpus, torch_threads,
                startup_breakdown_s: {phase: seconds} from the process's creation to its first step}
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

from orchestrator.core.json.jsonobject import JsonObject, optional
from orchestrator.core.json.values import JsonDict, JsonMapping
from orchestrator.core.planning.names import name_problem
from orchestrator.core.planning.trial import Trial

SCHEMA_VERSION = 1


class Status(StrEnum):
    """A trial's status in its record (a StrEnum: it is written, compared and printed as its value)."""

    OK = "ok"
    INFEASIBLE = "infeasible"
    FAILED = "failed"
    OOM = "oom"
    TIMEOUT = "timeout"


class Kind(StrEnum):
    """What a record measures; see the module docstring for each kind's section."""

    THROUGHPUT = "throughput"
    CONVERGENCE = "convergence"
    PEAK = "peak"
    ALLREDUCE = "allreduce"


STATUSES = tuple(Status)
KINDS = tuple(Kind)

# The record's keys, in the order every record is written (`Record`'s fields are declared in it).
RECORD_KEYS = (
    "schema",            # SCHEMA_VERSION
    "kind",              # one of KINDS
    "key",               # unique within a sweep: 'r2-t14-b4', 'conv-g8-s0', 'peak-r2-t14-fp32'
    "status",            # one of STATUSES
    "reason",            # why it is not ok (one line per reason), else null
    "reasons",           # [{code, message}] for infeasible points, else []
    "ranks", "threads_per_rank", "local_batch", "global_batch",
    "seed",              # convergence runs only
    "backend",           # 'gloo' or 'ccl'
    "communication",     # what the ranks communicated with: {backend, version, oneccl, env{CCL_*: value},
                         # worker_threads_on_cpu{cpu: threads bound there alone}}, see run.comm
    "placement",         # list of per-rank placements, see module docstring
    "started_at",        # ISO-8601 UTC, `utc_timestamp`: '2025-11-20T09:03:00Z'
    "wall_s",            # from reservation to release
    "startup_s",         # from reservation until every rank has built its model
    "throughput", "memory", "convergence", "peak", "allreduce",
    "applied",           # optimizations that took effect, as the workload reports them
    "log_tail",          # last lines of the failing rank's log, for failed/oom/timeout
)
# Written only where it applies, after them: "choice", why an adaptive sweep chose the trial (`ChoiceSection`).


def utc_timestamp(epoch_s: float) -> str:
    """The one timestamp format of the results folder (trials.jsonl and environment.json): ISO-8601 in
    UTC to the second, with a 'Z'. Pure: the caller reads the clock.

    >>> utc_timestamp(1763629380.4)
    '2025-11-20T09:03:00Z'
    """
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def peak_key(ranks: int, threads_per_rank: int, precision: str) -> str:
    """The key of a layout's peak record, e.g. 'peak-r2-t14-fp32' (older records: 'peak-t14-fp32')."""
    return f"peak-r{ranks}-t{threads_per_rank}-{precision}"


def one_rank_peak_key(threads_per_rank: int, precision: str) -> str:
    """The key older orch gave one rank's peak on `threads_per_rank` cores, e.g. 'peak-t14-fp32' (it measured
    no layout's peak at once); readers still meet it in results written then."""
    return f"peak-t{threads_per_rank}-{precision}"


def convergence_key(global_batch: int, seed: int) -> str:
    """The key of one seed's convergence record, e.g. 'conv-g8-s0'."""
    return f"conv-g{global_batch}-s{seed}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ReasonEntry(JsonObject):
    """Why a point is infeasible: a rule's code, its message for this cell, and its cell-independent summary."""

    code: str
    message: str
    summary: str | None = None   # older records: absent


@dataclass(frozen=True, kw_only=True, slots=True)
class CommunicationSection(JsonObject):
    """What the ranks communicated with (run.comm.communication_report); the same from every rank but
    CCL_LOCAL_RANK, so the record keeps the first one's."""

    backend: str
    version: str | None = None
    oneccl: str | None = None
    env: dict[str, str] | None = None
    worker_threads_on_cpu: dict[str, int] | None = optional()   # ccl only: {cpu: threads bound there alone}


@dataclass(frozen=True, kw_only=True, slots=True)
class PlacementEntry(JsonObject):
    """Where one rank was placed, and (once it ran) what its process really had, read from the OS in it."""

    rank: int
    local_rank: int
    node: int
    node_name: str
    socket: int
    numa_nodes: list[int]
    cpus: list[int]
    ccl_cpus: list[int]
    pin: str | None = optional()
    pid: int | None = optional()
    observed_cpus: list[int] | None = optional()
    observed_main_thread_cpus: list[int] | None = optional()
    torch_threads: int | None = optional()
    startup_breakdown_s: dict[str, float] | None = optional()   # {phase: seconds}, creation to first step
    allreduce_check: dict[str, list[float]] | None = optional()  # {local_grad_sums, synced_grad_sums}
    ray_node_id: str | None = optional()


@dataclass(frozen=True, kw_only=True, slots=True)
class ThroughputSection(JsonObject):
    samples_per_s: float                             # median over repeats, summed over ranks
    samples_per_s_repeats: list[float] | None = None
    cv: float | None = None                          # a fraction: 0.012 is 1.2 %
    timed_s_repeats: list[float] | None = None
    warmup_steps: int | None = None
    timed_steps: int | None = None
    repeats: int | None = None
    step_ms_median: list[float] | None = None        # per rank
    step_ms_p90: list[float] | None = None           # per rank
    data_wait_share: float | None = None
    train_flops_per_sample: float | None = None
    # how train_flops_per_sample was counted (core.profile.flop_count): valid-taps (orch's counter) or stated (a
    # script's or the sweep file's figure); absent in older records, whose count was torch's own formula
    train_flops_rule: str | None = optional()
    gradient_bytes: int | None = None
    ddp_bucket_bytes: list[int] | None = None        # null for one rank; in the gradients' dtype
    ddp_wire_dtype: str | None = None
    ddp_wire_bucket_bytes: list[int] | None = None   # what each bucket's all-reduce moves
    # each bucket's ready time in a step over the last bucket's (the backward pass's end); null for one rank and in
    # records older than the field
    ddp_bucket_ready_share: list[float] | None = optional()


@dataclass(frozen=True, kw_only=True, slots=True)
class MemorySection(JsonObject):
    """Each rank's memory as orch plans it (orchestrator.run.procmem): its private peak against its budget, and
    its libraries' pages, which the ranks of a node share."""

    peak_private_mib: list[float | None] | None = optional()   # per rank; null for a rank that never reported
    shared_mib: list[float | None] | None = optional()         # per rank: its file-backed pages (the libraries)
    budget_mib: list[float]            # per rank: the limit on its private memory
    estimate_mib: float                # what one rank was planned to need of its own
    library_mib: float | None = optional()   # the libraries planned once per node
    peak_uss_mib: list[float | None] | None = optional()   # older records: unique memory (moved with co-runners)

    @property
    def peak_mib(self) -> list[float | None]:
        """Each rank's peak as its record measured it: private, or in an older record unique."""
        return self.peak_private_mib if self.peak_private_mib is not None else self.peak_uss_mib or []


@dataclass(frozen=True, kw_only=True, slots=True)
class NoiseScaleSection(JsonObject):
    """The gradient noise scale B_simple over a convergence run (core.measured.noise_scale): its value where the run
    stopped (the evaluation that reached the target, else the last) with a 90% interval, and the same at the
    end of every epoch. `high` null: unbounded (|G|² within its noise of zero); `b_simple` null: not
    resolved, or not measured (`why_not`)."""

    b_simple: float | None = None
    low: float | None = None
    high: float | None = None
    at_epoch: float | None = None
    method: str | None = None          # 'ddp' (local and all-reduced gradients) or 'micro-batches' (one rank)
    small_batch: int | None = None     # b: the batch of the small gradient (a rank's, or a micro-batch)
    big_batch: int | None = None       # B: the global batch (one rank: its whole batch)
    steps: int | None = None           # steps measured
    ema_decay: float | None = None
    g2: float | None = None            # the moving averages of the |G|² and tr(Σ) estimates at the end
    trace: float | None = None
    epochs: list[list[float | None]] | None = None   # [[epoch, b_simple, low, high]] at each epoch's end
    why_not: str | None = optional()
    every_steps: int | None = optional()   # one step in this many was measured (absent: every step, or older)


@dataclass(frozen=True, kw_only=True, slots=True)
class EdgeSection(JsonObject):
    """The stability edge measured in a convergence run (core.predict.edge): a learning-rate range test's rise
    rate per rank (the rate past which the loss rose; null: it never rose within the ramp, whose top is
    `rate` × 100) and, mode full with SGD, ε_max and B_noise from Hessian-vector products with their sd in log;
    `why_not` says why a part was not measured."""

    mode: str | None = None                 # 'auto' (a range test at the local batch) or 'full'
    at_epoch: float | None = None
    batch: int | None = None                # the batch the test's steps took
    optimizer: str | None = None
    momentum: float | None = None
    rate: float | None = None               # the run's own rate at the probe (the ramp goes from /10 to ×100)
    range_steps: int | None = None
    step_ratio: float | None = None         # one ramp step's factor
    rise_rates: list[float | None] | None = None   # per rank
    rise_rate: float | None = None          # their median
    eps_max: float | None = None
    eps_max_sd_log: float | None = None
    b_noise: float | None = None
    b_noise_sd_log: float | None = None
    why_not: str | None = optional()
    probe_s: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergenceSection(JsonObject):
    """The spec's convergence settings (always), then what the run reached (when it ran ok)."""

    metric: str | None = None
    target: float | None = None
    max_epochs: float | None = None
    lr_rule: str | None = None
    base_lr: float | None = None
    base_batch: int | None = None
    warmup_epochs: float | None = None
    eval_every_epochs: float | None = None
    converged: bool | None = None
    epochs_to_target: float | None = None   # None when it did not converge
    epochs_run: float | None = None
    curve: list[list[float]] | None = None   # [[epoch, value]]
    lr: float | None = None
    train_s: float | None = None
    steps_per_epoch: int | None = None
    noise_scale: NoiseScaleSection | None = optional()   # older records: absent
    edge: EdgeSection | None = optional()                # the stability edge, where the run measured it


# The convergence section's keys that come from the spec: all a run that did not end ok writes.
CONVERGENCE_SPEC_KEYS = ("metric", "target", "max_epochs", "lr_rule", "base_lr", "base_batch", "warmup_epochs",
                         "eval_every_epochs")


@dataclass(frozen=True, kw_only=True, slots=True)
class PeakSection(JsonObject):
    precision: str
    gemm_size: int | None = None
    gflops: float = 0.0                          # summed over the ranks' median-matmul rates
    best_gflops: float | None = None
    per_rank_gflops: list[float] | None = None
    concurrent: bool = False                     # older records: absent, one rank alone
    precision_reason: str | None = optional()    # why this precision, when the plan chose it
    # The compute roof (run.rank.roof): each primitive's rate summed over the ranks, and the best of them. Absent in
    # records from before it: the GEMM alone was the peak then.
    roof_gflops: float | None = optional()
    roof_by_primitive: dict[str, float] | None = optional()


@dataclass(frozen=True, kw_only=True, slots=True)
class AllreduceSection(JsonObject):
    link: str
    ranks: int
    dtype: str
    algorithm: str
    sizes_bytes: list[int]
    time_s: list[float]     # per size: the slowest rank's median


@dataclass(frozen=True, kw_only=True, slots=True)
class ChoiceSection(JsonObject):
    """Why an adaptive sweep chose this trial (core.adaptive.policy): the reason in words, the expected shrink
    of the answer's objective (when chosen by value), the estimated core-seconds and the answer's relative
    width before it (null while there is no answer)."""

    reason: str
    expected_shrink: float | None = None
    estimated_core_s: float | None = None
    width_before: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Record(JsonObject):
    """One trial record; its fields are `RECORD_KEYS`, in that order (see the module docstring)."""

    schema: int = SCHEMA_VERSION
    kind: Kind
    key: str
    status: Status
    reason: str | None = None
    reasons: tuple[ReasonEntry, ...] = ()
    ranks: int | None = None
    threads_per_rank: int | None = None
    local_batch: int | None = None
    global_batch: int | None = None
    seed: int | None = None
    backend: str | None = None
    communication: CommunicationSection | None = None
    placement: tuple[PlacementEntry, ...] | None = None
    started_at: str | None = None
    wall_s: float | None = None
    startup_s: float | None = None
    throughput: ThroughputSection | None = None
    memory: MemorySection | None = None
    convergence: ConvergenceSection | None = None
    peak: PeakSection | None = None
    allreduce: AllreduceSection | None = None
    applied: JsonDict | None = None
    log_tail: str | list[str] | None = None
    choice: ChoiceSection | None = optional()    # adaptive sweeps only

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def trial(self) -> Trial:
        """The grid point the record belongs to (its three layout fields; 0 where a hand-made one lacks them)."""
        return Trial(self.ranks or 0, self.threads_per_rank or 0, self.local_batch or 0)

    def reason_lines(self) -> list[str]:
        """The non-blank lines of `reason`."""
        return [line for line in (self.reason or "").splitlines() if line.strip()]


@dataclass(frozen=True, kw_only=True, slots=True)
class Derived(JsonObject):
    """spec.json's `derived` section (io.store): what the sweep resolved from its spec, which the record
    readers take beside the records (the grid's axes widen the tables; samples per epoch give time-to-train)."""

    samples_per_epoch: int | None = None
    ranks: list[int] | None = None
    threads: list[int] | None = None
    local_batches: list[int] | None = None
    workload: str | None = None
    metric: str | None = None
    # The workload's training FLOPs per sample as the sweep planned with them, and where each planning figure
    # (memory, flops_per_sample, samples_per_epoch) came from (core.planning.facts); absent in older folders.
    train_flops_per_sample: float | None = optional()
    sources: dict[str, str] | None = optional()
    # One rank's planned memory at some local batches ({"8": MiB}: the grid's, 1 and twice the largest), so
    # that a reader predicts memory from the folder's data alone, never by running the workload's formula.
    memory_mib: dict[str, float] | None = optional()
    library_mib: float | None = optional()   # the libraries a node holds once, as planned (absent: not counted)

    def memory_points(self) -> dict[int, float]:
        """`memory_mib` by local batch (io.store checked its shape)."""
        return {int(b): float(v) for b, v in (self.memory_mib or {}).items()}

    @staticmethod
    def of(derived: Derived | JsonMapping) -> Derived:
        """`derived` typed (itself when it is), from spec.json's object."""
        return derived if isinstance(derived, Derived) else Derived.from_json(derived)


@dataclass(frozen=True, slots=True)
class Records:
    """The records of a sweep, with the questions its readers ask of them."""

    items: tuple[Record, ...] = ()

    @staticmethod
    def of(records: Iterable[Record]) -> Records:
        """`records` as a collection (itself when it is one)."""
        return records if isinstance(records, Records) else Records(tuple(records))

    def __iter__(self) -> Iterator[Record]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def of_kind(self, kind: Kind) -> tuple[Record, ...]:
        return tuple(r for r in self.items if r.kind == kind)

    def ok(self, kind: Kind | None = None) -> tuple[Record, ...]:
        """The ok records, of one kind or of all."""
        return tuple(r for r in self.items if r.ok and (kind is None or r.kind == kind))

    def failed(self) -> tuple[Record, ...]:
        """The records that ran and did not end ok (failed, oom, timeout)."""
        return tuple(r for r in self.items if r.status not in (Status.OK, Status.INFEASIBLE))

    def by_key(self) -> dict[str, Record]:
        return {r.key: r for r in self.items}

    def by_trial(self) -> dict[Trial, Record]:
        """The throughput records by their grid point."""
        return {r.trial: r for r in self.of_kind(Kind.THROUGHPUT)}


def dumps(record: Record) -> str:
    """One line of JSON (no NaN: it is not JSON)."""
    return json.dumps(record.to_json(), sort_keys=False, allow_nan=False, separators=(",", ":"))


def parse_lines(lines: Iterable[str]) -> tuple[Records, list[str]]:
    """Records from the lines of a trials file, and a message for each line that could not be used.

    A later record with the same key replaces an earlier one (a `--rerun` appends, never rewrites).
    """
    records: dict[str, Record] = {}
    errors: list[str] = []
    for number, line, last in _with_last(lines):   # lazily: `lines` may be a large file read a chunk at a time
        text = line.strip()
        if not text:
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            what = "torn last line (a write was interrupted); skipped" if last else f"not JSON ({err.msg}); skipped"
            errors.append(f"line {number}: {what}")
            continue
        except RecursionError:   # valid JSON nested past the parser: no record orch writes is
            errors.append(f"line {number}: JSON nested too deeply to read; skipped")
            continue
        record = _record(data)
        if record is None:
            errors.append(f"line {number}: not an orch record of schema {SCHEMA_VERSION}; skipped")
            continue
        if not is_key(record.key):   # a key names a tracker's run folder and a log file: a name, never a path
            errors.append(f"line {number}: key {str(record.key)[:40]!r} is not a name orch gives a trial (letters, "
                          "digits, '.', '_' or '-'); skipped")
            continue
        records.pop(record.key, None)
        records[record.key] = record
    return Records(tuple(records.values())), errors


def _with_last(lines: Iterable[str]) -> Iterator[tuple[int, str, bool]]:
    """(line number from 1, line, whether it is the last line) without holding the lines."""
    it = iter(lines)
    previous = next(it, None)
    number = 1
    while previous is not None:
        current = next(it, None)
        yield number, previous, current is None
        previous, number = current, number + 1


def is_key(key: object) -> bool:
    """Whether `key` is a trial key as orch makes them: one plain file name (the sweep name's rule,
    core.planning.names), so that no folder or file named after it can step outside its parent.

    >>> is_key("r2-t1-b16"), is_key("../../x"), is_key("/tmp/victim"), is_key(".."), is_key("a/b")
    (True, False, False, False, False)
    """
    return name_problem(key, "key") is None


def _record(data: object) -> Record | None:
    """The record of a parsed line, or None when it is not one of this schema."""
    if not isinstance(data, Mapping):
        return None
    try:
        record = Record.from_json(data)
    except (TypeError, ValueError):   # not an object, a key or kind missing, an unknown status or kind
        return None
    return record if record.has("schema") and record.schema == SCHEMA_VERSION else None
