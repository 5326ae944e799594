"""`orch workloads`: the registered workloads and every parameter they take, with defaults."""

from __future__ import annotations

import argparse

from orchestrator.cli.common import EXIT_OK, console, fail_input
from orchestrator.core.schema import field_help


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "workloads", help="list workloads and their parameters",
        description="List the registered workloads (the names a sweep's workload.name accepts), their metrics "
                    "(usable as convergence.metric) and, for one NAME, every parameter with its default and meaning.")
    parser.add_argument("name", metavar="NAME", nargs="?", help="show this workload's parameters")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    import workloads

    names = [args.name] if args.name else sorted(workloads.REGISTRY)
    out = console()
    for name in names:
        try:
            workload = workloads.get(name)
        except workloads.UnknownWorkload as err:
            return fail_input(str(err))
        out.print(f"[bold]{name}[/]: {workload.description}  (metrics: {', '.join(workload.metrics)})")
        if args.name:
            table = Table("parameter", "default", "meaning")
            for field, default, text in field_help(workload.params_type):
                table.add_row(field, default, text)
            out.print(table)
    return EXIT_OK
