"""A sweep run beside other torch processes, then its probe against its records: does the
memory orch plans hold in any company?

Other torch processes on a node (a notebook, another sweep) share the pages of torch's libraries with the
sweep's ranks. Unique memory (USS) fell by the libraries' size while they ran, so a probe and a sweep measured
with different neighbours disagreed by +70% to +80%. Private memory (orchestrator.run.procmem) does not move
with them; this runs the whole path beside them to show it.

It starts `--neighbours` torch processes (each imports torch and torchvision, builds torchvision's `--arch` at
`--image-size`, trains it `NEIGHBOUR_STEPS` steps, and holds it), then `orch sweep SWEEP --results DIR
--no-convergence` with a cache of its own (so the sweep probes afresh, beside them: `orch sweep` probes before it
plans), ends the neighbours once the sweep is done, and runs `benchmarks/validate_probe.py DIR`: every record
within ±10% of the probe's private-memory prediction, or marked.

    .venv/bin/python benchmarks/memory_beside_torch.py sweeps/memory-shufflenet.yaml \
        --results results/memory-beside-torch

Exit status: the sweep's if it failed, else validate_probe's (0 compared; its last line says whether every
record was within ±10%); 2 when a neighbour did not start.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NEIGHBOUR_STEPS = 3
# A torch process as a user's would be: torch and torchvision imported, a model trained a few steps (so that it
# maps the library pages a rank runs), held until its stdin closes.
NEIGHBOUR = """
import sys
import torch
import torchvision
arch, size, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
model = torchvision.models.get_model(arch, weights=None, num_classes=10)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(steps):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(torch.randn(8, 3, size, size)), torch.randint(0, 10, (8,))).backward()
    opt.step()
print("ready", flush=True)
sys.stdin.read()
"""


def start_neighbours(count: int, arch: str, image_size: int) -> list[subprocess.Popen]:
    """`count` torch processes holding a model; each has said it is ready when this returns."""
    started = []
    for _ in range(count):
        proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, arch, str(image_size), str(NEIGHBOUR_STEPS)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started.append(proc)
        if proc.stdout is None or proc.stdout.readline().strip() != "ready":
            stop(started)
            raise RuntimeError(f"a torch neighbour ({arch} at {image_size} px) did not start")
    return started


def stop(neighbours: list[subprocess.Popen]) -> None:
    for proc in neighbours:
        try:
            proc.communicate(timeout=60)   # closes its stdin: it ends
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", help="the sweep file to run")
    parser.add_argument("--results", required=True, help="the sweep's results folder")
    parser.add_argument("--neighbours", type=int, default=1, help="torch processes beside it (default 1)")
    parser.add_argument("--arch", default="shufflenet_v2_x0_5", help="the neighbours' torchvision model")
    parser.add_argument("--image-size", type=int, default=64, help="the neighbours' image size, px")
    args, sweep_args = parser.parse_known_args(argv)
    try:
        neighbours = start_neighbours(args.neighbours, args.arch, args.image_size)
    except RuntimeError as err:
        print(f"memory_beside_torch: {err}", file=sys.stderr)
        return 2
    print(f"{len(neighbours)} torch neighbour(s) holding {args.arch} at {args.image_size} px: pid(s) "
          f"{', '.join(str(p.pid) for p in neighbours)}", flush=True)
    orch = Path(sys.executable).parent / "orch"
    with tempfile.TemporaryDirectory(prefix="orch-cache-") as cache:
        try:
            status = subprocess.call([str(orch), "sweep", args.sweep, "--results", args.results, "--no-convergence",
                                      *sweep_args], env={**os.environ, "ORCH_CACHE_DIR": cache})
        finally:
            alive = all(p.poll() is None for p in neighbours)
            stop(neighbours)
    print(f"the neighbours ran to the sweep's end: {'yes' if alive else 'NO: one ended early'}", flush=True)
    if status != 0:
        print(f"memory_beside_torch: orch sweep exited with status {status}", file=sys.stderr)
        return status
    return subprocess.call([sys.executable, str(REPO / "benchmarks" / "validate_probe.py"), args.results])


if __name__ == "__main__":
    sys.exit(main())
