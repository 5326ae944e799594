"""The job file (run.job): a rank's task is a union tagged by its kind. Every kind's task comes back from the file
as its own member, a rank entry that asks for another member is refused, and the sweep's work items build each
kind's task from the spec."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from orchestrator.core.measured.records import Kind
from orchestrator.run.job import (
    AllreduceTask,
    ConvergenceSettings,
    ConvergenceTask,
    PeakTask,
    ProbeTask,
    ProfileTask,
    RankJob,
    ScriptSettings,
    Steps,
    Task,
    ThroughputTask,
)

REPO = Path(__file__).resolve().parents[2]
SETTINGS = ConvergenceSettings(metric="accuracy", target=0.85, max_epochs=3, eval_every_epochs=0.5, lr_rule="sqrt",
                               base_lr=0.05, base_batch=32, warmup_epochs=0.0, global_batch=64)
TASKS = [
    ThroughputTask(steps=Steps(warmup=2, timed=5, repeats=3, data="stream")),
    ConvergenceTask(settings=SETTINGS),
    PeakTask(precision="bf16"),
    AllreduceTask(message_bytes=[4096, 2**20], precision="fp32"),
    ProfileTask(warmup_steps=3, steps=4, out_dir="/tmp/p", replay=False),
    ProbeTask(steps=Steps(warmup=1, timed=8, repeats=1)),
]


def _job(task, **over) -> RankJob:
    return RankJob(**{**dict(task=task, workload="classifier", params={"hidden": 8}, backend="gloo", local_batch=8),
                      **over})


@pytest.mark.parametrize("task", TASKS, ids=lambda t: str(t.kind))
def test_every_kind_s_task_comes_back_from_the_file_as_its_own_member(task):
    job = _job(task)
    text = job.to_json()
    assert json.loads(text)["task"]["kind"] == str(task.kind)      # the tag is in the file
    back = RankJob.from_json(text)
    assert back == job and type(back.task) is type(task)
    assert back.kind == task.kind and back.task_as(type(task)) == task


def test_the_tasks_above_are_every_member_of_the_union():
    """task_from_json reads a member back by the kind its default names, with no table to keep: a member added
    to `Task` is covered once it is added to TASKS, which this test asks for."""
    assert {type(t) for t in TASKS} == set(typing.get_args(Task))


def test_a_rank_entry_asking_for_another_kind_s_task_is_refused():
    job = _job(PeakTask(precision="fp32"))
    with pytest.raises(ValueError, match="a peak job is not a ConvergenceTask"):
        job.task_as(ConvergenceTask)
    with pytest.raises(ValueError, match="a peak job has no timed steps"):
        job.steps()
    assert _job(TASKS[-1]).steps() == Steps(warmup=1, timed=8, repeats=1)   # a probe times steps as a trial does


def test_a_script_s_job_keeps_its_task_and_its_script():
    script = ScriptSettings(path="/s/train.py", args=["--lr", "0.1"], sha256="ab" * 32, cwd="/s", metric="accuracy",
                            target=0.8, max_epochs=2.0)
    job = _job(ConvergenceTask(settings=SETTINGS), workload=None, script=script)
    back = RankJob.from_json(job.to_json())
    assert back.script == script and back.task_as(ConvergenceTask).settings == SETTINGS


def test_a_file_of_an_unknown_kind_is_refused():
    text = _job(PeakTask(precision="fp32")).to_json().replace('"peak"', '"gather"')
    with pytest.raises(ValueError, match="gather"):
        RankJob.from_json(text)


def test_the_sweep_s_items_build_each_kind_s_task_from_the_spec():
    """A sweep's work items, planned for a compact 2-core machine: each kind's job carries its own task, with the
    spec's measure section where the kind times steps and the spec's convergence section where it trains."""
    from conftest import two_core_avx2_machine

    from orchestrator.app.plan import plan_for
    from orchestrator.io.sweepfile import load_sweep
    from orchestrator.run.driver.kinds import item_types
    from orchestrator.run.driver.kinds.base import SweepContext

    sweep = load_sweep(REPO / "sweeps" / "classifier.yaml")
    topology, _ = two_core_avx2_machine()
    ctx = SweepContext(sweep, plan_for(sweep, topology, ccl_available=False), nodes=1)
    m, conv = sweep.spec.measure, sweep.spec.convergence
    members = {Kind.THROUGHPUT: ThroughputTask, Kind.CONVERGENCE: ConvergenceTask, Kind.PEAK: PeakTask,
               Kind.ALLREDUCE: AllreduceTask}
    seen = set()
    for kind in item_types():
        for item in kind.plan_items(ctx):
            job = item.job(ctx, item.planned)
            assert type(job.task) is members[item.KIND] and job.kind == item.KIND
            if isinstance(job.task, ThroughputTask):
                assert job.task.steps == Steps(warmup=m.warmup_steps, timed=m.timed_steps, repeats=m.repeats,
                                               data=m.data)
            if isinstance(job.task, ConvergenceTask):
                settings = job.task.settings
                assert (settings.metric, settings.target) == (conv.metric, conv.target)
                assert settings.global_batch == item.planned.trial.global_batch
            seen.add(item.KIND)
    assert seen >= {Kind.THROUGHPUT, Kind.CONVERGENCE, Kind.PEAK}, seen
