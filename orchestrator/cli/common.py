"""What the subcommands share: exit statuses, consoles, the one-line bad-input message."""

from __future__ import annotations

import logging
import signal
from typing import TYPE_CHECKING

from orchestrator.app.notices import Notice

log = logging.getLogger(__name__)

if TYPE_CHECKING:   # rich is imported when a console is made, not when the CLI starts
    from rich.console import Console

EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 128 + signal.SIGINT    # what a shell reports for a command ended by Ctrl-C: 130


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def fail_input(message: str) -> int:
    """Bad input: one paragraph on stderr, exit status 2, no traceback."""
    log.error("%s", message)
    return EXIT_BAD_INPUT


def print_notice(notice: Notice, out: Console | None = None) -> None:
    """A use-case's notice on stderr, its heading in bold (`orchestrator.app.notices`)."""
    (out or console(stderr=True)).print(f"[bold]{notice.heading}[/]: {notice.text}" if notice.heading
                                        else notice.text)
