"""The adaptive policy replayed against folders measured in full, beside three baselines.

    .venv/bin/python benchmarks/adaptive_replay.py [FOLDER ...] [--question fastest|table|both] [--seeds 5]
                                                   [--factor 1.25] [--steps]

Without folders: every committed one (results/*/ and results/ccl-vs-gloo/*/ with a trials.jsonl). For each
folder and question, each policy (`orchestrator.core.adaptive.replay`: adaptive, cheapest first, random order
over --seeds seeds, the grid's own order) is replayed: it chooses, the recorded trial is read as if measured
now, the answer is recomputed, until the policy stops or every cell is measured. The full grid's answer is the
answer from every record (for the fastest time-to-train, `orch report`'s fastest layout and its time).

Printed, as Markdown:

- per folder: the full grid's answer, width and core-seconds; for each policy the core-seconds (and share of
  the full grid's) at the first step whose interval holds the full grid's answer and is at most --factor × as
  wide ('reached'), and the share from which that holds to the end ('holds'); and where the adaptive sweep
  itself stops when its target width is --factor × the full grid's (`target_rel_width`, its answer confirmed
  on its own layout first), and whether its interval holds the full grid's answer there;
- the answer's error and the interval's coverage at 25%, 50%, 75% and 100% of the full grid's core-seconds;
- the totals over every folder.

Pure arithmetic on the records (no Ray, no torch): the figures do not depend on the machine it runs on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARES = (0.25, 0.5, 0.75, 1.0)


def committed() -> list[Path]:
    found = sorted(p.parent for p in (REPO / "results").glob("*/trials.jsonl"))
    return found + sorted(p.parent for p in (REPO / "results").glob("ccl-vs-gloo/*/trials.jsonl"))


def _name(path: Path) -> str:
    return str(path.relative_to(REPO / "results")) if path.is_relative_to(REPO / "results") else str(path)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _reach_text(step: object, full_core_s: float) -> str:
    if step is None:
        return "never"
    return f"{step.core_s:,.0f} ({_pct(step.core_s / full_core_s)})"      # type: ignore[attr-defined]


def holds_from(t: object, full: object, factor: float) -> object:
    """The first step from which every later one holds the full grid's answer within factor × its width."""
    from orchestrator.core.adaptive.replay import covered

    found = None
    for s in t.steps:                                                   # type: ignore[attr-defined]
        a = s.answer
        ok = a.value is not None and a.width <= factor * full.width and covered(a, full)   # type: ignore[attr-defined]
        found = (found or s) if ok else None
    return found


def run_folder(path: Path, kind: str, seeds: int, factor: float, show_steps: bool) -> dict[str, object]:
    from orchestrator.core.adaptive import replay as rp
    from orchestrator.core.adaptive.answer import Known, answer_of
    from orchestrator.io.store import load_results

    res = load_results(path)
    s = rp.setting_of(res.spec, res.derived.samples_per_epoch, res.topology, res.environment.precision_chosen)
    q = rp.question_of(res.records, kind, s)
    full = answer_of(Known.of(res.records), q)
    runs = {"adaptive": [rp.replay(res.records, q, s, rp.adaptive_policy(), rp.ADAPTIVE)],
            "cheapest": [rp.replay(res.records, q, s, rp.cheapest_policy, rp.CHEAPEST)],
            "random": [rp.replay(res.records, q, s, rp.random_policy(res.records, k), f"{rp.RANDOM} {k}")
                       for k in range(seeds)],
            "grid": [rp.replay(res.records, q, s, rp.grid_policy(res.records), rp.GRID)]}
    # the live sweep's stop at factor × the full grid's width (its answer confirmed on its own layout first)
    if full.value is not None and full.width < float("inf"):
        runs["stopped"] = [rp.replay(res.records, q, s, rp.adaptive_policy(target_width=factor * full.width),
                                     rp.ADAPTIVE)]
    full_core_s = runs["grid"][0].steps[-1].core_s
    if show_steps:
        for t in runs["adaptive"]:
            for st in t.steps:
                a = st.answer
                print(f"    {_name(path)} | {kind} | {st.trials} | {st.core_s:,.0f} | {st.key or 'start'} | "
                      f"width {a.width:.3f} | covered {rp.covered(a, full)} | {st.reason}")
            print(f"    stop: {t.stop}")
    return {"path": path, "kind": kind, "full": full, "full_core_s": full_core_s, "runs": runs,
            "cells": len(rp.measured_items(res.records)), "throughput_cells": len(q.layouts)}


def summary_row(r: dict[str, object], factor: float) -> tuple[str, dict[str, float]]:
    """A Markdown row and each policy's share of the full core-seconds to reach (1.0: the full grid)."""
    from orchestrator.core.adaptive.answer import relative_text
    from orchestrator.core.adaptive.replay import covered, reached

    full, full_core_s, runs = r["full"], float(r["full_core_s"]), r["runs"]              # type: ignore[index]
    shares: dict[str, float] = {}
    cols = []
    for name in ("adaptive", "cheapest", "random", "grid"):
        hits = [reached(t, full, factor) for t in runs[name]]                          # type: ignore[index]
        values = [h.core_s / full_core_s if h else 1.0 for h in hits]
        shares[name] = statistics.median(values)
        if name == "random":
            cols.append(f"median {_pct(shares[name])} ({sum(h is not None for h in hits)}/{len(hits)} reach)")
        else:
            held = holds_from(runs[name][0], full, factor)                               # type: ignore[index]
            cols.append(f"{_reach_text(hits[0], full_core_s)}; holds from {_reach_text(held, full_core_s)}")
    stopped = runs.get("stopped")                                                        # type: ignore[attr-defined]
    stop = stopped[0].steps[-1] if stopped else None
    at_stop = "–" if stop is None else (f"{_pct(stop.core_s / full_core_s)}, "
                                        f"{'holds' if covered(stop.answer, full) else 'MISSES'} the answer")
    label = "–" if full.layout is None else full.layout.label                            # type: ignore[attr-defined]
    return (f"| {_name(r['path'])} | {r['kind']} | {r['cells']} | {full_core_s:,.0f} | {label}, "  # type: ignore[arg-type]
            f"{relative_text(full.width)} | " + " | ".join(cols) + f" | {at_stop} |", shares)  # type: ignore[attr-defined]


def curve_rows(r: dict[str, object]) -> list[str]:
    """Error and coverage at shares of the full grid's core-seconds, per policy."""
    from orchestrator.core.adaptive.replay import at_share, covered, error

    full, full_core_s, runs = r["full"], float(r["full_core_s"]), r["runs"]              # type: ignore[index]
    rows = []
    for name in ("adaptive", "cheapest", "random", "grid"):
        cells = []
        for share in SHARES:
            steps = [at_share(t, share * full_core_s) for t in runs[name]]               # type: ignore[index]
            errs = [e for s in steps if (e := error(s.answer, full)) is not None]
            inside = sum(covered(s.answer, full) for s in steps)
            err = _pct(statistics.median(errs)) if errs else "no answer"
            cells.append(f"{err}, {inside}/{len(steps)} inside")
        rows.append(f"| {_name(r['path'])} | {r['kind']} | {name} | " + " | ".join(cells) + " |")  # type: ignore[arg-type]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="results folders (default: every committed one)")
    parser.add_argument("--question", choices=("fastest", "table", "both"), default="both")
    parser.add_argument("--seeds", type=int, default=5, help="random orders (default 5)")
    parser.add_argument("--factor", type=float, default=1.25, help="width allowed over the full grid's (1.25)")
    parser.add_argument("--steps", action="store_true", help="also every step of the adaptive policy")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from orchestrator.core.adaptive.answer import FASTEST, TABLE

    kinds = {"fastest": [FASTEST], "table": [TABLE], "both": [FASTEST, TABLE]}[args.question]
    folders = [p.resolve() for p in args.folders] or committed()
    results = [run_folder(p, k, args.seeds, args.factor, args.steps) for k in kinds for p in folders]
    print(f"Core-seconds to reach the full grid's answer inside an interval at most {args.factor:g}× as wide as "
          "the full grid's (share of the full grid's core-seconds; 'holds from': from there to the end)\n")
    print("| folder | question | trials | full core-s | full answer | adaptive | cheapest first | random | "
          "grid order | adaptive sweep, target width = factor × full |")
    print("|---|---|---:|---:|---|---|---|---|---|---|")
    shares = []
    for r in results:
        row, share = summary_row(r, args.factor)
        print(row)
        shares.append((r, share))
    print("\nThe answer's median |error| against the full grid's, and the runs whose interval holds it, at a share "
          "of the full grid's core-seconds\n")
    print("| folder | question | policy | " + " | ".join(f"{s:.0%}" for s in SHARES) + " |")
    print("|---|---|---|" + "---|" * len(SHARES))
    for r in results:
        print("\n".join(curve_rows(r)))
    print()
    print("\n".join(totals(shares)))
    return 0


def totals(shares: list[tuple[dict[str, object], dict[str, float]]]) -> list[str]:
    """Over the folders with more than 3 throughput cells: with 3 (the fit's minimum) there is nothing to skip."""
    lines = []
    for kind in dict.fromkeys(str(r["kind"]) for r, _ in shares):
        mine = [s for r, s in shares if r["kind"] == kind and int(r["throughput_cells"]) > 3]   # type: ignore[call-overload]
        half = sum(s["adaptive"] <= 0.5 for s in mine)
        beats = sum(all(s["adaptive"] < s[b] for b in ("cheapest", "random", "grid")) for s in mine)
        ties = sum(all(s["adaptive"] <= s[b] for b in ("cheapest", "random", "grid")) for s in mine) - beats
        lines.append(f"- {kind}, on the {len(mine)} folders with more than 3 throughput cells: the adaptive policy "
                     f"reached the full grid's answer within half its core-seconds on {half}; it needed fewer "
                     f"core-seconds than every baseline on {beats} (tied with the best on {ties} more)")
    return lines


if __name__ == "__main__":
    sys.exit(main())
