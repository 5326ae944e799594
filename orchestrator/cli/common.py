"""What the subcommands share: exit statuses, consoles, the one-line bad-input message, and the end of every
subcommand's help (its examples and where the docs say more)."""

from __future__ import annotations

import argparse
import logging
import signal
from typing import TYPE_CHECKING, TypedDict

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


DOCS = "docs/commands.md"


class Epilog(TypedDict):
    """`add_parser`'s keywords that end a subcommand's help (`examples`)."""

    epilog: str
    formatter_class: type[argparse.HelpFormatter]


def examples(*lines: str, anchor: str) -> Epilog:
    """`add_parser`'s keywords for a help that ends with `lines` (each a whole command) and the docs' section:

        examples:
          orch sweep sweeps/classifier.yaml
        more: docs/commands.md#orch-sweep
    """
    text = "examples:\n" + "".join(f"  {line}\n" for line in lines) + f"more: {DOCS}#{anchor}"
    return Epilog(epilog=text, formatter_class=HelpFormatter)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but a text of several lines (the examples) keeps its lines as written; a paragraph
    (a description) is wrapped to the terminal as before."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)
