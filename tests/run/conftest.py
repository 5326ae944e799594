"""Shared pieces of the Ray-level tests: one real local Ray instance per test module, sweep files written
to disk, and readers of the records a sweep leaves behind."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EMULATED_2S1C = REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml"
CPUS = sorted(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def ray_local():
    """A real single-node Ray, shared by the tests of one module (starting Ray costs seconds)."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # "local": our own instance, not one another test or user started (ray.init() joins the instance
    # /tmp/ray/ray_current_cluster records, e.g. a running 2-node test cluster, and refuses num_cpus then).
    ray.init(address="local", num_cpus=len(CPUS), include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    yield ray
    ray.shutdown()


def write_sweep(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\n" + textwrap.dedent(body))
    return path


def read_records(results: Path) -> list[dict]:
    return [json.loads(line) for line in (results / "trials.jsonl").read_text().splitlines() if line.strip()]


def by_key(records: list[dict]) -> dict[str, dict]:
    return {r["key"]: r for r in records}
