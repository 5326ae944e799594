"""Would a memory-bandwidth bound on socket sharing hold here? The STREAM triad alone and with every core's
rank at once, against the slow-down per extra rank (μ) that `orch predict` fits to measured cells.

k ranks on one socket slow each other (the step model's 1 + μ·(k − 1)). If what they shared were memory
bandwidth alone, a rank's compute could slow at most as a fully bandwidth-bound one does: from the bandwidth it
gets alone, B1, to its share of what k get at once, Bk/k. So μ ≤ (k·B1/Bk − 1)/(k − 1) would bound the fit. This
script measures B1 and Bk at two working-set sizes (one that stays in a rank's share of the last-level cache and
one DRAM_OVER_CACHES × every cache: core/profile/levels) with the project's own triad
(run/rank/profile_replay), each rank a process pinned to one core with one thread, all k starting together.
Rounds alternate alone and together; each figure is its best round (another tenant only ever lowers a rate).

Then it prints the bound beside the μ each committed ledger case with multi-rank cells fitted (their saved
prediction's model table), with the CPU its cells were measured on: the bound is this machine's, so only that
CPU's rows compare. A fitted μ above the bound means sharing here is not bandwidth alone (the last-level
cache's capacity, the host's scheduling of the vCPUs), so the bound would cut off what was measured.

    python benchmarks/socket_sharing_triad.py               # 3 rounds, about a minute on 2 cores
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core.profile import levels as lv  # noqa: E402
from orchestrator.io.caches import cpu_caches  # noqa: E402

CASES = REPO / "benchmarks" / "ledger" / "cases"


def _rank(cpu: int, elements: int, runs: int, start: Any, out: Any) -> None:
    """One rank: pinned to `cpu`, one thread, the triad's best of `runs` over `elements` float32 per array."""
    os.sched_setaffinity(0, {cpu})
    import torch

    torch.set_num_threads(1)
    from orchestrator.run.rank.profile_replay import stream_triad_gbs

    stream_triad_gbs(elements, runs=1)          # first touch of the pages, outside the timed runs
    start.wait()
    out.put((cpu, stream_triad_gbs(elements, runs=runs)))


def triad_together(cpus: list[int], elements: int, runs: int) -> float:
    """The sum over `cpus` of each pinned rank's triad (GB/s), all started at once."""
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(len(cpus)), ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(cpu, elements, runs, start, out)) for cpu in cpus]
    for p in procs:
        p.start()
    rates = [out.get(timeout=600)[1] for _ in procs]
    for p in procs:
        p.join()
    return sum(rates)


def fitted_mu() -> list[tuple[str, float, str]]:
    """(case, μ, the CPU its cells were measured on) from each committed ledger prediction that fitted a μ."""
    found = []
    for saved in sorted(CASES.glob("*/prediction/prediction.json")):
        data = json.loads(saved.read_text())
        cpu = str(data.get("subject", {}).get("source_cpu", "?"))
        for table in data.get("tables", []):
            if table.get("name") != "prediction-model":
                continue
            for row in table["rows"]:
                if row["label"] == "μ" and row["cells"][2]["text"] == "fitted":
                    found.append((saved.parent.parent.name, float(row["cells"][0]["text"]), cpu))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10, help="triads per rank per round (best kept)")
    args = parser.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))
    k = len(cpus)
    if k < 2:
        print("needs at least 2 CPUs", file=sys.stderr)
        return 2
    caps = lv.capacities(cpu_caches(cpus), cpus)
    last = caps[-1] if caps else None
    sizes = {"DRAM": lv.dram_triad_bytes(caps)}
    if last is not None:
        sizes[f"{last.level} (half a rank's share)"] = last.share_bytes // k // 2
    print(f"CPUs {cpus}; caches: " + ", ".join(f"{c.level} {c.fits_bytes / lv.MIB:.0f} MiB" for c in caps))
    print(f"{'working set per rank':>30} {'B1 GB/s':>9} {f'B{k} GB/s':>9} {'k·B1/Bk':>8} {'μ bound':>8}")
    for name, total_bytes in sizes.items():
        elements = max(1, total_bytes // 12)
        alone = together = 0.0
        for _ in range(args.rounds):            # alternated, so a change in the machine's load touches both
            alone = max(alone, triad_together(cpus[:1], elements, args.runs))
            together = max(together, triad_together(cpus, elements, args.runs))
        slow = k * alone / together
        print(f"{name + f' {total_bytes / lv.MIB:.0f} MiB':>30} {alone:9.2f} {together:9.2f} {slow:8.2f} "
              f"{(slow - 1) / (k - 1):8.3f}")
    print("\nμ fitted by the committed ledger predictions (1 + μ·(k − 1) per rank sharing a socket):")
    for case, mu, cpu in fitted_mu():
        print(f"  {case:<36} μ = {mu:6.3f}   {cpu}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
