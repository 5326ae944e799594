"""`classifier`: an MLP on a synthetic Gaussian-mixture task. Learnable to a high accuracy in seconds on
one core, so convergence-versus-batch studies and the orchestrator's own tests run fast.

The data depend only on `data_seed` (the same task for every training seed); the training seed changes
the initialization and the shuffling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.core.schema import opt
from workloads.base import (
    DDP_BUCKET_MB_HELP,
    DDP_COMM_HOOK_HELP,
    DDP_DEFAULTS,
    DDP_GRAD_AS_BUCKET_VIEW_HELP,
    DdpCommHook,
    RankContext,
    Trainer,
    Workload,
    ddp_gradient_copies,
    ddp_options_of,
)
from workloads.ipex import IPEX_OPTION_HELP, IPEX_USS_MIB, IpexMode, ipex_applies

# Calibration of memory_estimate_mib: `python benchmarks/calibrate_memory.py` measured 364-374 MiB of peak USS
# per rank (2 ranks, gloo, 1 thread each, torch 2.14.1) at local batch 64 and 1024. Nearly all of it is the
# interpreter, torch's own heap and gloo's buffers; the model and data add a few MiB.
BASE_USS_MIB = 360.0
BYTES_PER_FLOAT = 4


@dataclass(frozen=True, kw_only=True, slots=True)
class ClassifierParams:
    features: int = opt(32, "input features", minimum=1)
    classes: int = opt(4, "number of classes", minimum=2)
    hidden: int = opt(128, "width of the two hidden layers", minimum=1)
    train_samples: int = opt(8192, "training samples per epoch (all ranks together)", minimum=1)
    test_samples: int = opt(2048, "held-out samples for accuracy", minimum=1)
    separation: float = opt(3.0, "distance between class centres in units of the noise", exclusive_minimum=0)
    data_seed: int = opt(1234, "seed of the synthetic task (fixed across training seeds)")
    lr: float = opt(0.05, "learning rate when the sweep gives none", exclusive_minimum=0)
    momentum: float = opt(0.9, "SGD momentum", minimum=0, maximum=1)
    optimizer_impl: Literal["loop", "foreach", "fused"] = opt("foreach", "torch.optim implementation")
    ipex: IpexMode = opt("auto", IPEX_OPTION_HELP)
    # Gradient all-reduce (DDP), with 2 ranks or more
    ddp_comm_hook: DdpCommHook = opt(DDP_DEFAULTS.comm_hook, DDP_COMM_HOOK_HELP)
    ddp_bucket_mb: float = opt(DDP_DEFAULTS.bucket_mb, DDP_BUCKET_MB_HELP, exclusive_minimum=0)
    ddp_grad_as_bucket_view: bool = opt(DDP_DEFAULTS.grad_as_bucket_view, DDP_GRAD_AS_BUCKET_VIEW_HELP)


class ClassifierWorkload(Workload):
    name = "classifier"
    description = "MLP on a synthetic Gaussian-mixture task; reaches 90% accuracy in seconds on one core"
    params_type = ClassifierParams
    metrics = ("accuracy",)
    rank_modules = ("workloads.classifier.trainer",)

    def memory_estimate_mib(self, params: ClassifierParams, local_batch: int) -> float:
        p = params
        weights = p.features * p.hidden + p.hidden * p.hidden + p.hidden * p.classes
        # weights, momentum, then the gradients and DDP's buckets as its switches hold them
        model_mib = (2 + ddp_gradient_copies(ddp_options_of(p))) * weights * BYTES_PER_FLOAT / 2**20
        data_mib = (p.train_samples + p.test_samples) * (p.features + 2) * BYTES_PER_FLOAT / 2**20
        activations_mib = 4 * local_batch * (2 * p.hidden + p.classes) * BYTES_PER_FLOAT / 2**20
        ipex_mib = IPEX_USS_MIB if ipex_applies(p.ipex) else 0.0
        return BASE_USS_MIB + ipex_mib + model_mib + data_mib + activations_mib

    def samples_per_epoch(self, params: ClassifierParams) -> int:
        return params.train_samples

    def train_flops_per_sample(self, params: ClassifierParams) -> float | None:
        """2 FLOPs per weight forward, 4 backward (input and weight gradients): 6 per weight."""
        p = params
        return 6.0 * (p.features * p.hidden + p.hidden * p.hidden + p.hidden * p.classes)

    def build(self, params: ClassifierParams, ctx: RankContext) -> Trainer:
        from workloads.classifier.trainer import ClassifierTrainer

        return ClassifierTrainer(params, ctx)
