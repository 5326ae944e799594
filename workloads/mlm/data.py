"""The mlm family's torch side (imported in rank processes only): BertForMaskedLM from a config, and the
masked sequences, synthetic (a Markov chain) or token ids from disk."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import BertConfig, BertForMaskedLM

from workloads.mlm.workload import MlmParams

# BERT's masking: of the tokens picked for prediction, 80% become the mask token, 10% a random token and 10%
# stay as they are (Devlin et al. 2019, section 3.1).
MASK_SHARE, RANDOM_SHARE = 0.8, 0.1
SPLIT_SEED = {"train": 1, "eval": 2}


def build_model(p: MlmParams) -> torch.nn.Module:
    """BertForMaskedLM from a BertConfig of `p`'s shape: random weights, nothing downloaded."""
    layers, hidden, heads = p.shape()
    config = BertConfig(vocab_size=p.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=4 * hidden, max_position_embeddings=p.seq_len,
                        hidden_dropout_prob=p.dropout, attention_probs_dropout_prob=p.dropout,
                        pad_token_id=p.pad_token_id)
    return BertForMaskedLM(config)


def markov_sequences(p: MlmParams, count: int, split: str) -> torch.Tensor:
    """`count` sequences of `seq_len` ordinary tokens from one random Markov chain (the same for every split,
    from `data_seed`): each token has `successors` likely successors, with probabilities 1/2, 1/4, ...
    (normalized), so a masked token is predictable from its neighbours."""
    ordinary = p.vocab_size - p.special_tokens
    chain = torch.Generator().manual_seed(p.data_seed)
    successors = torch.stack([torch.randperm(ordinary, generator=chain)[:p.successors] for _ in range(ordinary)])
    weights = 0.5 ** torch.arange(p.successors, dtype=torch.float)
    gen = torch.Generator().manual_seed(p.data_seed * 4 + SPLIT_SEED[split])
    tokens = torch.empty(count, p.seq_len, dtype=torch.long)
    tokens[:, 0] = torch.randint(ordinary, (count,), generator=gen)
    for t in range(1, p.seq_len):   # one step of the chain for every sequence at once
        pick = torch.multinomial(weights.expand(count, -1), 1, replacement=True, generator=gen).squeeze(1)
        tokens[:, t] = successors[tokens[:, t - 1], pick]
    return tokens + p.special_tokens


def masked(p: MlmParams, tokens: torch.Tensor, split: str) -> dict[str, torch.Tensor]:
    """BERT's masking of `tokens`, fixed by (data_seed, split): input_ids, attention_mask and labels (the
    original token where one was picked, -100 elsewhere). Special tokens are never picked; every sequence
    with an ordinary token has at least one picked, so no batch is without a label."""
    gen = torch.Generator().manual_seed(p.data_seed * 4 + SPLIT_SEED[split] + 2)
    ordinary = tokens >= p.special_tokens
    draw = torch.rand(tokens.shape, generator=gen)
    picked = ordinary & (draw < p.mask_prob)
    fallback = torch.where(ordinary, draw, 2.0).argmin(dim=1)   # the ordinary token of lowest draw
    rows = ~picked.any(dim=1) & ordinary.any(dim=1)
    picked[rows, fallback[rows]] = True
    how = torch.rand(tokens.shape, generator=gen)
    replacement = torch.randint(p.special_tokens, p.vocab_size, tokens.shape, generator=gen)
    inputs = torch.where(picked & (how < MASK_SHARE), p.mask_token_id, tokens)
    inputs = torch.where(picked & (how >= MASK_SHARE) & (how < MASK_SHARE + RANDOM_SHARE), replacement, inputs)
    return {"input_ids": inputs, "attention_mask": (tokens != p.pad_token_id).long(),
            "labels": torch.where(picked, tokens, -100)}


def load_tokens(p: MlmParams, split: str) -> torch.Tensor:
    """`data_path`/train.pt or eval.pt: a tensor of token ids [sequences, seq_len] (or a dict holding it
    under input_ids), checked against the parameters."""
    path = Path(p.data_path) / f"{split}.pt"
    if not path.is_file():
        raise ValueError(f"data_path {p.data_path}: no {path.name} (a tensor of token ids [sequences, seq_len] "
                         "saved with torch.save)")
    data = torch.load(path, weights_only=True)
    tokens = data.get("input_ids") if isinstance(data, dict) else data
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.is_floating_point():
        raise ValueError(f"{path} holds {type(tokens).__name__}, not an integer tensor [sequences, seq_len]")
    if tokens.shape[1] != p.seq_len:
        raise ValueError(f"{path} has sequences of {tokens.shape[1]} tokens but seq_len is {p.seq_len}")
    if len(tokens) and not 0 <= int(tokens.min()) <= int(tokens.max()) < p.vocab_size:
        raise ValueError(f"{path} has token ids in [{int(tokens.min())}, {int(tokens.max())}], outside "
                         f"vocab_size {p.vocab_size}")
    return tokens.long()


class MaskedSequences(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """Items are dicts (input_ids, attention_mask, labels): the model is called as model(**batch)."""

    def __init__(self, p: MlmParams, split: str):
        count = p.train_samples if split == "train" else p.eval_samples
        tokens = load_tokens(p, split) if p.data_path else markov_sequences(p, count, split)
        self.columns = masked(p, tokens, split)

    def __len__(self) -> int:
        return len(self.columns["input_ids"])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {name: column[index] for name, column in self.columns.items()}


def dataset(p: MlmParams, split: str) -> MaskedSequences:
    return MaskedSequences(p, split)
