"""Trial records: one JSON object per line in `results/<sweep>/trials.jsonl`, with fixed keys.

Every record has every key in `RECORD_KEYS` (null where it does not apply), so readers never guess.
Parsing is pure and forgiving: `parse_lines` returns (records, errors) and skips a torn last line (a
crash mid-write) instead of raising, as mlperf_logging's reader does.

Kinds and their sections:

- ``throughput``: one grid point. ``throughput``, ``memory`` and ``placement`` are set when status is ok.
- ``convergence``: one seed of one global batch trained to the target. ``convergence`` is set.
- ``peak``: a layout's measured GEMM peak: its ``ranks`` ranks of ``threads_per_rank`` cores each, all running
  the GEMM at once, pinned as in the trial (``peak.concurrent``). Records written before that hold one
  rank's peak for ``threads_per_rank`` cores, without ``concurrent``; readers treat them as such.
- ``allreduce``: the all-reduce calibration of ``ranks`` ranks over one link class. ``allreduce`` is set.

Section layouts (units in the names):

    throughput: {samples_per_s, samples_per_s_repeats[], cv, timed_s_repeats[], warmup_steps, timed_steps,
                 repeats, step_ms_median[rank], step_ms_p90[rank], data_wait_share, train_flops_per_sample,
                 gradient_bytes, ddp_bucket_bytes[] (null for one rank; in the gradients' dtype),
                 ddp_wire_dtype, ddp_wire_bucket_bytes[] (what each bucket's all-reduce moves: half of it with
                 a 16-bit ddp_comm_hook; null for one rank and in records older than the fields)}
    memory:     {peak_uss_mib[rank], budget_mib[rank], estimate_mib}
    convergence:{metric, target, converged, epochs_to_target, max_epochs, epochs_run, curve[[epoch, value]],
                 lr_rule, base_lr, base_batch, lr, warmup_epochs, train_s}
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
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

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


OK, INFEASIBLE, FAILED, OOM, TIMEOUT = Status.OK, Status.INFEASIBLE, Status.FAILED, Status.OOM, Status.TIMEOUT
STATUSES = tuple(Status)
THROUGHPUT, CONVERGENCE, PEAK, ALLREDUCE = Kind.THROUGHPUT, Kind.CONVERGENCE, Kind.PEAK, Kind.ALLREDUCE
KINDS = tuple(Kind)

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


def make_record(**fields: Any) -> dict[str, Any]:
    """A record with every key present; unknown keys are a programming error."""
    unknown = set(fields) - set(RECORD_KEYS)
    if unknown:
        raise KeyError(f"unknown record keys: {sorted(unknown)}")
    if fields.get("status") not in STATUSES:
        raise ValueError(f"status must be one of {tuple(map(str, STATUSES))}, got {fields.get('status')!r}")
    if fields.get("kind") not in KINDS:
        raise ValueError(f"kind must be one of {tuple(map(str, KINDS))}, got {fields.get('kind')!r}")
    record: dict[str, Any] = {key: None for key in RECORD_KEYS}
    record.update(schema=SCHEMA_VERSION, reasons=[])
    record.update(fields)
    return record


def dumps(record: dict[str, Any]) -> str:
    """One line of JSON (no NaN: it is not JSON)."""
    return json.dumps(record, sort_keys=False, allow_nan=False, separators=(",", ":"))


def parse_lines(lines: Iterable[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Records from the lines of a trials file, and a message for each line that could not be used.

    A later record with the same key replaces an earlier one (a `--rerun` appends, never rewrites).
    """
    records: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    numbered = list(enumerate(lines, start=1))
    for number, line in numbered:
        text = line.strip()
        if not text:
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            last = number == numbered[-1][0]
            what = "torn last line (a write was interrupted); skipped" if last else f"not JSON ({err.msg}); skipped"
            errors.append(f"line {number}: {what}")
            continue
        if not isinstance(record, dict) or record.get("schema") != SCHEMA_VERSION or "key" not in record:
            errors.append(f"line {number}: not an orch record of schema {SCHEMA_VERSION}; skipped")
            continue
        records.pop(record["key"], None)
        records[record["key"]] = record
    return list(records.values()), errors
