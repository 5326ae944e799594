"""What the user sees while a sweep runs: trials done / total, every running trial and its phase, elapsed and
estimated remaining time, and a running table of finished results. `--json` replaces all of it with one
JSON record per line on stdout."""

from __future__ import annotations

import json
import sys
import threading
import time

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from orchestrator.core.execution.eta import Eta, duration_text
from orchestrator.core.measured import records as rec
from orchestrator.run.driver.kinds import kind_module
from orchestrator.run.job import Phase, RankProgress

_STATUS_STYLE = {rec.Status.OK: "green", rec.Status.FAILED: "bold red", rec.Status.OOM: "bold red",
                 rec.Status.TIMEOUT: "bold red", rec.Status.INFEASIBLE: "dim"}
RECENT_ROWS = 12


def describe(record: rec.Record) -> str:
    """One line of what a record says: '312.4 samples/s (cv 1.2%)', 'reached 0.9 at 2.25 epochs', ... (an ok
    record's line is its kind's: run.driver.kinds), or the first line of why it failed."""
    if record.status != rec.Status.OK:
        return record.reason.splitlines()[0][:90] if record.reason else ""
    line: str = kind_module(record.kind).describe(record)
    return line


class SweepProgress:
    """Thread-safe: trials run concurrently, and each one's supervising thread reports its phase."""

    def __init__(self, total: int, *, json_mode: bool, console: Console | None = None, eta: Eta | None = None):
        self.json_mode = json_mode
        self.eta = eta   # the sweep's own estimate (core.execution.eta); without one, rich's pace-based guess
        self.console = console or Console(stderr=True, highlight=False)
        remaining = [TextColumn("{task.fields[remaining]}")] if eta else [TextColumn("remaining"),
                                                                           TimeRemainingColumn()]
        self.bar = Progress(TextColumn("[bold]trials"), BarColumn(), MofNCompleteColumn(), TextColumn("elapsed"),
                            TimeElapsedColumn(), *remaining, console=self.console)
        self.task = self.bar.add_task("trials", total=total, remaining="")
        self.recent: list[rec.Record] = []
        # Running trials, in start order: key -> (label, monotonic start, what it is doing now).
        self.running: dict[str, tuple[str, float, str]] = {}
        self.total, self.done, self.started = total, 0, 0
        self.reasons: dict[str, str] = {}   # why an adaptive sweep chose a trial, by key
        self._lock = threading.RLock()
        # A live display only redraws on a terminal; piped to a file or a CI log it would show nothing until
        # the end, so there each trial's start and end is printed as a plain line instead.
        self.lines = not json_mode and not self.console.is_terminal
        self.live = None if json_mode or self.lines else Live(self._render(), console=self.console,
                                                               refresh_per_second=4, transient=False)

    def __enter__(self) -> SweepProgress:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            with self._lock:
                self.running.clear()
                self.live.update(self._render())
            self.live.__exit__(*exc)

    def _render(self):
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
        for key, (label, t0, what) in self.running.items():
            running.append(Text(f"▶ {label}: {what} ({now - t0:,.0f} s)", style="cyan"))
            if key in self.reasons:
                running.append(Text(f"  chosen: {self.reasons[key]}", style="dim"))
        parts: list[RenderableType] = [self.bar, *running]
        if self.recent:
            parts.append(table)
        return Group(*parts)

    def _remaining_text(self, now: float) -> str:
        if self.eta is None:
            return ""
        elapsed = {key: now - t0 for key, (_label, t0, _what) in self.running.items()}
        return f"about {duration_text(self.eta.remaining_s(elapsed))} left"

    def _refresh(self) -> None:
        if self.live:
            self.live.update(self._render())

    def note(self, message: str) -> None:
        if self.json_mode:
            print(json.dumps({"note": message}), file=sys.stderr)
        else:
            self.console.print(message)

    def chosen(self, key: str, reason: str) -> None:
        """Why an adaptive sweep chose the trial `key`: said beside it while it runs."""
        with self._lock:
            self.reasons[key] = reason

    def start_trial(self, key: str, label: str) -> None:
        with self._lock:
            self.started += 1
            self.running[key] = (label, time.monotonic(), "starting")
            if self.lines:
                why = f" (chosen: {escape(self.reasons[key])})" if key in self.reasons else ""
                self.console.print(f"[{self.started}/{self.total}] {label}: starting{why}")
            self._refresh()

    def phase(self, key: str, progress: RankProgress | None) -> None:
        """Show what the trial's rank 0 last reported (None: nothing yet, or it could not be asked)."""
        if progress is None:
            what = str(Phase.STARTING)
        elif progress.phase == Phase.TIMING and not progress.of:   # a peak or a calibration: no repeats
            what = f"timing, {progress.step} done"
        elif progress.phase == Phase.TIMING:
            what = f"timing repeat {progress.repeat}/{progress.of}"
        elif progress.phase in (Phase.TRAINING, Phase.EVALUATING):
            metric = f", last eval {progress.metric:.3f}" if progress.metric is not None else ""
            what = f"{progress.phase} epoch {progress.repeat}/{progress.of}{metric}"
        elif progress.phase == Phase.BUILDING and progress.stage:
            what = f"starting up (done: {progress.stage})"
        else:
            what = str(progress.phase)
        with self._lock:
            if key in self.running:
                label, t0, _ = self.running[key]
                self.running[key] = (label, t0, what)
                self._refresh()

    def forget(self, key: str) -> None:
        """A trial that ended without a record (interrupted): it leaves the display, it is not counted."""
        with self._lock:
            self.running.pop(key, None)
            self._refresh()

    def finished(self, record: rec.Record, *, counts: bool = True) -> None:
        with self._lock:
            if self.json_mode:
                print(rec.dumps(record), flush=True)
            self.recent.append(record)
            _, t0, _ = self.running.pop(record.key, ("", time.monotonic(), ""))
            if counts:
                self.done += 1
                self.bar.advance(self.task)
                if self.eta is not None and isinstance(record.wall_s, (int, float)):
                    self.eta.finished(record.key, record.wall_s, record)   # the measured terms refine it
            if self.lines:
                # Infeasible points are recorded without running, so they have no count and no duration.
                head = f"[{self.done}/{self.total}] " if counts else ""
                took = f" in {time.monotonic() - t0:,.0f} s" if counts else ""
                what = describe(record)
                left = f" ({self._remaining_text(time.monotonic())})" if counts and self.eta else ""
                self.console.print(f"{head}{record.key}: {record.status}{took}{': ' + what if what else ''}"
                                   f"{left}")
            self._refresh()
