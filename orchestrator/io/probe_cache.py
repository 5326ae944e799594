"""The probe's cache and its copy in a results folder.

A probe (`orchestrator.run.driver.probe`) is cached under `cache_dir()/probes/`, one JSON file per key: the workload's
reference and a fingerprint of the file that defines it, its parameters (the precision chosen), the precision,
torch's version, the backend, the batches a throughput trial holds, the probe's format and the rule its FLOP
counter counts by (`probe_key_fields`). Any of them changed, the probe is measured again; an unreadable or foreign
file is a miss, never an error. The FLOP rule (`core.profile.flop_count.FLOPS_RULE`) is a key of its own, not a
new format: a probe whose FLOPs torch's own convolution formula counted is measured again, while a results folder's
probe.json of that time still reads (the format says how memory is measured, which did not change).
Reading needs no torch (`orch plan` reads the cache): torch's version comes from its installed metadata.

A sweep keeps the probe it planned with as `probe.json` in its results folder.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from orchestrator.constants import (
    CACHE_DIR_ENV_VAR,
    DEFAULT_CACHE_SUBDIR,
    DEFAULT_XDG_CACHE_HOME,
    XDG_CACHE_HOME_ENV_VAR,
)
from orchestrator.core.json.schema import to_plain
from orchestrator.core.json.values import JsonDict
from orchestrator.core.planning.probe import (
    PROBE_BATCHES,
    PROBE_FORMAT,
    PROBE_STEPS,
    ProbeResult,
    held_batches,
    probe_key,
)
from orchestrator.core.profile.flop_count import FLOPS_RULE
from orchestrator.io.files import write_atomic
from orchestrator.io.workload_finder import ENTRY_POINT_GROUP, is_reference

if TYPE_CHECKING:
    from orchestrator.core.planning.spec import SweepSpec

log = logging.getLogger(__name__)

PROBE_FILE = "probe.json"   # in a results folder: the probe the sweep planned with
PROBES_SUBDIR = "probes"


def cache_dir() -> Path:
    """$ORCH_CACHE_DIR, else $XDG_CACHE_HOME/orch, else ~/.cache/orch."""
    explicit = os.environ.get(CACHE_DIR_ENV_VAR)
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get(XDG_CACHE_HOME_ENV_VAR) or DEFAULT_XDG_CACHE_HOME).expanduser() / DEFAULT_CACHE_SUBDIR


def torch_version() -> str:
    """torch's installed version, from its metadata (importing torch takes seconds; `orch plan` must not)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _defining_file(ref: str) -> Path | None:
    """The file that defines the workload `ref` names: the file of a file path, the module of an import path or
    of an entry point's value."""
    target, sep, _ = ref.rpartition(":")
    if sep and (target.endswith(".py") or "/" in target):
        return Path(target)
    module = target if is_reference(ref) else next(
        (ep.module for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == ref), None)
    try:
        spec = importlib.util.find_spec(module) if module else None
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin else None


def code_fingerprint(ref: str) -> str:
    """A hash of the file that defines the workload: an edit to it invalidates the workload's probe (an edit
    to a module it imports does not: `orch probe --force` measures again)."""
    path = _defining_file(ref)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path is not None else "unknown"
    except OSError:
        return "unknown"


class ProbedSweep(Protocol):
    """What the probe's key reads of a sweep (io.sweepfile.Sweep is one; that module reads this cache, so it is
    named by its shape, not imported)."""

    @property
    def spec(self) -> SweepSpec: ...
    @property
    def params(self) -> object: ...
    @property
    def requested_precision(self) -> str | None: ...


def probe_key_fields(sweep: ProbedSweep, backend: str) -> JsonDict:
    """What a probe of `sweep` (its precision chosen) on `backend` depends on: `core.planning.probe.probe_key` hashes
    it."""
    m, w = sweep.spec.measure, sweep.spec.workload
    ref = w.name or ""   # never None here: a sweep finds its workload by this name (io.sweepfile)
    if w.script is not None:   # a script: its path, its content and its arguments are what it runs
        helpers = w.script_sources is not None and not w.script_sources.endswith(":0 files")
        code = f"{w.script_sha256} {w.script_sources}" if helpers else w.script_sha256   # a lone script: as before
        return {"format": PROBE_FORMAT, "workload": f"script {w.script}", "code": code,
                "params": {"args": list(w.arg_texts)}, "precision": "the script's own", "torch": torch_version(),
                "backend": backend, "held_batches": 0, "batches": list(PROBE_BATCHES), "steps": PROBE_STEPS}
    return {"format": PROBE_FORMAT, "workload": ref, "code": code_fingerprint(ref),
            "params": to_plain(sweep.params), "precision": sweep.requested_precision or "fp32",
            "torch": torch_version(), "backend": backend,
            "held_batches": held_batches(m.data, m.warmup_steps, m.timed_steps),
            "batches": list(PROBE_BATCHES), "steps": PROBE_STEPS, "flops_rule": FLOPS_RULE}


def _path(workload_name: str, key: str) -> Path:
    return cache_dir() / PROBES_SUBDIR / f"{workload_name}-{key[:20]}.json"


def read_probe(path: Path, key: str | None = None) -> ProbeResult | None:
    """The probe in `path` (with `key`, only if it is that probe's); None when absent, unreadable or another's."""
    try:
        result = ProbeResult.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as err:
        log.warning("ignoring %s: not a probe result (%s)", path, err)
        return None
    if result.format != PROBE_FORMAT or (key is not None and result.key != key):
        return None
    return result


def cached_probe(workload_name: str, fields: JsonDict) -> ProbeResult | None:
    """The cached probe for these key fields, if one has run."""
    key = probe_key(fields)
    return read_probe(_path(workload_name, key), key)


def store_probe(workload_name: str, result: ProbeResult) -> tuple[Path | None, str | None]:
    """Cache `result`: (its path, None), or (None, why not) when the cache cannot be written (the sweep then
    plans with the result in hand, and the next one probes again)."""
    path = _path(workload_name, result.key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(result.to_json(), indent=2) + "\n")
    except OSError as err:
        return None, f"the probe cache {path.parent} cannot be written ({err.strerror or err}); set {CACHE_DIR_ENV_VAR}"
    return path, None
