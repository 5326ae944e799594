"""`orch workloads`: the installed workloads (entry points of the `orch.workloads` group) with where each comes
from, and for one of them (an entry point's name, an import path or a file) every parameter with its default."""

from __future__ import annotations

import argparse
import dataclasses

from orchestrator.cli.common import EXIT_OK, console, examples
from orchestrator.core.json.schema import field_help


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "workloads", help="list workloads and their parameters",
        description="List the installed workloads (the entry points of the orch.workloads group: orch's own and "
                    "those of any installed package), where each comes from and its metrics (usable as "
                    "convergence.metric); for one NAME (an entry point's name, an import path "
                    "'package.module:attribute' or a file 'path/to/file.py:attribute'), every parameter with its "
                    "default and meaning. A workload that fails to load is listed with the reason.",
        **examples(
                   "orch workloads",
                   "orch workloads classifier",
                   anchor="orch-workloads"))
    parser.add_argument("name", metavar="NAME", nargs="?", help="show this workload's parameters")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from orch.workload import ModelParams
    from orchestrator.io.workload_finder import UnknownWorkload, entry_points, find_workload

    out = console()
    if not args.name:
        for ep in entry_points():
            try:
                found = find_workload(ep.name)
            except UnknownWorkload as err:
                out.print(f"[bold]{ep.name}[/]: [red]does not load[/]: {err}")
                continue
            w = found.workload
            out.print(f"[bold]{ep.name}[/]: {w.description}  (metrics: {', '.join(w.metrics) or 'none'}; "
                      f"from {ep.dist}: {ep.value})")
        return EXIT_OK
    found = find_workload(args.name)   # UnknownWorkload: bad input, said by main
    w = found.workload
    out.print(f"[bold]{w.name}[/]: {w.description}  (metrics: {', '.join(w.metrics) or 'none'})")
    out.print(f"from: {found.source}")
    table = Table("parameter", "default", "meaning")
    # The workload's own parameters first; the ones every workload shares (orch.workload's DdpParams and
    # ModelParams) after them.
    shared = {f.name for f in dataclasses.fields(ModelParams)}
    rows = field_help(w.params_type)
    for field, default, text in [r for r in rows if r[0] not in shared] + [r for r in rows if r[0] in shared]:
        table.add_row(field, default, text)
    out.print(table)
    return EXIT_OK
