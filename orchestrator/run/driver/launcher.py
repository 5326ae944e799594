"""Start one pinned rank process and watch it: exit status, memory against its budget, progress against
its timeouts. `RankLauncher` runs inside its node's `NodeLaunchers`, the one Ray actor per node that a sweep
starts on first use and keeps (`orchestrator.run.driver.trial.NodePool`), but the classes themselves are plain
Python so they can be tested without Ray.

Why a process per rank and not the actor itself: OpenMP, the allocator and CPU affinity only take full
effect when set before the process starts (as torch.backends.xeon.run_cpu does). Ray's CPUs are
logical; the pinning here is what makes them physical.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypedDict

import psutil

from orchestrator.constants import (
    LAUNCHER_PID_ENV_VAR,
    RANK_ENV_KEEP_ENV_VAR,
    RENDEZVOUS_FD_ENV_VAR,
    SECRET_ENV_PREFIXES,
    SECRET_ENV_WORDS,
)
from orchestrator.core.machine.topology import cpu_ranges
from orchestrator.core.measured.rank_end import RankStatus, classify_exit
from orchestrator.io.files import WORK_ROOT, create_private, private_dirs, read_nofollow
from orchestrator.run.job import STARTUP_PHASES, Phase, RankJob, RankProgress, RankResult, read_progress
from orchestrator.run.procmem import read_memory

# The launcher shares the machine with the rank it measures, so its checks are kept cheap. Every POLL_S:
# exit status, progress, and the rank's private memory from the kernel's counters (run.procmem: resident less
# file-backed, which no other process changes; no walk of its mappings). The list of child processes (a scan
# of all of /proc) is refreshed every TREE_EVERY_S.
POLL_S = 0.2
POLL_NEAR_BUDGET_S = 0.02   # once private memory passes NEAR_BUDGET of the budget: a runaway rank grows fast
NEAR_BUDGET = 0.8
TREE_EVERY_S = 2.0
LOG_TAIL_LINES = 40
LOG_KEEP_BYTES = 1 << 20
# A rank's log on its node may grow to this; a rank that prints more (a runaway loop) is stopped as failed,
# before it fills the disk that its node and the results may share. Its tail is kept, as for any failure.
LOG_MAX_BYTES = 64 << 20
STACK_DUMP_WAIT_S = 1.0


def pin_prefix(cpus: list[int], numa_nodes: list[int], sys_node: Path = Path("/sys/devices/system/node")
               ) -> tuple[list[str], str]:
    """The command prefix that applies the CPU list (and memory binding) before the interpreter starts,
    and a note on what was used. numactl binds memory to the socket's NUMA node too; it is skipped for
    NUMA nodes this machine does not have (an emulated topology)."""
    cpu_list = cpu_ranges(cpus)
    numactl = shutil.which("numactl")
    if numactl:
        real = [n for n in numa_nodes if (sys_node / f"node{n}").is_dir()]
        if numa_nodes and len(real) == len(numa_nodes):
            nodes = ",".join(map(str, numa_nodes))
            return [numactl, f"--physcpubind={cpu_list}", f"--membind={nodes}"], f"numactl -C {cpu_list} -m {nodes}"
        return [numactl, f"--physcpubind={cpu_list}"], (f"numactl -C {cpu_list} (memory not bound: NUMA node(s) "
                                                        f"{numa_nodes} not on this machine)")
    taskset = shutil.which("taskset")
    if taskset:
        return [taskset, "-c", cpu_list], f"taskset -c {cpu_list} (numactl not installed: memory not bound)"
    return [], "no numactl/taskset: affinity set by the launcher"


def kept_names() -> set[str]:
    """The variables the user passes to the ranks although their names say secret ($ORCH_RANK_ENV_KEEP)."""
    return {name.strip() for name in os.environ.get(RANK_ENV_KEEP_ENV_VAR, "").split(",") if name.strip()}


def passes_to_ranks(name: str, keep: set[str] | frozenset[str] = frozenset()) -> bool:
    """Whether the driver's variable `name` reaches the ranks: not when its name says it holds a secret
    (constants.SECRET_ENV_WORDS and _PREFIXES), unless the user named it in $ORCH_RANK_ENV_KEEP; orch's own
    ORCH_ variables always do.

    >>> [passes_to_ranks(n) for n in ("PATH", "HF_TOKEN", "MLFLOW_TRACKING_URI", "ORCH_RAY_SESSION_TOKEN")]
    [True, False, False, True]
    >>> passes_to_ranks("HF_TOKEN", {"HF_TOKEN"})
    True
    """
    if name in keep or name.startswith("ORCH_"):
        return True
    upper = name.upper()
    return not (any(word in upper for word in SECRET_ENV_WORDS) or upper.startswith(SECRET_ENV_PREFIXES))


def rank_environment(base: dict[str, str], *, cpus: list[int], ccl_cpus_on_node: list[int], backend: str,
                     rank: int, local_rank: int, world_size: int, local_world_size: int, master_addr: str,
                     master_port: int, ifname: str | None = None) -> dict[str, str]:
    """The environment of one rank, following torch.backends.xeon.run_cpu: OpenMP threads = cores, each
    OpenMP thread bound to one core of the rank (OMP_PLACES), Intel OpenMP's equivalents for when libiomp
    is preloaded, and torch.distributed's rendezvous variables. With backend ccl, oneCCL's settings
    (`ccl_environment`; `ccl_cpus_on_node`: every local rank's oneCCL worker cores, in local-rank order).
    `ifname`: the interface that carries the rank's Ray node address (`interface_settings`)."""
    env = dict(base)
    threads = str(len(cpus))
    env.update({
        "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
        "OMP_PLACES": ",".join(f"{{{c}}}" for c in cpus), "OMP_PROC_BIND": "close",
        "KMP_AFFINITY": "granularity=fine,compact,1,0", "KMP_BLOCKTIME": "1",
        "RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(local_world_size), "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
        "PYTHONUNBUFFERED": "1",
    })
    if backend == "ccl":
        env.update(ccl_environment(ccl_cpus_on_node, local_rank=local_rank, local_world_size=local_world_size,
                                   shares_core=bool(set(cpus) & set(ccl_cpus_on_node))))
    if ifname is not None:
        env.update({k: v for k, v in interface_settings(ifname, backend).items() if k not in base})
    return env


# The variables that bind a rank's communication to one interface: Gloo's device (without it Gloo binds the
# address the hostname resolves to, loopback on Ubuntu's default 127.0.1.1 entry or in a network namespace),
# and oneCCL's key-value store and libfabric's tcp provider.
GLOO_IFNAME_ENV_VAR = "GLOO_SOCKET_IFNAME"
CCL_IFNAME_ENV_VARS = ("CCL_KVS_IFACE", "FI_TCP_IFACE")


def interface_settings(ifname: str, backend: str) -> dict[str, str]:
    """Where a rank's collectives listen and connect: the interface that carries its Ray node's address. A
    variable the user set already (in the driver's environment) is kept by `rank_environment`: a user who binds
    Gloo to a faster fabric than Ray's knows better.

    >>> interface_settings("eth1", "ccl")
    {'GLOO_SOCKET_IFNAME': 'eth1', 'CCL_KVS_IFACE': 'eth1', 'FI_TCP_IFACE': 'eth1'}
    """
    names = (GLOO_IFNAME_ENV_VAR, *(CCL_IFNAME_ENV_VARS if backend == "ccl" else ()))
    return dict.fromkeys(names, ifname)


def interface_of(address: str, interfaces: dict[str, list[str]]) -> str | None:
    """The interface that carries `address`, from {interface: its IPv4 addresses}; None when none does (a
    node address behind NAT, say: the rank then keeps Gloo's own choice).

    >>> interface_of("10.77.0.2", {"lo": ["127.0.0.1"], "orch0": ["10.77.0.2"]})
    'orch0'
    >>> interface_of("127.0.0.1", {"lo": ["127.0.0.1"]}), interface_of("192.0.2.1", {"lo": ["127.0.0.1"]})
    ('lo', None)
    """
    return next((name for name, addrs in sorted(interfaces.items()) if address in addrs), None)


def local_interfaces() -> dict[str, list[str]]:
    """This network namespace's interfaces and their IPv4 addresses."""
    return {name: [a.address for a in addrs if a.family == socket.AF_INET]
            for name, addrs in psutil.net_if_addrs().items()}


def ccl_environment(worker_cpus_on_node: list[int], *, local_rank: int, local_world_size: int,
                    shares_core: bool = False) -> dict[str, str]:
    """oneCCL's settings for ranks that orch starts itself (no mpirun). oneCCL gives each local rank
    CCL_WORKER_COUNT cores of CCL_WORKER_AFFINITY, taken in CCL_LOCAL_RANK order.

    - CCL_ATL_TRANSPORT=ofi: the default transport, mpi, needs ranks started by mpirun;
    - CCL_ATL_SHM=1: ranks on one node exchange data through libfabric's shared-memory provider; without it
      they go through its tcp provider over loopback (2 ranks, 64 MiB: 46 ms against 258 ms, measured on
      this project's 2-vCPU machine under load);
    - CCL_PROCESS_LAUNCHER=none, CCL_LOCAL_RANK/SIZE: who is local is told, not asked of a launcher;
    - CCL_YIELD=sched_yield where the worker `shares_core` with the rank's compute thread (ccl_workers 0):
      with the default (pause, a spin) the two spin against each other on one core until the scheduler's
      time slice ends; 2 ranks, 4 KiB took 9.4 ms spinning and 0.06 ms yielding (64 MiB: 37 against 22 ms).

    >>> ccl_environment([7, 15], local_rank=1, local_world_size=2)["CCL_WORKER_AFFINITY"]
    '7,15'
    """
    if not worker_cpus_on_node or len(worker_cpus_on_node) % local_world_size:
        raise ValueError(f"oneCCL worker cores {worker_cpus_on_node} cannot be shared evenly by "
                         f"{local_world_size} local rank(s)")
    env = {"CCL_WORKER_COUNT": str(len(worker_cpus_on_node) // local_world_size),
           "CCL_WORKER_AFFINITY": ",".join(map(str, worker_cpus_on_node)),
           "CCL_LOCAL_RANK": str(local_rank), "CCL_LOCAL_SIZE": str(local_world_size),
           "CCL_PROCESS_LAUNCHER": "none", "CCL_ATL_TRANSPORT": "ofi", "CCL_ATL_SHM": "1"}
    if shares_core:
        env["CCL_YIELD"] = "sched_yield"
    return env


def free_port() -> int:
    """A port free now, for a test or a benchmark that starts ranks by hand. Trials do not use it: the port is
    free only until someone else binds it, and two trials starting at once could both be told the same one
    (`reserve_rendezvous` holds the port instead)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def reserve_rendezvous(addr: str) -> socket.socket:
    """A listening socket on `addr` at a port the kernel picks, for a trial's rendezvous: rank 0's launcher
    holds it from the moment the port is chosen and hands it to rank 0, whose TCPStore serves on it
    (run.rank.session reads RENDEZVOUS_FD_ENV_VAR). No other process can take the port in between, so trials
    started at the same moment never share one; peers that connect before rank 0 is up wait in its backlog."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind((addr, 0))
        listener.listen(128)
    except OSError:
        listener.close()
        raise
    return listener


# The first thing a rank's new process runs, before the pinning prefix and the rank's command: instead of a
# preexec_fn, which runs between fork and exec of a launcher that has other threads (where only
# async-signal-safe work is safe, and CPython says so). It sets normal priority (Ray starts its workers, our
# launchers, at niceness 15, which the rank would inherit and then lose its core to any ordinary process on a
# shared node; lowering niceness needs CAP_SYS_NICE or RLIMIT_NICE, without which the rank keeps Ray's), the
# CPU list where no numactl or taskset applies it (argv[1], empty otherwise), then execs the rest of argv.
_START = ("import os,sys\n"
          "if sys.argv[1]=='1':\n try:\n  os.setpriority(os.PRIO_PROCESS,0,0)\n except OSError:\n  pass\n"
          "if sys.argv[2]:\n os.sched_setaffinity(0,[int(c) for c in sys.argv[2].split(',')])\n"
          "os.execv(sys.argv[3],sys.argv[3:])\n")


def start_prefix(cpus: list[int] | None = None, *, normal_priority: bool = True) -> list[str]:
    """The command prefix that sets normal priority (and `cpus`, where given) in the new process, then execs
    the command after it: `[*start_prefix(), "/usr/bin/numactl", ...]`. Python without site (-S) and isolated
    (-I): a few milliseconds."""
    return [sys.executable, "-S", "-I", "-c", _START, "1" if normal_priority else "0", ",".join(map(str, cpus or []))]


class NodeInfo(TypedDict):
    """Where a process runs (`node_info`)."""

    node_id: str | None         # its Ray node's id (None outside Ray)
    ip: str                     # the node's address (loopback outside Ray)
    ifname: str | None          # the interface that carries it (None when none here does)
    hostname: str
    pid: int


def node_info() -> NodeInfo:
    """Where this process runs: its Ray node id and address (None and loopback outside Ray), and the interface
    that carries the address (None when none here does)."""
    try:
        import ray

        node_id = ray.get_runtime_context().get_node_id()
        ip = ray.util.get_node_ip_address()
    except Exception:  # plain-Python use (tests without Ray)
        node_id, ip = None, "127.0.0.1"
    return {"node_id": node_id, "ip": ip, "ifname": interface_of(ip, local_interfaces()),
            "hostname": socket.gethostname(), "pid": os.getpid()}


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def rank_command(job: RankJob, job_file: Path) -> tuple[list[str], str | None]:
    """What a rank process runs after its pinning prefix, and its working folder (None: the rank's work folder):
    orch's rank entry point, or for a script's trial the script's (run.driver.script_job.script_command). The one place
    a rank's command is made, so that anything that starts a rank (a probe of one rank too) starts it alike."""
    if job.script is not None:
        from orchestrator.run.driver.script_job import script_command

        return script_command(job_file), job.script.cwd
    return [sys.executable, "-m", "orchestrator.run.rank.main", str(job_file)], None


@dataclass(slots=True)
class MemoryWatch:
    """The rank's private memory (run.procmem: resident less file-backed, the rank's and its child processes'),
    from the kernel's counters at every check: its peak so far, its libraries' pages, and whether it exceeds the
    budget. The same definition as the probe's, so that the records and the plan agree whatever else runs."""

    root: psutil.Process
    budget_mib: float
    peak_private_mib: float = 0.0
    shared_mib: float = 0.0      # the rank's file-backed pages (its libraries) at their largest: once per node
    estimate_mib: float = 0.0    # private now
    seen: list[psutil.Process] = field(default_factory=list)   # every process of the tree seen so far
    _procs: list[psutil.Process] = field(default_factory=list)
    _tree_at: float = -TREE_EVERY_S

    def over_budget(self, now: float) -> str | None:
        """Update the peak; the reason to stop the rank when its private memory exceeds the budget, else None."""
        if now - self._tree_at >= TREE_EVERY_S:
            self._procs, self._tree_at = _tree(self.root), now
            known = {p.pid for p in self.seen}
            self.seen.extend(p for p in self._procs[1:] if p.pid not in known)
        total = root_peak = root_now = 0.0
        for p in self._procs:
            read = read_memory(p.pid)
            if read is None:
                continue
            total += read.private_mib
            if p.pid == self.root.pid:
                root_peak, root_now = read.peak_private_mib, read.private_mib
                self.shared_mib = max(self.shared_mib, read.file_mib)
        self.estimate_mib = total
        # The root's own high-water mark catches a peak between two reads; its children's are summed as read.
        self.peak_private_mib = max(self.peak_private_mib, total, total - root_now + root_peak)
        if total > self.budget_mib:
            return (f"private memory {total:,.0f} MiB exceeded the rank's budget {self.budget_mib:,.0f} MiB; "
                    "stopped before the kernel's OOM killer")
        return None

    def poll_s(self) -> float:
        """How long to sleep before the next check: a runaway rank grows fast once near its budget."""
        return POLL_NEAR_BUDGET_S if self.estimate_mib > NEAR_BUDGET * self.budget_mib else POLL_S


@dataclass(frozen=True, kw_only=True, slots=True)
class RankLimits:
    """What a rank's launcher holds it to: its private memory, its start-up (from the process's creation until it
    is ready to step), the longest stretch without progress once it steps, and the trial's wall-clock deadline
    (a time.time() instant)."""

    budget_mib: float
    startup_timeout_s: float
    step_timeout_s: float
    deadline: float


@dataclass(slots=True)
class Outcome:
    """How one rank ended: the launcher's report to the driver (it satisfies core.measured.rank_end.RankEnding)."""

    status: RankStatus
    reason: str | None
    exit_code: int | None
    peak_private_mib: float      # run.procmem: resident less file-backed, at its peak
    result: RankResult | None    # set when status is ok
    log_tail: str
    log: str | None              # the whole log (bounded) when the rank did not succeed
    pin: str
    pid: int
    shared_mib: float = 0.0      # its file-backed pages (its libraries) at their largest: a node holds them once


class RankLauncher:
    """One rank: `start` it, then `supervise` until it ends; `status` and `stop` may be called meanwhile
    from other threads (the Ray actor runs with max_concurrency > 1)."""

    def __init__(self, workdir: str):
        self.workdir = Path(workdir)
        # Under the shared /tmp, every folder down to the rank's is private and checked (io.files.WORK_ROOT).
        if self.workdir.is_relative_to(WORK_ROOT):
            private_dirs(self.workdir, WORK_ROOT)
        else:
            self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.proc: subprocess.Popen | None = None
        self.pin = ""
        self._stop = threading.Event()
        self._stop_reason = ""
        self._started_at = 0.0   # time.monotonic() when the rank process was started
        self._seen: list[psutil.Process] = []   # every process seen in the rank's tree (MemoryWatch adds them)

    # --- the rank process ---------------------------------------------------------------------------
    def start(self, job: RankJob, env: dict[str, str], cpus: list[int], numa_nodes: list[int],
              rendezvous: socket.socket | None = None) -> int:
        """Start the rank process; `rendezvous` (rank 0 of a trial): the listening socket its TCPStore serves
        on, passed to it as a file descriptor and closed here once the rank holds it."""
        job_file = self.workdir / "job.json"
        # Progress and result files live next to the process, on its node.
        job = replace(job, progress_path=str(self.workdir / "progress.json"),
                      result_path=str(self.workdir / "result.json"))
        _write_new(job_file, job.to_json().encode())
        self.job = job
        prefix, self.pin = pin_prefix(list(cpus), list(numa_nodes))
        prefix = [*start_prefix(None if prefix else list(cpus)), *prefix]
        self.log_path = self.workdir / "rank.log"
        env = {**env, LAUNCHER_PID_ENV_VAR: str(os.getpid())}
        passed: tuple[int, ...] = ()
        if rendezvous is not None:
            passed = (rendezvous.fileno(),)
            env[RENDEZVOUS_FD_ENV_VAR] = str(rendezvous.fileno())
        command, cwd = rank_command(job, job_file)
        self._started_at = time.monotonic()
        with os.fdopen(create_private(self.log_path), "wb") as log:
            self.proc = subprocess.Popen(
                [*prefix, *command], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd or str(self.workdir),
                start_new_session=True,  # its own process group: its end kills every process it started too
                pass_fds=passed)
        if rendezvous is not None:
            rendezvous.close()   # the rank holds it now
        try:
            niceness = psutil.Process(self.proc.pid).nice()
        except psutil.Error:
            niceness = 0
        if niceness:
            self.pin += f"; niceness {niceness} (Ray's worker niceness: this launcher may not lower it)"
        return self.proc.pid

    def _pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def progress(self) -> RankProgress | None:
        """The rank's last progress report; None before it started or wrote one."""
        return read_progress(self.job.progress_path) if self.proc else None

    def stop(self, reason: str = "stopped by the driver") -> None:
        self._stop_reason = reason
        self._stop.set()
        self._kill()

    def _dump_stacks(self) -> None:
        """Ask a stuck rank where it is stuck: run.rank.main registers faulthandler on SIGUSR1, which writes
        every thread's Python stack to the log, so the record's log tail shows the hung call."""
        if self.proc is None:
            return
        try:
            os.kill(self.proc.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return
        time.sleep(STACK_DUMP_WAIT_S)

    def _exited(self) -> bool:
        """Whether the rank process has exited, without reaping it (WNOWAIT): until `_kill` reaps it, its pid,
        which is its process group's id, cannot go to another process, so the group is killed safely after its
        leader's end."""
        if self.proc is None or self.proc.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:   # reaped already
            return True

    def _kill(self) -> None:
        """End the rank's whole process group, also after a normal end: what the rank started (a script's
        subprocesses, DataLoader or multiprocessing workers, compile workers) must not outlive its trial on the
        trial's cores; then any process seen in its tree that left the group (setsid); then reap the rank."""
        if self.proc is None:
            return
        if self.proc.returncode is None:   # not reaped: the group id is still the rank's (see _exited)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in self._seen:
            try:
                process.kill()   # psutil checks it is the same process (its start time), not a reused pid
            except psutil.Error:
                pass
        self.proc.wait()

    def supervise(self, limits: RankLimits) -> Outcome:
        """Block until the rank ends or is ended by one of its `limits`."""
        if self.proc is None:
            raise RuntimeError("supervise() before start()")
        memory = MemoryWatch(psutil.Process(self.proc.pid), limits.budget_mib)
        memory.seen = self._seen
        progress: tuple[str, int, int] | None = None
        progress_at = time.monotonic()
        ended: tuple[RankStatus, str] | None = None
        while ended is None and not self._exited():
            now = time.monotonic()
            if self._stop.is_set():
                ended = RankStatus.STOPPED, self._stop_reason
            elif (oom := memory.over_budget(now)) is not None:
                ended = RankStatus.OOM, oom
            elif (flood := self._log_over_bound()) is not None:
                ended = RankStatus.FAILED, flood
            else:
                s = read_progress(self.job.progress_path)
                key = None if s is None else (s.phase, s.step, s.repeat)
                if key != progress:
                    progress, progress_at = key, now
                ended = self._hung(s, limits, now, progress_at)
                if ended is None and time.time() > limits.deadline:
                    ended = RankStatus.TIMEOUT, "the trial exceeded its wall-clock limit (measure.timeout_s)"
                if ended is None:
                    time.sleep(memory.poll_s())
        if ended is None and self._stop.is_set():
            # stop() killed the process between two checks: its SIGKILL is the driver's, not the kernel's, and the
            # record must name the rank whose end made the driver stop this one
            ended = RankStatus.STOPPED, self._stop_reason
        return self._ended(ended, memory)

    def _hung(self, s: RankProgress | None, limits: RankLimits, now: float,
              progress_at: float) -> tuple[RankStatus, str] | None:
        """The watchdog's verdict on a rank still running: start-up is judged by its own budget from the
        process's start (slow is not hung: importing torch on a loaded CPU shows no steps), every later phase
        by the time since its last progress."""
        if s is None or s.phase in STARTUP_PHASES:
            if now - self._started_at <= limits.startup_timeout_s:
                return None
            if self.job.script is not None:
                from orchestrator.run.driver.script_job import startup_timeout_reason

                return RankStatus.TIMEOUT, startup_timeout_reason(limits.startup_timeout_s, s, self._pid())
            where = "before its first progress report" if s is None else f"{s.phase}, after {s.stage or 'start'}"
            return RankStatus.TIMEOUT, (f"not ready after {limits.startup_timeout_s:g} s of start-up ({where}): "
                                        "a stuck import, rendezvous or model build (measure.startup_timeout_s)")
        if now - progress_at <= limits.step_timeout_s:
            return None
        return RankStatus.TIMEOUT, (f"no progress for {limits.step_timeout_s:g} s ({s.phase}, step {s.step}): a hung "
                                    "collective or a stuck step")

    def _ended(self, ended: tuple[RankStatus, str] | None, memory: MemoryWatch) -> Outcome:
        """Stop the rank (its stacks first, if it hung) and say how it ended; `ended` is the watchdog's
        verdict, None when the process exited by itself."""
        if ended is not None and ended[0] == RankStatus.TIMEOUT:
            self._dump_stacks()
        self._kill()
        code = self.proc.returncode if self.proc is not None else None
        if ended is not None:
            return self._outcome(ended[0], ended[1], code, memory, None)
        written = Path(self.job.result_path).is_file()
        last = read_progress(self.job.progress_path)
        reported = getattr(last, "phase", None) == Phase.DONE
        status, reason = classify_exit(code, result_written=written, reported_done=reported,
                                       log_end=self._log_text())
        if status == RankStatus.FAILED and last is not None and last.error:
            reason = f"{reason}: {last.error}"
        result = RankResult.from_json(read_nofollow(self.job.result_path).decode()) if status == RankStatus.OK else None
        return self._outcome(status, reason, code, memory, result)

    def _log_text(self) -> str:
        """The end of the rank's log (its last LOG_KEEP_BYTES, read from there: the log may be long)."""
        try:
            return read_nofollow(self.log_path, tail_bytes=LOG_KEEP_BYTES).decode("utf-8", "replace")
        except OSError:
            return ""

    def _log_over_bound(self) -> str | None:
        """Why the rank is stopped for its log's size (more than LOG_MAX_BYTES), or None."""
        try:
            size = os.stat(self.log_path, follow_symlinks=False).st_size
        except OSError:
            return None
        if size <= LOG_MAX_BYTES:
            return None
        return (f"its log passed {LOG_MAX_BYTES >> 20} MiB ({size:,} bytes): stopped before it fills the disk "
                "(a print in a loop?); the end of the log is kept")

    def _outcome(self, status: RankStatus, reason: str | None, code: int | None, memory: MemoryWatch,
                 result: RankResult | None) -> Outcome:
        text = self._log_text()
        tail = "\n".join(text.splitlines()[-LOG_TAIL_LINES:])
        return Outcome(status, reason, code, memory.peak_private_mib, result, tail,
                       None if status == RankStatus.OK else text, self.pin,
                       self.proc.pid if self.proc is not None else 0, shared_mib=memory.shared_mib)

    def cleanup(self) -> None:
        self._kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


class NodeLaunchers:
    """Every rank launcher of one node, for a whole sweep: the driver starts one of these as a Ray actor per
    node, once, instead of one actor per rank and trial (a new actor is a new Ray worker process: about
    1 s of start-up idle, 3 s under load, per trial). Each running rank has its `RankLauncher`, under its
    work folder as its key (unique: a trial's folder names its start time); calls for different keys run
    concurrently (the actor's max_concurrency)."""

    def __init__(self) -> None:
        self._ranks: dict[str, RankLauncher] = {}
        self._rendezvous: dict[str, socket.socket] = {}   # rank key -> its reserved listening socket
        self._lock = threading.Lock()

    def node_info(self) -> NodeInfo:
        return node_info()

    def free_port(self) -> int:
        return free_port()

    def reserve_rendezvous(self, key: str, addr: str) -> int:
        """Reserve a rendezvous port for the rank `key` (a trial's rank 0): a socket listening on `addr`, held
        until `start(key, ...)` hands it to the rank (or `cleanup(key)` closes it); its port."""
        listener = reserve_rendezvous(addr)
        with self._lock:
            old = self._rendezvous.pop(key, None)
            self._rendezvous[key] = listener
        if old is not None:
            old.close()
        port: int = listener.getsockname()[1]
        return port

    def start(self, key: str, job: RankJob, env: dict[str, str], cpus: list[int], numa_nodes: list[int]) -> int:
        launcher = RankLauncher(key)
        with self._lock:
            if key in self._ranks:
                raise ValueError(f"rank {key} is already running on this node")
            self._ranks[key] = launcher
            rendezvous = self._rendezvous.pop(key, None)
        return launcher.start(job, env, cpus, numa_nodes, rendezvous=rendezvous)

    def supervise(self, key: str, limits: RankLimits) -> Outcome:
        return self._ranks[key].supervise(limits)

    def progress(self, key: str) -> RankProgress | None:
        launcher = self._ranks.get(key)
        return launcher.progress() if launcher is not None else None

    def stop(self, key: str, reason: str = "stopped by the driver") -> None:
        launcher = self._ranks.get(key)
        if launcher is not None:
            launcher.stop(reason)

    def cleanup(self, key: str) -> None:
        with self._lock:
            launcher = self._ranks.pop(key, None)
            rendezvous = self._rendezvous.pop(key, None)
        if rendezvous is not None:   # reserved for a rank that never started
            rendezvous.close()
        if launcher is not None:
            launcher.cleanup()


def _write_new(path: Path, data: bytes) -> None:
    """Write a new private file: nothing may be there already, a link planted by someone else included."""
    with os.fdopen(create_private(path), "wb") as fh:
        fh.write(data)
