"""Training step with `ipex.optimize` applied vs not, for the small RetinaNet and the classifier.

Run it in the IPEX environment (`bash scripts/setup.sh --ipex` makes .venv-ipex). For each model the two
trainers are built from the same seed with the same parameters except `ipex` (auto vs off), stepped on the
same pre-made batches with the same thread count, and timed interleaved with every other variant
(common.time_interleaved), so that noise on a shared machine hits all of them alike.

    .venv-ipex/bin/python benchmarks/bench_ipex.py              # 2 warm-up + 8 timed steps per variant
    .venv-ipex/bin/python benchmarks/bench_ipex.py --quick      # 1 + 3
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from bench_retinanet_step import step_case
from common import environment_line, format_ms, format_table, set_threads, speedup, time_interleaved

from orch.workload import RankContext
from orchestrator.io.workload_finder import find_workload, parse_params
from workloads.ipex import ipex_unavailable_reason
from workloads.retinanet.workload import SMALL_PARAMS

# (label, workload, params, local batch). The RetinaNet rows are the default sweep's model (bf16,
# channels_last, AdamW) and its fp32 twin; the classifier is the default MLP made wide enough to time.
MODELS = [
    ("small RetinaNet bf16", "retinanet", dict(SMALL_PARAMS), 8),
    ("small RetinaNet fp32", "retinanet", {**SMALL_PARAMS, "precision": "fp32"}, 8),
    ("small RetinaNet fp32 sgd", "retinanet", {**SMALL_PARAMS, "precision": "fp32", "optimizer": "sgd"}, 8),
    ("classifier hidden 1024", "classifier", {"hidden": 1024}, 256),
]


def build(workload_name: str, params: dict, local_batch: int, ipex: str):
    workload = find_workload(workload_name).workload
    p, problems = parse_params(workload, {**params, "ipex": ipex})
    if problems:
        raise SystemExit("\n".join(map(str, problems)))
    return workload.build(p, RankContext(rank=0, world_size=1, local_batch=local_batch, seed=0,
                                         threads=torch.get_num_threads()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--warmup", type=int, default=2, help="untimed interleaved steps first")
    parser.add_argument("--repeats", type=int, default=8, help="timed interleaved steps per variant")
    parser.add_argument("--quick", action="store_true", help="1 warm-up and 3 timed steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.warmup, args.repeats = 1, 3
    reason = ipex_unavailable_reason()
    if reason is not None:
        print(f"bench_ipex: {reason}; run it in the IPEX environment (bash scripts/setup.sh --ipex, then "
              f".venv-ipex/bin/python benchmarks/bench_ipex.py)", file=sys.stderr)
        return 2
    set_threads(args.threads)

    trainers, cases = {}, {}
    for label, name, params, local_batch in MODELS:
        for ipex in ("off", "auto"):
            trainer = build(name, params, local_batch, ipex)
            batches = [batch for _, batch in zip(range(2), trainer.batches(0))]
            trainers[(label, ipex)] = trainer
            cases[f"{label} ipex={ipex}"] = step_case(trainer, batches)
    print(environment_line())
    print(f"{args.threads} threads; {args.warmup} warm-up + {args.repeats} timed steps per variant, interleaved")
    started = time.perf_counter()
    timings = time_interleaved(cases, warmup=args.warmup, repeats=args.repeats)
    rows = []
    for label, _, _, _ in MODELS:
        off, on = timings[f"{label} ipex=off"], timings[f"{label} ipex=auto"]
        for ipex, phases in (("off", off), ("auto", on)):
            rows.append([label, ipex, format_ms(phases["total"]), f"{phases['forward'].median_ms:.1f}",
                         f"{phases['backward'].median_ms:.1f}", f"{phases['optimizer'].median_ms:.1f}",
                         f"{speedup(off['total'], on['total']):.2f}x" if ipex == "auto" else ""])
    print()
    print(format_table(["model", "ipex", "step_ms (median ±spread)", "fwd_ms", "bwd_ms", "opt_ms",
                        "ipex speedup"], rows))
    print("ipex speedup: step time with ipex off ÷ with ipex.optimize applied (above 1: IPEX is faster)")
    for label, _, _, _ in MODELS:
        print(f"{label}: {trainers[(label, 'auto')].applied()['ipex']}")
    print(f"bench wall time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
