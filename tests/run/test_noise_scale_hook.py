"""The gradient noise scale measured in real rank processes: the per-bucket DDP hook's squared norms against
the gradients computed directly, and B_simple recorded by convergence runs of 2 ranks (the hook, inside the
workload's own bf16 hook) and of 1 rank (two micro-batches)."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import run_launchers

from orchestrator.core.measured.records import ConvergenceSection, NoiseScaleSection
from orchestrator.run.job import ConvergenceSettings, ConvergenceTask, RankJob
from orchestrator.run.rank import noise_scale

CPUS = sorted(os.sched_getaffinity(0))
CONVERGENCE = dict(metric="accuracy", target=0.85, max_epochs=3, eval_every_epochs=0.5, lr_rule="sqrt",
                   base_lr=0.05, base_batch=32, warmup_epochs=0.0)


def test_module_examples():
    assert doctest.testmod(noise_scale).failed == 0


def test_a_batch_that_is_not_per_sample_is_not_split():
    import torch

    assert noise_scale.split_batch((torch.zeros(1, 3),)) is None          # one sample
    assert noise_scale.split_batch((torch.zeros(4), torch.zeros(3))) is None   # sizes disagree
    assert noise_scale.split_batch((torch.zeros(4), "labels")) is None
    first, second, n1, n2 = noise_scale.split_batch(({"x": torch.arange(6), "y": list(range(6))},))
    assert (n1, n2) == (3, 3) and first[0]["y"] == [0, 1, 2] and second[0]["x"].tolist() == [3, 4, 5]


# Two gloo ranks in plain processes: the hook's per-bucket norms against each rank's own gradient (DDP's
# no_sync), and the averaged gradient's norm after the backward against the mean of the two, over several
# buckets, with and without the bf16 hook inside it.
WORKER = textwrap.dedent('''
    import json, os, sys
    import torch, torch.distributed as dist
    from orch.workload import DdpOptions
    from orchestrator.run.rank import ddp
    from orchestrator.run.rank.noise_scale import NOISE_ATTR, grad_squared_norm

    rank, hook = int(os.environ["RANK"]), sys.argv[1]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                              torch.nn.Linear(64, 8))
    model = ddp.wrap(net, DdpOptions(comm_hook=hook, bucket_mb=0.01), noise_scale=True)   # 3 buckets
    state = getattr(model, NOISE_ATTR)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(16, 64), torch.randint(0, 8, (16,))
    loss = lambda: torch.nn.functional.cross_entropy(model(x), y)
    for _ in range(2):           # DDP rebuilds its buckets after the first step: measure later ones
        loss().backward()
        model.zero_grad(set_to_none=True)
    with model.no_sync():
        loss().backward()
    local = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone()
    model.zero_grad(set_to_none=True)
    state.clear()
    loss().backward()
    synced = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    both = [torch.zeros_like(local) for _ in range(2)]
    dist.all_gather(both, local)
    mean = (both[0] + both[1]) / 2
    print(json.dumps({"buckets": len(state.local), "hook_local": sum(state.local),
                      "direct_local": float(local.dot(local)), "hook_synced": grad_squared_norm(model),
                      "direct_synced": float(synced.dot(synced)), "mean_sq": float(mean.dot(mean))}), flush=True)
    dist.destroy_process_group()
    # Out without the interpreter's teardown: under load, gloo's threads were once still joinable when the C++
    # statics went ("terminate called without an active exception", exit 134) after everything above had passed.
    os._exit(0)
''')


@pytest.mark.needs_cpus(2)
@pytest.mark.parametrize("hook", ["none", "bf16"])
def test_the_hook_measures_the_local_and_the_averaged_gradient(tmp_path, hook):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    from conftest import free_port

    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    procs = [subprocess.Popen([sys.executable, str(script), hook], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    results = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    tolerance = 2e-2 if hook == "bf16" else 1e-5      # bf16 on the wire: 8 bits of mantissa
    for r in results:
        assert r["buckets"] >= 2, r
        assert r["hook_local"] == pytest.approx(r["direct_local"], rel=1e-5)
        assert r["hook_synced"] == pytest.approx(r["direct_synced"], rel=tolerance)
        assert r["hook_synced"] == pytest.approx(r["mean_sq"], rel=tolerance)
    assert results[0]["hook_local"] != pytest.approx(results[1]["hook_local"], rel=1e-3)   # each rank its own


def _job(**over) -> RankJob:
    base = dict(workload="classifier", params={"ddp_comm_hook": "bf16", "hidden": 64}, backend="gloo",
                local_batch=32, threads=1)
    return RankJob(**{**base, **over})


def _check_section(section: NoiseScaleSection, *, method: str, small: int, big: int, epochs_run: float) -> None:
    assert section.method == method and (section.small_batch, section.big_batch) == (small, big)
    assert section.b_simple is not None and section.b_simple > 0, section
    assert section.low is not None and section.low < section.b_simple
    assert section.high is None or section.high > section.b_simple
    assert section.at_epoch == pytest.approx(epochs_run) and section.steps > 0
    assert section.epochs and section.epochs[-1][0] == pytest.approx(epochs_run)
    # it survives the record's JSON unchanged, inside the convergence section
    conv = ConvergenceSection(converged=True).with_fields(noise_scale=section)
    assert ConvergenceSection.from_json(json.loads(json.dumps(conv.to_json()))).noise_scale == section


@pytest.mark.needs_cpus(2)
def test_a_two_rank_convergence_run_records_b_simple(tmp_path):
    job = _job(task=ConvergenceTask(settings=ConvergenceSettings(**CONVERGENCE, global_batch=64)))
    outcomes = run_launchers(tmp_path, [(job, [CPUS[0]]), (job, [CPUS[1]])])
    assert [o.status for o in outcomes] == ["ok", "ok"], [o.log_tail for o in outcomes]
    reports = [o.result.convergence for o in outcomes]
    assert reports[0].converged
    _check_section(reports[0].noise_scale, method="ddp", small=32, big=64, epochs_run=reports[0].epochs_run)
    assert reports[0].noise_scale == reports[1].noise_scale    # every rank holds the same averages


def test_a_one_rank_convergence_run_records_b_simple_from_micro_batches(tmp_path):
    # three epochs of 128 steps (the target is out of reach), every tenth step split: 38 steps measured
    settings = {**CONVERGENCE, "target": 0.999, "max_epochs": 3.0}
    job = _job(local_batch=64, task=ConvergenceTask(settings=ConvergenceSettings(**settings, global_batch=64)))
    outcomes = run_launchers(tmp_path, [(job, [CPUS[0]])])
    assert outcomes[0].status == "ok", outcomes[0].log_tail
    report = outcomes[0].result.convergence
    assert not report.converged and report.epochs_run == 3.0
    _check_section(report.noise_scale, method="micro-batches", small=32, big=64, epochs_run=3.0)
    assert report.noise_scale.steps == 3 * 128 // noise_scale.ONE_RANK_EVERY_STEPS
    assert [row[0] for row in report.noise_scale.epochs] == [1.0, 2.0, 3.0]


# Two gloo ranks stepping NoiseScale with every=4: only every 4th step takes the norms and the small all-reduce;
# the others leave the hook's state empty, and the section says how often it measured.
EVERY_WORKER = textwrap.dedent('''
    import json, os
    import torch, torch.distributed as dist
    from orch.workload import DdpOptions
    from orchestrator.run.rank import ddp
    from orchestrator.run.rank.noise_scale import NOISE_ATTR, NoiseScale

    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)

    class Loss(torch.nn.Module):       # what a workload hands orch: a module whose forward is the loss
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.net(x), y)

    model = ddp.wrap(Loss(), DdpOptions(comm_hook="none", bucket_mb=0.01), noise_scale=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    noise = NoiseScale(model, opt, world=2, local_batch=16, every=4)
    state = getattr(model, NOISE_ATTR)
    torch.manual_seed(1 + rank)
    local_after = []
    for step in range(12):
        noise.step((torch.randn(16, 32), torch.randint(0, 4, (16,))))
        local_after.append(len(state.local))
    section = noise.section(1.0)
    print(json.dumps({"local_after": local_after, "steps": section.steps, "every": section.every_steps,
                      "b_simple": section.b_simple}), flush=True)
    dist.destroy_process_group()
    os._exit(0)                        # as WORKER: no interpreter teardown behind gloo's threads
''')


@pytest.mark.needs_cpus(2)
def test_two_ranks_measure_every_kth_step_only(tmp_path):
    script = tmp_path / "every.py"
    script.write_text(EVERY_WORKER)
    from conftest import free_port

    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    procs = [subprocess.Popen([sys.executable, str(script)], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    for out in outs:
        r = json.loads(out[0].strip().splitlines()[-1])
        # steps 4, 8 and 12 (1-based) took the local norms; the others went through the hook untouched
        assert [n > 0 for n in r["local_after"]] == [i % 4 == 3 for i in range(12)], r
        assert r["steps"] == 3 and r["every"] == 4, r


def test_a_run_measures_more_often_where_an_epoch_has_few_steps():
    from orchestrator.core.measured.noise_scale import DDP_EVERY_STEPS, MEASURED_PER_EPOCH, every_steps

    assert every_steps(10_000) == DDP_EVERY_STEPS and every_steps(1) == 1
    assert all(steps // every_steps(steps) >= min(steps, MEASURED_PER_EPOCH) for steps in range(1, 500))
