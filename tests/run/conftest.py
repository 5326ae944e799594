"""Shared pieces of the Ray-level tests: one real local Ray instance per test module, sweep files written
to disk, readers of the records a sweep leaves behind, a real `orch` process to start, wait on and check
for leftover ranks, and rank launchers run without Ray under the driver's own supervision (run.driver.supervision)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.run.driver.launcher import RankLauncher, free_port, rank_environment
from orchestrator.run.driver.supervision import Limits, LocalRanks, supervise

REPO = Path(__file__).resolve().parents[2]
EMULATED_2S1C = REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml"
CPUS = sorted(os.sched_getaffinity(0))

# A process started in the background by a non-interactive shell (`cmd &`, as a CI script may start pytest)
# inherits SIGINT ignored, and so would every `orch` the tests start: Python installs its Ctrl-C handler only
# where SIGINT is not ignored, and the Ctrl-C tests would see a sweep that runs to its end. Handled here, the
# signal is reset to its default in the children (exec keeps an ignored signal ignored, not a handled one).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


def two_core_avx2_machine(**isa: object):
    """A stand-in machine for planning without probing this one: one node, one socket of 2 cores, 16 GiB, an
    AVX2-only CPU at 50 fp32 GFLOP/s (bf16 emulated, 2 GFLOP/s). `isa` overrides the CPU's fields. Returns the
    topology and its CPU."""
    from dataclasses import replace

    from orchestrator.core.machine.isa import PROBE, CpuIsa
    from orchestrator.core.machine.topology import CompactTopology, build_compact

    topology = build_compact(CompactTopology(nodes=1, sockets=1, cores_per_socket=2, threads_per_core=1,
                                             memory_gib=16))
    cpu = CpuIsa(**{"features": ("avx2",), "fp32_gflops": 50.0, "bf16_gflops": 2.0, "source": PROBE, **isa})
    return replace(topology, nodes=tuple(replace(n, isa=cpu) for n in topology.nodes)), cpu


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
            if "orchestrator.run.rank.main" in " ".join(p.info["cmdline"] or [])
            and workdir_part in " ".join(p.info["cmdline"] or [])
            and p.info["status"] != psutil.STATUS_ZOMBIE]


def wait_for_ranks(sweep_name: str, proc: subprocess.Popen, timeout_s: float = 60) -> list[psutil.Process]:
    """The sweep's rank processes, once the matcher sees at least one alive: a leftover check after a kill
    means something only when the same matcher saw the ranks before it."""
    deadline = time.monotonic() + timeout_s
    while not (alive := rank_processes(f"/{sweep_name}/")):
        assert proc.poll() is None, f"the sweep ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no rank process of {sweep_name} seen in {timeout_s:g} s"
        time.sleep(0.05)
    return alive


def assert_no_ranks_left(sweep_name: str, within_s: float = 15, seen: list[psutil.Process] = ()) -> None:
    """No rank process of the sweep is alive (zombies aside) within `within_s`, and none of `seen` (ranks
    seen earlier, checked by pid and start time, whatever their command line has become)."""
    deadline = time.monotonic() + within_s
    while True:
        alive = rank_processes(f"/{sweep_name}/") + [p for p in seen if _running(p)]
        if not alive:
            return
        assert time.monotonic() < deadline, f"rank processes left behind: {[p.pid for p in alive]}"
        time.sleep(0.3)


def _running(proc: psutil.Process) -> bool:
    try:  # is_running() also checks that the pid was not reused (by the start time psutil noted)
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _alive(ident: tuple[int, float]) -> bool:
    """The process (pid, create_time) still runs: not exited, not a zombie, its pid not reused since."""
    try:
        proc = psutil.Process(ident[0])
        return proc.create_time() == ident[1] and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class RankWatch:
    """Watches a sweep's rank processes from a thread while the sweep runs: every rank seen (by trial key and
    rank), the processes each rank started, and the rank's launcher (its parent: the node's NodeLaunchers
    actor, a Ray worker shared by every trial of the sweep by design). When a trial's first rank appears, it
    notes which processes of earlier trials are still alive: a failed trial's ranks must be gone by then,
    while the launcher that started them still runs (so their end is the trial's own cleanup, not the
    ranks' exit-when-orphaned backstop).

        with RankWatch("chaos-kill") as watch:
            main(["sweep", ...])
        assert watch.ranks("r2-t1-b8") == {0, 1}      # the matcher saw them while they ran
    """

    def __init__(self, sweep_name: str, poll_s: float = 0.05):
        self.sweep_name, self.poll_s = sweep_name, poll_s
        self._job = re.compile(rf"/{re.escape(sweep_name)}/(?P<key>.+)-\d+/rank(?P<rank>\d+)/job\.json")
        self.seen: dict[tuple[int, float], tuple[str, int | None]] = {}  # process -> (trial key, rank or None)
        self.launchers: dict[str, set[tuple[int, float]]] = {}          # trial key -> its ranks' parents
        self.left_at_start: dict[str, list[tuple[str, int | None]]] = {}  # trial key -> earlier trials' live ones
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RankWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in rank_processes(f"/{self.sweep_name}/"):
                try:
                    self._note(proc)
                except psutil.Error:  # it ended between the scan and now
                    pass
            self._stop.wait(self.poll_s)

    def _note(self, proc: psutil.Process) -> None:
        match = self._job.search(" ".join(proc.info["cmdline"] or []))
        if match is None:
            return
        key, rank = match["key"], int(match["rank"])
        if key not in self.launchers:  # this trial's first rank: what of the earlier trials is still alive?
            self.launchers[key] = set()
            self.left_at_start[key] = [who for ident, who in self.seen.items() if who[0] != key and _alive(ident)]
        parent = proc.parent()
        if parent is not None:
            self.launchers[key].add((parent.pid, parent.create_time()))
        self.seen[(proc.pid, proc.create_time())] = (key, rank)
        for child in proc.children(recursive=True):
            self.seen.setdefault((child.pid, child.create_time()), (key, None))

    def ranks(self, key: str) -> set[int]:
        """The ranks of trial `key` seen alive."""
        return {rank for who_key, rank in self.seen.values() if who_key == key and rank is not None}

    def alive(self) -> list[tuple[str, int | None] | str]:
        """What is still alive of everything seen: (trial key, rank or None for a rank's child) for rank
        processes and their children, 'launcher' for a launcher."""
        ranks = [who for ident, who in self.seen.items() if _alive(ident)]
        launchers = {ident for idents in self.launchers.values() for ident in idents}
        return [*ranks, *["launcher" for ident in launchers if _alive(ident)]]

    def assert_all_gone(self, within_s: float = 15) -> None:
        deadline = time.monotonic() + within_s
        while (left := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"left behind: {left}"


def run_launchers(tmp_path, jobs_cpus, *, budget_mib=4000, step_timeout_s=60, timeout_s=120, startup_timeout_s=600):
    """Start one launcher per (job, cpus) in this process and supervise them with the driver's own
    supervision (run.driver.supervision, over LocalRanks instead of Ray's actors): the ranks' outcomes."""
    port = free_port()
    world = len(jobs_cpus)
    launchers = []
    for rank, (job, cpus) in enumerate(jobs_cpus):
        launcher = RankLauncher(str(tmp_path / f"rank{rank}"))
        env = rank_environment(dict(os.environ), cpus=cpus, ccl_cpus_on_node=[], backend="gloo", rank=rank,
                               local_rank=rank, world_size=world, local_world_size=world, master_addr="127.0.0.1",
                               master_port=port)
        launcher.start(job, env, cpus, [0])
        launchers.append(launcher)
    started = time.time()
    limits = Limits([budget_mib] * world, step_timeout_s, started + timeout_s, startup_timeout_s)
    return supervise(LocalRanks(launchers), limits, started, stop=threading.Event()).outcomes
