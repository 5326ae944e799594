"""`orch profile`: where a training step's time goes, for one or more layouts side by side. A thin layer over
`orchestrator.app.profile`."""

from __future__ import annotations

import argparse

from orchestrator.app import profile as app_profile
from orchestrator.app.options import DEFAULT_MAX_PASSES, ProfileOptions
from orchestrator.cli.common import EXIT_OK, EXIT_RUN_FAILED, console, examples, print_notice
from orchestrator.cli.options import add_options, options_from

__all__ = ["DEFAULT_MAX_PASSES", "add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "profile", help="profile training steps on one or more layouts: oneDNN primitives, layers, ops, roofline",
        description="Run the sweep's workload on each layout exactly as a throughput trial runs (Ray placement "
                    "group, one pinned process per rank, the same launcher) and profile a few steps after warm-up: "
                    "oneDNN's primitive breakdown from its verbose log, layer-wise forward/backward time, "
                    "torch.profiler's operator table and a Chrome trace per rank, a roofline against the compute roof "
                    "(GEMMs and convolutions) and a STREAM-triad bandwidth per memory level (L2, L3, DRAM) measured "
                    "on the same cores, and the efficiency ratio from "
                    "replaying each convolution and matmul problem alone. Layouts (and the sweep file's profile "
                    "variants) are compared side by side. Writes profile.md, CSV/JSON tables and PNGs. "
                    "Exit status: 0 all profiled, 1 some target failed to run, 2 bad input.",
        **examples(
                   "orch profile sweeps/retinanet.yaml --layout 1x2x8 --layout 2x1x8",
                   "orch profile sweeps/retinanet.yaml --report-only --project-to avx2",
                   anchor="orch-profile"))
    add_options(parser, ProfileOptions)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The profile `args` ask for; exit status 1 when a target failed to run."""
    err = console(stderr=True)
    profiled = app_profile.profile(options_from(ProfileOptions, args), lambda notice: print_notice(notice, err))
    return EXIT_RUN_FAILED if profiled.failed else EXIT_OK
