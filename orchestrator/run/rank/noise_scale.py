"""The gradient noise scale measured in a training rank (the estimator is `orchestrator.core.measured.noise_scale`).

With several ranks, a DDP communication hook per gradient bucket: before the bucket is all-reduced it takes the
local gradient's squared norm (batch b, the rank's) and hands the bucket on to the hook the workload asked for
(the plain all-reduce, or a 16-bit compression) unchanged; after the backward pass the gradients are the
averaged ones (batch B = ranks × b), whose squared norm one fused call takes, and one small all-reduce
(asynchronous, waited for at the next step) averages the ranks' local squared norms. No per-parameter hook:
AdaptDL's slowed a small model 2.6×.

Every K-th step is measured (`core.measured.noise_scale.every_steps`: K ≤ 16, at least 4 measured steps per epoch); the
others pass through the hook untouched, and the last measured step's all-reduce is waited for at the next
measured one or the epoch's end.

With one rank there is no second gradient, so every `ONE_RANK_EVERY_STEPS`-th step runs its batch as two
micro-batches (each loss weighted by its share of the batch, so the step's gradient is the batch's): the first
half's gradient is the small one, the sum the big one. A batch that cannot be split (a single sample, an item
that is not a tensor or a list of per-sample items) is not measured.

Imported inside rank processes only (it imports torch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch
import torch.distributed as dist

from orchestrator.core.measured import noise_scale as ns
from orchestrator.core.measured.records import NoiseScaleSection

if TYPE_CHECKING:
    from orch.workload import Batch

    # A hook of DDP's default_hooks signature (allreduce_hook, bf16_compress_hook, ...).
    CommHook = Callable[[dist.ProcessGroup, dist.GradBucket], torch.futures.Future[torch.Tensor]]

NOISE_ATTR = "_orch_noise_scale"    # the hook's state, on the DDP module it is registered with
# One rank measures one step in this many: a split step runs two half batches, which cost more than the whole
# batch where the step has a large fixed part (about +20% for the classifier at batch 128 and the small
# RetinaNet at 8, in a quick run on a busy machine; benchmarks/bench_noise_scale.py measures it): every 10th
# step keeps the cost near 2%.
ONE_RANK_EVERY_STEPS = 10


@runtime_checkable
class CommHookHost(Protocol):
    """What takes a communication hook: a DistributedDataParallel module."""

    def register_comm_hook(self, state: object, hook: Callable[..., object]) -> None: ...


class HookState:
    """What the noise hook keeps between a step's buckets: the inner hook, each bucket's local squared norm, and
    whether this step is measured (a step that is not goes through to the inner hook untouched)."""

    def __init__(self, inner: CommHook):
        self.inner = inner
        self.local: list[float] = []
        self.measure = True

    def clear(self) -> None:
        self.local.clear()


def squared_norm(tensor: torch.Tensor) -> float:
    flat = tensor.detach().reshape(-1)
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    return float(torch.dot(flat, flat))


def grad_squared_norm(module: torch.nn.Module) -> float:
    """|∇|² over the module's gradients, in one fused call: after DDP's backward, the averaged gradient's."""
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    if not grads:
        return 0.0
    norms = torch._foreach_norm([g.detach() if g.dtype in (torch.float32, torch.float64) else g.detach().float()
                                 for g in grads])
    return float(torch.stack(norms).double().square().sum())


# No annotations on the hook: DDP compares its parameter's annotation with dist.GradBucket, and this module's
# annotations are strings (from __future__ import annotations). It adds no callback of its own to the bucket's
# future (each runs on the communication thread): the averaged gradient's norm is taken after the backward pass.
def noise_hook(state, bucket):
    if state.measure:
        state.local.append(squared_norm(bucket.buffer()))
    return state.inner(None, bucket)


def register(ddp: CommHookHost, inner: CommHook) -> HookState:
    """Register the noise hook on a DDP module around `inner` (a hook of DDP's default_hooks signature, called
    with the default process group), and keep its state on the module."""
    state = HookState(inner)
    ddp.register_comm_hook(state=state, hook=noise_hook)
    setattr(ddp, NOISE_ATTR, state)
    return state


def split_batch(batch: Batch) -> tuple[Batch, Batch, int, int] | None:
    """(first half, second half, its samples, the other's) of a batch whose items are tensors or lists with
    one entry per sample (a dict's values too); None when it cannot be split so.

    >>> a, b, n1, n2 = split_batch((torch.arange(5), [10, 11, 12, 13, 14]))
    >>> a[0].tolist(), b[1], n1, n2
    ([0, 1], [12, 13, 14], 2, 3)
    """
    sizes: set[int] = set()

    def size(item: object) -> None:
        if isinstance(item, torch.Tensor) and item.dim() > 0:
            sizes.add(int(item.shape[0]))
        elif isinstance(item, (list, tuple)):
            sizes.add(len(item))
        elif isinstance(item, dict):
            for value in item.values():
                size(value)
        else:
            sizes.add(-1)

    for item in batch:
        size(item)
    if len(sizes) != 1 or next(iter(sizes)) < 2:
        return None
    n = next(iter(sizes))
    half = n // 2

    def cut(item: object, part: slice) -> object:
        if isinstance(item, dict):
            return {key: cut(value, part) for key, value in item.items()}
        assert isinstance(item, (torch.Tensor, list, tuple))   # what `size` counted: anything else returned None
        return item[part]

    first = tuple(cut(item, slice(0, half)) for item in batch)
    second = tuple(cut(item, slice(half, n)) for item in batch)
    return first, second, half, n - half


class NoiseScale:
    """The protocol's training step with B_simple measured (`step`), rows at each epoch's end (`epoch_end`)
    and the record's section (`section`)."""

    def __init__(self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, *, world: int, local_batch: int,
                 every: int = 1):
        """`every`: with several ranks, measure one step in this many (`core.measured.noise_scale.every_steps`)."""
        self.module, self.optimizer, self.world, self.every = module, optimizer, world, max(1, every)
        self.state: HookState | None = getattr(module, NOISE_ATTR, None)
        self.steps = 0
        self.rows: list[list[float | None]] = []
        self.why_not = ""
        self.pending: tuple[dist.Work, torch.Tensor, float] | None = None
        if world > 1:
            self.method = ns.DDP
            self.meter = ns.NoiseMeter(small_batch=local_batch, big_batch=local_batch * world)
            if self.state is None:
                self.why_not = "the DDP module has no noise hook"
        else:
            self.method = ns.MICRO_BATCHES
            self.local_batch = local_batch
            if local_batch < 2:
                self.why_not = "one rank at local batch 1: no two micro-batches to compare"
            self.meter = ns.NoiseMeter(small_batch=max(1, local_batch // 2), big_batch=max(2, local_batch))

    def step(self, batch: Batch) -> torch.Tensor:
        self.steps += 1
        if self.why_not:
            return self._plain(batch)
        if self.world > 1:
            if self.steps % self.every == 0:
                return self._ddp_step(batch)
            assert self.state is not None
            self.state.clear()
            self.state.measure = False   # through the hook untouched; the last measured step's all-reduce waits
            try:
                return self._plain(batch)
            finally:
                self.state.measure = True
        if self.steps % ONE_RANK_EVERY_STEPS == 0:
            halves = split_batch(batch)
            if halves is not None and halves[2] + halves[3] == self.local_batch:
                return self._split_step(*halves)
        return self._plain(batch)

    def _plain(self, batch: Batch) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.module(*batch)
        loss.backward()
        self.optimizer.step()
        return loss

    def _ddp_step(self, batch: Batch) -> torch.Tensor:
        assert self.state is not None
        self.state.clear()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.module(*batch)
        loss.backward()
        self._collect()
        local = torch.tensor([sum(self.state.local)], dtype=torch.float64)
        # waited for at the next step (or the epoch's end): its latency hides behind the optimizer's step and the
        # next forward pass; every rank issues it at the same point, so the collectives stay in order
        self.pending = (dist.all_reduce(local, async_op=True), local, grad_squared_norm(self.module))
        self.optimizer.step()
        return loss

    def _collect(self) -> None:
        """The previous step's averaged local squared norm, into the meter."""
        if self.pending is not None:
            work, local, synced = self.pending
            work.wait()
            self.meter.add(small_sq=float(local.item()) / self.world, big_sq=synced)
            self.pending = None

    def _split_step(self, first: Batch, second: Batch, n1: int, n2: int) -> torch.Tensor:
        n = n1 + n2
        self.optimizer.zero_grad(set_to_none=True)
        loss1 = self.module(*first) * (n1 / n)
        loss1.backward()
        small = grad_squared_norm(self.module) / (n1 / n) ** 2
        loss2 = self.module(*second) * (n2 / n)
        loss2.backward()
        self.meter.add(small_sq=small, big_sq=grad_squared_norm(self.module))
        self.optimizer.step()
        return (loss1 + loss2).detach()

    def epoch_end(self, epoch: float) -> None:
        if not self.why_not:
            self._collect()
            self.rows.append(ns.epoch_entry(epoch, self.meter.estimate()))

    def section(self, at_epoch: float) -> NoiseScaleSection:
        if self.why_not:
            return ns.not_measured(self.why_not)
        self._collect()
        if not self.rows or self.rows[-1][0] != round(at_epoch, 6):
            self.epoch_end(at_epoch)
        return ns.section(self.meter, method=self.method, at_epoch=at_epoch, epochs=self.rows,
                          every=self.every if self.world > 1 else ONE_RANK_EVERY_STEPS)


class ScriptNoise:
    """B_simple in a script's convergence run, from the DDP model it hands orch (`orch.script.model`): the noise
    hook around the plain all-reduce, read (with the averaged gradients) at each `orch.script.step()`. No
    collective runs inside the script's step (its ranks call orch at their own points), so the small gradient is
    this rank's alone, not the ranks' average: as unbiased, a little noisier."""

    def __init__(self, state: HookState | None, *, world: int, local_batch: int, why_not: str = "",
                 module: torch.nn.Module | None = None):
        self.state, self.why_not, self.module = state, why_not, module
        self.meter = ns.NoiseMeter(small_batch=local_batch, big_batch=local_batch * max(world, 2))
        self.rows: list[list[float | None]] = []

    @classmethod
    def attach(cls, module: object, *, world: int, local_batch: int) -> ScriptNoise:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        # (a model with DDP's hook registration is a module: DDP is one)
        if world < 2 or not isinstance(module, torch.nn.Module) or not isinstance(module, CommHookHost):
            why = ("one rank: a script's steps are its own, so orch cannot split a batch in two" if world < 2 else
                   "the model handed to orch.script.model is not wrapped in DistributedDataParallel")
            return cls(None, world=world, local_batch=local_batch, why_not=why)
        if getattr(module, "_comm_hooks", None):
            return cls(None, world=world, local_batch=local_batch,
                       why_not="the script registered its own DDP communication hook (DDP takes one)")
        try:
            state = register(module, default_hooks.allreduce_hook)
        except RuntimeError as err:   # a built-in hook registered by the script: DDP takes one
            return cls(None, world=world, local_batch=local_batch, why_not=f"DDP refused the noise hook: {err}")
        return cls(state, world=world, local_batch=local_batch, module=module)

    def step(self) -> None:
        """After one of the script's steps: its backward's squared norms (none where it ran no synced backward).
        The gradients are still the step's: a script zeroes them before its next backward."""
        if self.state is None or not self.state.local or self.module is None:   # (a state comes with its module)
            return
        self.meter.add(small_sq=sum(self.state.local), big_sq=grad_squared_norm(self.module))
        self.state.clear()

    def epoch_end(self, epoch: float) -> None:
        if self.state is not None:
            self.rows.append(ns.epoch_entry(epoch, self.meter.estimate()))

    def section(self, at_epoch: float) -> NoiseScaleSection:
        if self.state is None:
            return ns.not_measured(self.why_not)
        if not self.rows or self.rows[-1][0] != round(at_epoch, 6):
            self.epoch_end(at_epoch)
        return ns.section(self.meter, method=ns.DDP, at_epoch=at_epoch, epochs=self.rows)
