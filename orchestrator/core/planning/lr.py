"""Learning-rate scaling with the global batch (Goyal et al.'s linear rule, Krizhevsky's square-root rule)
and linear warm-up from the base rate."""

from __future__ import annotations

import math
from dataclasses import dataclass


def scaled_lr(*, rule: str, base_lr: float, base_batch: int, global_batch: int) -> float:
    """
    >>> scaled_lr(rule="linear", base_lr=0.1, base_batch=32, global_batch=128)
    0.4
    >>> scaled_lr(rule="sqrt", base_lr=0.1, base_batch=32, global_batch=128)
    0.2
    """
    ratio = global_batch / base_batch
    if rule == "none":
        return base_lr
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    raise ValueError(f"unknown lr_rule {rule!r}; valid: none, linear, sqrt")


def learning_rate(*, rule: str, base_lr: float, base_batch: int, global_batch: int, warmup_epochs: float,
                  epoch: float) -> float:
    """The rate at fractional `epoch`: ramps linearly from base_lr to the scaled rate over warmup_epochs.

    >>> learning_rate(rule="linear", base_lr=0.1, base_batch=32, global_batch=128, warmup_epochs=2, epoch=1)
    0.25
    """
    target = scaled_lr(rule=rule, base_lr=base_lr, base_batch=base_batch, global_batch=global_batch)
    if warmup_epochs > 0 and epoch < warmup_epochs:
        return base_lr + (target - base_lr) * epoch / warmup_epochs
    return target


@dataclass(frozen=True, kw_only=True, slots=True)
class LrSchedule:
    """A convergence run's learning rate: the spec's rule, base rate and base batch, the run's global batch,
    and the warm-up.

    >>> LrSchedule(rule="sqrt", base_lr=0.1, base_batch=32, global_batch=128, warmup_epochs=0.0).at(0.0)
    0.2
    """

    rule: str
    base_lr: float
    base_batch: int
    global_batch: int
    warmup_epochs: float

    def at(self, epoch: float) -> float:
        return learning_rate(rule=self.rule, base_lr=self.base_lr, base_batch=self.base_batch,
                             global_batch=self.global_batch, warmup_epochs=self.warmup_epochs, epoch=epoch)


# The exponent p of each rule's ε(B) = base_lr·(B/base_batch)^p
RULE_EXPONENTS = {"none": 0.0, "sqrt": 0.5, "linear": 1.0}


@dataclass(frozen=True, kw_only=True, slots=True)
class LrScaling:
    """A sweep's learning-rate rule without a batch: the rate it gives at any global batch (after warm-up), which
    the epochs model needs at batches no run trained at.

    >>> s = LrScaling(rule="sqrt", base_lr=0.1, base_batch=32)
    >>> s.at(128), s.exponent
    (0.2, 0.5)
    """

    rule: str
    base_lr: float
    base_batch: int
    warmup_epochs: float = 0.0      # the linear warm-up from base_lr to the rule's rate (the epochs model counts it)

    def __post_init__(self) -> None:
        if self.rule not in RULE_EXPONENTS:
            raise ValueError(f"unknown lr_rule {self.rule!r}; valid: {', '.join(RULE_EXPONENTS)}")
        if not (self.base_lr > 0 and self.base_batch > 0):
            raise ValueError(f"base_lr({self.base_lr}) and base_batch({self.base_batch}) must be > 0")

    @property
    def exponent(self) -> float:
        return RULE_EXPONENTS[self.rule]

    def at(self, global_batch: float) -> float:
        return float(self.base_lr * (global_batch / self.base_batch) ** self.exponent)

    def words(self) -> str:
        warmup = f", {self.warmup_epochs:g} epochs of warm-up" if self.warmup_epochs else ""
        return f"the {self.rule} rule ({self.base_lr:g} at global batch {self.base_batch}{warmup})"
