"""A script's ranks without Ray: the user's script run as it is by the launcher, its `orch.script` calls keeping
the timing rules, and every way a script can go wrong ending as a failed rank that names its cause.

The cases of one test run side by side (each its own launcher and rendezvous): a rank process spends most of
its few seconds importing torch."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from conftest import CPUS, run_launchers

from orchestrator.core.measured.rank_end import RankStatus
from orchestrator.core.measured.records import Kind
from orchestrator.run.driver.script_job import startup_timeout_reason
from orchestrator.run.job import (
    ConvergenceSettings,
    ConvergenceTask,
    RankJob,
    RankProgress,
    ScriptSettings,
    Steps,
    ThroughputTask,
)
from orchestrator.run.rank.script_reporter import cpu_backend

pytestmark = pytest.mark.slow   # real processes, seconds each: the second tier

HEAD = "import os, sys, time\nimport torch\nimport torch.distributed as dist\nimport orch.script\n"
STEP = "torch.ones(4).sum()\norch.script.step(samples=4)\n"

BAD = {
    "crash": (HEAD + "x = 1 / 0\n", {}),
    "silent": (HEAD + "print('done, without the reporter')\n", {}),
    "short": (HEAD + "for _ in range(3):\n" + textwrap.indent(STEP, "    "), {}),
    "exit3": (HEAD + "sys.exit(3)\n", {}),
    "batch": (HEAD + "for _ in range(9):\n    orch.script.step(samples=7)\n", {}),
    # the plan chose ccl; init_process_group() with no backend is gloo on CPU
    "backend": (HEAD + "dist.init_process_group()\nfor _ in range(9):\n" + textwrap.indent(STEP, "    "),
                {"backend": "ccl"}),
    # its own training workers, as many DDP examples start them
    "spawn": (HEAD + textwrap.dedent("""
        import torch.multiprocessing as mp

        def worker(index):
            for _ in range(9):
                orch.script.step(samples=4)

        if __name__ == "__main__":
            mp.spawn(worker, nprocs=2)
        """), {}),
    "changed": (HEAD + "for _ in range(9):\n" + textwrap.indent(STEP, "    "), {"sha256": "0" * 64}),
    "never": (HEAD + "time.sleep(3600)\n", {}),
}
# Short: the case waits it out whole, while the others (each its own trial, all at once) end on their own.
NEVER_STARTUP_S = 20


def _script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def _job(script: Path, *, kind: Kind = Kind.THROUGHPUT, backend: str = "gloo", warmup: int = 1,
         **settings) -> RankJob:
    base = ScriptSettings(path=str(script), args=["--flag", "x"], sha256=hashlib.sha256(script.read_bytes()).hexdigest(),
                          cwd=str(script.parent), env={"ORCH_LOCAL_BATCH": "4"})
    script_settings = replace(base, **settings)
    task = ThroughputTask(steps=Steps(warmup=warmup, timed=2, repeats=2)) if kind == Kind.THROUGHPUT else \
        ConvergenceTask(settings=ConvergenceSettings(
            metric=script_settings.metric or "", target=script_settings.target or 0.0,
            max_epochs=script_settings.max_epochs or 1.0, eval_every_epochs=1.0, lr_rule="none",
            base_lr=script_settings.lr or 0.0, base_batch=4, warmup_epochs=0.0, global_batch=4))
    return RankJob(task=task, workload="script", params={}, backend=backend, local_batch=4, threads=1,
                   init_timeout_s=120, script=script_settings)


def _run(tmp_path: Path, cases: dict[str, tuple[RankJob, int, float]]) -> dict:
    """Each case (its job, its ranks, its start-up budget) as its own trial, all at once: the ranks' outcomes."""
    def one(name: str, job: RankJob, ranks: int, startup_s: float) -> list:
        folder = tmp_path / name
        folder.mkdir()
        return run_launchers(folder, [(job, [CPUS[r % len(CPUS)]]) for r in range(ranks)], step_timeout_s=60,
                             timeout_s=240, startup_timeout_s=startup_s)

    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        futures = {name: pool.submit(one, name, *case) for name, case in cases.items()}
        return {name: future.result() for name, future in futures.items()}


def test_a_bad_script_is_a_failed_rank_that_names_its_cause(tmp_path):
    cases = {}
    for name, (text, settings) in BAD.items():
        backend = settings.pop("backend", "gloo")
        job = _job(_script(tmp_path, name, text), backend=backend, **settings)
        cases[name] = (job, 1, NEVER_STARTUP_S if name == "never" else 240)
    ends = {name: outcomes[0] for name, outcomes in _run(tmp_path, cases).items()}
    expected = {
        "crash": "ZeroDivisionError: division by zero",
        "silent": "the script ended without calling orch.script.step()",
        "short": "the script ended after 3 step(s), before the trial's 5 (1 warm-up, 2 × 2 timed)",
        "exit3": "the script exited with status 3",
        "batch": "step 1 of the script had 7 samples on rank 0, but the trial's local batch is 4",
        "backend": "the script joined torch.distributed with backend gloo, but the plan chose ccl",
        "spawn": "the script started its own training processes",
        "changed": "changed since the sweep was planned",
        "never": f"the script did not call orch.script.step() within {NEVER_STARTUP_S} s of its start",
    }
    for name, text in expected.items():
        end = ends[name]
        status = RankStatus.TIMEOUT if name == "never" else RankStatus.FAILED
        assert end.status == status and text in (end.reason or ""), (name, end.reason, end.log_tail[-2000:])
        assert "Traceback" not in (end.reason or "") and end.result is None
    assert "its process tree" not in ends["never"].reason   # no processes of its own: no hint about them
    # the crash's traceback is in the log, for the record's log tail
    assert "Traceback" in ends["crash"].log_tail and "x = 1 / 0" in ends["crash"].log_tail


CONVERGING = HEAD + textwrap.dedent("""
    dist.init_process_group()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(100):
        for _ in range(5):
            optimizer.zero_grad()
            model(torch.randn(4, 4)).sum().backward()
            optimizer.step()
            orch.script.step(samples=4)
        if dist.get_rank() == 0:   # rank 0 evaluates alone while the others wait for it, as many scripts do
            orch.script.metric("accuracy", ACCURACY(epoch), epoch=epoch + 1)
        dist.barrier()
    raise SystemExit("orch never ended the script")
    """)

TIMED = HEAD + textwrap.dedent("""
    dist.init_process_group()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    orch.script.model(model)
    orch.script.flops(per_sample=123.0)
    print("argv", sys.argv[1:], "cwd", os.getcwd(), "batch", os.environ["ORCH_LOCAL_BATCH"], flush=True)
    for _ in range(100):
        optimizer.zero_grad()
        model(torch.randn(4, 16)).sum().backward()
        optimizer.step()
        orch.script.step(samples=4)
    raise SystemExit("orch never ended the script")
    """)


def test_scripts_are_timed_and_stopped_by_the_trial(tmp_path):
    conv = dict(kind=Kind.CONVERGENCE, metric="accuracy", target=0.8, max_epochs=5.0, lr=0.05)
    reaching = _script(tmp_path, "reaching", CONVERGING.replace("ACCURACY(epoch)", "0.5 + 0.2 * epoch"))
    capped = _script(tmp_path, "capped", CONVERGING.replace("ACCURACY(epoch)", "0.1"))
    # warmup_steps 0 (a job made outside a sweep file) still excludes one: the first step's start is not seen
    cases = {"timed": (_job(_script(tmp_path, "timed", TIMED), warmup=0), 2, 240),
             "reaching": (_job(reaching, **conv), 2, 240),
             "capped": (_job(capped, **{**conv, "max_epochs": 2.0}), 1, 240)}
    runs = _run(tmp_path, cases)
    for name, outcomes in runs.items():
        assert [o.status for o in outcomes] == [RankStatus.OK] * len(outcomes), (name, [o.reason for o in outcomes])

    timed = [o.result for o in runs["timed"]]
    for result in timed:
        t = result.throughput
        assert len(t.repeat_s) == 2 and t.timed_s == pytest.approx(sum(t.repeat_s))
        assert t.train_flops_per_sample == 123.0 and t.gradient_bytes == 4 * (16 * 4 + 4) and t.data_wait_s is None
        assert t.train_flops_rule == "stated"    # the script's figure: orch counted nothing
        assert result.applied["script_args"] == ["--flag", "x"] and result.applied["flops_per_sample"].startswith(
            "the script")
        assert list(result.startup_breakdown_s) == ["interpreter", "import_torch", "orch_store", "script"]
    assert not any("orch never ended the script" in o.log_tail for o in runs["timed"])   # ended inside step()
    # The script ran as `python SCRIPT ARGS` in its folder, with the grid's values in its environment.
    assert f"argv ['--flag', 'x'] cwd {tmp_path} batch 4" in runs["timed"][0].log_tail

    reports = [o.result.convergence for o in runs["reaching"]]
    assert reports[0].converged and reports[0].epochs_to_target == 3.0
    assert reports[0].curve == [[1.0, 0.5], [2.0, 0.7], [3.0, 0.9]] and reports[0].steps_per_epoch == 5
    assert reports[0].lr == 0.05 and reports[1].converged   # rank 1 stopped at the step rank 0 posted
    assert "orch never ended the script" not in runs["reaching"][1].log_tail
    capped_report = runs["capped"][0].result.convergence
    assert not capped_report.converged and capped_report.epochs_to_target is None and capped_report.epochs_run == 2.0


def test_the_reporter_does_nothing_outside_orch_and_imports_no_torch(tmp_path):
    code = ("import sys, orch.script as s; s.step(samples=3); s.metric('accuracy', 0.5, epoch=1); s.flops(1.0); "
            "s.model(None); print(s.active(), sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False []"


def test_the_example_script_runs_as_before_outside_orch():
    example = Path(__file__).resolve().parents[2] / "examples" / "ddp_script" / "train.py"
    out = subprocess.run([sys.executable, str(example), "--epochs", "1", "--train-samples", "256", "--test-samples",
                          "64"], capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("epoch 1: accuracy ")


def test_the_start_up_timeout_says_whether_the_script_ran_and_what_it_started():
    before = startup_timeout_reason(30, RankProgress(stage="import_torch"), pid=0)
    assert "after import_torch), before the script started" in before
    alone = startup_timeout_reason(30, RankProgress(stage="script"), pid=2**22 + 1)   # no such process
    assert "did not call orch.script.step() within 30 s" in alone and "process tree" not in alone
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = startup_timeout_reason(30, RankProgress(stage="script"), pid=os.getpid())
    finally:
        child.kill()
        child.wait()
    assert "its process tree holds" in started and "did it start workers of its own?" in started


def test_the_backend_of_cpu_tensors_is_read_from_the_config():
    assert cpu_backend("cpu:gloo,cuda:nccl") == "gloo" and cpu_backend("ccl") == "ccl"
    assert cpu_backend("cuda:nccl").startswith("none for CPU tensors")


# --- what a script's trial runs and leaves behind ------------------------------------------------------------

CHILD = HEAD + textwrap.dedent("""
    import subprocess
    child = subprocess.Popen(["sleep", "600"])      # a helper of the script's own, never waited for
    with open(os.environ["CHILD_PID_FILE"], "w") as fh:
        fh.write(str(child.pid))
    for _ in range(9):
        torch.ones(4).sum()
        orch.script.step(samples=4)
    """)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE   # killed, waiting for init to reap it
    except psutil.NoSuchProcess:
        return True


def test_a_scripts_own_processes_end_with_its_trial_after_a_normal_end(tmp_path):
    """The rank ends normally (the reporter's os._exit once the timed steps are done); the `sleep 600` it started
    must not outlive the trial on the trial's cores: the launcher ends the rank's whole process group."""
    pid_file = tmp_path / "child.pid"
    job = _job(_script(tmp_path, "child", CHILD), env={"ORCH_LOCAL_BATCH": "4", "CHILD_PID_FILE": str(pid_file)})
    (end,) = _run(tmp_path, {"child": (job, 1, 240)})["child"]
    assert end.status == RankStatus.OK, (end.reason, end.log_tail[-2000:])
    pid = int(pid_file.read_text())
    try:
        assert _gone(pid), f"the script's child {pid} outlived its trial"
    finally:
        if not _gone(pid):
            os.kill(pid, 9)


VERSIONED = HEAD + textwrap.dedent("""
    print("VERSION", VERSION, flush=True)
    dist.init_process_group()
    for _ in range(9):
        torch.ones(4).sum()
        orch.script.step(samples=4)
    """)


def test_the_bytes_a_rank_runs_are_the_bytes_it_hashed(tmp_path):
    """Rank 1 checks the script's hash, then waits for rank 0's rendezvous store; the script is edited meanwhile
    (rank 0 is planned with the new version). Rank 1 must run the version it checked, not read the file again."""
    from orchestrator.run.driver.launcher import RankLauncher, free_port, rank_environment
    from orchestrator.run.driver.supervision import Limits, LocalRanks, supervise

    script = _script(tmp_path, "versioned", "VERSION = 1\n" + VERSIONED)
    planned = _job(script)
    port = free_port()
    launchers = []

    def start(rank: int, job: RankJob) -> None:
        launcher = RankLauncher(str(tmp_path / f"rank{rank}"))
        env = rank_environment(dict(os.environ), cpus=[CPUS[rank % len(CPUS)]], ccl_cpus_on_node=[], backend="gloo",
                               rank=rank, local_rank=rank, world_size=2, local_world_size=2,
                               master_addr="127.0.0.1", master_port=port)
        launcher.start(job, env, [CPUS[rank % len(CPUS)]], [0])
        launchers.append(launcher)

    start(1, planned)
    waiting = launchers[0]
    deadline = time.monotonic() + 240
    while (p := waiting.progress()) is None or p.stage in (None, "interpreter"):   # checked, now importing torch
        assert waiting.proc.poll() is None and time.monotonic() < deadline, waiting._log_text()[-2000:]
        time.sleep(0.1)
    script.write_text("VERSION = 2\n" + VERSIONED)
    start(0, _job(script))
    launchers.reverse()   # rank order
    started = time.time()
    ends = supervise(LocalRanks(launchers), Limits([4000] * 2, 60, started + 240, 240), started,
                     stop=threading.Event()).outcomes
    assert [e.status for e in ends] == [RankStatus.OK] * 2, [(e.reason, e.log_tail[-1000:]) for e in ends]
    assert "VERSION 1" in ends[1].log_tail and "VERSION 2" not in ends[1].log_tail
    assert "VERSION 2" in ends[0].log_tail


def test_a_changed_helper_beside_the_script_fails_the_rank(tmp_path):
    """The script's folder's Python files are in its fingerprint: a rank planned with other helpers fails."""
    from orchestrator.io.files import python_sources_sha256

    (tmp_path / "helper.py").write_text("X = 1\n")
    script = _script(tmp_path, "helped", HEAD + "import helper\nfor _ in range(9):\n" + textwrap.indent(STEP, "    "))
    planned = python_sources_sha256(script)
    (tmp_path / "helper.py").write_text("X = 2\n")
    (end,) = _run(tmp_path, {"helped": (_job(script, sources=planned), 1, 240)})["helped"]
    assert end.status == RankStatus.FAILED and "changed since the sweep was planned" in end.reason, end.reason
    assert f"a Python file in {tmp_path}" in end.reason
