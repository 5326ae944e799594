"""Tables of `orch profile`, from the ranks' profile results (plain JSON data): step summary and
overhead, oneDNN breakdown, operator categories side by side with how they scale, layers, roofline and
the efficiency ratio. Pure: no torch, no files.

A profiled target is a dict `{"label", "variant", "ranks", "threads", "local_batch", "results": [rank
0's profile, rank 1's, ...]}` where each rank's profile is what `orchestrator.run.profiling.profile_rank`
returns. Per-rank figures come from rank 0; step times are the slowest rank's.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core import roofline as rl

Target = Mapping[str, Any]
OTHER = "other (between ops)"
ALLREDUCE_WAIT = "communication: all-reduce wait (inferred)"
CONTENDED = 0.8   # below this share of its cores, a rank's times say more about its neighbours than itself
OUTSIDE_ONEDNN = "outside oneDNN (ATen, BLAS, Python)"

# Operator categories for the side-by-side view, first match wins (lower-cased substring of the op name).
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("communication", ("c10d", "allreduce", "all_reduce", "gloo", "broadcast", "barrier", "ccl")),
    ("convolution", ("convolution", "conv2d", "conv3d")),
    ("matmul", ("addmm", "aten::mm", "bmm", "matmul", "linear")),
    ("optimizer", ("optimizer", "_foreach", "adam", "sgd")),
    ("normalization", ("batch_norm", "layer_norm", "group_norm")),
    ("memory (copy, fill, reorder)", ("copy_", "fill_", "zero_", "clone", "to_dense", "reorder", "empty",
                                      "contiguous", "cat")),
)
ELEMENTWISE = "elementwise and other ATen"


def category(op: str) -> str:
    low = op.lower()
    for name, needles in CATEGORIES:
        if any(n in low for n in needles):
            return name
    return ELEMENTWISE


@dataclass(frozen=True, slots=True)
class StepSummary:
    label: str
    plain_step_ms: float       # median of the unprofiled steps, slowest rank
    verbose_overhead: float    # oneDNN-verbose step ÷ plain step − 1
    profiler_overhead: float   # torch.profiler step ÷ plain step − 1
    named_share: float         # of the profiler pass's step, inside named ops
    onednn_ms: float           # per step, rank 0, sum of logged primitive times
    verbose_step_ms: float


def _rank0(target: Target) -> Mapping[str, Any]:
    first: Mapping[str, Any] = target["results"][0]
    return first


def _slowest_median(target: Target, key: str) -> float:
    return float(max(statistics.median(r[key]) for r in target["results"]))


def summary(target: Target) -> StepSummary:
    r0 = _rank0(target)
    plain = _slowest_median(target, "plain_step_ms")
    verbose = _slowest_median(target, "verbose_step_ms")
    prof = max(statistics.median(r["profiler"]["step_ms"]) for r in target["results"])
    cov = r0["profiler"]["coverage"]
    steps = r0["steps"]
    onednn = sum(t["time_ms"] for t in r0["onednn"]["totals"]) / steps
    attributed = cov["named_ms"] + cov.get("allreduce_wait_ms", 0.0)
    return StepSummary(target["label"], plain, verbose / plain - 1, prof / plain - 1,
                       attributed / cov["step_ms"] if cov["step_ms"] else 0.0, onednn, verbose)


def onednn_breakdown(target: Target) -> dict[str, float]:
    """ms per step by 'kind direction' (rank 0), plus what the verbose pass's step spent outside oneDNN."""
    r0 = _rank0(target)
    steps = r0["steps"]
    out: dict[str, float] = {}
    for t in r0["onednn"]["totals"]:
        key = t["kind"] if t["direction"] == "undef" else f"{t['kind']} {t['direction']}"
        out[key] = out.get(key, 0.0) + t["time_ms"] / steps
    step = statistics.median(r0["verbose_step_ms"])
    out[OUTSIDE_ONEDNN] = max(0.0, step - sum(out.values()))
    return out


def onednn_kernels(target: Target) -> list[dict[str, Any]]:
    """Rows kind × direction × implementation with calls and ms per step and share of the verbose step."""
    r0 = _rank0(target)
    steps = r0["steps"]
    step = statistics.median(r0["verbose_step_ms"])
    return [{"kind": t["kind"], "direction": t["direction"], "implementation": t["implementation"],
             "calls_per_step": t["calls"] / steps, "ms_per_step": t["time_ms"] / steps,
             "share_of_step": t["time_ms"] / steps / step if step else 0.0} for t in r0["onednn"]["totals"]]


def categories(target: Target) -> dict[str, float]:
    """ms per step by operator category (self time, rank 0's profiler pass) plus the time between ops."""
    r0 = _rank0(target)
    out: dict[str, float] = {}
    for row in r0["profiler"]["ops"]:
        name = category(row["op"])
        out[name] = out.get(name, 0.0) + row["self_ms_per_step"]
    out[OTHER] = r0["profiler"]["coverage"]["other_ms"]
    wait = r0["profiler"]["coverage"].get("allreduce_wait_ms", 0.0)
    if wait:
        out[ALLREDUCE_WAIT] = wait
    return out


def cpu_share(target: Target) -> float | None:
    """The lowest share of its cores any rank got during the plain steps (None when not measured)."""
    shares = [r.get("plain_cpu_share") for r in target["results"]]
    return min(shares) if shares and all(x is not None for x in shares) else None


def scaling(targets: Sequence[Target], values: Sequence[Mapping[str, float]]) -> list[dict[str, Any]]:
    """Each category's time per step in every target, and against the first target of the same variant
    (layouts are compared, not variants): the speed-up and the speed-up that threads alone would give
    (threads ratio; same local batch per rank). A category whose speed-up stays near 1 while threads
    double does not scale with threads. No verdict is given when a rank of either target got less than
    CONTENDED of its cores: then the times measure the other processes on the machine, not the layout."""
    bases: dict[str, int] = {}
    for i, t in enumerate(targets):
        bases.setdefault(t.get("variant", ""), i)
    names = sorted({k for v in values for k in v}, key=lambda k: -max(v.get(k, 0.0) for v in values))
    rows = []
    for name in names:
        row: dict[str, Any] = {"category": name}
        for t, v in zip(targets, values):
            row[t["label"]] = round(v.get(name, 0.0), 3)
        for i, (t, v) in enumerate(zip(targets, values)):
            b = bases[t.get("variant", "")]
            if b != i:
                row.update(_compare(name, targets[b], values[b], t, v))
        rows.append(row)
    return rows


def _compare(name: str, base_t: Target, base: Mapping[str, float], t: Target,
             v: Mapping[str, float]) -> dict[str, Any]:
    now, before = v.get(name, 0.0), base.get(name, 0.0)
    speedup = before / now if now > 0 and before > 0 else None
    starved = [x for x in (cpu_share(base_t), cpu_share(t)) if x is not None and x < CONTENDED]
    verdict = (f"not judged: a rank got {min(starved):.0%} of its cores" if starved
               else _verdict(speedup, t["threads"] / base_t["threads"]))
    return {f"speed-up {t['label']}": round(speedup, 2) if speedup else None, f"verdict {t['label']}": verdict}


def _verdict(speedup: float | None, ideal: float) -> str:
    if speedup is None:
        return "–"
    if ideal <= 1:
        # Same threads per rank (more ranks): per-rank time should stay put; growth is contention.
        return "unchanged" if speedup >= 0.9 else f"slower ×{1 / speedup:.2f} (contention)"
    efficiency = (speedup - 1) / (ideal - 1)
    if efficiency >= 0.6:
        return "scales with threads"
    if efficiency >= 0.25:
        return "scales partly"
    return "does not scale"


def layers(target: Target, top: int = 15) -> list[dict[str, Any]]:
    r0 = _rank0(target)
    step = r0["profiler"]["coverage"]["step_ms"]
    rows = [{"layer": r["layer"], "forward_ms": r["forward_ms"], "backward_ms": r["backward_ms"],
             "total_ms": r["forward_ms"] + r["backward_ms"],
             "share_of_step": (r["forward_ms"] + r["backward_ms"]) / step if step else 0.0}
            for r in r0["profiler"]["layers"]]
    rows.sort(key=lambda r: -r["total_ms"])
    return rows[:top]


def layer_share(target: Target, name: str) -> float:
    """Share of the profiled step spent in one layer or region (forward + backward), e.g. focal_loss."""
    r0 = _rank0(target)
    step = r0["profiler"]["coverage"]["step_ms"]
    total = sum(r["forward_ms"] + r["backward_ms"] for r in r0["profiler"]["layers"] if r["layer"] == name)
    return total / step if step else 0.0


def roofline_points(target: Target) -> list[dict[str, Any]]:
    """Per distinct primitive problem (rank 0): FLOPs and bytes per call, achieved GFLOP/s from the logged
    time, the attainable GFLOP/s under the measured peak and bandwidth, and the fraction reached."""
    r0 = _rank0(target)
    peak, bw = r0["peak"]["gflops"], r0["stream_triad_gbs"]
    out = []
    for s in r0["onednn"]["shapes"]:
        cost = rl.primitive_cost(s["kind"], s["problem"], s["dtype"])
        if cost is None or s["time_ms"] <= 0 or cost.bytes <= 0:
            continue
        per_call_ms = s["time_ms"] / s["calls"]
        achieved = cost.flops / (per_call_ms / 1e3) / 1e9
        attainable = rl.attainable_gflops(cost.intensity, peak, bw) if cost.flops else 0.0
        out.append({"kind": s["kind"], "direction": s["direction"], "problem": s["problem"], "dtype": s["dtype"],
                    "calls": s["calls"], "ms_per_call": per_call_ms, "gflop_per_call": cost.flops / 1e9,
                    "mbytes_per_call": cost.bytes / 1e6, "flop_per_byte": cost.intensity,
                    "achieved_gflops": achieved, "attainable_gflops": attainable,
                    "fraction_of_attainable": achieved / attainable if attainable else None,
                    "achieved_gbs": cost.bytes / (per_call_ms / 1e3) / 1e9})
    return out


def roofline_by_kind(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Time-weighted roofline figures per kind × direction: total FLOPs ÷ total time."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for p in points:
        groups.setdefault((p["kind"], p["direction"]), []).append(p)
    rows = []
    for (kind, direction), pts in groups.items():
        ms = sum(p["ms_per_call"] * p["calls"] for p in pts)
        gflop = sum(p["gflop_per_call"] * p["calls"] for p in pts)
        attain_ms = sum(p["ms_per_call"] * p["calls"] * (p["attainable_gflops"] or 0) for p in pts)
        rows.append({"kind": kind, "direction": direction, "ms": ms, "gflop": gflop,
                     "achieved_gflops": gflop / (ms / 1e3) if ms else 0.0,
                     "attainable_gflops": attain_ms / ms if ms else 0.0,
                     "fraction_of_attainable": (gflop / (ms / 1e3)) / (attain_ms / ms) if ms and attain_ms else None})
    return sorted(rows, key=lambda r: -r["ms"])


def efficiency(target: Target) -> dict[str, Any]:
    """The seed's efficiency ratio: Σ(isolated time × calls) of the replayed primitives ÷ the measured
    step time, next to Σ(logged time) of the same primitives; the rest of the step is framework and
    primitives not replayed."""
    r0 = _rank0(target)
    steps = r0["steps"]
    logged = {(s["kind"], s["direction"], s["problem"], s["dtype"]): s for s in r0["onednn"]["shapes"]}
    isolated_ms = logged_ms = 0.0
    replayed = skipped = 0
    for row in r0["replay"]:
        s = logged.get((row["kind"], row["direction"], row["problem"], row["dtype"]))
        if s is None or row["isolated_ms"] is None:
            skipped += 1
            continue
        replayed += 1
        isolated_ms += row["isolated_ms"] * s["calls"] / steps
        logged_ms += s["time_ms"] / steps
    step = statistics.median(r0["plain_step_ms"])
    return {"step_ms": step, "replayed_shapes": replayed, "not_replayed_shapes": skipped,
            "isolated_ms_per_step": isolated_ms, "logged_ms_per_step": logged_ms,
            "efficiency_ratio": isolated_ms / step if step else None,
            "isolated_vs_logged": isolated_ms / logged_ms if logged_ms else None,
            "framework_and_other_ms": step - isolated_ms}
