"""orch's diagnostics through Python's `logging`: warnings, notes, errors and debug detail. What a command
exists to show (the plan, the live progress display, the report's and the prediction's tables, JSON) is
output, printed as before; everything said about the run is a log record of a module's logger
(`log = logging.getLogger(__name__)`), so that it can be filtered, redirected or raised to debug.

The CLI configures one handler, on orch's own loggers (`orch`, `orchestrator`, `workloads`; libraries keep
theirs): rich's RichHandler when stderr is a terminal, else plain lines on stderr in orch's usual words
(`orch: error: ...`, `warning: ...`, a note as it is). The level: `-v` (DEBUG) or `-q` (WARNING) on any
command, else $ORCH_LOG_LEVEL (default INFO). $ORCH_LOG_FILE adds a file that gets every record, DEBUG
included, with its time and logger. Used as a library (a notebook), orch configures nothing: records at
WARNING and above reach stderr through Python's last-resort handler, and `logging.basicConfig` shows the rest.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from orchestrator.constants import DEFAULT_LOG_FILE, DEFAULT_LOG_LEVEL, LOG_FILE_ENV_VAR, LOG_LEVEL_ENV_VAR
from orchestrator.errors import InputError

LOGGERS = ("orch", "orchestrator", "workloads")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_OURS = "_orch_cli_handler"   # marks the handlers `configure` installed, so that a second call replaces them


class LogSetupError(InputError):
    """A log level or a log file from the environment that cannot be used: bad input (exit 2)."""


class PlainFormatter(logging.Formatter):
    """orch's words on a pipe or in a CI log: `orch: error: ...`, `warning: ...`, a note as it is.

    >>> record = logging.LogRecord("orchestrator.cli", logging.WARNING, "", 0, "2 lines skipped", None, None)
    >>> PlainFormatter().format(record)
    'warning: 2 lines skipped'
    """

    PREFIX = {logging.DEBUG: "debug: ", logging.INFO: "", logging.WARNING: "warning: ", logging.ERROR: "orch: error: "}

    def format(self, record: logging.LogRecord) -> str:
        prefix = self.PREFIX.get(record.levelno, "orch: error: " if record.levelno > logging.ERROR else "")
        if record.levelno == logging.DEBUG:
            prefix += f"{record.name}: "
        return prefix + super().format(record)


class StderrHandler(logging.StreamHandler):
    """Plain lines on whatever sys.stderr is at the moment of writing (a live display or a test swaps it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def add_options(parser: argparse.ArgumentParser) -> None:
    """-v / -q, given to every command."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", dest="log_level", action="store_const", const="DEBUG",
                       help=f"say more: debug detail (default: ${LOG_LEVEL_ENV_VAR}, else {DEFAULT_LOG_LEVEL})")
    group.add_argument("-q", "--quiet", dest="log_level", action="store_const", const="WARNING",
                       help="say less: only warnings and errors (the command's output is unchanged)")


def _level(chosen: str | None) -> int:
    given = chosen or os.environ.get(LOG_LEVEL_ENV_VAR) or DEFAULT_LOG_LEVEL
    text = given.strip().upper()
    if text not in LEVELS:
        raise LogSetupError(f"{LOG_LEVEL_ENV_VAR}={given!r}: expected one of {', '.join(LEVELS)} (or -v, -q)")
    level: int = getattr(logging, text)
    return level


def configure(chosen: str | None = None, *, terminal: bool | None = None) -> None:
    """Install the CLI's handlers on orch's loggers, replacing any an earlier call installed: stderr at the
    chosen level (`chosen`: a level name from -v / -q; None: the environment's), RichHandler on a terminal
    (`terminal`: None looks at stderr), and $ORCH_LOG_FILE at DEBUG. LogSetupError for a bad level or an
    unwritable file, raised once stderr's handler is in place, so that the message itself is logged."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for handler in [h for h in logger.handlers if getattr(h, _OURS, False)]:
            logger.removeHandler(handler)
            handler.close()
    is_terminal = sys.stderr.isatty() if terminal is None else terminal
    stderr = _rich_handler() if is_terminal else StderrHandler()
    if not is_terminal:
        stderr.setFormatter(PlainFormatter())
    handlers: list[logging.Handler] = [stderr]
    _install(handlers, logging.INFO)
    stderr.setLevel(_level(chosen))
    path = os.environ.get(LOG_FILE_ENV_VAR, DEFAULT_LOG_FILE)
    if path:
        try:
            to_file = logging.FileHandler(path, encoding="utf-8")
        except OSError as err:
            raise LogSetupError(f"{LOG_FILE_ENV_VAR}={path}: cannot be written ({err.strerror})") from None
        to_file.setFormatter(logging.Formatter(FILE_FORMAT))
        handlers.append(to_file)
    _install(handlers, min(h.level or logging.DEBUG for h in handlers))


def _rich_handler() -> logging.Handler:
    from rich.console import Console
    from rich.logging import RichHandler

    return RichHandler(console=Console(stderr=True), show_time=False, show_path=False, markup=False,
                       rich_tracebacks=False)


def _install(handlers: list[logging.Handler], level: int) -> None:
    for handler in handlers:
        setattr(handler, _OURS, True)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for handler in handlers:
            if handler not in logger.handlers:
                logger.addHandler(handler)
        logger.setLevel(level)
