"""Shared pieces of the Ray-level tests: one real local Ray instance per test module, sweep files written
to disk, readers of the records a sweep leaves behind, a real `orch` process to start, wait on and check
for leftover ranks, and rank launchers run without Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.run.launcher import RankLauncher, free_port, rank_environment

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


def start_orch(*args: str) -> subprocess.Popen:
    """`orch ARGS` as a real process in its own session (a test may kill its whole group), output piped."""
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def file_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def wait_for_records(results: Path, count: int, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while len(file_lines(results / "trials.jsonl")) < count:
        assert proc.poll() is None, f"the sweep ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.2)


def rank_processes(workdir_part: str) -> list[psutil.Process]:
    """Live rank processes (zombies aside) whose command line names `workdir_part`, e.g. '/<sweep name>/'
    (a rank's job file lies in its trial's work folder, which names the sweep and the trial key)."""
    return [p for p in psutil.process_iter(["cmdline", "status"])
            if "orchestrator.run.rank_main" in " ".join(p.info["cmdline"] or [])
            and workdir_part in " ".join(p.info["cmdline"] or [])
            and p.info["status"] != psutil.STATUS_ZOMBIE]


def assert_no_ranks_left(sweep_name: str, within_s: float = 15) -> None:
    """No rank process of the sweep is alive (zombies aside) within `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        alive = rank_processes(f"/{sweep_name}/")
        if not alive:
            return
        assert time.monotonic() < deadline, f"rank processes left behind: {[p.pid for p in alive]}"
        time.sleep(0.3)


def run_launchers(tmp_path, jobs_cpus, *, budget_mib=4000, step_timeout_s=60, timeout_s=120):
    """Start one launcher per (job, cpus), supervise them in threads like Ray's threaded actors do."""
    port = free_port()
    world = len(jobs_cpus)
    launchers, outcomes = [], [None] * world
    for rank, (job, cpus) in enumerate(jobs_cpus):
        launcher = RankLauncher(str(tmp_path / f"rank{rank}"))
        env = rank_environment(dict(os.environ), cpus=cpus, ccl_cpus_on_node=[], ccl_workers=0, rank=rank,
                               local_rank=rank, world_size=world, local_world_size=world, master_addr="127.0.0.1",
                               master_port=port)
        launcher.start(job, env, cpus, [0])
        launchers.append(launcher)

    def supervise(i):
        outcomes[i] = launchers[i].supervise(budget_mib=budget_mib, step_timeout_s=step_timeout_s,
                                             deadline=time.time() + timeout_s)
        # Like the driver: one rank ending badly stops the others.
        if outcomes[i].status != "ok":
            for other in launchers:
                other.stop(f"rank {i} ended")

    threads = [threading.Thread(target=supervise, args=(i,)) for i in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes
