"""What a rank process is asked to do, and how it reports progress: plain data shared by the launcher
(which writes the job file and reads the status file) and the rank process (which does the opposite).

No torch, no Ray: both sides import it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Phases a rank reports, in order. The driver shows them; the watchdog uses `step`/`t` to spot hangs.
STARTING, BUILDING, WARMUP, TIMING, TRAINING, EVALUATING, DONE = (
    "starting", "building", "warm-up", "timing", "training", "evaluating", "done")


@dataclass(frozen=True, kw_only=True, slots=True)
class RankJob:
    """Everything one rank process needs, written as JSON next to its log."""

    kind: str                      # throughput | convergence | peak | profile
    workload: str
    params: dict[str, Any]
    backend: str                   # gloo | ccl
    local_batch: int
    seed: int = 0
    threads: int = 1
    warmup_steps: int = 0
    timed_steps: int = 0
    repeats: int = 0
    data: str = "memory"
    convergence: dict[str, Any] | None = None   # the spec's convergence section, plus global_batch
    peak_precision: str = "fp32"
    status_path: str = ""
    result_path: str = ""
    init_timeout_s: float = 300.0
    profile: dict[str, Any] | None = None       # kind profile: steps, out_dir, replay (orchestrator.run.profiling)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> "RankJob":
        return RankJob(**json.loads(text))


@dataclass(slots=True)
class Status:
    """A rank's progress, rewritten atomically at most every `MIN_INTERVAL_S`."""

    phase: str = STARTING
    step: int = 0            # training steps done so far (all phases), the watchdog's heartbeat
    repeat: int = 0          # timing repeat in progress (1-based) or epoch in convergence runs
    of: int = 0              # repeats in all, or max epochs
    t: float = field(default_factory=time.time)
    metric: float | None = None


class StatusWriter:
    """Cheap enough to call every step: it only touches the file when the phase changes or at most every
    MIN_INTERVAL_S, so the timed region pays one clock read per step."""

    MIN_INTERVAL_S = 0.5

    def __init__(self, path: str):
        self.path = path
        self.status = Status()
        self._last_write = 0.0

    def update(self, *, force: bool = False, **changes: Any) -> None:
        phase_changed = "phase" in changes and changes["phase"] != self.status.phase
        for key, value in changes.items():
            setattr(self.status, key, value)
        now = time.monotonic()
        if self.path and (force or phase_changed or now - self._last_write >= self.MIN_INTERVAL_S):
            self.status.t = time.time()
            tmp = f"{self.path}.tmp"
            with open(tmp, "w") as fh:
                json.dump(asdict(self.status), fh)
            os.replace(tmp, self.path)
            self._last_write = now

    def step(self, **changes: Any) -> None:
        self.update(step=self.status.step + 1, **changes)


def read_status(path: str | Path) -> Status | None:
    try:
        return Status(**json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError):
        return None
