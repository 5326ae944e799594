"""The rank launcher without Ray: real rank processes, real affinity, real failures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from conftest import run_launchers

from orchestrator.run.driver.launcher import ccl_environment, pin_prefix, rank_environment
from orchestrator.run.job import RankJob, Steps, ThroughputTask

pytestmark = pytest.mark.slow   # real processes, seconds each: the second tier

CPUS = sorted(os.sched_getaffinity(0))


def _job(**over) -> RankJob:
    base = dict(task=ThroughputTask(steps=Steps(warmup=2, timed=5, repeats=2)), workload="classifier", params={},
                backend="gloo", local_batch=32, threads=1)
    base.update(over)
    return RankJob(**base)


def test_pin_prefix_skips_membind_for_numa_nodes_this_machine_lacks(tmp_path):
    (tmp_path / "node0").mkdir()
    prefix, note = pin_prefix([0], [7], sys_node=tmp_path)
    assert "--membind=7" not in " ".join(prefix)
    if prefix and "numactl" in prefix[0]:
        assert "memory not bound" in note
        prefix, note = pin_prefix([0], [0], sys_node=tmp_path)
        assert "--membind=0" in prefix and "--physcpubind=0" in prefix


def test_rank_environment_pins_openmp_and_sets_rendezvous():
    env = rank_environment({"PATH": "/bin"}, cpus=[4, 5, 6], ccl_cpus_on_node=[7, 15], backend="ccl", rank=3,
                           local_rank=1, world_size=4, local_world_size=2, master_addr="10.0.0.1", master_port=29500)
    assert env["OMP_NUM_THREADS"] == "3" and env["OMP_PLACES"] == "{4},{5},{6}"
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == ("3", "1", "4")
    assert env["MASTER_ADDR"] == "10.0.0.1" and env["MASTER_PORT"] == "29500"
    assert env["CCL_WORKER_COUNT"] == "1" and env["CCL_WORKER_AFFINITY"] == "7,15"
    assert (env["CCL_LOCAL_RANK"], env["CCL_LOCAL_SIZE"]) == ("1", "2")
    # ranks orch starts itself: the ofi transport (mpi needs mpirun), shared memory within the node
    assert (env["CCL_ATL_TRANSPORT"], env["CCL_ATL_SHM"], env["CCL_PROCESS_LAUNCHER"]) == ("ofi", "1", "none")
    assert "CCL_YIELD" not in env      # the worker has its own core: oneCCL's default spin is right
    shared = rank_environment({}, cpus=[4], ccl_cpus_on_node=[4, 5], backend="ccl", rank=0, local_rank=0,
                              world_size=2, local_world_size=2, master_addr="127.0.0.1", master_port=1)
    assert shared["CCL_YIELD"] == "sched_yield"   # ccl_workers 0: the worker yields its rank's core
    assert env["PATH"] == "/bin"


def test_gloo_ranks_get_no_ccl_settings_and_uneven_worker_cores_are_refused():
    env = rank_environment({}, cpus=[0], ccl_cpus_on_node=[], backend="gloo", rank=0, local_rank=0, world_size=1,
                           local_world_size=1, master_addr="127.0.0.1", master_port=1)
    assert not [k for k in env if k.startswith("CCL_")]
    with pytest.raises(ValueError, match=r"oneCCL worker cores \[3, 4, 5\] cannot be shared evenly by 2 local rank"):
        ccl_environment([3, 4, 5], local_rank=0, local_world_size=2)
    # two workers each: rank 1 of 2 takes the second pair (oneCCL slices the list by CCL_LOCAL_RANK)
    assert ccl_environment([3, 4, 5, 6], local_rank=1, local_world_size=2)["CCL_WORKER_COUNT"] == "2"


def test_single_rank_runs_pinned_and_reports(tmp_path):
    (outcome,) = run_launchers(tmp_path, [(_job(), [CPUS[-1]])])
    assert outcome.status == "ok", outcome.log_tail
    assert outcome.result.affinity["main_thread"] == [CPUS[-1]]
    # Every thread of the process (OpenMP workers included) was born inside the rank's CPU.
    assert outcome.result.affinity["threads"] == [CPUS[-1]]
    assert len(outcome.result.throughput.repeat_s) == 2
    assert outcome.peak_private_mib > 50 and outcome.shared_mib > 50   # torch's libraries: file-backed


@pytest.mark.needs_cpus(2)
def test_two_ranks_allreduce_and_disjoint_affinity(tmp_path):
    outcomes = run_launchers(tmp_path, [(_job(), [CPUS[0]]), (_job(), [CPUS[1]])])
    assert [o.status for o in outcomes] == ["ok", "ok"], [o.log_tail for o in outcomes]
    masks = [set(o.result.affinity["threads"]) for o in outcomes]
    assert masks[0] == {CPUS[0]} and masks[1] == {CPUS[1]}
    checks = [o.result.throughput.allreduce_check for o in outcomes]
    synced = [c["synced_grad_sums"] for c in checks]
    local = [c["local_grad_sums"] for c in checks]
    # After the all-reduce both ranks hold the same gradients, the mean of their (different) local ones.
    assert synced[0] == pytest.approx(synced[1], rel=1e-6, abs=1e-9)
    assert local[0] != pytest.approx(local[1], rel=1e-3)
    mean = [(a + b) / 2 for a, b in zip(*local)]
    assert synced[0] == pytest.approx(mean, rel=1e-4, abs=1e-7)


def test_crash_is_failed_with_the_traceback_in_the_log(tmp_path):
    (outcome,) = run_launchers(tmp_path, [(_job(workload="chaos", params={"fault": "crash"}), [CPUS[0]])])
    assert outcome.status == "failed"
    assert "exited with status 1" in outcome.reason
    assert "injected crash" in outcome.log_tail and "Traceback" in outcome.log


def test_memory_watchdog_stops_a_runaway_rank_before_the_kernel_does(tmp_path):
    job = _job(workload="chaos", params={"fault": "oom", "oom_step_mib": 32},
               task=ThroughputTask(steps=Steps(warmup=5, timed=5, repeats=2)))
    started = time.monotonic()
    (outcome,) = run_launchers(tmp_path, [(job, [CPUS[0]])], budget_mib=900)
    assert outcome.status == "oom", outcome.log_tail
    assert "exceeded the rank's budget 900 MiB" in outcome.reason
    assert 900 < outcome.peak_private_mib < 900 + 32 * 8  # stopped within a few allocation steps of the budget
    assert time.monotonic() - started < 60


def test_no_progress_is_a_timeout(tmp_path):
    job = _job(workload="chaos", params={"fault": "hang"})
    started = time.monotonic()
    (outcome,) = run_launchers(tmp_path, [(job, [CPUS[0]])], step_timeout_s=4)
    assert outcome.status == "timeout"
    assert "no progress for 4 s" in outcome.reason
    assert time.monotonic() - started < 30


def test_a_slow_start_up_is_not_a_hang(tmp_path):
    """Start-up (importing torch, the rendezvous, building the model) shows no steps; it is judged by its own
    budget, not by the step timeout. The build here sleeps 3 s past a 1 s step timeout: a rank that would have
    been killed as hung by a watchdog that counts start-up as 'no progress'."""
    job = _job(workload="chaos", params={"build_delay_s": 4.0})
    (outcome,) = run_launchers(tmp_path, [(job, [CPUS[0]])], step_timeout_s=1, startup_timeout_s=600)
    assert outcome.status == "ok", outcome.reason
    breakdown = outcome.result.startup_breakdown_s
    assert breakdown["build"] >= 4.0   # the sleep was inside start-up, where the step timeout does not apply


def test_a_start_up_past_its_budget_is_a_timeout_that_says_where_it_was(tmp_path):
    job = _job(workload="chaos", params={"build_delay_s": 3600.0})
    started = time.monotonic()
    (outcome,) = run_launchers(tmp_path, [(job, [CPUS[0]])], step_timeout_s=600, startup_timeout_s=6)
    assert outcome.status == "timeout"
    # The reason names the last start-up stage the rank finished. Which one depends on how fast this CPU imports
    # torch within the 6 s (on a loaded 2-vCPU machine it may not get past the interpreter), so any named stage
    # of the rank's clock (run.rank.process) is right; once past the workload's import, it is stuck in the build, and its stacks,
    # dumped before it was killed, show the chaos trainer.
    match = re.search(r"not ready after 6 s of start-up \(building, after (\w+)\): a stuck import", outcome.reason)
    assert match, outcome.reason
    assert match.group(1) in ("interpreter", "import_torch", "import_protocol", "rendezvous", "import_workload")
    assert "Current thread" in outcome.log or "Thread 0x" in outcome.log, outcome.log[-2000:]   # the stack dump
    if match.group(1) == "import_workload":
        assert "chaos/trainer.py" in outcome.log, outcome.log[-2000:]
    assert time.monotonic() - started < 600   # ended by the start-up budget, not by the step timeout


def test_orphaned_rank_exits_when_its_launcher_dies(tmp_path):
    """The rank watches its parent: a launcher killed without cleanup (actor or driver killed) must not
    leave a rank holding cores."""
    import subprocess
    import sys

    import psutil

    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys, time\n"
        "from orchestrator.run.job import RankJob, Steps, ThroughputTask\n"
        "from orchestrator.run.driver.launcher import RankLauncher, rank_environment, free_port\n"
        "job = RankJob(task=ThroughputTask(steps=Steps(warmup=2, timed=2, repeats=1)), workload='chaos',"
        " params={'fault': 'hang', 'fault_at_step': 1}, backend='gloo', local_batch=8, threads=1)\n"
        f"l = RankLauncher({str(tmp_path / 'w')!r})\n"
        "env = rank_environment(dict(os.environ), cpus=[0], ccl_cpus_on_node=[], backend='gloo', rank=0, local_rank=0,"
        " world_size=1, local_world_size=1, master_addr='127.0.0.1', master_port=free_port())\n"
        "print(l.start(job, env, [0], [0]), flush=True)\n"
        "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    rank_pid = int(parent.stdout.readline())
    assert psutil.pid_exists(rank_pid)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(rank_pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"rank {rank_pid} still running 10 s after its launcher died")


@pytest.mark.skipif(os.geteuid() != 0, reason="lowering niceness needs root or CAP_SYS_NICE")
def test_a_rank_runs_at_normal_priority_though_its_launcher_is_niced(tmp_path):
    """Ray starts its workers (the launchers) at niceness 15; the rank must not inherit it."""
    code = ("import os, subprocess, sys\n"
            "os.nice(15)\n"
            "from orchestrator.run.driver.launcher import start_prefix\n"
            "child = subprocess.run([*start_prefix(), sys.executable, '-c',\n"
            "                        'import os; print(os.getpriority(os.PRIO_PROCESS, 0))'],\n"
            "                       capture_output=True, text=True)\n"
            "print(os.getpriority(os.PRIO_PROCESS, 0), child.stdout.strip())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    # The test run may itself be niced (`nice pytest`): the launcher ends 15 above it, at most 19.
    assert out == [str(min(19, os.getpriority(os.PRIO_PROCESS, 0) + 15)), "0"]


def test_a_rank_stopped_by_the_driver_is_recorded_as_stopped_not_as_the_kernels_sigkill(tmp_path):
    """The driver stops a rank's partners once one rank failed (run.driver.supervision); stop() kills the process at
    once, so the supervising loop may find it dead before it sees the stop. The record then said "killed by
    SIGKILL (not sent by orch: the kernel's out-of-memory killer is the usual sender)", and that signal outranked
    the partner's real cause: the loop sleeps between checks and tests the process before the stop flag."""
    import threading

    from orchestrator.core.measured.rank_end import root_cause
    from orchestrator.run.driver.launcher import RankLauncher, RankLimits

    launcher = RankLauncher(str(tmp_path / "rank1"))
    env = rank_environment(dict(os.environ), cpus=[CPUS[0]], ccl_cpus_on_node=[], backend="gloo", rank=0,
                           local_rank=0, world_size=1, local_world_size=1, master_addr="127.0.0.1", master_port=1)
    launcher.start(_job(workload="chaos", params={"build_delay_s": 3600.0}), env, [CPUS[0]], [0])
    ends = []
    limits = RankLimits(budget_mib=4000, startup_timeout_s=600, step_timeout_s=600, deadline=time.time() + 600)
    watcher = threading.Thread(target=lambda: ends.append(launcher.supervise(limits)))
    watcher.start()
    time.sleep(1.0)
    launcher.stop("stopped because another rank ended: rank 0: the rank exited with status 1: Gloo connectFullMesh")
    watcher.join(timeout=30)
    launcher.cleanup()
    (outcome,) = ends
    assert outcome.status == "stopped" and outcome.exit_code == -9
    assert "SIGKILL" not in outcome.reason and "another rank ended" in outcome.reason
    partner = SimpleNamespace(status="failed", reason="the rank exited with status 1: Gloo connectFullMesh failed",
                              exit_code=1, log_tail="")
    assert root_cause([partner, outcome], ended=[1, 0])[2].startswith("rank 0: the rank exited with status 1")


def test_collectives_bind_to_the_interface_of_the_node_address_unless_the_user_chose_one():
    from orchestrator.run.driver.launcher import interface_of, local_interfaces

    assert interface_of("127.0.0.1", local_interfaces()) == "lo"
    kw = dict(cpus=[0], ccl_cpus_on_node=[0], rank=0, local_rank=0, world_size=2, local_world_size=1,
              master_addr="10.77.0.1", master_port=1, ifname="orch0")
    gloo = rank_environment({}, backend="gloo", **kw)
    assert gloo["GLOO_SOCKET_IFNAME"] == "orch0" and "CCL_KVS_IFACE" not in gloo
    ccl = rank_environment({}, backend="ccl", **kw)
    assert (ccl["GLOO_SOCKET_IFNAME"], ccl["CCL_KVS_IFACE"], ccl["FI_TCP_IFACE"]) == ("orch0",) * 3
    assert rank_environment({"GLOO_SOCKET_IFNAME": "ib0"}, backend="gloo", **kw)["GLOO_SOCKET_IFNAME"] == "ib0"
    assert "GLOO_SOCKET_IFNAME" not in rank_environment({}, backend="gloo", **{**kw, "ifname": None})


def test_the_drivers_secrets_reach_no_rank(monkeypatch):
    """A sweep's ranks (and the probe's) get the driver's environment but for variables whose names say they hold
    a secret, unless the user names them in $ORCH_RANK_ENV_KEEP; orch's own ORCH_ variables always pass."""
    from orchestrator.run.driver import probe, trial

    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "t")
    monkeypatch.setenv("HF_TOKEN", "h")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a")
    monkeypatch.setenv("MY_DB_PASSWORD", "p")
    monkeypatch.setenv("ORCH_RAY_SESSION_TOKEN", "s")
    monkeypatch.setenv("ORCH_RANK_ENV_KEEP", "HF_TOKEN")
    for env in (trial._worker_env(), probe._base_env()):
        assert "PATH" in env and env["ORCH_RAY_SESSION_TOKEN"] == "s" and env["HF_TOKEN"] == "h"
        assert not {"MLFLOW_TRACKING_TOKEN", "AWS_SECRET_ACCESS_KEY", "MY_DB_PASSWORD"} & set(env)
