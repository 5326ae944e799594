"""`orch probe`: measure what a sweep's workload does not declare (one rank's memory per local batch, its
training FLOPs per sample, its samples per epoch) with one rank on this machine, and cache it for `orch plan`
and `orch sweep` (which runs it itself when it must). No Ray."""

from __future__ import annotations

import argparse
import json
import logging
from typing import TYPE_CHECKING

from orchestrator.app import probe as app_probe
from orchestrator.app.options import ProbeOptions
from orchestrator.cli.common import EXIT_OK, console, examples
from orchestrator.cli.options import add_options, options_from
from orchestrator.core.planning.probe import PROBE_BATCHES, PROBE_STEPS

if TYPE_CHECKING:
    from orchestrator.core.planning.probe import ProbePoint
    from orchestrator.io.sweepfile import Sweep
    from orchestrator.run.driver.probe import ProbeSetup

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    batches = " and ".join(map(str, PROBE_BATCHES))
    parser = sub.add_parser(
        "probe", help="measure one rank's memory, FLOPs and epoch size where the workload does not declare them",
        description=f"Run one rank of the sweep's workload on this machine, in the precision the plan chooses, at "
                    f"local batches {batches}, each in a process of its own, pinned and watched as a sweep's ranks "
                    f"are (no Ray): {PROBE_STEPS} training steps holding the batches a throughput trial holds. "
                    "Fits one rank's peak private memory (resident less file-backed pages) as intercept + slope × "
                    "local batch with a stated margin (DDP's gradient buckets added), measures the libraries' "
                    "file-backed pages that a node holds once for its ranks, counts the training FLOPs per sample "
                    "with orch's FLOP counter (torch's, a convolution's taps inside the input only) and reads the "
                    "train split's length, then caches the result (per "
                    "workload, parameters, precision and torch version) where `orch plan` and `orch sweep` find "
                    "it. The workload's own figures win where it declares them. Exit status: 0 ok (or nothing to "
                    "probe), 2 bad input or a probe that failed (the rank's error).",
        **examples(
                   "orch probe sweeps/classifier.yaml",
                   "orch probe sweeps/retinanet.yaml --force --json",
                   anchor="orch-probe"))
    add_options(parser, ProbeOptions)
    parser.add_argument("--json", action="store_true", help="print the probe's result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """What `orchestrator.app.probe` measured or found cached, said as it goes and at the end."""
    err = console(stderr=True)

    def started(sweep: Sweep, setup: ProbeSetup, precision: str) -> None:
        err.print(f"probing workload {sweep.workload.name} in {precision} on CPU(s) "
                  f"{', '.join(map(str, setup.cpus))}, memory budget {setup.budget_mib:,.0f} MiB "
                  f"({setup.budget_note}) ...")

    def point(p: ProbePoint) -> None:
        err.print(f"  local batch {p.local_batch}: peak {p.peak_mib:,.0f} MiB private (the rank's high-water "
                  f"mark {_mib(p.rank_peak_private_mib)}, the launcher's watch {_mib(p.watched_peak_private_mib)}), "
                  f"{p.library_mib:,.0f} MiB of libraries"
                  + (f", a step {p.step_s:.3g} s" if p.step_s is not None else "") + f", {p.wall_s:.1f} s in all")

    probed = app_probe.probe(options_from(ProbeOptions, args), on_start=started, on_point=point)
    sweep = probed.sweep
    result = probed.sweep.probe
    if args.json:
        print(json.dumps(result.to_json() if result is not None else None, indent=2))
    if result is None:
        log.info("workload %s declares every figure the plan needs: nothing to probe (--force measures anyway)",
                 sweep.workload.name)
        return EXIT_OK
    if not args.json:
        out = console()
        out.print(("measured" if probed.measured else "cached") + f" probe of {sweep.workload.name} "
                  f"({result.precision}, {result.backend}, torch {result.torch}, {result.measured_at}):")
        out.print(f"  memory per rank: {result.memory.text()}")
        out.print(f"  FLOPs per sample: {result.flops_source}")
        out.print(f"  samples per epoch: {result.samples_source}")
    if probed.cache_path is not None:
        log.info("cached: %s", probed.cache_path)
    elif probed.cache_problem:
        log.warning("not cached: %s", probed.cache_problem)
    return EXIT_OK


def _mib(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "unknown"
