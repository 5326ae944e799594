"""The one interface between the orchestrator and a workload.

A `Workload` is cheap and torch-free to import and to ask about its parameters, memory and epoch size:
`orch plan` uses it without importing torch. Only `Workload.build`, called inside a rank process, imports
torch and returns a `Trainer`, which holds one rank's model, optimizer, data shard and evaluation.

The orchestrator owns the training step (so that every workload is timed the same way, and the direct
launch benchmark can reuse it)::

    trainer = workload.build(params, ctx)
    module = DistributedDataParallel(trainer.module, ...)  # when world_size > 1, with ddp_options_of(params)
    for batch in trainer.batches(epoch):
        optimizer.zero_grad(set_to_none=True)
        loss = module(*batch)                              # the module returns the scalar training loss
        loss.backward()                                    # gradients all-reduced by DDP here
        trainer.optimizer.step()
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

if TYPE_CHECKING:  # torch is imported only inside rank processes
    import torch


# torch.optim's constructor switches for each `optimizer_impl` a workload offers: the per-tensor loop, the
# multi-tensor foreach kernels, or one fused kernel.
OPTIMIZER_IMPL_KWARGS: dict[str, dict[str, bool]] = {
    "loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


# How DDP all-reduces the gradients, the same switches in every workload (the orchestrator owns the DDP
# wrapper: orchestrator/run/ddp.py applies them, and records what took effect in `applied`). They act only with
# two ranks or more. A workload declares them as parameters with these help texts; `ddp_options_of` reads them
# from its parameters, for the wrapper and for the memory estimate alike.
DdpCommHook = Literal["none", "bf16", "fp16"]
DDP_COMM_HOOK_HELP = ("none: DDP all-reduces the gradients in their own dtype (fp32); bf16 / fp16: DDP's "
                      "bf16_compress_hook / fp16_compress_hook cast each gradient bucket to 16 bits for the all-reduce "
                      "and back (half the bytes on the wire, less precise sums); 2 ranks or more")
DDP_BUCKET_MB_HELP = ("DDP's bucket_cap_mb: gradients are all-reduced in buckets of about this many MiB (fewer, larger "
                      "all-reduces above 25, less overlap with the backward pass); 2 ranks or more")
DDP_GRAD_AS_BUCKET_VIEW_HELP = ("DDP's gradient_as_bucket_view: the gradients are views into the all-reduce buckets "
                                "(no copy into and out of them, less memory); 2 ranks or more")


@dataclass(frozen=True, kw_only=True, slots=True)
class DdpOptions:
    """A workload's DDP switches, as `ddp_options_of` reads them from its parameters (defaults: DDP's own)."""

    comm_hook: DdpCommHook = "none"
    bucket_mb: float = 25.0
    grad_as_bucket_view: bool = False

    def __post_init__(self) -> None:
        if self.comm_hook not in get_args(DdpCommHook):
            raise ValueError(f"ddp_comm_hook({self.comm_hook!r}) must be one of "
                             f"{', '.join(map(repr, get_args(DdpCommHook)))}")
        if not self.bucket_mb > 0:
            raise ValueError(f"ddp_bucket_mb({self.bucket_mb}) must be > 0")


# DDP's own defaults: the defaults of every workload's ddp_* parameters.
DDP_DEFAULTS = DdpOptions()


def ddp_gradient_copies(options: DdpOptions) -> float:
    """How many fp32-sized copies of the trained parameters the gradients and DDP hold, for the memory
    estimates: the gradients and DDP's buckets (2); one fewer when the gradients are views into the buckets;
    half a copy more with a 16-bit communication hook (its compressed copy of each bucket, and the buckets'
    all-reduces can all be in flight at once). `benchmarks/calibrate_memory.py` (small-bf16, small-bf16-hook,
    small-bf16-view) measures the difference.

    >>> ddp_gradient_copies(DDP_DEFAULTS), ddp_gradient_copies(DdpOptions(comm_hook="bf16", grad_as_bucket_view=True))
    (2.0, 1.5)
    """
    copies = 1.0 if options.grad_as_bucket_view else 2.0
    return copies + (0.5 if options.comm_hook != "none" else 0.0)


def ddp_options_of(params: Any) -> DdpOptions:
    """The DDP switches of a workload's parameters (fields `ddp_comm_hook`, `ddp_bucket_mb`,
    `ddp_grad_as_bucket_view`; DDP's defaults for those it does not declare)."""
    return DdpOptions(comm_hook=getattr(params, "ddp_comm_hook", DDP_DEFAULTS.comm_hook),
                      bucket_mb=getattr(params, "ddp_bucket_mb", DDP_DEFAULTS.bucket_mb),
                      grad_as_bucket_view=getattr(params, "ddp_grad_as_bucket_view", DDP_DEFAULTS.grad_as_bucket_view))


@dataclass(frozen=True, kw_only=True, slots=True)
class RankContext:
    """What a rank process knows about itself when it builds its trainer."""

    rank: int
    world_size: int
    local_batch: int
    seed: int
    threads: int
    lr: float | None = None   # the learning rate to start from; None: the workload's default


class Trainer(abc.ABC):
    """One rank's training state, built inside the rank process."""

    module: torch.nn.Module         # forward(*batch) -> scalar training loss; the orchestrator wraps it in DDP
    optimizer: torch.optim.Optimizer

    @abc.abstractmethod
    def batches(self, epoch: int) -> Iterator[tuple[Any, ...]]:
        """This rank's shard of `epoch`, each item a tuple of `module` arguments of `local_batch` samples.

        Deterministic given (seed, epoch, rank, world_size); the shards of all ranks are disjoint.
        """

    def steps_per_epoch(self) -> int:
        """How many batches `batches(epoch)` yields (the same for every epoch and rank). This default counts
        them, which builds every batch of an epoch; a trainer that knows its sample count should answer with
        `workloads.sharding.batches_per_epoch` instead."""
        return sum(1 for _ in self.batches(0))

    @abc.abstractmethod
    def evaluate(self) -> dict[str, float]:
        """Metrics on the held-out split (module in eval mode, restored to train mode after)."""

    # Optional: evaluation shared by the ranks. A trainer whose evaluation is costly (a detector's inference)
    # lets every rank infer its share of the held-out split, and rank 0 scores the shares together, instead
    # of rank 0 inferring it all while the others wait. Both or neither must be overridden.
    def evaluate_shard(self, rank: int, world_size: int) -> Any:
        """This rank's part of the evaluation (picklable: it travels to rank 0); None: not supported."""
        return None

    def score_shards(self, shards: list[Any]) -> dict[str, float]:
        """The metrics of `evaluate`, from every rank's `evaluate_shard` in rank order."""
        raise NotImplementedError(f"{type(self).__name__} has no sharded evaluation")

    def applied(self) -> dict[str, str]:
        """What optimizations actually took effect (e.g. {'ipex': 'off: not installed'}), for the record."""
        return {}


class Workload(abc.ABC):
    """A named, registered workload. Subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]
    description: ClassVar[str]
    params_type: ClassVar[type]          # a frozen kw_only dataclass; fields use orchestrator.core.schema.opt
    metrics: ClassVar[tuple[str, ...]]   # names `Trainer.evaluate` returns, usable as convergence targets
    # The torch-side modules `build` imports (its trainer's). A rank imports them before it builds, so that
    # its start-up breakdown tells importing (torch, torchvision, ...) from building; empty: `build` imports.
    rank_modules: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def memory_estimate_mib(self, params: Any, local_batch: int) -> float:
        """Peak unique memory (USS) of one rank at `local_batch`. A formula calibrated by measurement;
        the code states the calibration. Must not import torch."""

    @abc.abstractmethod
    def samples_per_epoch(self, params: Any) -> int:
        """Training samples in one epoch over all ranks. Must not import torch."""

    def train_flops_per_sample(self, params: Any) -> float | None:
        """FLOPs of training on one sample (forward and backward), for the sweep's time estimate before anything
        runs; None when the workload cannot say. May import torch (the driver calls it once per sweep)."""
        return None

    @abc.abstractmethod
    def build(self, params: Any, ctx: RankContext) -> Trainer:
        """Model, optimizer and data for one rank. Runs inside the rank process; may import torch."""
