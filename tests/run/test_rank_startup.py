"""A rank's start-up: what it imports for each job kind, its phase breakdown, and DDP's start-up broadcast
skipped only when the ranks already agree. Real rank processes (no Ray): `run.rank.main.main` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.run.driver.launcher import free_port
from orchestrator.run.job import AllreduceTask, PeakTask, RankJob, RankResult, Steps, ThroughputTask
from orchestrator.run.rank.process import StartupClock, process_started_at

pytestmark = pytest.mark.slow   # real processes, seconds each: the second tier

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torchvision", "workloads")   # a peak or all-reduce rank needs neither

# main() as the launcher runs it, then which of the packages named in argv[2] the process ended up with.
RUN_RANK = textwrap.dedent("""
    import json, sys
    from orchestrator.run.rank import main as rank_main
    code = rank_main.main(["rank_main", sys.argv[1]])
    packages = sys.argv[2].split(",")
    print(json.dumps({"code": code, "modules": sorted(m for m in sys.modules if m.split(".")[0] in packages)}))
    """)


def _env(rank: int = 0, world: int = 1, port: int = 0) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port or free_port()), "OMP_NUM_THREADS": "1"}


def _run_rank(tmp_path: Path, **job: object) -> tuple[dict, RankResult]:
    spec = dict(workload="retinanet", params={}, backend="gloo", local_batch=1, threads=1,
                progress_path=str(tmp_path / "progress.json"), result_path=str(tmp_path / "result.json"))
    job_file = tmp_path / "job.json"
    job_file.write_text(RankJob(**{**spec, **job}).to_json())  # type: ignore[arg-type]
    run = subprocess.run([sys.executable, "-c", RUN_RANK, str(job_file), ",".join(HEAVY)], env=_env(), capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    return report, RankResult.from_json((tmp_path / "result.json").read_text())


def _assert_breakdown(result: RankResult, phases: list[str]) -> None:
    assert result.started_at is not None and result.ready_at is not None and result.startup_breakdown_s
    assert list(result.startup_breakdown_s) == phases
    # each phase that does work took time (a lap of 0 is a phase never timed: two clock reads at one point;
    # laps are rounded to 0.1 ms, and a barrier among ranks already waiting may be that fast)
    working = [p for p in phases if p != "barrier"]
    assert all(result.startup_breakdown_s[p] > 0 for p in working), result.startup_breakdown_s
    # the phases add up to the rank's whole start-up (each lap is rounded to 0.1 ms)
    assert sum(result.startup_breakdown_s.values()) == pytest.approx(result.ready_at - result.started_at, abs=0.01)


def test_peak_rank_imports_neither_torchvision_nor_a_workload(tmp_path):
    # fp32 and a small GEMM would do; the protocol's size is fixed, fp32 keeps it quick on any CPU
    report, result = _run_rank(tmp_path, task=PeakTask(precision="fp32"))
    assert report["modules"] == []
    assert result.peak is not None and result.peak.gflops > 0
    _assert_breakdown(result, ["interpreter", "import_torch", "import_protocol"])


def test_allreduce_rank_imports_neither_torchvision_nor_a_workload(tmp_path):
    report, result = _run_rank(tmp_path, task=AllreduceTask(message_bytes=[4096], precision="fp32"))
    assert report["modules"] == []
    assert result.allreduce is not None and len(result.allreduce.time_s) == 1
    _assert_breakdown(result, ["interpreter", "import_torch", "import_protocol", "rendezvous", "barrier"])


def test_training_rank_times_its_workload_imports_apart_from_building(tmp_path):
    report, result = _run_rank(tmp_path, task=ThroughputTask(steps=Steps(warmup=1, timed=1, repeats=1)),
                               workload="classifier",
                               params={"hidden": 16, "train_samples": 64, "test_samples": 16}, local_batch=8)
    assert "workloads.classifier.trainer" in report["modules"] and "torchvision" not in report["modules"]
    _assert_breakdown(result, ["interpreter", "import_torch", "import_protocol", "rendezvous", "import_workload",
                               "build", "barrier"])   # one rank: no DDP


def test_process_started_at_reads_proc_stat_and_tolerates_its_absence():
    started = process_started_at()
    assert started is not None
    # The kernel's record of this process's creation as psutil reads it (the same field, its own parse, against
    # /proc/stat's boot time in whole seconds): the two agree within that second, however long ago the run began.
    assert started == pytest.approx(psutil.Process().create_time(), abs=1.5)
    assert process_started_at("garbage") is None
    # A real /proc/<pid>/stat line (from `cat /proc/self/stat` on Linux 6.x), its name replaced by one with
    # spaces and parentheses: the start time is field 22, 168564 ticks after boot. Its neighbours differ
    # from it (num_threads 1 and itrealvalue 0 before, vsize 3133440 after: the kernel always writes 0 for
    # itrealvalue), so a parse shifted by one field either way lands ~1685 s or ~29600 s off.
    stat = ("14918 (python -m x (rank 0) :) S 14915 14915 3836 0 -1 4194304 103 0 0 0 0 0 0 0 20 0 1 0 168564 "
            "3133440 400 18446744073709551615 93843760308224 93843760328105 140720645480352 0 0 0 0 0 0 0 0 0 17 "
            "1 0 0 0 0 0 93843760344112 93843760345728 93844501118976 140720645487316 140720645487336 "
            "140720645487336 140720645488619 0")
    boot_epoch = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)   # when the machine booted
    started = process_started_at(stat)
    boot_epoch_after = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    ticks_s = 168564 / os.sysconf("SC_CLK_TCK")
    # The boot instant, read twice around the call, moves only by the gap between two clock reads (and NTP
    # slewing): 0.05 s is ample for that on a busy machine and far below a one-field shift (~1685 s).
    assert started == pytest.approx(boot_epoch + ticks_s, abs=0.05)
    assert started == pytest.approx(boot_epoch_after + ticks_s, abs=0.05)


def test_startup_clock_without_a_start_time_leaves_the_first_phase_out():
    clock = StartupClock(None)
    clock.lap("interpreter")
    clock.ready("import_torch")
    assert list(clock.laps_s) == ["import_torch"] and clock.ready_at is not None


DDP_RANK = textwrap.dedent("""
    import json, os, sys, torch, torch.distributed as dist
    import torch.nn.parallel.distributed as ddp_module
    from orchestrator.run.rank import protocol
    broadcasts = []
    sync = ddp_module._sync_module_states   # DDP's start-up broadcast: count its calls
    ddp_module._sync_module_states = lambda *args, **kwargs: (broadcasts.append(1), sync(*args, **kwargs))[1]
    rank = int(sys.argv[1])
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0 if sys.argv[2] == "same" else rank)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
    if sys.argv[2] == "permuted" and rank == 1:   # same values, other places
        with torch.no_grad():
            net[0].weight.copy_(net[0].weight.flatten().flip(0).view(8, 8))
    same = protocol.same_on_every_rank(net)
    ddp = protocol.wrap_ddp(net)
    sums = [float(p.detach().double().sum()) for p in ddp.module.parameters()]
    dist.destroy_process_group()
    print(json.dumps({"same": same, "sums": sums, "broadcast": bool(broadcasts)}), flush=True)
    os._exit(0)   # as run.rank.main does: gloo's threads can abort interpreter teardown ("terminate called ...")
    """)


@pytest.mark.parametrize("case, agree", [("same", True), ("different", False), ("permuted", False)])
def test_ddp_skips_its_start_up_broadcast_only_when_every_rank_holds_the_same_weights(case, agree):
    env = _env(world=2)
    procs = [subprocess.Popen([sys.executable, "-c", DDP_RANK, str(rank), case], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**env, "RANK": str(rank)}) for rank in (0, 1)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert [r["same"] for r in reports] == [agree, agree]
    assert [r["broadcast"] for r in reports] == [not agree, not agree]
    # whichever way DDP started, every rank steps from the same weights (rank 0's when they differed)
    assert reports[0]["sums"] == reports[1]["sums"]
