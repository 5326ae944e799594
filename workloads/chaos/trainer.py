"""The chaos workload's torch side: the classifier trainer whose module misbehaves on cue."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from typing import cast

import torch

from orch.workload import RankContext
from workloads.chaos.workload import ChaosParams
from workloads.classifier.trainer import ClassifierTrainer, LossModule


class FaultyLossModule(LossModule):
    def __init__(self, net: torch.nn.Module, p: ChaosParams, rank: int):
        super().__init__(net)
        self.p, self.rank, self.steps = p, rank, 0
        self.hoard: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        if self.training and self.rank == self.p.fault_rank and self.steps == self.p.fault_at_step:
            self._misbehave()
        return super().forward(x, y)

    def _misbehave(self) -> None:
        fault = self.p.fault
        if fault == "crash":
            raise RuntimeError(f"chaos: injected crash on rank {self.rank} at step {self.steps}")
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "hang":
            # The other ranks block in this step's all-reduce, waiting for a gradient that never comes.
            while True:
                time.sleep(3600)
        if fault == "oom":
            elements = self.p.oom_step_mib * 2**20 // 4
            while True:
                self.hoard.append(torch.ones(elements))  # ones, not empty: pages must really be touched
                time.sleep(0.02)


class ChaosTrainer(ClassifierTrainer):
    def __init__(self, p: ChaosParams, ctx: RankContext):
        time.sleep(p.build_delay_s)   # a slow start-up shows no steps: the watchdog must not read it as a hang
        super().__init__(p, ctx)
        armed = p.fault_local_batch is None or p.fault_local_batch == ctx.local_batch
        net = cast(torch.nn.Module, self.module.net)
        self.module = FaultyLossModule(net, p if armed else replace(p, fault="none"), ctx.rank)
