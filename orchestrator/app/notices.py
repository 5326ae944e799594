"""What a use-case says as it goes: a line for the person who started it (what runs, where, how long it should
take), which is neither its result nor a diagnostic. The CLI prints each on stderr, its heading in bold; the
Python API logs it at INFO (shown once logging is configured), so that a notebook gets no console output it did
not ask for."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Notice:
    """One line: `heading` (bold in a terminal, may be empty) and `text`.

    >>> Notice("3 of 4 grid points feasible", heading="sweep demo").plain()
    'sweep demo: 3 of 4 grid points feasible'
    """

    text: str
    heading: str = ""

    def plain(self) -> str:
        return f"{self.heading}: {self.text}" if self.heading else self.text


Notify = Callable[[Notice], None]


def to_log(logger: logging.Logger) -> Notify:
    """Notices as INFO records of `logger` (the Python API's default)."""

    def notify(notice: Notice) -> None:
        logger.info("%s", notice.plain())

    return notify
