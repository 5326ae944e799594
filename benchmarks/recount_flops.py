"""What the valid-tap FLOP count changes in a results folder measured before it: the workload's training step at
the records' local batch, counted by torch's own FLOP counter (what the records hold: every convolution tap, those
in the zero padding too) and by orch's (run.rank.flops: only the taps inside the input), then the folder's
hardware-efficiency table as it reads with each. Nothing is measured or written: one training step of one rank is
built and counted (fp32: the count does not depend on the precision), the folder is only read.

    python benchmarks/recount_flops.py results/example-retinanet results/example-torchvision

A folder whose FLOPs were stated (a training script's, or the sweep file's) or counted already by the valid-tap rule
is said and skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any


def counts(workload_name: str, params: dict[str, Any], local_batch: int) -> tuple[float, float]:
    """(torch's own, orch's) training FLOPs per sample of the workload's step at `local_batch`, one rank, fp32."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from orch import decide_precision
    from orch.workload import RankContext
    from orchestrator.io.workload_finder import find_workload, parse_params
    from orchestrator.run.rank.flops import flop_counter
    from orchestrator.run.rank.protocol import make_step

    workload = find_workload(workload_name).workload
    given = {**params, "precision": "fp32"} if "precision" in params else params
    p, problems = parse_params(workload, given)
    if problems:
        raise SystemExit("\n".join(map(str, problems)))
    p = decide_precision(p)   # a workload whose params leave precision at `auto` (a sweep's plan decided it)
    torch.manual_seed(0)
    trainer = workload.build(p, RankContext(rank=0, world_size=1, local_batch=local_batch, seed=0, threads=1))
    step = make_step(trainer.module, trainer.optimizer)
    batch = next(iter(trainer.batches(0)))
    step(batch)                                  # the optimizer's state made: count a steady step
    every_tap, valid = FlopCounterMode(display=False), flop_counter()
    with every_tap:
        step(batch)
    with valid:
        step(batch)
    return every_tap.get_total_flops() / local_batch, valid.get_total_flops() / local_batch


def recounted(records: Any, ratio: float) -> list[Any]:
    """The records with each counted figure × `ratio`, marked as counted by the valid-tap rule."""
    from orchestrator.core.profile.flop_count import VALID_TAPS

    out = []
    for r in records:
        t = r.throughput
        if t is not None and t.train_flops_per_sample:
            t = dataclasses.replace(t, train_flops_per_sample=t.train_flops_per_sample * ratio,
                                    train_flops_rule=VALID_TAPS)
        out.append(dataclasses.replace(r, throughput=t))
    return out


def report(folder: Path) -> None:
    from orchestrator.core.measured import records as rec
    from orchestrator.core.planning.probe import flop_text
    from orchestrator.core.profile.flop_count import TORCH_DEFAULT
    from orchestrator.core.tabulate.throughput import flops_rule_of, hardware_efficiency_table
    from orchestrator.io.store import load_results

    results = load_results(folder)
    counted = [r for r in results.records.ok(rec.Kind.THROUGHPUT)
               if r.throughput and r.throughput.train_flops_per_sample]
    if not counted:
        print(f"## {folder}\n\nnothing to recount: no trial counted its FLOPs (the table uses the sweep's figure: "
              f"{(results.derived.sources or {}).get('flops_per_sample', 'none given')})\n")
        return
    if any(flops_rule_of(r) != TORCH_DEFAULT for r in counted):
        print(f"## {folder}\n\nnothing to recount: its FLOPs are stated or counted by the valid-tap rule already\n")
        return
    workload = results.spec.workload
    recorded = counted[0].throughput.train_flops_per_sample
    every_tap, valid = counts(workload.name, workload.params, counted[0].local_batch or 1)
    before = hardware_efficiency_table(results.records)
    after = hardware_efficiency_table(recounted(results.records, valid / every_tap))
    print(f"## {folder}\n\n{workload.name}: recorded {flop_text(recorded)} per sample; recounted now at local "
          f"batch {counted[0].local_batch}: torch's own {flop_text(every_tap)}, orch's {flop_text(valid)} "
          f"(torch's is {every_tap / valid - 1:+.1%})\n")
    print("| layout | GFLOP/s before | after | % of peak before | after |\n|---|---:|---:|---:|---:|")
    for (label, old), (_, new) in zip(before.rows, after.rows, strict=True):
        print(f"| {label} | {old[2].text} | {new[2].text} | {old[4].text} | {new[4].text} |")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    for folder in parser.parse_args(argv).folders:
        report(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
