"""A training script named by a sweep file (`workload: {script: train.py, args: [...]}`): found, read and
hashed in the driver, and what the sweep knows of it as a workload.

The script is run as it is, one process per rank (orchestrator.run.rank.script); orch never imports it. What
the plan would ask a workload (its memory, FLOPs, epoch size) comes from the sweep file, or stays unknown and
the plan and the reports say so.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from orch.workload import RankContext, Trainer, Workload
from orchestrator.core.json.schema import Problem
from orchestrator.core.planning.names import name_problem
from orchestrator.io.files import python_sources_sha256

SHA256_CHARS = 64


@dataclass(frozen=True, kw_only=True, slots=True)
class NoParams:
    """A script has no workload parameters: its settings are its arguments."""


@dataclass(frozen=True, slots=True)
class ScriptFile:
    path: Path        # absolute
    sha256: str
    sources: str = ""  # io.files.python_sources_sha256 of its folder: the helpers it may import


def find_script(name: str, base: Path | None) -> tuple[ScriptFile | None, str | None]:
    """The script `name` (relative to `base`, the sweep file's folder) read and hashed; (None, why) when it does
    not exist, is not a file or cannot be read."""
    path = Path(name).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    path = path.resolve()
    if not path.exists():
        return None, f"{path} does not exist"
    if not path.is_file():
        return None, f"{path} is not a file"
    if not os.access(path, os.R_OK):
        return None, f"{path} is not readable"
    try:
        data = path.read_bytes()
    except OSError as err:
        return None, f"{path} cannot be read: {err.strerror or err}"
    return ScriptFile(path, hashlib.sha256(data).hexdigest(), python_sources_sha256(path)), None


def script_problems(script: str, declared: str | None, base: Path | None) -> tuple[ScriptFile | None, list[Problem]]:
    """The spec's script (`workload.script`) found and checked against the SHA-256 it states (`declared`, if
    any); the problems otherwise."""
    found, why = find_script(script, base)
    if found is None:
        return None, [Problem("workload.script", str(why))]
    if declared is not None and declared.lower() != found.sha256:
        return None, [Problem("workload.script_sha256", f"{found.path} has SHA-256 {found.sha256}, not {declared}: "
                                                        "the script changed (or give its new hash)")]
    return found, []


def label_of(script: str) -> str:
    """The default label of a script's results: its file name without `.py`, as a workload name must be.

    >>> label_of("/home/me/My Train.py")
    'My-Train'
    """
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(script).stem).strip("-._")
    return cleaned if name_problem(cleaned, "script") is None else "script"


class ScriptWorkload(Workload[NoParams]):
    """What the sweep knows of a script as a workload: its label, and the planning figures the sweep file
    gives (None: unknown). It is never built: its ranks run the script itself."""

    params_type = NoParams
    metrics: tuple[str, ...] = ()   # a script reports what it reports: any convergence metric is allowed

    def __init__(self, name: str, script: ScriptFile | None, flops_per_sample: float | None,
                 samples_per_epoch: int | None, script_path: str):
        self.name, self.script = name, script
        self.description = f"the script {script_path}"
        self._flops, self._samples = flops_per_sample, samples_per_epoch

    def samples_per_epoch(self, params: NoParams) -> int | None:
        return self._samples

    def train_flops_per_sample(self, params: NoParams) -> float | None:
        return self._flops

    def build(self, params: NoParams, ctx: RankContext) -> Trainer:
        raise TypeError(f"{self.description} runs as it is: a script is never built as a workload")
