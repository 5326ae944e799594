"""The driver itself dies or is interrupted: a real `orch sweep` process (with its own embedded Ray) is
killed with SIGKILL or stopped with Ctrl-C (SIGINT) mid-sweep. Nothing finished may be lost, nothing may
be recorded twice, no rank may be left running, and a rerun resumes."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from conftest import (
    EMULATED_2S1C,
    assert_no_ranks_left,
    file_lines,
    read_records,
    start_orch,
    wait_for_ranks,
    wait_for_records,
    write_sweep,
)

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]

SWEEP = """
workload: {name: classifier, params: {hidden: 64, train_samples: 2048}}
grid: {ranks: [1, 2], threads_per_rank: [1], local_batch: [8, 16, 32]}
measure: {warmup_steps: 2, timed_steps: 200, repeats: 2, peak: false, allreduce: false}
"""


def test_driver_killed_mid_sweep_then_rerun_resumes(tmp_path):
    sweep = write_sweep(tmp_path, "killed-driver", SWEEP)
    results = tmp_path / "results"
    args = ["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results), "--no-report"]
    proc = start_orch(*args)
    wait_for_records(results, 2, proc)
    seen = wait_for_ranks("killed-driver", proc)  # the matcher sees ranks running: its "none left" means gone
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and everything in its session, as a crash or `kill -9`
    proc.wait()
    assert_no_ranks_left("killed-driver", seen=seen)
    finished = file_lines(results / "trials.jsonl")
    assert len(finished) >= 2

    rerun = start_orch(*args)
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    lines = file_lines(results / "trials.jsonl")
    assert lines[:len(finished)] == finished          # nothing recorded before the kill was touched
    keys = [r["key"] for r in read_records(results)]
    assert len(keys) == len(set(keys)) == 6          # every grid point exactly once
    assert [r["status"] for r in read_records(results)] == ["ok"] * 6, read_records(results)
    assert f"{len(finished)} already done" in err or f"{6 - len(finished)} trial(s) to run" in err


def test_ctrl_c_stops_cleanly_and_keeps_what_finished(tmp_path):
    sweep = write_sweep(tmp_path, "interrupted", SWEEP)
    results = tmp_path / "results"
    proc = start_orch("sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results), "--no-report")
    wait_for_records(results, 1, proc)
    seen = wait_for_ranks("interrupted", proc)  # into the next trial, with rank processes running
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert_no_ranks_left("interrupted", seen=seen)
    records = read_records(results)
    assert records and all(r["status"] == "ok" for r in records)


def _listening() -> set[tuple[str, int, int]]:
    return {(c.laddr.ip, c.laddr.port, c.pid or 0) for c in psutil.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN}


def _process_tree(pid: int) -> set[int]:
    try:
        root = psutil.Process(pid)
        return {pid} | {child.pid for child in root.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def test_embedded_ray_and_ranks_listen_on_loopback_only(tmp_path):
    """With no cluster address, everything the sweep starts (Ray's servers, the rank rendezvous, gloo)
    listens on loopback only. Only the sweep's own processes are looked at (the driver and its descendants:
    Ray's servers and agents, the launchers and the ranks), not other programs on a shared machine."""
    sweep = write_sweep(tmp_path, "loopback", SWEEP)
    results = tmp_path / "results"
    proc = start_orch("sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results), "--no-report")
    seen: set[tuple[str, int, int]] = set()
    try:
        wait_for_records(results, 1, proc)  # Ray is up and trials are running
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            seen |= {s for s in _listening() if s[2] in _process_tree(proc.pid)}
            time.sleep(0.1)
    finally:
        try:  # the sweep may already have finished: it has only a few short trials
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        proc.communicate(timeout=60)
    assert any(port for _, port, _ in seen), "no listening socket observed"
    exposed = [s for s in seen if s[0] not in ("127.0.0.1", "::ffff:127.0.0.1", "::1")]
    assert not exposed, f"listening beyond loopback: {exposed}"
