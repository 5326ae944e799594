"""`orch` command line: one module per subcommand, `main(argv) -> int`.

Exit status: 0 success, 1 a run failed, 2 bad input (unreadable or invalid file, unknown option) with a
message and no traceback. Each subcommand reads its options into its options object (`orchestrator.app.options`)
and calls its use-case (`orchestrator.app`); the errors orch raises on purpose (`orchestrator.errors.OrchError`)
are mapped to exit statuses here, in one place: an `InputError` to 2, a `RunFailed` to 1. Anything else is a bug
and shows its traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys

from orchestrator import __version__
from orchestrator.cli import (
    cluster_cmd,
    plan_cmd,
    predict_cmd,
    probe_cmd,
    profile_cmd,
    report_cmd,
    score_cmd,
    sweep_cmd,
    topology_cmd,
    workloads_cmd,
)
from orchestrator.cli.common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, fail_input
from orchestrator.cli.logs import LogSetupError, add_options, configure
from orchestrator.cli.options import OLD_SPELLINGS, expand_equals
from orchestrator.errors import InputError, OrchError

COMMANDS = (topology_cmd, plan_cmd, probe_cmd, sweep_cmd, profile_cmd, report_cmd, predict_cmd, score_cmd,
            workloads_cmd, cluster_cmd)
log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orch", description="Sweep ranks × threads-per-rank × local batch as real torch.distributed jobs "
                                 "on a CPU machine or cluster; report scalability, convergence and time-to-train.")
    parser.add_argument("--version", action="version", version=f"orch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    for command_parser in sub.choices.values():   # every command says more with -v, less with -q
        add_options(command_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(expand_equals(sys.argv[1:] if argv is None else list(argv)))
    except SystemExit as exit_:  # argparse: 0 after --help, 2 after a usage error (already printed)
        return int(exit_.code or 0)
    try:
        configure(args.log_level)
    except LogSetupError as err:
        return fail_input(str(err))
    for line in getattr(args, OLD_SPELLINGS, []):   # each old spelling given, said once
        log.warning("%s", line)
    try:
        code: int = args.run(args)
        return code
    except InputError as err:
        return fail_input(str(err))
    except OrchError as err:   # a RunFailed: the input was good, the run could not finish
        log.error("%s", err)
        return EXIT_RUN_FAILED
    except KeyboardInterrupt:
        log.warning("interrupted")
        return EXIT_INTERRUPTED


def console_main() -> None:
    sys.exit(main())


__all__ = ["main", "EXIT_OK", "EXIT_BAD_INPUT"]
