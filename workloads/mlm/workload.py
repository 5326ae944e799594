"""`mlm`: a BERT encoder trained with masked-language modelling, Hugging Face `transformers`' BertForMaskedLM
built from a config (no weights downloaded, no hub), through the function adapter (`model_workload`). Its
metric is the masked-token accuracy (`orch.workload.accuracy` skips the -100 labels of unmasked tokens).

Sizes by name, as Google's BERT releases name them: tiny (2 layers, hidden 128), mini, small, medium, base
and large (24 layers, hidden 1024, 16 heads: MLPerf's BERT); `layers`, `hidden` and `heads` override one.

Data: synthetic by default, sequences from a random Markov chain (each token has a few likely successors),
so a masked token is predictable from its neighbours; deterministic from `data_seed`. Or tokenized data on
disk (`data_path`: train.pt and eval.pt, token-id tensors saved with torch.save). Masking is BERT's: 15% of the
tokens, of which 80% become the mask token, 10% a random token and 10% stay, fixed per sequence by the seed.

Needs orch's optional extra `hf` (Hugging Face transformers). Without it this module does not load, and the
message says how to install it: `orch plan` exits 2 with it, and `orch workloads` lists it as not loading.
This module is torch-free: `orch plan` reads the parameters without importing torch or transformers.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any, Literal

from orch.workload import ModelParams, WorkloadError, accuracy, model_workload, param

EXTRA = "hf"
MISSING_EXTRA = (f"the mlm workload needs Hugging Face transformers, orch's optional extra '{EXTRA}': install it "
                 f"with `bash scripts/setup.sh --{EXTRA}` (or `.venv/bin/pip install -e '.[{EXTRA}]'` in orch's "
                 "folder)")


class MissingExtra(WorkloadError, ImportError):
    """An optional dependency of a workload is not installed; the message says how to install it."""


def require_transformers() -> None:
    """Raise MissingExtra unless transformers can be imported (found, not imported: importing it imports
    torch). A module set to None in sys.modules is Python's mark for "not importable": find_spec raises
    ValueError for it."""
    try:
        found = importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtra(MISSING_EXTRA)


require_transformers()

Size = Literal["tiny", "mini", "small", "medium", "base", "large"]
# (layers, hidden, heads) of Google's BERT sizes (the miniatures of Turc et al. 2019, BERT-base and -large);
# the feed-forward width is 4 × hidden in all of them.
SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8), "medium": (8, 512, 8),
    "base": (12, 768, 12), "large": (24, 1024, 16)}


@dataclass(frozen=True, kw_only=True, slots=True)
class MlmParams(ModelParams):
    size: Size = param("tiny", "BERT size: tiny (2 layers × 128), mini (4 × 256), small (4 × 512), medium "
                               "(8 × 512), base (12 × 768), large (24 × 1024, 16 heads: MLPerf's BERT)")
    layers: int = param(0, "encoder layers; 0: the size's", minimum=0)
    hidden: int = param(0, "hidden width (the feed-forward is 4 ×); 0: the size's", minimum=0)
    heads: int = param(0, "attention heads (must divide hidden); 0: the size's", minimum=0)
    vocab_size: int = param(64, "token ids 0..vocab_size-1 (BERT's uncased WordPiece: 30522)", minimum=3)
    seq_len: int = param(16, "tokens per sequence (MLPerf's BERT: 512)", minimum=2)
    dropout: float = param(0.1, "dropout of the hidden states and the attention probabilities (BERT's 0.1)",
                           minimum=0, maximum=1)
    mask_prob: float = param(0.15, "share of the tokens masked for prediction (BERT's 0.15)", exclusive_minimum=0,
                             maximum=1)
    pad_token_id: int = param(0, "padding: never masked, not attended to", minimum=0)
    mask_token_id: int = param(1, "the mask token (BERT's uncased vocabulary: 103)", minimum=0)
    special_tokens: int = param(2, "ids below this are special (never masked, never a random replacement); "
                                   "BERT's uncased vocabulary: 104", minimum=1)
    train_samples: int = param(4096, "synthetic data: training sequences per epoch (all ranks together)", minimum=1,
                               maximum=2**31 - 1)
    eval_samples: int = param(256, "synthetic data: held-out sequences the metrics are computed on", minimum=1,
                              maximum=2**31 - 1)
    successors: int = param(2, "synthetic data: likely successors of each token in the Markov chain (fewer is "
                               "more predictable)", minimum=1)
    data_seed: int = param(1234, "synthetic data, and the masking of any data: the seed (the same for every "
                                 "training seed)", minimum=0, maximum=2**31 - 1)
    data_path: str = param("", "real data: an absolute path to a folder with train.pt and eval.pt, each a tensor "
                               "of token ids [sequences, seq_len] saved with torch.save; empty: synthetic data")
    optimizer: Literal["sgd", "adamw", "adam"] = param("adamw", "adamw (BERT's), sgd (with momentum) or adam")
    lr: float = param(1e-3, "learning rate when the sweep gives none (a convergence run scales its own)",
                      exclusive_minimum=0)
    weight_decay: float = param(0.01, "decoupled (adamw) or L2 (sgd, adam) weight decay", minimum=0)

    def shape(self) -> tuple[int, int, int]:
        """(layers, hidden, heads): the size's, with any override."""
        layers, hidden, heads = SIZES[self.size]
        return self.layers or layers, self.hidden or hidden, self.heads or heads

    def __post_init__(self) -> None:
        problems = []
        _, hidden, heads = self.shape()
        if hidden % heads:
            problems.append(f"hidden({hidden}) must be a multiple of heads({heads})")
        for name in ("pad_token_id", "mask_token_id"):
            if getattr(self, name) >= self.special_tokens:
                problems.append(f"{name}({getattr(self, name)}) must be < special_tokens({self.special_tokens}): "
                                "ids below special_tokens are the special ones")
        if self.special_tokens >= self.vocab_size:
            problems.append(f"special_tokens({self.special_tokens}) must be < vocab_size({self.vocab_size})")
        if not self.data_path and self.successors > self.vocab_size - self.special_tokens:
            problems.append(f"successors({self.successors}) > the {self.vocab_size - self.special_tokens} ordinary "
                            f"tokens (vocab_size({self.vocab_size}) - special_tokens({self.special_tokens}))")
        if self.data_path and not os.path.isabs(self.data_path):
            problems.append(f"data_path({self.data_path!r}) must be absolute: ranks may run in another folder")
        if problems:
            raise ValueError("\n".join(problems))


def build_model(p: MlmParams) -> Any:
    from workloads.mlm.data import build_model as build

    return build(p)


def train_set(p: MlmParams) -> Any:
    from workloads.mlm.data import dataset

    return dataset(p, "train")


def eval_set(p: MlmParams) -> Any:
    from workloads.mlm.data import dataset

    return dataset(p, "eval")


def samples_per_epoch(p: MlmParams) -> int | None:
    """The synthetic set's size; a file's is read in the rank (the probe records it)."""
    return None if p.data_path else p.train_samples


# No loss: BertForMaskedLM computes its own from the batch's labels (the adapter takes the output's .loss).
workload = model_workload(
    name="mlm", params=MlmParams, model=build_model, train_data=train_set, eval_data=eval_set,
    metrics={"accuracy": accuracy}, samples_per_epoch=samples_per_epoch,
    description="a BERT encoder (Hugging Face transformers, from a config) trained with masked-language modelling; "
                "metric: masked-token accuracy; size tiny learns a Markov chain in minutes on two cores, size large "
                "is MLPerf's BERT")
workload.rank_modules = ("workloads.mlm.data",)
