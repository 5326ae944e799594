"""A driver killed with SIGKILL leaves nothing behind: every process its embedded Ray started (gcs_server,
raylet, the dashboard and runtime-env agents, workers) and every rank it launched is gone within seconds,
and a rerun resumes with nothing lost and nothing recorded twice.

Only the driver's pid is killed, as `kill -9 <pid>` or the OOM killer would: killing its whole process group
(as test_driver_interrupt does) would also take Ray's agents, which share that group, and hide a leak."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from conftest import EMULATED_2S1C, file_lines, read_records, start_orch, write_sweep

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]

SWEEP = """
workload: {name: classifier, params: {hidden: 64, train_samples: 2048}}
grid: {ranks: [1, 2], threads_per_rank: [1], local_batch: [8]}
measure: {warmup_steps: 2, timed_steps: 200, repeats: 2, peak: false, allreduce: false}
"""
GRID_POINTS = 2
GONE_WITHIN_S = 15.0
SESSION_DIR = re.compile(r"/[^\s=]*/session_\d{4}-\d\d-\d\d_[^/\s]+")   # as gcs_server's --log_dir names it


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def _alive(proc: psutil.Process) -> bool:
    try:   # is_running() also checks the pid was not reused
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _holding(session_dir: str) -> list[psutil.Process]:
    """Live processes whose command line names the Ray session's directory or that hold a file in it."""
    found = []
    for proc in psutil.process_iter():
        try:
            paths = [_cmdline(proc), *(f.path for f in proc.open_files())]
        except psutil.Error:
            continue
        if any(session_dir + "/" in p or p.endswith(session_dir) for p in paths) and _alive(proc):
            found.append(proc)
    return found


def _run_until_rank_running(proc: subprocess.Popen, results: Path, timeout_s: float = 120
                            ) -> dict[tuple[int, float], psutil.Process]:
    """Every process the sweep started, seen while it runs, until the second trial (2 ranks) is running."""
    seen: dict[tuple[int, float], psutil.Process] = {}
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"the sweep ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "no rank process started"
        for p in _descendants(proc.pid):
            try:
                seen.setdefault((p.pid, p.create_time()), p)
            except psutil.Error:
                continue
        ranks = [p for p in seen.values() if "orchestrator.run.rank.main" in _cmdline(p) and _alive(p)]
        if ranks and len(file_lines(results / "trials.jsonl")) >= 1:
            return seen
        time.sleep(0.2)


def test_driver_sigkill_leaves_no_process_and_rerun_resumes(tmp_path):
    sweep = write_sweep(tmp_path, "reaped-driver", SWEEP)
    results = tmp_path / "results"
    args = ["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results), "--no-report"]
    proc = start_orch(*args)
    seen: dict[tuple[int, float], psutil.Process] = {}
    try:
        seen = _run_until_rank_running(proc, results)
        time.sleep(1.0)   # let every process of the running trial start
        seen.update({(p.pid, p.create_time()): p for p in _descendants(proc.pid)})
        names = {_cmdline(p) for p in seen.values()}
        match = SESSION_DIR.search(" ".join(names))
        assert match, f"no Ray session directory in {names}"
        session_dir = match.group(0)
        for wanted in ("gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent", "orchestrator.run.rank.main",
                       "orchestrator.run.driver.reaper"):
            assert any(wanted in n for n in names), f"{wanted} not seen among {sorted(names)}"

        os.kill(proc.pid, signal.SIGKILL)   # the driver alone, as `kill -9 <pid>`
        proc.wait()
        killed_at = time.monotonic()
        while True:
            left = [p for p in seen.values() if _alive(p)] + _holding(session_dir)
            if not left:
                break
            assert time.monotonic() - killed_at < GONE_WITHIN_S, (
                f"left behind {GONE_WITHIN_S:.0f} s after the driver's SIGKILL: "
                f"{sorted({(p.pid, _cmdline(p)[:80]) for p in left})}")
            time.sleep(0.2)
    finally:
        for p in [*seen.values(), proc]:   # a failed test must not leak what it started either
            if isinstance(p, psutil.Process) and _alive(p):
                p.kill()
        if proc.poll() is None:
            proc.kill()
    finished = file_lines(results / "trials.jsonl")

    rerun = start_orch(*args)
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert file_lines(results / "trials.jsonl")[:len(finished)] == finished   # nothing recorded before was touched
    records = read_records(results)
    keys = [r["key"] for r in records]
    assert len(keys) == len(set(keys)) == GRID_POINTS                     # none lost, none twice
    assert all(r["status"] == "ok" for r in records)
    deadline = time.monotonic() + 5
    while any(f"orchestrator.run.driver.reaper {rerun.pid} " in _cmdline(p) and _alive(p) for p in psutil.process_iter()):
        assert time.monotonic() < deadline, "the watchdog outlived a normal end"
        time.sleep(0.2)
