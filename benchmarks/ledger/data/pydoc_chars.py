"""Real text for the ledger's masked-language-model cases: the English of Python's own documentation, as the
standard library ships it (`pydoc_data.topics`, the help() pages), as character-level token ids.

    .venv/bin/python benchmarks/ledger/data/pydoc_chars.py /tmp/orch-ledger-data/pydoc-chars

Writes train.pt and eval.pt (int64 tensors [sequences, SEQ_LEN], torch.save) for the mlm workload's `data_path`,
and prints their SHA-256 and the vocabulary size. Deterministic for a given Python release: the topics in sorted
order, every character seen given an id by first appearance (ids 0 and 1 are the mlm workload's pad and mask),
the text cut into consecutive sequences, the first TRAIN of them for training and the next EVAL for evaluation.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

SEQ_LEN = 32
TRAIN, EVAL = 4096, 512
SPECIAL = 2                  # the mlm workload's pad (0) and mask (1)
MAX_VOCAB = 128


def token_ids() -> tuple[list[int], int]:
    import pydoc_data.topics as topics

    text = "\n".join(topics.topics[k] for k in sorted(topics.topics))
    ids: dict[str, int] = {}
    out = []
    for ch in text:
        if ch not in ids:
            if len(ids) + SPECIAL >= MAX_VOCAB:
                continue              # a rare character past the vocabulary: dropped
            ids[ch] = len(ids) + SPECIAL
        out.append(ids[ch])
    return out, len(ids) + SPECIAL


def main(folder: str) -> int:
    import torch

    tokens, vocab = token_ids()
    need = (TRAIN + EVAL) * SEQ_LEN
    if len(tokens) < need:
        raise SystemExit(f"only {len(tokens)} characters, {need} needed")
    data = torch.tensor(tokens[:need], dtype=torch.long).view(TRAIN + EVAL, SEQ_LEN)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for name, part in (("train.pt", data[:TRAIN]), ("eval.pt", data[TRAIN:])):
        torch.save(part.clone(), out / name)
        digest = hashlib.sha256(part.numpy().tobytes()).hexdigest()
        print(f"{out / name}: {tuple(part.shape)}, sha256 of the ids {digest}")
    print(f"vocab_size {vocab}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/orch-ledger-data/pydoc-chars"))
