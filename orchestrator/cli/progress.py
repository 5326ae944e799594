"""What `orch sweep` shows while it runs (the driver's events, run.driver.events): trials done / total, every
running trial and its phase, elapsed and estimated remaining time, and a running table of finished results
(`LiveProgress`); on a pipe or in a CI log, where a live display would show nothing until the end, one plain line
per trial start and end instead. `--json` replaces all of it with one JSON record per finished trial on stdout
(`JsonProgress`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from orchestrator.core.execution.eta import Eta, duration_text
from orchestrator.core.measured import records as rec
from orchestrator.run.driver.events import describe, phase_words
from orchestrator.run.job import RankProgress

_STATUS_STYLE = {rec.Status.OK: "green", rec.Status.FAILED: "bold red", rec.Status.OOM: "bold red",
                 rec.Status.TIMEOUT: "bold red", rec.Status.INFEASIBLE: "dim"}
RECENT_ROWS = 12


class LiveProgress:
    """The live display (a context manager). Thread-safe: trials run concurrently, and each one's supervising
    thread reports its phase. `eta`: the sweep's own estimate, refined by the driver as trials finish (without
    one, rich's pace-based guess)."""

    def __init__(self, total: int, *, console: Console | None = None, eta: Eta | None = None):
        self.eta = eta
        self.console = console or Console(stderr=True, highlight=False)
        remaining = [TextColumn("{task.fields[remaining]}")] if eta else [TextColumn("remaining"),
                                                                           TimeRemainingColumn()]
        self.bar = Progress(TextColumn("[bold]trials"), BarColumn(), MofNCompleteColumn(), TextColumn("elapsed"),
                            TimeElapsedColumn(), *remaining, console=self.console)
        self.task = self.bar.add_task("trials", total=total, remaining="")
        self.recent: list[rec.Record] = []
        # Running trials, in start order: key -> (label, monotonic start, what it is doing now, why it was chosen).
        self.running: dict[str, tuple[str, float, str, str | None]] = {}
        self.total, self.done, self.started_count = total, 0, 0
        self._lock = threading.RLock()
        # A live display only redraws on a terminal; piped to a file or a CI log it would show nothing until
        # the end, so there each trial's start and end is printed as a plain line instead.
        self.lines = not self.console.is_terminal
        self.live = None if self.lines else Live(self._render(), console=self.console, refresh_per_second=4,
                                                 transient=False)

    def __enter__(self) -> LiveProgress:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self.live:
            with self._lock:
                self.running.clear()
                self.live.update(self._render())
            self.live.__exit__(kind, error, trace)

    def _render(self) -> Group:
        table = Table(title="finished trials (latest last)", title_justify="left", expand=False)
        for column in ("trial", "layout", "status", "result"):
            table.add_column(column)
        for r in self.recent[-RECENT_ROWS:]:
            layout = (f"{r.ranks}×{r.threads_per_rank} thr, b{r.local_batch}" if r.ranks is not None
                      else f"{r.threads_per_rank} thr")
            table.add_row(r.key, layout, Text(r.status, style=_STATUS_STYLE.get(r.status, "")), describe(r))
        now = time.monotonic()
        self.bar.update(self.task, remaining=self._remaining_text(now))
        running: list[RenderableType] = []
        for label, t0, what, chosen in self.running.values():
            running.append(Text(f"▶ {label}: {what} ({now - t0:,.0f} s)", style="cyan"))
            if chosen:
                running.append(Text(f"  chosen: {chosen}", style="dim"))
        parts: list[RenderableType] = [self.bar, *running]
        if self.recent:
            parts.append(table)
        return Group(*parts)

    def _remaining_text(self, now: float) -> str:
        if self.eta is None:
            return ""
        elapsed = {key: now - t0 for key, (_label, t0, _what, _chosen) in self.running.items()}
        return f"about {duration_text(self.eta.remaining_s(elapsed))} left"

    def _refresh(self) -> None:
        if self.live:
            self.live.update(self._render())

    def note(self, message: str) -> None:
        self.console.print(message)

    def started(self, key: str, label: str, chosen: str | None) -> None:
        with self._lock:
            self.started_count += 1
            self.running[key] = (label, time.monotonic(), "starting", chosen)
            if self.lines:
                why = f" (chosen: {escape(chosen)})" if chosen else ""
                self.console.print(f"[{self.started_count}/{self.total}] {label}: starting{why}")
            self._refresh()

    def phase(self, key: str, progress: RankProgress | None) -> None:
        what = phase_words(progress)
        with self._lock:
            if key in self.running:
                label, t0, _, chosen = self.running[key]
                self.running[key] = (label, t0, what, chosen)
                self._refresh()

    def finished(self, key: str, record: rec.Record | None, *, counts: bool) -> None:
        with self._lock:
            _, t0, _, _ = self.running.pop(key, ("", time.monotonic(), "", None))
            if record is None:   # interrupted: it leaves the display, it is not counted
                self._refresh()
                return
            self.recent.append(record)
            if counts:
                self.done += 1
                self.bar.advance(self.task)
            if self.lines:
                # Infeasible points are recorded without running, so they have no count and no duration.
                head = f"[{self.done}/{self.total}] " if counts else ""
                took = f" in {time.monotonic() - t0:,.0f} s" if counts else ""
                what = describe(record)
                left = f" ({self._remaining_text(time.monotonic())})" if counts and self.eta else ""
                self.console.print(f"{head}{record.key}: {record.status}{took}{': ' + what if what else ''}{left}")
            self._refresh()


class JsonProgress:
    """`orch sweep --json`: one JSON record per finished trial on stdout (the machine-readable output), a note as
    `{"note": ...}` on stderr, nothing else."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> JsonProgress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        return None

    def note(self, message: str) -> None:
        print(json.dumps({"note": message}), file=sys.stderr)

    def started(self, key: str, label: str, chosen: str | None) -> None:
        return None

    def phase(self, key: str, progress: RankProgress | None) -> None:
        return None

    def finished(self, key: str, record: rec.Record | None, *, counts: bool) -> None:
        if record is not None:
            with self._lock:
                print(rec.dumps(record), flush=True)
