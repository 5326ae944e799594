"""The public door (`orch.workload`) and how workloads are found: entry points, import paths, files; the
function adapter building and stepping an unmodified nn.Module; what a user's mistakes look like."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from orch.workload import DdpParams, ModelParams, RankContext, WorkloadError, ddp_options_of, model_workload, param
from orchestrator.io.workload_finder import UnknownWorkload, entry_points, find_workload, parse_params

TINYNET = Path(__file__).parent / "data" / "own_model" / "tinynet.py"


def test_importing_the_door_and_finding_a_builtin_imports_no_torch():
    code = ("import sys; import orch.workload; from orchestrator.io.workload_finder import find_workload; "
            "find_workload('classifier'); find_workload('retinanet'); print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('torch', 'torchvision', 'ray')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_builtins_are_entry_points_of_orch():
    found = {e.name: e for e in entry_points()}
    assert {"classifier", "chaos", "retinanet"} <= set(found)
    assert found["classifier"].dist.startswith("orch ")
    assert find_workload("classifier").source.startswith("entry point classifier = workloads.classifier")


def test_a_file_path_is_resolved_against_the_sweep_folder_and_made_absolute(tmp_path):
    found = find_workload("tinynet.py:workload", base=TINYNET.parent)
    assert found.ref == f"{TINYNET.resolve()}:workload" and found.workload.name == "tinynet"
    assert found.workload.metrics == ("accuracy",)
    # A rank finds it again from the absolute reference, wherever its working folder is.
    assert find_workload(found.ref).workload is found.workload


def test_an_import_path_finds_a_module_attribute():
    found = find_workload("workloads.classifier.workload:ClassifierWorkload")
    assert found.workload.name == "classifier" and found.source.startswith("import path")


@pytest.mark.parametrize("name, expected", [
    ("nosuch", "no workload named 'nosuch': the entry points of group orch.workloads are: chaos, classifier"),
    ("nosuchpkg.mod:workload", "importing module nosuchpkg.mod failed: ModuleNotFoundError: No module named 'nosuchpkg'"),
    ("workloads.classifier.workload:Nope", "has no attribute 'Nope' (it has: "),
    ("workloads.classifier.workload:CP", "is a TypeVar, not an orch.workload.Workload"),
    ("/nonexistent/bench.py:workload", "file /nonexistent/bench.py does not exist"),
    (":x", "expected 'package.module:attribute' or 'path/file.py:attribute'"),
])
def test_a_name_that_does_not_resolve_says_what_was_tried(name, expected):
    with pytest.raises(UnknownWorkload) as err:
        find_workload(name)
    assert expected in str(err.value)


def test_a_file_that_fails_to_import_is_a_clear_error(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import nosuchmodule_xyz\n")
    with pytest.raises(UnknownWorkload, match="importing .*broken.py failed: ModuleNotFoundError"):
        find_workload(f"{broken}:workload")


def test_ddp_params_mixin_gives_the_switches_and_their_defaults():
    @dataclass(frozen=True, kw_only=True, slots=True)
    class Mine(DdpParams):
        depth: int = param(2, "layers", minimum=1)

    params, problems = parse_params(_stub(Mine), {"depth": 3, "ddp_bucket_mb": 50})
    assert problems == [] and ddp_options_of(params).bucket_mb == 50.0 and params.depth == 3
    _, problems = parse_params(_stub(Mine), {"ddp_comm_hook": "int8"})
    assert [p.path for p in problems] == ["workload.params.ddp_comm_hook"]


def _stub(params_type):
    class Stub:
        pass

    stub = Stub()
    stub.params_type = params_type
    return stub


def test_model_workload_refuses_a_half_declared_workload():
    with pytest.raises(WorkloadError, match="give exactly one of train_data .* and train_batches"):
        model_workload(name="x", params=ModelParams, model=lambda p: None)
    with pytest.raises(WorkloadError, match="train_batches needs samples_per_epoch"):
        model_workload(name="x", params=ModelParams, model=lambda p: None, train_batches=lambda p, c: iter(()))
    with pytest.raises(WorkloadError, match="need an eval split"):
        model_workload(name="x", params=ModelParams, model=lambda p: None, train_data=lambda p: [],
                       metrics={"accuracy": lambda o, t: 1.0})


def _trainer(name="workload", world=1, rank=0, local_batch=16, **params):
    w = find_workload(f"{TINYNET}:{name}").workload
    p, problems = parse_params(w, {"precision": "fp32", **params})
    assert problems == []
    return w.build(p, RankContext(rank=rank, world_size=world, local_batch=local_batch, seed=0, threads=1))


def test_a_trainer_built_outside_a_sweep_refuses_precision_auto_and_says_how_to_decide_it():
    # Deciding `auto` probes the CPU, which the public door may not: a sweep's plan decides it, or the caller.
    with pytest.raises(WorkloadError, match=r"workload 'tinynet': precision 'auto' reached the trainer undecided\. "
                                            r"A sweep decides it in its plan; .*orch\.decide_precision\(params\)"):
        _trainer(precision="auto")


@pytest.mark.isa
def test_decide_precision_decides_auto_on_this_cpu_as_the_isa_probe_does():
    import orch
    from orchestrator.io import isa

    w = find_workload(f"{TINYNET}:workload").workload
    auto, problems = parse_params(w, {"precision": "auto"})
    assert problems == [] and auto.precision == "auto"
    decided = orch.decide_precision(auto)
    assert decided.precision == ("bf16" if isa.probe().bf16_native else "fp32")
    assert orch.decide_precision(decided) is decided                  # explicit precision: unchanged
    other = object()
    assert orch.decide_precision(other) is other                      # no precision field: unchanged
    trainer = w.build(decided, RankContext(rank=0, world_size=1, local_batch=16, seed=0, threads=1))
    assert trainer.applied()["precision"] == decided.precision


def test_the_adapter_shards_steps_and_evaluates_an_unmodified_module():
    import torch

    ranks = [_trainer(world=2, rank=r) for r in (0, 1)]
    assert [t.steps_per_epoch() for t in ranks] == [16, 16] and ranks[0].samples_per_epoch() == 512
    first = [torch.cat([b[0] for b in t.batches(0)]) for t in ranks]
    # The shards are disjoint, and a rank's shard is the same again for the same epoch (seeded), not for another.
    assert not set(map(tuple, first[0].tolist())) & set(map(tuple, first[1].tolist()))
    assert torch.equal(torch.cat([b[0] for b in ranks[0].batches(0)]), first[0])
    assert not torch.equal(torch.cat([b[0] for b in ranks[0].batches(1)]), first[0])
    trainer = _trainer()
    before = trainer.evaluate()["accuracy"]
    for _ in range(3):
        for batch in trainer.batches(0):
            trainer.optimizer.zero_grad()
            loss = trainer.module(*batch)
            assert loss.dim() == 0
            loss.backward()
            trainer.optimizer.step()
    after = trainer.evaluate()["accuracy"]
    assert after > 0.9 and after > before
    # Sharded evaluation over two ranks scores what one rank scores alone.
    shards = [trainer.evaluate_shard(r, 2) for r in (0, 1)]
    assert trainer.score_shards(shards)["accuracy"] == pytest.approx(after)


def test_a_forward_without_a_scalar_loss_says_what_it_returned():
    trainer = _trainer(name="inputs_only")
    batch = next(trainer.batches(0))
    with pytest.raises(WorkloadError, match=r"the training loss is a float32 tensor of shape \(16, 2\), not a scalar"):
        trainer.module(*batch)


def test_a_model_that_cannot_take_the_target_without_a_loss_is_told_to_give_one():
    trainer = _trainer(name="no_loss")
    batch = next(trainer.batches(0))
    with pytest.raises(WorkloadError, match=r"with no loss= given, the model is called with every item of a batch "
                                            r"\(model\(\*batch\), 2 arguments\)"):
        trainer.module(*batch)


def test_a_factory_that_raises_is_named():
    with pytest.raises(WorkloadError, match="the model factory build_model raised RuntimeError: the model factory "
                                            "failed on purpose"):
        _trainer(fail="factory")


def test_a_dataset_smaller_than_one_batch_per_rank_is_refused_with_the_numbers():
    with pytest.raises(WorkloadError, match=r"the train split has 40 samples: fewer than one batch per rank "
                                            r"\(2 rank\(s\) × local batch 32 = 64\)"):
        _trainer(world=2, local_batch=32, samples=40)
