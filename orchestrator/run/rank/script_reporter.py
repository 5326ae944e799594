"""What stands behind `orch.script` in a script's rank (run.rank.script): the throughput and convergence
protocols, kept by the script's own calls instead of orch's loop. The timing rules are the built-ins'
(run.rank.protocol); only what reports a step differs:

- a step is what happens between two `orch.script.step()` calls: everything the script's loop does (loading the
  batch, logging, its own syncs), which is what the script costs per step;
- warm-up steps excluded: the timed window opens at the end of step `warmup_steps`;
- a window all ranks share: a barrier in the trial's rendezvous store at each repeat's boundary (kept by orch,
  so it holds whether or not the script joined torch.distributed), and each rank's wall time per repeat; the
  driver takes the slowest rank, the median of repeats and their spread (core.measured.throughput), as for the
  built-ins;
- a throughput trial ends the script inside the step that ends its last repeat (result written, process
  ended: code after the loop does not run);
- a convergence trial ends it at the step after rank 0 reports the target metric at or above the target (or
  the epoch cap), every rank at the same step: rank 0 posts that step in the store, the others read it there.

Every check that can fail a trial names its cause and ends the rank (`fail`): a script that had not
joined torch.distributed by its first step with several ranks, or joined it on another backend than the plan's,
a step with other than the trial's local batch, an end without the steps or the metric the trial needs.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.core.measured.records import Kind, NoiseScaleSection
from orchestrator.core.profile.flop_count import STATED
from orchestrator.run.job import PROBE, Phase, ProgressWriter, RankJob, RankResult
from orchestrator.run.rank.process import ERROR_CHARS
from orchestrator.run.reports import ConvergenceReport, ProbeReport, Report, ThroughputReport

if TYPE_CHECKING:   # the reporter stands in a script's process: torch is the script's to import
    import torch
    from torch.distributed import Store

    from orchestrator.run.rank.noise_scale import ScriptNoise
    from orchestrator.run.rank.process import StartupClock

STOP_KEY = "orch/stop"        # a convergence run's verdict, posted by rank 0: {"step", "converged", "epoch"}
LEFT_KEY = "orch/left"        # how many ranks other than 0 are done with the store
LEAVE_WAIT_S = 30.0           # rank 0 (the store's host) waits this long at most for the others to be done with it
LEAVE_POLL_S = 0.01


def fail(progress: ProgressWriter, message: str) -> None:
    """End the rank as failed with `message` as its reason (written first: the launcher reads it at the exit)."""
    progress.update(error=message[:ERROR_CHARS], force=True)
    print(f"orch: {message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


def cpu_backend(config: str) -> str:
    """The backend of CPU tensors in torch.distributed.get_backend_config()'s answer.

    >>> cpu_backend("cpu:gloo,cuda:nccl"), cpu_backend("gloo"), cpu_backend("cuda:nccl")
    ('gloo', 'gloo', 'none for CPU tensors (cuda:nccl)')
    """
    parts = [part.strip() for part in config.split(",") if part.strip()]
    for part in parts:
        device, sep, backend = part.partition(":")
        if not sep:
            return device
        if device == "cpu":
            return backend
    return f"none for CPU tensors ({config})"


@dataclass(frozen=True, slots=True)
class StopVerdict:
    """A convergence run's verdict, posted by rank 0 in the store (STOP_KEY) for every rank: stop after `step`,
    whether it converged, and the epoch it stopped at."""

    step: int
    converged: bool
    epoch: float


class ScriptReporter:
    """One rank's reporter: `orch.script`'s calls land here (orch.script.Reporter)."""

    def __init__(self, job: RankJob, progress: ProgressWriter, clock: StartupClock, store: Store):
        if job.script is None:
            raise ValueError("a script reporter needs a script's job")
        self.job, self.settings, self.progress, self.clock, self.store = job, job.script, progress, clock, store
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.started = time.perf_counter()
        self.steps = 0
        self.reported_flops: float | None = None
        self.module: torch.nn.Module | None = None
        self.noise: ScriptNoise | None = None   # the gradient noise scale, when the script hands orch its DDP model
        # throughput
        self.repeat_s: list[float] = []
        self.step_ms: list[float] = []
        self.window_start = self.last_step = 0.0
        # convergence
        self.first_step_at = 0.0
        self.curve: list[list[float]] = []
        self.metrics_seen: set[str] = set()
        self.reached_at: float | None = None
        self.last_epoch: float | None = None
        self.steps_at_last_epoch = 0
        self.stop: StopVerdict | None = None

    # --- orch.script's calls ------------------------------------------------------------------------------
    def step(self, samples: int | None) -> None:
        now = time.perf_counter()
        self.steps += 1
        if self.steps == 1:
            self._first_step()
        self._check_samples(samples)
        if self._timed():
            self._timing(now)
        else:
            self._training()

    def metric(self, name: str, value: float, epoch: float) -> None:
        value, epoch = float(value), float(epoch)
        if not (math.isfinite(epoch) and epoch >= 0):
            raise ValueError(f"orch.script.metric({name!r}, ..., epoch={epoch}): epoch must be a finite number >= 0")
        self.metrics_seen.add(name)
        if self.job.kind != Kind.CONVERGENCE or name != self.settings.metric:
            return
        self.curve.append([round(epoch, 6), value])
        if self.noise is not None:
            self.noise.epoch_end(epoch)
        self.last_epoch, self.steps_at_last_epoch = epoch, self.steps
        self.progress.update(metric=value)
        if self.rank != 0 or self.stop is not None:
            return   # rank 0's reports decide; a verdict stands once posted
        target, cap = float(self.settings.target or 0.0), float(self.settings.max_epochs or math.inf)
        if self.reached_at is None and value >= target:
            self.reached_at = epoch
        if self.reached_at is not None or epoch >= cap:
            # Stop at the next step, on every rank: a rank may be waiting for rank 0 in a collective right now.
            self.stop = StopVerdict(step=self.steps + 1, converged=self.reached_at is not None, epoch=epoch)
            if self.world > 1:
                self.store.set(STOP_KEY, json.dumps(asdict(self.stop)))

    def flops(self, per_sample: float) -> None:
        self.reported_flops = float(per_sample)

    def model(self, module: object) -> None:
        import torch

        if not isinstance(module, torch.nn.Module):
            fail(self.progress, f"orch.script.model(): a {type(module).__name__}, not a torch.nn.Module")
            return
        self.module = module
        if self.job.kind == Kind.CONVERGENCE:
            from orchestrator.run.rank.noise_scale import ScriptNoise

            self.noise = ScriptNoise.attach(module, world=self.world, local_batch=self.job.local_batch)

    # --- start-up's end, and the checks of the first step ---------------------------------------------------
    def _first_step(self) -> None:
        self.clock.ready("script")
        self.first_step_at = time.perf_counter()
        problem = self._distributed_problem()
        if problem is not None:
            self._fail(problem)
        if self._timed():
            self.progress.update(phase=Phase.WARMUP, of=self.job.steps().repeats, force=True)
        else:
            self.progress.update(phase=Phase.TRAINING, of=math.ceil(self.settings.max_epochs or 0), force=True)

    def _distributed_problem(self) -> str | None:
        """Why the script's torch.distributed is not the trial's (None: it is, or one rank needs none)."""
        dist = sys.modules.get("torch.distributed")
        joined = dist is not None and dist.is_available() and dist.is_initialized()
        if not joined:
            if self.world == 1:
                return None
            return (f"the script had not joined torch.distributed by its first orch.script.step(), with "
                    f"{self.world} ranks: its ranks would train apart, not data-parallel; call "
                    "torch.distributed.init_process_group() before training")
        assert dist is not None
        backend, planned = cpu_backend(dist.get_backend_config()), self.job.backend
        if backend != planned:
            how = ("call init_process_group() with no backend, or with 'gloo'" if planned == "gloo" else
                   f"call init_process_group('{planned}') (after importing oneccl_bindings_for_pytorch), or set "
                   "the sweep's backend: gloo")
            return (f"the script joined torch.distributed with backend {backend}, but the plan chose {planned}: "
                    f"{how}")
        if dist.get_world_size() != self.world:
            return (f"the script joined torch.distributed with world size {dist.get_world_size()}, but the trial "
                    f"has {self.world} ranks: leave the world size to the environment (WORLD_SIZE)")
        return None

    def _check_samples(self, samples: int | None) -> None:
        """A throughput trial times full batches of the trial's local batch; a convergence run's global batch is
        ranks × its local batch (an epoch's last batch may be short)."""
        if samples is None:
            return
        batch = self.job.local_batch
        short_tail = self.job.kind == Kind.CONVERGENCE and self.steps > 1 and 0 < samples < batch
        if samples != batch and not short_tail:
            self._fail(f"step {self.steps} of the script had {samples} samples on rank {self.rank}, but the trial's "
                       f"local batch is {batch}: give the script {{local_batch}} as its batch size per rank"
                       + (" and drop the last, short batch of an epoch" if samples < batch else ""))

    # --- throughput -------------------------------------------------------------------------------------------
    def _timing(self, now: float) -> None:
        steps = self.job.steps()
        warmup, timed, repeats = self._warmup_steps(), steps.timed, steps.repeats
        if self.steps <= warmup:
            self.progress.step()
            if self.steps == warmup:
                self._open_window(1)
            return
        self.step_ms.append((now - self.last_step) * 1e3)
        self.last_step = now
        self.progress.step()
        done = self.steps - warmup
        if done % timed:
            return
        repeat = done // timed
        self.repeat_s.append(now - self.window_start)
        if repeat < repeats:
            self._open_window(repeat + 1)
            return
        self.barrier(f"timing-{repeat}")
        self._finish(self._probe_report() if self.job.kind == PROBE else self._throughput_report())

    def _timed(self) -> bool:
        """A throughput trial, or the memory probe (one rank at a small batch, run as a short throughput trial)."""
        return self.job.kind in (Kind.THROUGHPUT, PROBE)

    def _probe_report(self) -> ProbeReport:
        """What the probe needs of a script's rank (run.reports.ProbeReport): its own peak private memory, its
        timed steps' median (from one orch.script.step() to the next: the script's data loading is in it), the
        FLOPs of one step where the script or the sweep file states them, its gradient bytes where the script
        showed orch its model. The epoch size of a script is only ever the sweep file's."""
        from orchestrator.run.rank.probe import own_peak_private_mib
        from orchestrator.run.rank.protocol import gradient_sizes

        peak_mib, library_mib = own_peak_private_mib()
        flops = self._flops_per_sample()
        sizes = gradient_sizes(self.module) if self.module is not None else {}
        return ProbeReport(local_batch=self.job.local_batch, steps=self.steps, held_batches=0,
                           rank_peak_private_mib=peak_mib, library_mib=library_mib,
                           flops_per_step=flops * self.job.local_batch if flops is not None else None,
                           flops_error=None if flops is not None else
                           "a script's FLOPs are not counted: the script reports them (orch.script.flops) or the "
                           "sweep file states them (workload.flops_per_sample)",
                           flops_rule=STATED if flops is not None else None,
                           samples_per_epoch=None, gradient_bytes=int(sizes.get("gradient_bytes") or 0),
                           gradient_dtype=sizes.get("gradient_dtype"),
                           step_s=statistics.median(self.step_ms) / 1e3 if self.step_ms else None)

    def _warmup_steps(self) -> int:
        """At least one: a step's start is seen only as the previous step's end, so the window opens at the end
        of a step (the spec asks for one at least; a job made elsewhere may not)."""
        return max(1, self.job.steps().warmup)

    def _open_window(self, repeat: int) -> None:
        """A barrier, then repeat `repeat`'s clock starts: every rank's window covers the same steps."""
        self.progress.update(phase=Phase.TIMING, repeat=repeat, force=True)
        self.barrier(f"timing-{repeat - 1}")
        self.window_start = self.last_step = time.perf_counter()

    def _throughput_report(self) -> ThroughputReport:
        from orchestrator.run.rank.protocol import gradient_sizes, percentile

        sizes = gradient_sizes(self.module) if self.module is not None else {}
        return ThroughputReport(allreduce_check=None, **sizes, repeat_s=self.repeat_s,
                                step_ms_median=statistics.median(self.step_ms),
                                step_ms_p90=percentile(self.step_ms, 90), data_wait_s=None,
                                timed_s=sum(self.repeat_s), train_flops_per_sample=self._flops_per_sample(),
                                train_flops_rule=STATED if self._flops_per_sample() is not None else None)

    # --- convergence ------------------------------------------------------------------------------------------
    def _training(self) -> None:
        if self.noise is not None:
            self.noise.step()
        self.progress.step(repeat=int(self.last_epoch or 0) + 1)
        if self.stop is None and self.world > 1 and self.store.check([STOP_KEY]):
            self.stop = StopVerdict(**json.loads(self.store.get(STOP_KEY)))
        if self.stop is not None and self.steps >= self.stop.step:
            self.barrier("stop")
            self._finish(self._convergence_report())

    def _convergence_report(self) -> ConvergenceReport:
        converged = self.stop.converged if self.stop is not None else self.reached_at is not None
        epochs_run = self.stop.epoch if self.stop is not None else float(self.last_epoch or 0.0)
        per_epoch = round(self.steps_at_last_epoch / self.last_epoch) if self.last_epoch else 0
        return ConvergenceReport(converged=converged, epochs_to_target=self.reached_at if converged else None,
                                 epochs_run=epochs_run, steps_per_epoch=per_epoch, curve=self.curve,
                                 lr=self.settings.lr, train_s=time.perf_counter() - self.first_step_at,
                                 noise_scale=self._noise_scale(epochs_run))

    def _noise_scale(self, epochs_run: float) -> NoiseScaleSection:
        """B_simple where the script handed orch its DDP model (orch.script.model), else why not."""
        from orchestrator.core.measured.noise_scale import not_measured

        if self.noise is not None:
            return self.noise.section(epochs_run)
        return not_measured("the script did not hand orch its model (orch.script.model)" if self.module is None else
                            "one rank: a script's steps are its own, so orch cannot split a batch in two")

    # --- the end ----------------------------------------------------------------------------------------------
    def script_ended(self) -> None:
        """The script returned by itself: a convergence run that trained to the script's own end is a result
        (converged or not) once rank 0 saw its metric; anything else lacks what the trial needs."""
        settings, job = self.settings, self.job
        if self.steps == 0:
            self._fail("the script ended without calling orch.script.step(): add `orch.script.step(samples=...)` "
                       "after each optimizer step (docs/own-script.md)")
        if self._timed():
            warmup = self._warmup_steps()
            steps = job.steps()
            needed = warmup + steps.repeats * steps.timed
            self._fail(f"the script ended after {self.steps} step(s), before the trial's {needed} "
                       f"({warmup} warm-up, {steps.repeats} × {steps.timed} timed): let it train longer "
                       "(more epochs, or more data)")
        if self.rank == 0 and settings.metric not in self.metrics_seen:
            seen = ", ".join(sorted(self.metrics_seen))
            self._fail(f"the script ended without reporting the convergence metric {settings.metric!r} "
                       + (f"(it reported: {seen})" if seen else "(it never called orch.script.metric)"))
        self._finish(self._convergence_report())

    def _finish(self, report: Report) -> None:
        """Write the rank's result, let the others finish with the store, and end the process here."""
        import torch

        from orchestrator.core.measured.records import CommunicationSection
        from orchestrator.io.files import write_atomic
        from orchestrator.run.comm import communication_report
        from orchestrator.run.rank.process import observed_affinity

        result = RankResult(rank=self.rank, pid=os.getpid(), threads=torch.get_num_threads(),
                            affinity=observed_affinity(), run_s=time.perf_counter() - self.started,
                            applied=self._applied(), ready_at=self.clock.ready_at,
                            started_at=self.clock.started_at, startup_breakdown_s=self.clock.laps_s,
                            kind=self.job.kind, report=report,
                            communication=CommunicationSection.from_json(communication_report(self.job.backend)))
        write_atomic(self.job.result_path, result.to_json())
        self.progress.update(phase=Phase.DONE, force=True)
        self._leave()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def _leave(self) -> None:
        """Rank 0 hosts the store: it leaves last, once every other rank said it is done with it (or after
        LEAVE_WAIT_S, when one of them is gone)."""
        if self.world == 1:
            return
        if self.rank != 0:
            self.store.add(LEFT_KEY, 1)
            return
        deadline = time.monotonic() + LEAVE_WAIT_S
        while self.store.add(LEFT_KEY, 0) < self.world - 1 and time.monotonic() < deadline:
            time.sleep(LEAVE_POLL_S)

    def _applied(self) -> dict[str, Any]:   # RankResult.applied is str-valued: a script's args are a list
        """What ran, for the record: the script, its hash and its arguments, and where the FLOPs came from."""
        source = ("the sweep file" if self.settings.flops_per_sample is not None else
                  "the script (orch.script.flops)" if self.reported_flops is not None else "unknown")
        return {"script": self.settings.path, "script_sha256": self.settings.sha256,
                "script_args": list(self.settings.args), "flops_per_sample": source}

    def _flops_per_sample(self) -> float | None:
        return self.settings.flops_per_sample if self.settings.flops_per_sample is not None else self.reported_flops

    def barrier(self, name: str) -> None:
        """Every rank reaches `name` before any goes on: a counter and a key in the trial's store."""
        if self.world == 1:
            return
        key = f"orch/barrier/{name}"
        if self.store.add(key, 1) == self.world:
            self.store.set(f"{key}/open", "1")
        self.store.wait([f"{key}/open"])

    def _fail(self, message: str) -> None:
        fail(self.progress, message)
