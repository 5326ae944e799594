"""`orch workloads`."""

from __future__ import annotations


def add_parser(sub) -> None:
    parser = sub.add_parser("workloads", help="(not yet implemented)")
    parser.set_defaults(run=lambda args: 1)
