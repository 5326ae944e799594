"""Does orch time a user's script as it times its own workloads? The small RetinaNet of sweeps/retinanet.yaml, in
fp32, swept twice over the same layouts in one run, round after round with the order alternated:

- built-in: orch's `retinanet` workload (orch's loop, its batches prepared in memory);
- script:   examples/retinanet_script/train.py, the same model, data, optimizer and DDP switches in a user's own
            loop, reporting with `orch.script.step()` (its batches rendered before training and cycled, as
            orch's `measure.data: memory` does).

Per layout: the median samples/s of each side over all its repeats, their ratio, and the repeats' own noise
(the coefficient of variation of each side's repeats). The two agree when |script / built-in − 1| is at most
twice the larger CV: a gap inside that is noise, not the script path's doing.

    python benchmarks/bench_script_vs_builtin.py              # this machine's layouts at local batch 8, 3 rounds
    python benchmarks/bench_script_vs_builtin.py --rounds 5 --out results/script-vs-builtin
    python benchmarks/bench_script_vs_builtin.py --quick      # one 1×1 layout, a few steps: the pipeline only

Run it on a quiet machine (nothing else running): both sides are timed, and a busy neighbour makes the noise,
not the comparison, the finding. Exit status 0 when every trial of both sides ran ok, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core.measured.records import Kind  # noqa: E402
from orchestrator.core.measured.throughput import coefficient_of_variation  # noqa: E402
from orchestrator.io.store import load_results  # noqa: E402

SCRIPT = REPO / "examples" / "retinanet_script" / "train.py"
# sweeps/retinanet.yaml's workload, in fp32 (the same on every CPU), without IPEX (the script has none)
PARAMS: dict[str, Any] = {
    "backbone": "resnet18", "trainable_layers": 5, "image_size": 128, "classes": 4, "train_samples": 256,
    "test_samples": 32, "max_objects": 3, "precision": "fp32", "memory_format": "channels_last",
    "focal_loss": "kernel", "frozen_bn": "fused", "ddp_comm_hook": "bf16", "ddp_grad_as_bucket_view": True,
    "ipex": "off",
}
FULL = {"grid": {"ranks": "auto", "threads_per_rank": "auto", "local_batch": [8]},
        "measure": {"warmup_steps": 3, "timed_steps": 12, "repeats": 3}}
QUICK = {"grid": {"ranks": [1], "threads_per_rank": [1], "local_batch": [2]},
         "measure": {"warmup_steps": 1, "timed_steps": 2, "repeats": 2},
         "params": {"train_samples": 8, "image_size": 64}}


def script_args(params: dict[str, Any], cache_batches: int) -> list[str]:
    """The script's arguments for the built-in's parameters."""
    return ["--batch-size", "{local_batch}", "--seed", "{seed}", "--epochs", "1000000",
            "--backbone", params["backbone"], "--image-size", str(params["image_size"]),
            "--classes", str(params["classes"]), "--train-samples", str(params["train_samples"]),
            "--max-objects", str(params["max_objects"]), "--precision", params["precision"], "--channels-last",
            "--focal-loss", params["focal_loss"], "--frozen-bn", params["frozen_bn"],
            "--ddp-comm-hook", params["ddp_comm_hook"], "--ddp-grad-as-bucket-view",
            "--cache-batches", str(cache_batches)]


def sweep_specs(quick: bool) -> dict[str, dict[str, Any]]:
    """The two sweeps, equal but for the workload."""
    shape = QUICK if quick else FULL
    params = {**PARAMS, **shape.get("params", {})}
    measure = {**shape["measure"], "peak": False, "allreduce": False}
    # orch's loop with `data: memory` cycles this many distinct batches (run.rank.protocol.measure_throughput)
    cache = max(1, min(16, measure["warmup_steps"] + measure["timed_steps"]))
    common = {"grid": shape["grid"], "measure": measure, "backend": "gloo"}
    return {"built-in": {"name": "bench-builtin", "workload": {"name": "retinanet", "params": params}, **common},
            "script": {"name": "bench-script", "workload": {"script": str(SCRIPT),
                                                            "args": script_args(params, cache)}, **common}}


def run_sweep(spec: dict[str, Any], folder: Path) -> dict[str, dict[str, Any]]:
    """`orch sweep` on `spec` into `folder`: each throughput record's status, reason and repeats, by key."""
    folder.mkdir(parents=True)
    sweep = folder / "sweep.yaml"
    sweep.write_text(json.dumps(spec))
    results = folder / "results"
    run = subprocess.run([sys.executable, "-m", "orchestrator.cli", "sweep", str(sweep), "--results", str(results),
                          "--no-report", "--json"], capture_output=True, text=True, cwd=REPO)
    if not (results / "trials.jsonl").is_file():
        raise RuntimeError(f"orch sweep {spec['name']} recorded nothing (exit {run.returncode}):\n{run.stderr[-2000:]}")
    out = {}
    for record in load_results(results).records.of_kind(Kind.THROUGHPUT):
        if str(record.status) == "infeasible":
            continue
        t = record.throughput
        out[record.key] = {"status": str(record.status), "reason": record.reason,
                           "repeats": list(t.samples_per_s_repeats or []) if t is not None else []}
    return out


def compare(runs: dict[str, list[dict[str, dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Per layout: each side's median and CV over all its repeats, the ratio and the verdict."""
    rows = []
    for key in sorted({k for side in runs.values() for run in side for k in run}):
        row: dict[str, Any] = {"layout": key}
        failed = []
        for side, side_runs in runs.items():
            trials = [run[key] for run in side_runs if key in run]
            failed += [f"{side}: {t['status']} ({t['reason']})" for t in trials if t["status"] != "ok"]
            repeats = [v for t in trials for v in t["repeats"]]
            row[side] = {"median": statistics.median(repeats) if repeats else None,
                         "cv": coefficient_of_variation(repeats), "repeats": repeats}
        b, s = row["built-in"], row["script"]
        if failed or not b["median"] or not s["median"]:
            row.update(ratio=None, noise=None, verdict="failed: " + "; ".join(failed or ["no repeats"]))
        else:
            ratio, noise = s["median"] / b["median"], 2 * max(b["cv"], s["cv"])
            row.update(ratio=ratio, noise=noise, verdict="within noise" if abs(ratio - 1) <= noise else "outside noise")
        rows.append(row)
    return rows


def _side(s: dict[str, Any]) -> str:
    return "–" if s["median"] is None else f"{s['median']:,.2f} ({s['cv']:.1%}, {len(s['repeats'])} repeats)"


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| layout | built-in samples/s (CV) | script samples/s (CV) | script / built-in | noise (2 × CV) "
             "| verdict |", "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        ratio = "–" if r["ratio"] is None else f"{r['ratio']:.3f}"
        noise = "–" if r["noise"] is None else f"±{r['noise']:.1%}"
        lines.append(f"| {r['layout']} | {_side(r['built-in'])} | {_side(r['script'])} | {ratio} | {noise} "
                     f"| {r['verdict']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one round of one 1×1 layout, a few steps (correctness)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each running both sweeps (default 3)")
    parser.add_argument("--out", metavar="DIR", help="also write summary.json and summary.md there")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    specs = sweep_specs(args.quick)
    print(f"script vs built-in RetinaNet, {rounds} round(s); {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    runs: dict[str, list[dict[str, dict[str, Any]]]] = {side: [] for side in specs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            # Alternate which side goes first, so that a slow phase of the machine does not favour one.
            for side in (list(specs) if r % 2 == 0 else list(reversed(specs))):
                runs[side].append(run_sweep(specs[side], Path(tmp) / f"round{r}-{side.replace('-', '')}"))
                print(f"round {r + 1}: {side} done", flush=True)
    rows = compare(runs)
    text = table(rows)
    print(text)
    print(f"load average at the end {os.getloadavg()[0]:.2f}; verdict: |script/built-in − 1| ≤ 2 × the larger CV "
          "of the two sides' repeats")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps({"rounds": rounds, "quick": args.quick, "rows": rows}, indent=1))
        (out / "summary.md").write_text(text + "\n")
    return 0 if all(not r["verdict"].startswith("failed") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
