"""The torch side of `orch.workload.model_workload`: one rank's model, optimizer, data shard and metrics, built
inside the rank process. Private: users reach it through `model_workload` only."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import torch
from torch import nn

from orch.workload import (
    MP,
    Batch,
    BatchContext,
    BatchFactory,
    DatasetFactory,
    LossFn,
    ModelParams,
    ModelWorkload,
    RankContext,
    Trainer,
    WorkloadError,
    batches_per_epoch,
    shard_indices,
)

R = TypeVar("R")


def _call(factory: Callable[..., R], *args: object, what: str) -> R:
    """Call a user function; what it raises becomes a WorkloadError that names it."""
    try:
        return factory(*args)
    except WorkloadError:
        raise
    except Exception as err:
        name = getattr(factory, "__qualname__", repr(factory))
        raise WorkloadError(f"{what} {name} raised {type(err).__name__}: {err}") from err


def as_args(batch: object) -> Batch:
    """A collated batch as the module's arguments: a dict is one argument (the model is called with
    **batch), a tuple or list its items, anything else itself."""
    if isinstance(batch, Mapping):
        return (dict(batch),)
    if isinstance(batch, (tuple, list)):
        return tuple(batch)
    return (batch,)


def _target(args: Batch) -> object:
    if len(args) == 1 and isinstance(args[0], dict):
        return args[0].get("labels", args[0])
    return args[-1]


class _Split:
    """One split's batches for this rank: a map-style dataset sharded by orch, or the user's generator."""

    def __init__(self, source: Any, *, is_generator: bool, params: ModelParams, ctx: RankContext, split: str,
                 samples: int | None):
        self.source, self.is_generator, self.params, self.ctx, self.split = source, is_generator, params, ctx, split
        self.samples = samples
        if not is_generator:
            if not hasattr(source, "__getitem__") or not hasattr(source, "__len__"):
                raise WorkloadError(f"the {split} data is a {type(source).__name__}, not a map-style dataset "
                                    "(__getitem__ and __len__); give a generator with "
                                    f"{split}_batches= instead")
            self.samples = len(source)

    def steps(self) -> int:
        return batches_per_epoch(self.samples or 0, self.ctx.world_size, self.ctx.local_batch)

    def _collate(self, indices: torch.Tensor) -> Batch:
        data = self.source
        if isinstance(data, torch.utils.data.TensorDataset):   # one gather per tensor, not one item at a time
            return tuple(t[indices] for t in data.tensors)
        return as_args(torch.utils.data.default_collate([data[i] for i in indices.tolist()]))

    def train_batches(self, epoch: int) -> Iterator[Batch]:
        c = self.ctx
        if self.is_generator:
            context = BatchContext(rank=c.rank, world_size=c.world_size, local_batch=c.local_batch, epoch=epoch,
                                   seed=c.seed, split="train")
            generated = _call(self.source, self.params, context, what=f"the {self.split} batch generator")
            for _, batch in zip(range(self.steps()), generated):
                yield as_args(batch)
            return
        for indices in shard_indices(self.samples or 0, epoch=epoch, seed=c.seed, rank=c.rank,
                                     world_size=c.world_size, local_batch=c.local_batch):
            yield self._collate(indices)

    def eval_batches(self, rank: int, world_size: int) -> Iterable[Batch]:
        """Every sample once, unshuffled, this rank's share (rank::world_size) in batches of local_batch."""
        c = self.ctx
        if self.is_generator:
            context = BatchContext(rank=rank, world_size=world_size, local_batch=c.local_batch, epoch=0,
                                   seed=c.seed, split="eval")
            for batch in _call(self.source, self.params, context, what=f"the {self.split} batch generator"):
                yield as_args(batch)
            return
        mine = torch.arange(rank, self.samples or 0, world_size)
        for start in range(0, len(mine), c.local_batch):
            yield self._collate(mine[start:start + c.local_batch])


class LossModule(nn.Module):
    """forward(*batch) -> the scalar training loss, the shape orch's training step expects."""

    def __init__(self, model: nn.Module, loss: LossFn | None, bf16: bool):
        super().__init__()
        self.model, self.loss_fn, self.bf16 = model, loss, bf16

    def outputs(self, *args: object) -> object:
        """The model's output on a batch (its inputs without the target when a loss is given)."""
        with torch.autocast("cpu", dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext():
            if len(args) == 1 and isinstance(args[0], dict):
                return self.model(**args[0])
            return self.model(*(args[:-1] if self.loss_fn is not None and len(args) > 1 else args))

    def forward(self, *args: object) -> torch.Tensor:
        try:
            out = self.outputs(*args)
        except TypeError as err:
            if self.loss_fn is not None or len(args) < 2:
                raise
            raise WorkloadError(f"with no loss= given, the model is called with every item of a batch "
                                f"(model(*batch), {len(args)} arguments) and must return the loss, but it raised "
                                f"TypeError: {err}; give model_workload a loss=(output, target) -> scalar, which calls "
                                "model(inputs) and scores the target") from err
        loss: object
        if self.loss_fn is not None:
            loss = self.loss_fn(_fp32(out), _target(args))
        else:
            loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", out)
        if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.is_floating_point()):
            raise WorkloadError(f"the training loss is {_describe(loss)}, not a scalar: the model's forward returned "
                                f"{_describe(out)}; give model_workload a loss=(output, target) -> scalar, or "
                                "return the loss (or an output with .loss) from forward")
        return loss.float().reshape(())


def _batch_size(args: Batch) -> int:
    """Samples in a batch: the first dimension of its first tensor."""
    first = next(iter(args[0].values())) if len(args) == 1 and isinstance(args[0], dict) else args[0]
    return int(first.shape[0]) if isinstance(first, torch.Tensor) else len(first)


def _fp32(out: object) -> object:
    """Autocast's bf16 logits as fp32 for the loss (losses are computed in fp32)."""
    if isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16:
        return out.float()
    return out


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def make_optimizer(parameters: list[nn.Parameter], p: ModelParams, lr: float) -> torch.optim.Optimizer:
    if p.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=lr, momentum=p.momentum, weight_decay=p.weight_decay)
    if p.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=lr, weight_decay=p.weight_decay)
    return torch.optim.AdamW(parameters, lr=lr, weight_decay=p.weight_decay)


class ModelTrainer(Trainer):
    """One rank of a `model_workload`."""

    def __init__(self, workload: ModelWorkload[MP], params: MP, ctx: RankContext):
        # Deciding `auto` probes the CPU (orch.precision): a side effect the workload door does not have.
        if params.precision == "auto":
            raise WorkloadError(f"workload {workload.name!r}: precision 'auto' reached the trainer undecided. A sweep "
                                "decides it in its plan; outside a sweep, decide it on this machine before building "
                                "the trainer: params = orch.decide_precision(params)")
        self.workload, self.p, self.ctx = workload, params, ctx
        torch.manual_seed(ctx.seed)
        model = _call(workload.model, params, what="the model factory")
        if not isinstance(model, nn.Module):
            raise WorkloadError(f"the model factory returned a {type(model).__name__}, not a torch.nn.Module")
        self.train = self._split(workload.train_data, workload.train_batches, "train")
        self.eval = self._split(workload.eval_data, workload.eval_batches, "eval")
        if self.train is not None and self.train.steps() == 0:
            raise WorkloadError(f"the train split has {self.train.samples} samples: fewer than one batch per rank "
                                f"({ctx.world_size} rank(s) × local batch {ctx.local_batch} = "
                                f"{ctx.world_size * ctx.local_batch})")
        self.module: LossModule = LossModule(model, workload.loss, bf16=params.precision == "bf16")
        trained = [q for q in model.parameters() if q.requires_grad]
        lr = ctx.lr or params.lr
        self.optimizer = (_call(workload.optimizer, trained, params, lr, what="the optimizer factory")
                          if workload.optimizer is not None else make_optimizer(trained, params, lr))

    def _split(self, dataset: DatasetFactory[MP] | None, generator: BatchFactory[MP] | None,
               split: str) -> _Split | None:
        if dataset is not None:
            source = _call(dataset, self.p, what=f"the {split} dataset factory")
            return _Split(source, is_generator=False, params=self.p, ctx=self.ctx, split=split, samples=None)
        if generator is not None:
            return _Split(generator, is_generator=True, params=self.p, ctx=self.ctx, split=split,
                          samples=self.workload.samples_per_epoch(self.p))
        return None

    def batches(self, epoch: int) -> Iterator[Batch]:
        assert self.train is not None   # model_workload requires a train split
        return self.train.train_batches(epoch)

    def steps_per_epoch(self) -> int:
        return self.train.steps() if self.train is not None else 0

    def samples_per_epoch(self) -> int | None:
        return self.train.samples if self.train is not None else None

    def evaluate(self) -> dict[str, float]:
        return self.score_shards([self.evaluate_shard(0, 1)])

    def evaluate_shard(self, rank: int, world_size: int) -> dict[str, list[float]]:
        sums = {name: [0.0, 0.0] for name in self.workload.metric_fns}
        if self.eval is None or not sums:
            return sums
        self.module.eval()
        try:
            with torch.no_grad():
                for args in self.eval.eval_batches(rank, world_size):
                    out, target, samples = _fp32(self.module.outputs(*args)), _target(args), _batch_size(args)
                    for name, fn in self.workload.metric_fns.items():
                        value = _call(fn, out, target, what=f"the metric {name!r}")
                        total, count = value if isinstance(value, tuple) else (value * samples, samples)
                        sums[name][0] += float(total)
                        sums[name][1] += float(count)
        finally:
            self.module.train()
        return sums

    def score_shards(self, shards: list[dict[str, list[float]]]) -> dict[str, float]:
        out = {}
        for name in self.workload.metric_fns:
            total = sum(shard[name][0] for shard in shards)
            count = sum(shard[name][1] for shard in shards)
            out[name] = total / count if count else float("nan")
        return out

    def applied(self) -> dict[str, str]:
        data = ("generator" if self.train is not None and self.train.is_generator
                else f"dataset ({self.samples_per_epoch()} samples)")
        optimizer = "user's" if self.workload.optimizer is not None else self.p.optimizer
        return {"precision": self.p.precision, "optimizer": optimizer, "data": data}
