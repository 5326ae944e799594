"""Cluster predictions checked against an emulated cluster: for a model, the 2-node cells predicted at
each link rate from a 1-node sweep plus the link statement, and again plus the cross-node calibration, then
measured on 2 emulated nodes (`orch cluster up`: network namespaces, tbf-shaped links, a Ray node in each).

    .venv/bin/python benchmarks/bench_emulated_cluster.py [--sweep sweeps/retinanet.yaml] [--rates 10gbit,1gbit,200mbit]
        [--cores-per-node 1] [--local-batch 8,16] [--allreduce-nodes 2,3,4] [--out results/emulated-retinanet]
    .venv/bin/python benchmarks/bench_emulated_cluster.py --tiny      # the classifier, a few minutes: the mechanics

As root (network namespaces). Steps, each a normal `orch` command whose folder stays under --out:

1. `1node/`: the sweep's workload on one emulated node of 2C cores (C = --cores-per-node): ranks 1 and 2 of C
   threads at each local batch, with its GEMM peak and its in-node all-reduce calibration; no convergence.
2. for each rate R: `2node-R/`: two emulated nodes of C cores on R-shaped links: 2 ranks of C threads (one per
   node) at each local batch, with the cross-node all-reduce calibration.
3. `allreduce-N-R/` (N in --allreduce-nodes beyond 2): the classifier's cross-node calibration alone on N nodes
   (cores shared where there are too few: an all-reduce on a slow link is network-bound).
4. `orch predict 1node --topology target-R.yaml --nodes 2` (the target states `network: {bandwidth_gbit_per_s}`),
   and again with `--calibration 2node-R`: predicted 2-node cells with their intervals.

It prints, per rate and cell: measured; predicted [interval], error and inside/outside, by the statement and by the
calibration; the naive baselines (linear scaling from the 1-rank cell; the 2-rank cell as one node measured it, the
network ignored); then the all-reduce over N nodes against the ring model from the link statement alone (median
|error| over sizes of 1 MiB and up). `summary.json` holds every figure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core.machine.topology import NodeLink  # noqa: E402
from orchestrator.core.measured.records import Kind, parse_lines  # noqa: E402
from orchestrator.core.predict import comm  # noqa: E402
from orchestrator.core.predict.network import software_fit, stated_fit  # noqa: E402
from orchestrator.core.text.units import parse_rate  # noqa: E402

ORCH = [sys.executable, "-m", "orchestrator.cli"]
HEAD = "10.77.0.1:6379"
TINY = {"workload": {"name": "classifier", "params": {"hidden": 1024, "train_samples": 2048}},
        "measure": {"warmup_steps": 2, "timed_steps": 10, "repeats": 2}}
ALLREDUCE_ONLY = {"workload": {"name": "classifier", "params": {"hidden": 32, "train_samples": 512}},
                  "measure": {"warmup_steps": 1, "timed_steps": 3, "repeats": 1, "peak": False, "allreduce": True}}


def run(argv: list[str]) -> None:
    print(f"$ {' '.join(argv)}  (load average {os.getloadavg()[0]:.2f})", flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    subprocess.run(argv, check=True, cwd=REPO, env=env)


def sweep_file(base: dict, out: Path, name: str, ranks: list[int], threads: int, batches: list[int],
               **measure: object) -> Path:
    doc = {k: v for k, v in base.items() if k not in ("convergence", "name", "grid")}
    doc["name"] = name
    doc["grid"] = {"ranks": ranks, "threads_per_rank": [threads], "local_batch": batches}
    doc["measure"] = {**doc.get("measure", {}), "probe": "auto", **measure}
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


PREDICT_ONLY = False   # --predict-only: the folders are measured; predict again (after a model change) and print


def on_cluster(nodes: int, cores: int, rate: str | None, sweep: Path, results: Path, *, share: bool = False) -> None:
    if PREDICT_ONLY:
        if not (results / "trials.jsonl").exists():
            raise SystemExit(f"--predict-only: {results} was not measured")
        return
    if (results / "trials.jsonl").exists():
        print(f"{results} exists: resumed (finished trials kept)", flush=True)
    link = ["--rate", rate] if rate else []
    run([*ORCH, "cluster", "up", "--nodes", str(nodes), "--cores-per-node", str(cores), *link, "--name", "bench",
         *(["--share-cores"] if share else []), "--", *ORCH, "sweep", str(sweep), "--address", HEAD, "--min-nodes",
         str(nodes), "--results", str(results), "--no-report"])


def target_file(out: Path, cores: int, rate: str) -> Path:
    path = out / f"target-{rate}.yaml"
    path.write_text(f"name: emulated\nnodes: 2\nsockets: 1\ncores_per_socket: {cores}\nmemory_gib: 8\n"
                    f"network: {{bandwidth_gbit_per_s: {parse_rate(rate) / 1e9:g}, shared_host: true}}\n")
    return path


def predicted(out: Path, cores: int, rate: str, batches: list[int], calibrated: bool) -> dict[int, dict]:
    folder = out / f"predict-{rate}-{'calibrated' if calibrated else 'stated'}"
    extra = ["--calibration", str(out / f"2node-{rate}")] if calibrated else []
    run([*ORCH, "predict", str(out / "1node"), "--topology", str(target_file(out, cores, rate)), "--nodes", "2",
         "--local-batch", ",".join(map(str, batches)), *extra, "--out", str(folder)])
    rows = json.loads((folder / "prediction.json").read_text())["layouts"]
    return {r["local_batch"]: r for r in rows if r["ranks"] == 2 and r["threads_per_rank"] == cores}


def records(folder: Path):
    parsed, _ = parse_lines((folder / "trials.jsonl").read_text().splitlines())
    return parsed


def measured(folder: Path, ranks: int, threads: int) -> dict[int, float]:
    return {r.local_batch: r.throughput.samples_per_s for r in records(folder).ok(Kind.THROUGHPUT)
            if r.ranks == ranks and r.threads_per_rank == threads and r.throughput is not None}


def error_pct(value: float, truth: float) -> float:
    return (value / truth - 1) * 100


def cell_rows(out: Path, cores: int, rate: str, batches: list[int]) -> list[dict]:
    one_node = measured(out / "1node", 2, cores)
    one_rank = measured(out / "1node", 1, cores)
    truth = measured(out / f"2node-{rate}", 2, cores)
    by = {how: predicted(out, cores, rate, batches, how == "calibrated") for how in ("stated", "calibrated")}
    rows = []
    for b in batches:
        if b not in truth:
            continue
        row = {"rate": rate, "local_batch": b, "measured": truth[b]}
        for how, table in by.items():
            p = table.get(b)
            if p is None:
                continue
            low, high = p["samples_per_s_low"], p["samples_per_s_high"]
            row[how] = {"value": p["samples_per_s"], "low": low, "high": high,
                        "error_pct": error_pct(p["samples_per_s"], truth[b]),
                        "inside": low is not None and low <= truth[b] <= high,
                        "half_width_pct": None if low is None else (math.sqrt(high / low) - 1) * 100}
        if b in one_rank:
            row["linear"] = error_pct(2 * one_rank[b], truth[b])
        if b in one_node:
            row["one_node"] = error_pct(one_node[b], truth[b])
        rows.append(row)
    return rows


def allreduce_rows(out: Path, rate: str, folder: Path) -> dict:
    """The cross-node all-reduce as measured against the ring from the statement alone (plus the software's cost,
    from the 1-node calibration), at every size of 1 MiB and up."""
    software = software_fit(comm.fit_links(comm.samples_from_records(records(out / "1node"))))
    model = stated_fit(NodeLink(parse_rate(rate)), {software.link: software} if software else {})
    points = [s for s in comm.samples_from_records(records(folder))
              if s.link == comm.NODES and s.message_bytes >= 2**20]
    errors = [error_pct(model.allreduce_s(s.ranks, s.message_bytes), s.time_s) for s in points]
    fit = comm.fit_link(comm.NODES, comm.samples_from_records(records(folder)))
    return {"rate": rate, "folder": folder.name, "ranks": sorted({s.ranks for s in points}),
            "fitted_gbit_per_s": 8 / fit.beta_s_per_byte / 1e9, "errors_pct": errors,
            "median_abs_error_pct": statistics.median(abs(e) for e in errors) if errors else None}


def show(rows: list[dict], reduces: list[dict]) -> None:
    def cell(p: dict | None) -> str:
        if not p:
            return "–"
        interval = f"[{p['low']:,.1f}–{p['high']:,.1f}]" if p["low"] is not None else "[no interval]"
        return f"{p['value']:,.1f} {interval} {p['error_pct']:+.1f}% {'in' if p['inside'] else 'OUT'}"

    print("\n| rate | b | measured | by the statement | by the calibration | linear | one node |")
    print("|---|---:|---:|---|---|---:|---:|")
    for r in rows:
        baselines = f"{r.get('linear', math.nan):+.1f}% | {r.get('one_node', math.nan):+.1f}%"
        print(f"| {r['rate']} | {r['local_batch']} | {r['measured']:,.1f} | {cell(r.get('stated'))} | "
              f"{cell(r.get('calibrated'))} | {baselines} |")
    for how in ("stated", "calibrated"):
        got = [r[how] for r in rows if r.get(how)]
        if got:
            widths = [p["half_width_pct"] for p in got if p["half_width_pct"] is not None]
            print(f"{how}: median |error| {statistics.median(abs(p['error_pct']) for p in got):.1f}%, "
                  f"{sum(p['inside'] for p in got)} of {len(got)} inside, median half-width "
                  f"{statistics.median(widths) if widths else math.nan:.1f}%")
    for name in ("linear", "one_node"):
        got = [abs(r[name]) for r in rows if name in r]
        if got:
            print(f"{name}: median |error| {statistics.median(got):.1f}%")
    print("\n| rate | folder | ranks | fitted Gbit/s | ring from the statement: median abs error |")
    print("|---|---|---|---:|---:|")
    for a in reduces:
        print(f"| {a['rate']} | {a['folder']} | {a['ranks']} | {a['fitted_gbit_per_s']:.3f} | "
              f"{a['median_abs_error_pct']:.1f}% |")
    every = [abs(e) for a in reduces for e in a["errors_pct"]]
    if every:
        print(f"all-reduce against the ring from the statement: median |error| {statistics.median(every):.1f}% over "
              f"{len(every)} points")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", default="sweeps/retinanet.yaml", help="the model's sweep file (workload, measure)")
    parser.add_argument("--rates", default="10gbit,1gbit,200mbit")
    parser.add_argument("--cores-per-node", type=int, default=1, dest="cores")
    parser.add_argument("--local-batch", default="8,16", dest="batches")
    parser.add_argument("--allreduce-nodes", default="2", dest="allreduce_nodes",
                        help="node counts for the all-reduce check (2 comes from the 2-node sweeps)")
    parser.add_argument("--out", help="results folder (default results/emulated-<sweep name>)")
    parser.add_argument("--tiny", action="store_true", help="the classifier at hidden 1024, local batch 32 and 64")
    parser.add_argument("--predict-only", action="store_true",
                        help="measure nothing: predict again from the folders under --out and print the tables")
    args = parser.parse_args()
    global PREDICT_ONLY
    PREDICT_ONLY = args.predict_only
    base = yaml.safe_load((REPO / args.sweep).read_text())
    batches = [int(b) for b in args.batches.split(",")]
    if args.tiny:
        base, batches = {**base, **TINY}, [32, 64]
    name = "classifier" if args.tiny else base.get("name", Path(args.sweep).stem)
    out = Path(args.out or REPO / "results" / f"emulated-{name}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    rates = args.rates.split(",")
    on_cluster(1, 2 * args.cores, None, sweep_file(base, out, f"{name}-1node", [1, 2], args.cores, batches,
                                                   allreduce=True), out / "1node")
    rows, reduces = [], []
    for rate in rates:
        folder = out / f"2node-{rate}"
        on_cluster(2, args.cores, rate, sweep_file(base, out, f"{name}-2node", [2], args.cores, batches,
                                                   allreduce=True, peak=False), folder)
        rows += cell_rows(out, args.cores, rate, batches)
        reduces.append(allreduce_rows(out, rate, folder))
        for nodes in (int(n) for n in args.allreduce_nodes.split(",") if int(n) > 2):
            folder = out / f"allreduce-{nodes}-{rate}"
            doc = {**ALLREDUCE_ONLY, "name": f"allreduce-{nodes}"}
            share = nodes > len(os.sched_getaffinity(0))
            on_cluster(nodes, 1, rate, sweep_file(doc, out, f"allreduce-{nodes}", [nodes], 1, [16],
                                                  **ALLREDUCE_ONLY["measure"]), folder, share=share)
            reduces.append(allreduce_rows(out, rate, folder))
    (out / "summary.json").write_text(json.dumps({"cells": rows, "allreduce": reduces}, indent=1) + "\n")
    show(rows, reduces)
    return 0


if __name__ == "__main__":
    sys.exit(main())
