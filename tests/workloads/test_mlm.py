"""The mlm family (`workloads/mlm/`): its parameters (sizes by name, overrides, refused values with the reason),
a torch-free import, the missing extra as a plan-time message, BERT's masking, the Markov-chain data learnable
by BertForMaskedLM through the function adapter, and tokenized data read from disk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orch.workload import RankContext, WorkloadError
from orchestrator.io.workload_finder import find_workload, parse_params

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread, as a 1-thread rank has: two OpenMP threads on a shared 2-vCPU machine can run
    many times slower than one, and these tests time nothing."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _params(**values):
    params, problems = parse_params(find_workload("mlm").workload, {"precision": "fp32", **values})
    assert problems == [], problems
    return params


def _problems(**values):
    return [str(p) for p in parse_params(find_workload("mlm").workload, values)[1]]


def test_it_is_an_entry_point_of_orch_and_its_import_is_torch_free():
    code = ("import sys; from orchestrator.io.workload_finder import find_workload; "
            "w = find_workload('mlm').workload; print(w.name, w.metrics, w.samples_per_epoch(w.params_type()), "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "mlm ('accuracy',) 4096 []"


def test_without_transformers_orch_plan_exits_2_naming_the_extra_and_the_setup_command():
    """transformers made unimportable (None in sys.modules, Python's own mark) in a fresh interpreter."""
    code = ("import sys; sys.modules['transformers'] = None; from orchestrator.cli import main; "
            "sys.exit(main(['plan', 'sweeps/mlm.yaml']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert ("the mlm workload needs Hugging Face transformers, orch's optional extra 'hf': install it with "
            "`bash scripts/setup.sh --hf`") in " ".join((out.stdout + out.stderr).split())


def test_sizes_are_bert_s_and_any_dimension_overrides_its_size():
    assert _params().shape() == (2, 128, 2)
    assert _params(size="large").shape() == (24, 1024, 16)
    assert _params(size="base", layers=4).shape() == (4, 768, 12)


@pytest.mark.parametrize("values, expected", [
    ({"hidden": 100, "heads": 3}, "hidden(100) must be a multiple of heads(3)"),
    ({"mask_token_id": 5}, "mask_token_id(5) must be < special_tokens(2)"),
    ({"special_tokens": 64}, "special_tokens(64) must be < vocab_size(64)"),
    ({"vocab_size": 4, "successors": 3}, "successors(3) > the 2 ordinary tokens"),
    ({"data_path": "tokens"}, "data_path('tokens') must be absolute"),
    ({"size": "huge"}, "workload.params.size: must be one of"),
])
def test_bad_parameters_are_refused_with_the_reason(values, expected):
    assert any(expected in p for p in _problems(**values)), _problems(**values)


def test_masking_is_bert_s_fixed_by_the_seed_and_never_touches_special_tokens():
    import torch

    from workloads.mlm.data import markov_sequences, masked

    p = _params(seq_len=32, vocab_size=64)
    tokens = markov_sequences(p, 2000, "train")
    assert tokens.shape == (2000, 32) and int(tokens.min()) >= 2 and int(tokens.max()) < 64
    assert torch.equal(tokens, markov_sequences(p, 2000, "train"))
    assert not torch.equal(tokens, markov_sequences(p, 2000, "eval"))
    tokens[:, 0] = 0   # a padding column: never picked, not attended to
    batch = masked(p, tokens, "train")
    picked = batch["labels"] != -100
    assert torch.equal(batch["labels"][picked], tokens[picked]) and not picked[:, 0].any()
    assert (batch["attention_mask"][:, 0] == 0).all() and (batch["attention_mask"][:, 1:] == 1).all()
    assert picked.any(dim=1).all()
    share = picked.float().mean().item()
    assert 0.13 < share < 0.17
    masked_share = (batch["input_ids"][picked] == 1).float().mean().item()
    assert 0.75 < masked_share < 0.85
    assert torch.equal(batch["input_ids"], masked(p, tokens, "train")["input_ids"])


def test_each_token_has_its_few_successors_so_a_masked_token_is_predictable():
    from workloads.mlm.data import markov_sequences

    tokens = markov_sequences(_params(), 500, "train")
    pairs = set(zip(tokens[:, :-1].flatten().tolist(), tokens[:, 1:].flatten().tolist()))
    successors = {}
    for a, b in pairs:
        successors.setdefault(a, set()).add(b)
    assert max(len(s) for s in successors.values()) == 2


def _trainer(local_batch=16, **values):
    w = find_workload("mlm").workload
    return w.build(_params(**values), RankContext(rank=0, world_size=1, local_batch=local_batch, seed=0, threads=1))


def _train(trainer, epochs):
    for epoch in range(epochs):
        for batch in trainer.batches(epoch):
            trainer.optimizer.zero_grad()
            loss = trainer.module(*batch)
            loss.backward()
            trainer.optimizer.step()
    return loss


def test_bert_builds_from_a_config_and_steps_through_the_adapter():
    import torch

    trainer = _trainer(train_samples=64, eval_samples=32, layers=1)
    model = trainer.module.model
    assert type(model).__name__ == "BertForMaskedLM" and model.config.num_hidden_layers == 1
    assert trainer.steps_per_epoch() == 4 and trainer.applied()["optimizer"] == "adamw"
    assert torch.isfinite(_train(trainer, 1))
    assert 0.0 <= trainer.evaluate()["accuracy"] <= 1.0


@pytest.mark.slow
def test_bert_learns_the_markov_chain_well_above_chance():
    """BERT-tiny, 256 steps: 2 epochs of 4096 sequences. Chance is 1/62; copying the unmasked input (what the
    model learns first: 10% of the picked tokens stay as they are) scores about 0.1; the context, 0.85."""
    trainer = _trainer(local_batch=32, dropout=0.0, train_samples=4096, eval_samples=128)
    _train(trainer, 2)
    assert trainer.evaluate()["accuracy"] > 0.5


def test_tokenized_data_on_disk_is_read_and_checked(tmp_path):
    import torch

    torch.save(torch.randint(2, 64, (40, 16)), tmp_path / "train.pt")
    torch.save({"input_ids": torch.randint(2, 64, (8, 16))}, tmp_path / "eval.pt")
    trainer = _trainer(local_batch=8, data_path=str(tmp_path))
    assert trainer.samples_per_epoch() == 40 and trainer.steps_per_epoch() == 5
    batch = next(trainer.batches(0))[0]
    assert batch["input_ids"].shape == (8, 16) and set(batch) == {"input_ids", "attention_mask", "labels"}
    with pytest.raises(WorkloadError, match="has sequences of 16 tokens but seq_len is 32"):
        _trainer(data_path=str(tmp_path), seq_len=32)
    with pytest.raises(WorkloadError, match=r"token ids in \[2, 63\], outside vocab_size 32"):
        _trainer(data_path=str(tmp_path), vocab_size=32)
    with pytest.raises(WorkloadError, match="no train.pt"):
        _trainer(data_path=str(tmp_path / "nowhere"))
