"""`classifier`: an MLP on a synthetic Gaussian-mixture task. Learnable to a high accuracy in seconds on
one core, so convergence-versus-batch studies and the orchestrator's own tests run fast.

The data depend only on `data_seed` (the same task for every training seed); the training seed changes
the initialization and the shuffling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeVar

from orch.workload import DdpParams, RankContext, Trainer, Workload, ddp_gradient_copies, ddp_options_of, param
from workloads.ipex import IPEX_OPTION_HELP, IPEX_USS_MIB, IpexMode, ipex_applies

# Calibration of memory_estimate_mib: `python benchmarks/calibrate_memory.py` measured 364-374 MiB of peak USS
# per rank (2 ranks, gloo, 1 thread each, torch 2.14.1) at local batch 64 and 1024. Nearly all of it is the
# interpreter, torch's own heap and gloo's buffers; the model and data add a few MiB.
BASE_USS_MIB = 360.0
BYTES_PER_FLOAT = 4


@dataclass(frozen=True, kw_only=True, slots=True)
class ClassifierParams(DdpParams):
    features: int = param(32, "input features", minimum=1)
    classes: int = param(4, "number of classes", minimum=2)
    hidden: int = param(128, "width of the two hidden layers", minimum=1)
    train_samples: int = param(8192, "training samples per epoch (all ranks together)", minimum=1)
    test_samples: int = param(2048, "held-out samples for accuracy", minimum=1)
    separation: float = param(3.0, "distance between class centres in units of the noise", exclusive_minimum=0)
    data_seed: int = param(1234, "seed of the synthetic task (fixed across training seeds)")
    lr: float = param(0.05, "learning rate when the sweep gives none", exclusive_minimum=0)
    momentum: float = param(0.9, "SGD momentum", minimum=0, maximum=1)
    optimizer_impl: Literal["loop", "foreach", "fused"] = param("foreach", "torch.optim implementation")
    ipex: IpexMode = param("auto", IPEX_OPTION_HELP)


CP = TypeVar("CP", bound=ClassifierParams)


class MlpWorkload(Workload[CP]):
    """The classifier's MLP, for any parameters that extend ClassifierParams (the chaos workload's)."""

    metrics = ("accuracy",)
    rank_modules = ("workloads.classifier.trainer",)

    def memory_estimate_mib(self, params: CP, local_batch: int) -> float:
        p = params
        weights = p.features * p.hidden + p.hidden * p.hidden + p.hidden * p.classes
        # weights, momentum, then the gradients and DDP's buckets as its switches hold them
        model_mib = (2 + ddp_gradient_copies(ddp_options_of(p))) * weights * BYTES_PER_FLOAT / 2**20
        data_mib = (p.train_samples + p.test_samples) * (p.features + 2) * BYTES_PER_FLOAT / 2**20
        activations_mib = 4 * local_batch * (2 * p.hidden + p.classes) * BYTES_PER_FLOAT / 2**20
        ipex_mib = IPEX_USS_MIB if ipex_applies(p.ipex) else 0.0
        return BASE_USS_MIB + ipex_mib + model_mib + data_mib + activations_mib

    def samples_per_epoch(self, params: CP) -> int:
        return params.train_samples

    def train_flops_per_sample(self, params: CP) -> float | None:
        """2 FLOPs per weight forward, 4 backward (input and weight gradients): 6 per weight. Matmuls only, counted
        as orch's counter counts them (torch's rule; no convolution here), biases not counted; a real step computes
        no input gradient for the first layer (the features need none), so orch counts a step 2 · features · hidden
        FLOPs per sample lower than this."""
        p = params
        return 6.0 * (p.features * p.hidden + p.hidden * p.hidden + p.hidden * p.classes)

    def build(self, params: CP, ctx: RankContext) -> Trainer:
        from workloads.classifier.trainer import ClassifierTrainer

        return ClassifierTrainer(params, ctx)


class ClassifierWorkload(MlpWorkload[ClassifierParams]):
    name = "classifier"
    description = "MLP on a synthetic Gaussian-mixture task; reaches 90% accuracy in seconds on one core"
    params_type = ClassifierParams
