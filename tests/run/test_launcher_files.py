"""What the launcher writes and reads on a node that other users share: its files made new and private, never
through a link; the log's tail read from its end and the log bounded; the rendezvous port held from the moment it
is chosen until rank 0 serves on it, so that trials started together never share one."""

from __future__ import annotations

import errno
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from orchestrator.run.driver import launcher as launcher_module
from orchestrator.run.driver.launcher import NodeLaunchers, RankLauncher, RankLimits, rank_environment
from orchestrator.run.driver.supervision import Limits, LocalRanks, supervise
from orchestrator.run.job import AllreduceTask, RankJob

pytestmark = pytest.mark.slow   # real processes, seconds each: the second tier

CPUS = sorted(os.sched_getaffinity(0))


def _job(**over) -> RankJob:
    base = dict(task=AllreduceTask(message_bytes=[4096], precision="fp32"), workload="classifier", params={},
                backend="gloo", local_batch=8, threads=1)
    base.update(over)
    return RankJob(**base)


def test_a_link_planted_where_the_job_file_goes_is_refused_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("mine")
    work = tmp_path / "rank0"
    launcher = RankLauncher(str(work))
    os.symlink(victim, work / "job.json")
    with pytest.raises(FileExistsError):
        launcher.start(_job(), dict(os.environ), [CPUS[0]], [0])
    assert victim.read_text() == "mine" and launcher.proc is None


def test_a_rank_folder_under_the_work_root_is_private_down_to_the_rank(tmp_path, monkeypatch):
    root = tmp_path / "orch-0"
    monkeypatch.setattr(launcher_module, "WORK_ROOT", root)
    work = root / "sweep" / "trial-1" / "rank0"
    RankLauncher(str(work))
    for folder in (root, root / "sweep", root / "sweep" / "trial-1", work):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    os.chmod(root, 0o777)   # another user could now plant links: refused
    with pytest.raises(ValueError, match="writable by other users"):
        RankLauncher(str(root / "sweep" / "trial-2" / "rank0"))


def test_a_rank_that_floods_its_log_is_stopped_before_it_fills_the_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher_module, "LOG_MAX_BYTES", 1 << 20)
    launcher = RankLauncher(str(tmp_path / "rank0"))
    launcher.job = _job(progress_path=str(tmp_path / "rank0" / "progress.json"),
                        result_path=str(tmp_path / "rank0" / "result.json"))
    launcher.log_path = tmp_path / "rank0" / "rank.log"
    with open(launcher.log_path, "wb") as log:
        launcher.proc = subprocess.Popen([sys.executable, "-c", "while True: print('x' * 1000, flush=True)"],
                                         stdout=log, start_new_session=True)
    launcher._started_at = time.monotonic()
    outcome = launcher.supervise(RankLimits(budget_mib=4000, startup_timeout_s=600, step_timeout_s=600,
                                            deadline=time.time() + 60))
    assert outcome.status == "failed" and "its log passed 1 MiB" in outcome.reason
    assert outcome.log_tail.endswith("x" * 100) and len(outcome.log) <= launcher_module.LOG_KEEP_BYTES
    assert launcher.proc.poll() is not None


def test_reserved_rendezvous_ports_are_distinct_and_held_until_taken(tmp_path):
    launchers = NodeLaunchers()
    keys = [f"{tmp_path}/trial{i}/rank0" for i in range(16)]
    with ThreadPoolExecutor(8) as pool:   # trials starting at the same moment
        ports = list(pool.map(lambda key: launchers.reserve_rendezvous(key, "127.0.0.1"), keys))
    assert len(set(ports)) == len(ports)
    for port in ports:   # each is held: nobody else can bind it meanwhile
        with socket.socket() as other, pytest.raises(OSError) as err:
            other.bind(("127.0.0.1", port))
        assert err.value.errno == errno.EADDRINUSE
    for key in keys:     # a rank that never started: its reservation is released with it
        launchers.cleanup(key)
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", ports[0]))


def _trial(launchers: NodeLaunchers, folder, cpus) -> list:
    """A 2-rank all-reduce trial through the node's launchers, as RayRanks drives them (without Ray)."""
    keys = [f"{folder}/rank{r}" for r in range(2)]
    port = launchers.reserve_rendezvous(keys[0], "127.0.0.1")
    for rank, key in enumerate(keys):
        env = rank_environment(dict(os.environ), cpus=[cpus[rank]], ccl_cpus_on_node=[], backend="gloo", rank=rank,
                               local_rank=rank, world_size=2, local_world_size=2, master_addr="127.0.0.1",
                               master_port=port)
        launchers.start(key, _job(), env, [cpus[rank]], [0])
    started = time.time()
    limits = Limits([4000, 4000], 120, started + 300, 300)
    try:
        run = supervise(LocalRanks([launchers._ranks[k] for k in keys]), limits, started, stop=threading.Event())
    finally:
        for key in keys:
            launchers.cleanup(key)
    return run.outcomes


@pytest.mark.needs_cpus(2)
def test_two_trials_started_together_each_rendezvous_on_its_own_reserved_port(tmp_path):
    """Rank 0 serves on the socket its launcher reserved (it cannot bind the port itself: the launcher's
    socket holds it), so both trials ending ok shows the port went from the reservation to the rank."""
    launchers = NodeLaunchers()
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda i: _trial(launchers, tmp_path / f"trial{i}", CPUS[:2]), range(2)))
    for outcomes in runs:
        assert [o.status for o in outcomes] == ["ok", "ok"], [o.log_tail for o in outcomes]
    assert launchers._rendezvous == {}
