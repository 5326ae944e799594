"""The stability edge measured inside a convergence rank: the learning rate past which a step makes the loss worse.
The estimators' arithmetic and the fit across batches are `orchestrator.core.predict.edge`.

McCandlish, Kaplan, Amodei et al. (2018, App. A): one SGD step of rate ε at batch B lowers the loss by
ε|G|² − ½ε²(GᵀHG + tr(HΣ)/B), which is negative past twice the optimal rate, ε_edge(B) = 2·ε_max/(1 + B_noise/B),
ε_max = |G|²/GᵀHG and B_noise = tr(HΣ)/GᵀHG. Two ways to place it, each on a copy of the model and its
optimizer taken at the probe point (training goes on from the original, its random state restored, so a probed
run trains as an unprobed one would):

- a learning-rate range test (any optimizer): steps at rates growing geometrically from a tenth of the run's rate
  to a hundred times it, the loss taken after each on a few held batches; the rate at which it is lowest is where
  it starts to rise: the edge at the batch the steps took. Every rank runs its own on its own shard, so the ranks'
  spread is its uncertainty;
- Hessian-vector products (SGD only: an adaptive optimizer's step is preconditioned, the plain Hessian is not
  the one its step sees): gradients of `micro` local batches, their mean Ĝ and deviations d_j, and Ĝ·HĜ and each
  d_j·H d_j by double backward on another micro-batch (so that the Hessian's noise and the vector's are
  independent); each rank's sums are pooled.

Imported inside rank processes only (it imports torch).
"""

from __future__ import annotations

import copy
import math
import random
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed as dist

from orchestrator.core.measured.records import EdgeSection
from orchestrator.core.predict import edge as core_edge

if TYPE_CHECKING:
    from orch.workload import Batch, Trainer

PROBE_EPOCH = 1_000_003      # the data of `trainer.batches(epoch)` the probe draws from: not the run's own epochs


class _Copy:
    """The module's parameters and buffers cloned as fresh leaves (no hook of DDP's reducer on them, which a
    deepcopy would carry over), called through `torch.func.functional_call`, with an optimizer of the same kind,
    groups and state over them."""

    def __init__(self, trainer: Trainer):
        module = trainer.module
        self.module = module
        self.params = {n: p.detach().clone().requires_grad_(p.requires_grad) for n, p in module.named_parameters()}
        self.buffers = {n: b.detach().clone() for n, b in module.named_buffers()}
        name_of = {id(p): n for n, p in module.named_parameters()}
        original = trainer.optimizer
        groups = [{**{k: v for k, v in g.items() if k != "params"},
                   "params": [self.params[name_of[id(p)]] for p in g["params"]]} for g in original.param_groups]
        # each group carries every hyperparameter: the constructor's own keywords are not needed (and a subclass's
        # defaults may hold keys its constructor refuses: AdamW's decoupled_weight_decay)
        self.optimizer = type(original)(groups)  # type: ignore[call-arg]   # every concrete optimizer has defaults
        # a deep copy: load_state_dict keeps tensors that need no cast as they are, so the copy's momentum would be
        # the original's, stepped by the probe
        self.optimizer.load_state_dict(copy.deepcopy(original.state_dict()))

    def loss(self, batch: Batch) -> torch.Tensor:
        out: torch.Tensor = torch.func.functional_call(self.module, {**self.params, **self.buffers}, tuple(batch))
        return out

    @property
    def trainable(self) -> list[torch.Tensor]:
        return [p for p in self.params.values() if p.requires_grad]


def _batches(trainer: Trainer) -> Iterator[Batch]:
    epoch = PROBE_EPOCH
    while True:
        yield from trainer.batches(epoch)
        epoch += 1


def range_test(trainer: Trainer, rate: float, *, steps: int, accumulate: int,
               heartbeat: Callable[[], None]) -> tuple[float | None, list[float], list[float]]:
    """(the rate at the lowest loss, or None where the loss never rose; the rates; the losses) of `steps` steps
    from rate/10 to rate×100, each over `accumulate` local batches. The loss is taken after each step on a fixed
    set of held batches (`accumulate` + 1 of them, never stepped on): a training batch's own loss is too noisy at
    small batches to place the rise."""
    copy_ = _Copy(trainer)
    optimizer = copy_.optimizer
    rates = core_edge.ramp(rate, steps)
    data = _batches(trainer)
    held = [next(data) for _ in range(accumulate + 1)]
    losses: list[float] = []
    for lr in rates:
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        for _ in range(accumulate):
            (copy_.loss(next(data)) / accumulate).backward()
        optimizer.step()
        with torch.no_grad():
            losses.append(float(sum(float(copy_.loss(batch)) for batch in held) / len(held)))
        heartbeat()
        if not math.isfinite(losses[-1]):
            break
    return core_edge.rise_rate(rates[:len(losses)], losses), rates[:len(losses)], losses


def hvp_sums(trainer: Trainer, *, micro: int, heartbeat: Callable[[], None]) -> core_edge.HvpSums:
    """This rank's sums for ε_max and B_noise from `micro` local batches (the module's own parameters, in place:
    nothing is stepped)."""
    copy_ = _Copy(trainer)
    params = copy_.trainable
    data = _batches(trainer)
    batches = [next(data) for _ in range(micro + 1)]
    grads = []
    for batch in batches[:micro]:
        grads.append([g.detach().clone() for g in torch.autograd.grad(copy_.loss(batch), params)])
        heartbeat()
    mean = [torch.stack([g[i] for g in grads]).mean(0) for i in range(len(params))]

    def quad(vector: list[torch.Tensor], batch: Batch) -> float:
        first = torch.autograd.grad(copy_.loss(batch), params, create_graph=True)
        dot = torch.stack([(f * v).sum() for f, v in zip(first, vector)]).sum()
        hv = torch.autograd.grad(dot, params)
        heartbeat()
        return float(sum((h * v).sum() for h, v in zip(hv, vector)))

    deviations = [[g - m for g, m in zip(grad, mean)] for grad in grads]
    return core_edge.HvpSums(
        local_batch=_size(batches[0]), mean_sq=float(sum((m * m).sum() for m in mean)),
        mean_h_mean=quad(mean, batches[micro]),
        deviation_sq=[float(sum((d * d).sum() for d in dev)) for dev in deviations],
        deviation_h=[quad(dev, batches[(j + 1) % micro]) for j, dev in enumerate(deviations)])


def _size(batch: Batch) -> int:
    for item in batch:
        if isinstance(item, torch.Tensor) and item.dim() > 0:
            return int(item.shape[0])
        if isinstance(item, (list, tuple)):
            return len(item)
    return 1


def probe(trainer: Trainer, *, mode: str, rate: float, at_epoch: float, local_batch: int, world: int,
          heartbeat: Callable[[], None]) -> EdgeSection:
    """The edge at this point of the run, measured as `mode` asks (core_edge.AUTO: a range test at the local
    batch; FULL: at the global batch, and Hessian-vector products for SGD), pooled over the ranks."""
    started = time.perf_counter()
    states = (torch.get_rng_state(), random.getstate(), np.random.get_state())
    optimizer = trainer.optimizer
    name = type(optimizer).__name__
    momentum = float(optimizer.defaults.get("momentum", 0.0) or 0.0)
    accumulate = world if mode == core_edge.FULL else 1
    try:
        rise, rates, losses = range_test(trainer, rate, steps=core_edge.RANGE_STEPS[mode], accumulate=accumulate,
                                         heartbeat=heartbeat)
        sums = None
        why_not = ""
        if mode == core_edge.FULL:
            why_not = core_edge.hvp_why_not(name)
            if not why_not:
                try:
                    sums = hvp_sums(trainer, micro=core_edge.HVP_MICRO_BATCHES, heartbeat=heartbeat)
                except RuntimeError as err:       # a kernel without double backward, say
                    why_not = f"Hessian-vector products failed: {str(err).splitlines()[0][:200]}"
    finally:   # the run goes on as if unprobed: every random state the probe's batches and dropout drew from
        torch.set_rng_state(states[0])
        random.setstate(states[1])
        np.random.set_state(states[2])
    pooled = _gather((rise, sums, rates[0] if rates else rate, losses), world)
    return core_edge.section(pooled, mode=mode, at_epoch=at_epoch, batch=local_batch * accumulate, optimizer=name,
                             momentum=momentum, rate=rate, steps=len(losses), why_not=why_not,
                             probe_s=time.perf_counter() - started)


def _gather(mine: tuple[object, ...], world: int) -> list[tuple[object, ...]]:
    if world <= 1 or not dist.is_initialized():
        return [mine]
    out: list[tuple[object, ...] | None] = [None] * world
    dist.all_gather_object(out, mine)
    return [o for o in out if o is not None]
