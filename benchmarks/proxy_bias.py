"""The GEMM-peak proxy's bias for a training step, on every results folder: how much better a GEMM scales over
the same cores than a training step does, and the figures `orchestrator.core.predict.evidence` takes from
the committed folders where a folder has no pair of its own.

    .venv/bin/python benchmarks/proxy_bias.py [FOLDER ...] [--pairs]

For every pair of measured cells at one local batch, one on more cores (1×2×b over 1×1×b grows the threads,
2×1×b over 1×1×b the ranks), with GEMM peaks for both layouts (measured with all ranks at once): the step's
speed-up, the GEMM's, and the step ÷ GEMM efficiency ratio. A GEMM proxy that scaled the step by the GEMM's
speed-up alone would be off by GEMM ÷ step − 1 (its bias, > 0: optimistic). Then, over the folders whose GEMM
peaks are not disturbed (a GEMM slower on more cores: the machine was busy):

- the worst step efficiency per doubling (PRIOR_WORST_PER_DOUBLING) and the lowest step ÷ GEMM ratio
  (PRIOR_RATIO_LOW), the stand-ins where a folder has no pair of cells on different cores;
- the median ratio of thread pairs (PRIOR_THREAD_RATIO), the proxy's correction per doubling of the threads
  where a folder has no thread pair;
- on the same cores and batch, the thread pair's efficiency over the rank pair's and the reverse (the margin
  CROSS_AXIS leaves below the lower).

Pure arithmetic on the records: the figures do not depend on the machine it runs on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def committed() -> list[Path]:
    found = sorted(p.parent for p in (REPO / "results").glob("*/trials.jsonl"))
    return found + sorted(p.parent for p in (REPO / "results").glob("ccl-vs-gloo/*/trials.jsonl"))


def folder_pairs(path: Path) -> tuple[list[dict[str, object]], str]:
    """Every pair of the folder as a row, and why its peaks are disturbed ("" when they are not)."""
    from orchestrator.core.predict import data, evidence
    from orchestrator.io.store import load_results

    records = load_results(path).records
    cells, gemm = data.cells_from_records(records), data.gemm_peaks(records)
    ev = evidence.Evidence(gemm=gemm)
    rows = []
    for p in evidence.pairs(cells):
        hi, lo = p.high.layout, p.low.layout
        grown = evidence.axes_grown(hi, lo)
        g = ev.gemm_speedup(hi, lo)
        step = p.high.samples_per_s / p.low.samples_per_s
        rows.append({"pair": p.label, "axis": "+".join(grown) or "–", "per_doubling": p.per_doubling,
                     "step": step, "gemm": g, "ratio": p.efficiency / ev.gemm_efficiency(hi, lo)
                     if ev.gemm_efficiency(hi, lo) else None, "bias": g / step - 1 if g else None,
                     "same_cores": (hi.local_batch, hi.cores, lo.cores, lo.ranks, lo.threads)})
    return rows, evidence.disturbed_by(gemm)


def cross_axis(rows: list[dict[str, object]]) -> list[tuple[float, float]]:
    """(threads ÷ ranks, ranks ÷ threads) step efficiency, for each batch with both pairs over the same base."""
    out = []
    by_key: dict[object, dict[str, float]] = {}
    for r in rows:
        if r["axis"] in ("threads", "ranks"):
            by_key.setdefault(r["same_cores"], {})[str(r["axis"])] = float(r["step"])   # type: ignore[arg-type]
    for found in by_key.values():
        if "threads" in found and "ranks" in found:
            out.append((found["threads"] / found["ranks"], found["ranks"] / found["threads"]))
    return out


def _f(value: object, fmt: str = "{:.3f}") -> str:
    return "–" if value is None else fmt.format(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="results folders (default: every committed one)")
    parser.add_argument("--pairs", action="store_true", help="print every pair, not only each folder's summary")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from orchestrator.core.predict import evidence

    pooled: list[dict[str, object]] = []
    cross: list[tuple[float, float]] = []
    print("| folder | pairs | GEMM proxy bias, threads | GEMM proxy bias, ranks | step ÷ GEMM, min / median |")
    print("|---|---:|---:|---:|---:|")
    for path in [p.resolve() for p in args.folders] or committed():
        rows, disturbed = folder_pairs(path)
        name = path.relative_to(REPO / "results") if path.is_relative_to(REPO / "results") else path
        bias = {a: [float(r["bias"]) for r in rows if r["axis"] == a and r["bias"] is not None]   # type: ignore[arg-type]
                for a in ("threads", "ranks")}
        ratios = [float(r["ratio"]) for r in rows if r["ratio"] is not None]                     # type: ignore[arg-type]
        span = {a: f"{min(b):+.1%} to {max(b):+.1%}" if b else "–" for a, b in bias.items()}
        print(f"| {name}{' (disturbed)' if disturbed else ''} | {len(rows)} | {span['threads']} | {span['ranks']} | "
              f"{_f(min(ratios) if ratios else None)} / {_f(statistics.median(ratios) if ratios else None)} |")
        if args.pairs:
            for r in rows:
                print(f"|   {r['pair']} ({r['axis']}) | | step {r['step']:.3f}× | GEMM {_f(r['gemm'])}× | "
                      f"ratio {_f(r['ratio'])}, per doubling {r['per_doubling']:.3f} |")
        if not disturbed:
            pooled += rows
            cross += cross_axis(rows)
    ratios = [float(r["ratio"]) for r in pooled if r["ratio"] is not None]                       # type: ignore[arg-type]
    threads = [float(r["ratio"]) for r in pooled if r["ratio"] is not None and r["axis"] == "threads"]  # type: ignore[arg-type]
    worst = min(pooled, key=lambda r: float(r["per_doubling"]))                                  # type: ignore[arg-type]
    print()
    print(f"undisturbed folders: {len(pooled)} pairs, {len(ratios)} with GEMM peaks for both layouts")
    print(f"- worst step efficiency per doubling: {float(worst['per_doubling']):.3f} ({worst['pair']}); "   # type: ignore[arg-type]
          f"evidence.PRIOR_WORST_PER_DOUBLING = {evidence.PRIOR_WORST_PER_DOUBLING}")
    print(f"- lowest step ÷ GEMM ratio: {min(ratios):.3f}; evidence.PRIOR_RATIO_LOW = {evidence.PRIOR_RATIO_LOW}")
    print(f"- median step ÷ GEMM ratio of thread pairs: {statistics.median(threads):.3f} over {len(threads)}; "
          f"evidence.PRIOR_THREAD_RATIO = {evidence.PRIOR_THREAD_RATIO}")
    if cross:
        print(f"- on the same cores: threads ÷ ranks efficiency ≥ {min(c[0] for c in cross):.3f}, ranks ÷ threads "
              f"≥ {min(c[1] for c in cross):.3f} (communication in it) over {len(cross)} batches; "
              f"evidence.CROSS_AXIS = {evidence.CROSS_AXIS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
