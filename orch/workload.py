"""Bring your own model to orch: the one module a workload imports.

Two ways in, both found by the name a sweep file gives (`workload: {name: "mypkg.bench:workload"}`, an
entry point in the `orch.workloads` group, or `path/to/file.py:workload`):

**The function adapter**, for the common case: a model factory, a dataset per split, optionally a loss and
metrics. orch shards the data per rank (disjoint and deterministic given the seed), builds the optimizer,
wraps the model in DDP and times the step exactly as for its built-ins::

    from dataclasses import dataclass
    from orch.workload import ModelParams, accuracy, model_workload, param

    @dataclass(frozen=True, kw_only=True, slots=True)
    class Params(ModelParams):
        width: int = param(256, "hidden width", minimum=1)

    def build_model(p: Params) -> torch.nn.Module: ...
    def train_set(p: Params) -> torch.utils.data.Dataset: ...    # items (input, target), or dicts
    def test_set(p: Params) -> torch.utils.data.Dataset: ...

    workload = model_workload(name="mynet", params=Params, model=build_model, train_data=train_set,
                              eval_data=test_set, loss=torch.nn.functional.cross_entropy,
                              metrics={"accuracy": accuracy})

An unmodified `nn.Module` works. What orch needs to plan (memory per rank, FLOPs per sample, samples per
epoch) is measured by a probe before the sweep unless you give it.

**The workload base**, for full control: subclass `Workload[P]` (generic over its parameter dataclass) and
return a `Trainer` from `build`. This is how orch's own workloads are written.

Parameters are a frozen, keyword-only dataclass whose fields are made with `param` (a default, a help text
and numeric bounds, checked strictly when the sweep file is loaded). `DdpParams` declares DDP's switches
(bucket size, gradient views, a 16-bit communication hook); inherit from it (or from `ModelParams`, which
does) and orch applies them.

Importing this module never imports torch (`orch plan` stays torch-free): torch is imported inside rank
processes, by `build`.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, get_args

from orchestrator.core.json.schema import MISSING, opt
from orchestrator.errors import InputError

if TYPE_CHECKING:  # torch is imported only inside rank processes
    import torch

__all__ = [
    "Batch", "BatchContext", "DdpOptions", "DdpParams", "Metric", "ModelParams", "ModelWorkload", "RankContext",
    "Trainer", "Workload", "WorkloadError", "accuracy", "batches_per_epoch", "ddp_options_of", "model_workload",
    "param", "shard_indices",
]

P = TypeVar("P")
MP = TypeVar("MP", bound="ModelParams")
# One batch as `Trainer.module`'s arguments: what a workload's data holds (tensors, dicts of tensors) passes
# through orch untouched, so no narrower type than "any objects" exists for its items.
Batch = tuple[Any, ...]


class WorkloadError(InputError):
    """A workload that cannot be built or stepped as declared (a factory that raised, a forward that returned
    no scalar loss, a dataset too small for one batch per rank). The message says what to change."""


def param(default: object = MISSING, help: str = "", *, minimum: float | None = None,
          maximum: float | None = None, exclusive_minimum: float | None = None, finite: bool = True,
          factory: Callable[[], object] | None = None) -> Any:
    """A workload parameter: a dataclass field with its default, the help text `orch workloads NAME` shows, and
    numeric bounds checked when the sweep file is loaded (every problem reported at once, with its line).
    No default: the sweep file must give it. `factory`: a default built per instance (mutable values).
    `finite=False` lets a float take NaN and ±inf, which are refused by default.

    >>> from dataclasses import dataclass, fields
    >>> @dataclass(frozen=True, kw_only=True, slots=True)
    ... class Params:
    ...     width: int = param(64, "hidden width", minimum=1)
    >>> Params().width, [f.name for f in fields(Params)]
    (64, ['width'])
    """
    return opt(default, help, minimum=minimum, maximum=maximum, exclusive_minimum=exclusive_minimum,
               finite=finite, factory=MISSING if factory is None else factory)


# --- DDP's switches ------------------------------------------------------------------------------------------

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
    """DDP's switches as orch applies them (defaults: DDP's own)."""

    comm_hook: DdpCommHook = "none"
    bucket_mb: float = 25.0
    grad_as_bucket_view: bool = False

    def __post_init__(self) -> None:
        if self.comm_hook not in get_args(DdpCommHook):
            raise ValueError(f"ddp_comm_hook({self.comm_hook!r}) must be one of "
                             f"{', '.join(map(repr, get_args(DdpCommHook)))}")
        if not self.bucket_mb > 0:
            raise ValueError(f"ddp_bucket_mb({self.bucket_mb}) must be > 0")


DDP_DEFAULTS = DdpOptions()


@dataclass(frozen=True, kw_only=True, slots=True)
class DdpParams:
    """The DDP switches as workload parameters: inherit from this (single inheritance: the parameters are a
    slotted dataclass) instead of declaring them. They act with 2 ranks or more, and the record's `applied`
    says what took effect."""

    ddp_comm_hook: DdpCommHook = param(DDP_DEFAULTS.comm_hook, DDP_COMM_HOOK_HELP)
    ddp_bucket_mb: float = param(DDP_DEFAULTS.bucket_mb, DDP_BUCKET_MB_HELP, exclusive_minimum=0)
    ddp_grad_as_bucket_view: bool = param(DDP_DEFAULTS.grad_as_bucket_view, DDP_GRAD_AS_BUCKET_VIEW_HELP)


def ddp_options_of(params: object) -> DdpOptions:
    """The DDP switches of a workload's parameters; DDP's defaults for parameters without them.

    >>> ddp_options_of(DdpParams(ddp_bucket_mb=100.0)).bucket_mb, ddp_options_of(object()).bucket_mb
    (100.0, 25.0)
    """
    if isinstance(params, DdpParams):
        return DdpOptions(comm_hook=params.ddp_comm_hook, bucket_mb=params.ddp_bucket_mb,
                          grad_as_bucket_view=params.ddp_grad_as_bucket_view)
    return DDP_DEFAULTS


def ddp_gradient_copies(options: DdpOptions) -> float:
    """How many fp32-sized copies of the trained parameters the gradients and DDP hold, for a memory formula:
    the gradients and DDP's buckets (2); one fewer when the gradients are views into the buckets; half a copy
    more with a 16-bit communication hook (its compressed copy of each bucket).

    >>> ddp_gradient_copies(DDP_DEFAULTS), ddp_gradient_copies(DdpOptions(comm_hook="bf16", grad_as_bucket_view=True))
    (2.0, 1.5)
    """
    copies = 1.0 if options.grad_as_bucket_view else 2.0
    return copies + (0.5 if options.comm_hook != "none" else 0.0)


# --- the workload base ---------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class RankContext:
    """What a rank process knows about itself when it builds its trainer."""

    rank: int
    world_size: int
    local_batch: int
    seed: int
    threads: int
    lr: float | None = None   # the learning rate to start from (a convergence run's scaled rate); None: yours


class Trainer(abc.ABC):
    """One rank's training state, built inside the rank process by `Workload.build`.

    orch owns the training step, so every workload is timed the same way::

        module = DistributedDataParallel(trainer.module)   # with 2 ranks or more, with the DDP switches
        for batch in trainer.batches(epoch):
            trainer.optimizer.zero_grad(set_to_none=True)
            loss = module(*batch)                             # forward returns the scalar training loss
            loss.backward()
            trainer.optimizer.step()
    """

    module: torch.nn.Module         # forward(*batch) -> scalar training loss
    optimizer: torch.optim.Optimizer

    @abc.abstractmethod
    def batches(self, epoch: int) -> Iterator[Batch]:
        """This rank's shard of `epoch`: tuples of `module` arguments, `local_batch` samples each.
        Deterministic given (seed, epoch, rank, world_size); the shards of all ranks are disjoint."""

    def steps_per_epoch(self) -> int:
        """How many batches `batches(epoch)` yields (the same for every epoch and rank). This default counts
        them, which builds every batch of an epoch: answer with `batches_per_epoch` where you can."""
        return sum(1 for _ in self.batches(0))

    def samples_per_epoch(self) -> int | None:
        """Training samples in one epoch over all ranks, where the trainer knows it (its dataset's length);
        the memory probe records it for workloads that do not declare it. None: unknown."""
        return None

    @abc.abstractmethod
    def evaluate(self) -> dict[str, float]:
        """Metrics on the held-out split (module in eval mode, restored to train mode after)."""

    # Optional: evaluation shared by the ranks. Each rank evaluates its share and rank 0 scores the shares
    # together, instead of rank 0 evaluating it all while the others wait. Both or neither are overridden.
    def evaluate_shard(self, rank: int, world_size: int) -> object:
        """This rank's part of the evaluation (picklable: it travels to rank 0); None: not supported."""
        return None

    def score_shards(self, shards: list[Any]) -> dict[str, float]:
        """The metrics of `evaluate`, from every rank's `evaluate_shard` in rank order."""
        raise NotImplementedError(f"{type(self).__name__} has no sharded evaluation")

    def applied(self) -> dict[str, str]:
        """What took effect (e.g. {'precision': 'bf16'}), for the record."""
        return {}


class Workload(abc.ABC, Generic[P]):
    """A workload: its parameters (`params_type`, a frozen keyword-only dataclass of `param` fields), what
    it reports (`metrics`, usable as convergence targets), and how to build one rank (`build`).

    The three planning figures are optional: return None (the default) and orch measures them with a probe
    before the sweep (one rank at two small local batches, in the sweep's precision), caches the result and
    says so in `orch plan`. A hand-written formula stays allowed, and the report says which was used.
    Every method but `build` must be cheap and must not import torch.
    """

    name: str
    description: str = ""
    params_type: type[P]
    metrics: tuple[str, ...] = ()
    # Modules `build` imports (its trainer's): a rank imports them before it builds, so that its start-up
    # breakdown tells importing from building. Empty: `build` imports them itself.
    rank_modules: tuple[str, ...] = ()

    def memory_estimate_mib(self, params: P, local_batch: int) -> float | None:
        """Peak private memory of one rank at `local_batch` (its resident set less its file-backed pages: what it
        allocates; the libraries' pages, which a node's ranks share, are not in it), MiB; None: probe it."""
        return None

    def samples_per_epoch(self, params: P) -> int | None:
        """Training samples in one epoch over all ranks; None: probe it (`Trainer.samples_per_epoch`)."""
        return None

    def train_flops_per_sample(self, params: P) -> float | None:
        """FLOPs of training on one sample (forward and backward); None: count them with torch's FLOP
        counter in the probe."""
        return None

    @abc.abstractmethod
    def build(self, params: P, ctx: RankContext) -> Trainer:
        """Model, optimizer and data for one rank. Runs inside the rank process; may import torch."""


# --- data sharding, shared by the adapter and the built-ins ----------------------------------------------------

def shard_indices(num_samples: int, *, epoch: int, seed: int, rank: int, world_size: int,
                  local_batch: int) -> Iterator[torch.Tensor]:
    """Index tensors of `local_batch` samples for this rank, with torch's DistributedSampler semantics:
    shuffled by (seed, epoch), disjoint across ranks, and the same number of batches on every rank (the tail
    that would make ranks uneven is dropped), so collectives never wait on a rank that ran out of data."""
    import torch
    from torch.utils.data import BatchSampler, DistributedSampler

    class _Sized(torch.utils.data.Dataset[int]):
        def __len__(self) -> int:
            return num_samples

        def __getitem__(self, index: int) -> int:
            return index

    sampler: DistributedSampler[int] = DistributedSampler(_Sized(), num_replicas=world_size, rank=rank,
                                                          shuffle=True, seed=seed, drop_last=True)
    sampler.set_epoch(epoch)
    for indices in BatchSampler(sampler, local_batch, drop_last=True):
        yield torch.tensor(indices, dtype=torch.long)


def batches_per_epoch(num_samples: int, world_size: int, local_batch: int) -> int:
    """How many batches `shard_indices` yields per epoch, without building them.

    >>> batches_per_epoch(1000, world_size=2, local_batch=16)
    31
    """
    return (num_samples // world_size) // local_batch


# --- the function adapter ---------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class ModelParams(DdpParams):
    """The parameters every adapted model has (subclass it to add your own): the optimizer, its rate and
    the precision; DDP's switches come from `DdpParams`."""

    optimizer: Literal["sgd", "adamw", "adam"] = param("sgd", "sgd (with momentum), adamw or adam")
    lr: float = param(0.01, "learning rate when the sweep gives none (a convergence run scales its own)",
                      exclusive_minimum=0)
    momentum: float = param(0.9, "sgd only: momentum", minimum=0, maximum=1)
    weight_decay: float = param(0.0, "decoupled (adamw) or L2 (sgd, adam) weight decay", minimum=0)
    precision: Literal["auto", "fp32", "bf16"] = param(
        "auto", "bf16: the forward under torch.autocast(cpu, bfloat16), the loss in fp32; auto: bf16 where every "
                "node computes bf16 natively (AVX512-BF16 or AMX), else fp32")


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchContext:
    """What a batch generator is told: whose batches, of which epoch and split."""

    rank: int
    world_size: int
    local_batch: int
    epoch: int
    seed: int
    split: Literal["train", "eval"]


# A metric of one batch: (output, target) -> the batch's mean, weighted by its samples, or (sum, count), summed
# over the batches (a masked accuracy counts tokens, not samples). With dict batches the target is
# batch["labels"] when there is one, else the whole batch. Its arguments, and a loss's, stay open: a user's function
# declares its own types (`accuracy` takes a Tensor target), which a narrower Callable here would refuse.
Metric = Callable[[Any, Any], "float | tuple[float, float]"]
# A dataset per split: a map-style torch Dataset whose items are (input, ..., target) tuples or dicts of tensors.
DatasetFactory = Callable[[MP], object]
# Or a batch generator: yields this rank's batches of `local_batch` samples for the epoch (it may be endless:
# orch takes samples_per_epoch // (world_size × local_batch) of them).
BatchFactory = Callable[[MP, BatchContext], Iterable[object]]
LossFn = Callable[[Any, Any], "torch.Tensor"]
OptimizerFactory = Callable[[Iterable["torch.nn.Parameter"], MP, float], "torch.optim.Optimizer"]


def accuracy(output: object, target: torch.Tensor) -> tuple[float, float]:
    """Top-1 accuracy as (correct, counted): the argmax of the last dimension of `output` (or its `.logits`)
    against integer `target`; targets of -100 (Hugging Face's "not a label") are not counted, so a masked
    language model's accuracy is over its masked tokens."""
    # A Hugging Face model returns an output object holding the logits; a plain module, the logits tensor.
    logits = cast("torch.Tensor", getattr(output, "logits", output))
    predicted = logits.argmax(dim=-1)
    counted = target != -100
    return float((predicted[counted] == target[counted]).sum()), float(counted.sum())


class ModelWorkload(Workload[MP]):
    """A workload made by `model_workload` from functions; see there."""

    def __init__(self, *, name: str, params: type[MP], model: Callable[[MP], torch.nn.Module],
                 train_data: DatasetFactory[MP] | None, eval_data: DatasetFactory[MP] | None,
                 train_batches: BatchFactory[MP] | None, eval_batches: BatchFactory[MP] | None,
                 loss: LossFn | None, metrics: Mapping[str, Metric], optimizer: OptimizerFactory[MP] | None,
                 samples_per_epoch: int | Callable[[MP], int | None] | None, description: str,
                 memory_mib: Callable[[MP, int], float] | None,
                 flops_per_sample: float | Callable[[MP], float] | None):
        self.name, self.description, self.params_type = name, description, params
        self.metrics = tuple(metrics)
        self.model, self.loss, self.metric_fns, self.optimizer = model, loss, dict(metrics), optimizer
        self.train_data, self.eval_data = train_data, eval_data
        self.train_batches, self.eval_batches = train_batches, eval_batches
        self._samples, self._memory, self._flops = samples_per_epoch, memory_mib, flops_per_sample

    def samples_per_epoch(self, params: MP) -> int | None:
        return self._samples(params) if callable(self._samples) else self._samples

    def memory_estimate_mib(self, params: MP, local_batch: int) -> float | None:
        return self._memory(params, local_batch) if self._memory is not None else None

    def train_flops_per_sample(self, params: MP) -> float | None:
        return self._flops(params) if callable(self._flops) else self._flops

    def build(self, params: MP, ctx: RankContext) -> Trainer:
        from orch._model_trainer import ModelTrainer

        return ModelTrainer(self, params, ctx)


def model_workload(*, name: str, params: type[MP], model: Callable[[MP], torch.nn.Module],
                   train_data: DatasetFactory[MP] | None = None, eval_data: DatasetFactory[MP] | None = None,
                   train_batches: BatchFactory[MP] | None = None, eval_batches: BatchFactory[MP] | None = None,
                   loss: LossFn | None = None, metrics: Mapping[str, Metric] | None = None,
                   optimizer: OptimizerFactory[MP] | None = None,
                   samples_per_epoch: int | Callable[[MP], int | None] | None = None, description: str = "",
                   memory_mib: Callable[[MP, int], float] | None = None,
                   flops_per_sample: float | Callable[[MP], float] | None = None) -> ModelWorkload[MP]:
    """A workload from a model factory and its data.

    - `params`: your parameter dataclass, a subclass of `ModelParams`; every factory receives an instance.
    - `model(p)`: an `nn.Module`, built afresh in each rank (seeded by the run's seed).
    - Data, one of two forms per split: `train_data(p)` / `eval_data(p)`, map-style datasets whose items are
      `(input, ..., target)` tuples (a single tensor: input only) or dicts of tensors (Hugging Face style),
      which orch shards per rank; or `train_batches(p, ctx)` / `eval_batches(p, ctx)`, generators of this
      rank's batches (`BatchContext`), which need `samples_per_epoch`.
    - `loss(output, target)`: the training loss. Without it, the loss is the model's output when that is a
      scalar, or its `.loss` (Hugging Face outputs). With dict batches, the model is called as
      `model(**batch)` and `loss` receives the batch as target.
    - `metrics`: name -> `Metric` (e.g. {"accuracy": accuracy}), evaluated on the eval split; the names are
      what a convergence target may use.
    - `optimizer(parameters, p, lr)`: your own; default: `p.optimizer` at `lr`.
    - `samples_per_epoch`, `memory_mib(p, local_batch)`, `flops_per_sample`: give them, or orch measures them
      with its probe (the dataset's length, the peak private memory at two small batches, torch's FLOP
      counter). A `samples_per_epoch(p)` that returns None leaves it to the probe for those parameters (a
      dataset on disk whose length only the rank can read).
    """
    problems = []
    if (train_data is None) == (train_batches is None):
        problems.append("give exactly one of train_data (a dataset factory) and train_batches (a batch generator)")
    if eval_data is not None and eval_batches is not None:
        problems.append("give at most one of eval_data and eval_batches")
    if train_batches is not None and samples_per_epoch is None:
        problems.append("train_batches needs samples_per_epoch: a generator has no length to read")
    if metrics and eval_data is None and eval_batches is None:
        problems.append(f"metrics {sorted(metrics)} need an eval split: give eval_data or eval_batches")
    if not (isinstance(params, type) and issubclass(params, ModelParams) and dataclasses.is_dataclass(params)):
        problems.append(f"params must be a dataclass subclass of orch.workload.ModelParams, not {params!r}")
    if problems:
        raise WorkloadError(f"model_workload {name!r}: " + "; ".join(problems))
    return ModelWorkload(name=name, params=params, model=model, train_data=train_data, eval_data=eval_data,
                         train_batches=train_batches, eval_batches=eval_batches, loss=loss,
                         metrics=dict(metrics or {}), optimizer=optimizer, samples_per_epoch=samples_per_epoch,
                         description=description, memory_mib=memory_mib, flops_per_sample=flops_per_sample)
