"""`chaos`: the classifier with a fault injected on one rank at one step. It exists to prove, on your own
cluster, what the orchestrator does when training goes wrong: a crash, a kill, a hung collective, runaway
memory. Each fault is real: the process really raises, really receives SIGKILL, really blocks before the
all-reduce, really allocates and touches memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orch.workload import RankContext, Trainer, param
from workloads.classifier.workload import ClassifierParams, MlpWorkload


@dataclass(frozen=True, kw_only=True, slots=True)
class ChaosParams(ClassifierParams):
    fault: Literal["none", "crash", "kill", "hang", "oom"] = param(
        "none", "crash: raise; kill: SIGKILL itself; hang: block before the all-reduce forever; oom: allocate "
                "and touch memory until stopped")
    fault_rank: int = param(0, "the rank that misbehaves", minimum=0)
    fault_at_step: int = param(3, "the training step (counted from 1, warm-up included) at which it does",
                             minimum=1)
    fault_local_batch: int | None = param(None, "only misbehave in trials with this local batch (others run clean, "
                                              "so one sweep shows failing and healthy trials side by side)")
    oom_step_mib: int = param(64, "memory the oom fault adds every 20 ms", minimum=1)
    build_delay_s: float = param(0.0, "seconds every rank's build sleeps before it returns: a slow start-up, as on "
                                    "a slow or loaded CPU or with a large model", minimum=0)


class ChaosWorkload(MlpWorkload[ChaosParams]):
    name = "chaos"
    description = "the classifier with an injected fault (crash, kill, hang, oom) for testing failure handling"
    params_type = ChaosParams
    rank_modules = ("workloads.chaos.trainer",)

    def build(self, params: ChaosParams, ctx: RankContext) -> Trainer:
        from workloads.chaos.trainer import ChaosTrainer

        return ChaosTrainer(params, ctx)
