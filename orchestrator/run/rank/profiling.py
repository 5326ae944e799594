"""Profiling inside a rank process (`RankJob.kind == "profile"`), after the same build and warm-up as a
throughput trial. Three passes over the same batches, each `steps` long and barrier-synchronised:

1. plain: timed like a throughput repeat, profiling off: the reference for the overhead of the others. It
   runs twice, first and again last, and its figures are both runs' steps: steps drift over a run (a
   quiet focal-loss profile's plain pass, run only first, read 1,479, 1,322 and 1,217 ms, and the verbose
   pass after it came out 7.8% faster), and a reference taken at one end of the drift makes the later
   passes' overheads read low, even negative; bracketed, a steady drift cancels;
2. oneDNN verbose: `torch.backends.mkldnn.verbose` on for these steps only, the process's stdout
   redirected to a file so the primitive log is not mixed with the rank's own log;
3. torch.profiler: operator table (self time, calls, input shapes, FLOPs), a Chrome trace, and the
   events that give layer-wise forward/backward time (every module's forward is wrapped in a
   `module::<path>` range for this pass only).

Each pass records the share of its CPUs the rank got (CPU time ÷ wall time ÷ threads), which the
physical checks (core/profile/checks) read. Then, alone on the same pinned cores: the GEMM peak, a
STREAM-triad bandwidth, and each distinct convolution, matmul and reorder problem of the oneDNN log
replayed through torch with oneDNN's verbose capture on (benchdnn ships in no package; see
profile_replay). None of these steps feed a throughput figure.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from orch.workload import Batch, Trainer
from orchestrator.core.profile import events as pe
from orchestrator.core.profile import onednn_verbose as ov
from orchestrator.core.profile.result import (
    CacheRoof,
    CoverageJson,
    LayerRow,
    OnednnSummary,
    OpRow,
    Peak,
    ProfilerSummary,
    RankProfile,
    ReplayRow,
    ReplaySetting,
)
from orchestrator.run.job import Phase, ProfileTask, ProgressWriter, RankJob
from orchestrator.run.rank.profile_replay import level_roofs, replay_setting, replay_shapes, stdout_to, stream_triad_gbs
from orchestrator.run.rank.protocol import make_step
from orchestrator.run.rank.roof import compute_peak

if TYPE_CHECKING:
    from torch.autograd.profiler import record_function
    from torch.profiler import profile

Step = Callable[[Batch], object]   # one training step on a batch (protocol.make_step)
OP_TABLE_ROWS = 300     # the operator table keeps the rows with the most self time


def _timed_steps(step: Step, batches: Iterator[Batch], steps: int,
                 status: ProgressWriter, cpu: dict[str, float] | None = None) -> list[float]:
    """Step times in ms; `cpu` receives the process's CPU seconds and wall seconds over the steps (on a
    shared machine, CPU time well below wall × threads means the rank's cores were taken by others)."""
    dist.barrier()
    out = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        step(next(batches))
        out.append((time.perf_counter() - t0) * 1e3)
        status.step()
    if cpu is not None:
        cpu.update(cpu_s=time.process_time() - cpu0, wall_s=time.perf_counter() - wall0)
    dist.barrier()
    return out


@contextmanager
def _module_ranges(root: torch.nn.Module) -> Iterator[None]:
    """Every module's forward inside a `module::<path>` profiler range, for the profiler pass only."""
    from torch.autograd.profiler import record_function

    handles = []
    for path, mod in root.named_modules():
        name = pe.MODULE_PREFIX + (path or type(mod).__name__)
        stack: list[record_function] = []

        def pre(_m: object, _i: object, name: str = name, stack: list[record_function] = stack) -> None:
            rf = record_function(name)   # entered here, left in the forward hook: no `with` spans both
            rf.__enter__()   # type: ignore[no-untyped-call]  # untyped in torch
            stack.append(rf)

        def post(_m: object, _i: object, _o: object, stack: list[record_function] = stack) -> None:
            if stack:
                stack.pop().__exit__(None, None, None)

        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _events(prof: profile) -> list[pe.Event]:
    """The training thread's ranges as plain data (the thread that ran the ProfilerStep# ranges)."""
    evs = list(prof.events())   # type: ignore[no-untyped-call]  # untyped in torch
    main = next((e.thread for e in evs if e.name.startswith(pe.STEP_PREFIX)), None)
    ids = {id(e): i for i, e in enumerate(evs)}
    out = []
    for i, e in enumerate(evs):
        if e.thread != main:
            continue
        parent = ids.get(id(e.cpu_parent)) if e.cpu_parent is not None else None
        out.append(pe.Event(i, e.name, float(e.time_range.start), float(e.time_range.end), parent,
                            int(e.sequence_nr) if e.sequence_nr is not None else -1,
                            annotation=bool(getattr(e, "is_user_annotation", False))))
    return out


def _op_table(prof: profile, steps: int) -> list[OpRow]:
    skip = (pe.MODULE_PREFIX, pe.REGION_PREFIX, pe.STEP_PREFIX)
    rows = []
    for a in prof.key_averages(group_by_input_shape=True):
        if a.key.startswith(skip):
            continue
        rows.append(OpRow(op=a.key, calls_per_step=a.count / steps,
                          self_ms_per_step=a.self_cpu_time_total / 1e3 / steps,
                          total_ms_per_step=a.cpu_time_total / 1e3 / steps, input_shapes=str(a.input_shapes),
                          gflop_per_step=(a.flops or 0) / 1e9 / steps))
    rows.sort(key=lambda r: -r.self_ms_per_step)
    return rows[:OP_TABLE_ROWS]


def _profiler_pass(step: Step, batches: Iterator[Batch], root: torch.nn.Module, steps: int,
                   trace_path: Path, status: ProgressWriter, usage: dict[str, float]) -> ProfilerSummary:
    from torch.profiler import ProfilerActivity, profile, schedule

    captured: list[tuple[list[pe.Event], list[OpRow]]] = []   # what `ready` read, once

    def ready(prof: profile) -> None:
        # Read everything here: the profiler clears its events when a cycle ends. Each stage tells the
        # watchdog it is alive: on a busy machine exporting a large trace takes minutes.
        status.update(phase=Phase.TIMING, repeat=5, force=True)
        prof.export_chrome_trace(str(trace_path))
        status.update(phase=Phase.TIMING, repeat=6, force=True)
        events = _events(prof)
        status.update(phase=Phase.TIMING, repeat=7, force=True)
        captured.append((events, _op_table(prof, steps)))
        status.update(phase=Phase.TIMING, repeat=8, force=True)

    dist.barrier()
    step_ms = []
    cpu_s = wall_s = 0.0
    with _module_ranges(root), profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True,
                                       schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                                       on_trace_ready=ready) as prof:
        for i in range(steps + 1):   # one profiler warm-up step: the profiler's own start-up is not measured
            t0, c0 = time.perf_counter(), time.process_time()
            step(next(batches))
            if i:
                step_ms.append((time.perf_counter() - t0) * 1e3)
                cpu_s, wall_s = cpu_s + time.process_time() - c0, wall_s + time.perf_counter() - t0
            prof.step()
            status.step()
    dist.barrier()
    usage.update(cpu_s=cpu_s, wall_s=wall_s)
    if not captured:
        raise RuntimeError("torch.profiler delivered no trace for the profiled steps")
    events, ops = captured[0]
    cov = pe.coverage(events)
    layers = pe.layer_times(events, steps)
    return ProfilerSummary(
        step_ms=tuple(step_ms), ops=tuple(ops),
        coverage=CoverageJson(cov.step_ms, cov.named_ms, cov.other_ms, allreduce_wait_ms=cov.wait_ms),
        layers=tuple(LayerRow(r.name, r.forward_ms, r.backward_ms) for r in layers), trace=trace_path.name)


def _batches(trainer: Trainer, count: int) -> Iterator[Batch]:
    def epochs() -> Iterator[Batch]:
        for epoch in itertools.count():
            yield from trainer.batches(epoch)

    return itertools.cycle(list(itertools.islice(epochs(), max(1, min(16, count)))))


def _barrier() -> None:
    dist.barrier()


def _share(usage: dict[str, float], threads: int) -> float | None:
    """CPU time ÷ wall time ÷ threads: the share of its CPUs the rank got (profile.checks.MIN_CPU_SHARE)."""
    return usage["cpu_s"] / (usage["wall_s"] * threads) if usage.get("wall_s") else None


def profile_rank(job: RankJob, trainer: Trainer, module: torch.nn.Module, status: ProgressWriter) -> RankProfile:
    cfg = job.task_as(ProfileTask)
    steps = cfg.steps
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rank = dist.get_rank()
    step = make_step(module, trainer.optimizer)
    batches = _batches(trainer, cfg.warmup_steps + steps)

    status.update(phase=Phase.WARMUP, of=4)   # timing repeats: plain, verbose, profiler, plain
    for _ in range(cfg.warmup_steps):
        step(next(batches))
        status.step()
    status.update(phase=Phase.TIMING, repeat=1, force=True)
    usage: dict[str, dict[str, float]] = {"plain": {}, "verbose": {}, "profiler": {}}
    plain_ms = _timed_steps(step, batches, steps, status, usage["plain"])

    status.update(phase=Phase.TIMING, repeat=2, force=True)
    log_path = out_dir / f"onednn-rank{rank}.log"
    # (torch leaves mkldnn.verbose untyped; it only stores the level until entered)
    verbose = torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON)   # type: ignore[no-untyped-call]
    with stdout_to(log_path), verbose:
        verbose_ms = _timed_steps(step, batches, steps, status, usage["verbose"])
    executions, problems = ov.parse_lines(log_path.read_text(errors="replace").splitlines())
    log_path = _gzip(log_path)   # ~30× smaller; read it with zcat

    status.update(phase=Phase.TIMING, repeat=3, force=True)
    prof = _profiler_pass(step, batches, trainer.module, steps, out_dir / f"trace-rank{rank}.json.gz", status,
                          usage["profiler"])
    status.update(phase=Phase.TIMING, repeat=4, force=True)
    again: dict[str, float] = {}
    plain_ms += _timed_steps(step, batches, steps, status, again)      # the bracket's other end (docstring)
    usage["plain"] = {k: usage["plain"][k] + again[k] for k in ("cpu_s", "wall_s")}
    onednn = OnednnSummary(log=log_path.name, problems=tuple(problems[:20]), executions=len(executions),
                           totals=tuple(ov.aggregate(executions)), shapes=tuple(ov.by_shape(executions)))
    peak, bandwidth, levels, replay, setting = _alone(job, cfg, executions, status)
    return RankProfile(plain_step_ms=tuple(plain_ms), verbose_step_ms=tuple(verbose_ms), steps=steps,
                       plain_cpu_share=_share(usage["plain"], job.threads),
                       verbose_cpu_share=_share(usage["verbose"], job.threads),
                       profiler_cpu_share=_share(usage["profiler"], job.threads),
                       onednn=onednn, profiler=prof, peak=peak, stream_triad_gbs=bandwidth, level_roofs=levels,
                       replay=replay, replay_setting=setting)


Alone = tuple[Peak, float, tuple[CacheRoof, ...], tuple[ReplayRow, ...], ReplaySetting | None]


def _alone(job: RankJob, cfg: ProfileTask, executions: list[ov.Execution], status: ProgressWriter) -> Alone:
    """Alone on the pinned cores, after training: the compute roof, the bandwidth roof of every cache level
    and DRAM, the isolated primitives. The ranks measure in step (gemm_peak's barrier starts and ends its window
    on every rank at once, and one starts each of the roof's primitives), so the ranks of one node share caches,
    memory bandwidth and power as they do in training."""
    status.update(phase=Phase.TIMING, repeat=4, force=True)   # progress for the watchdog: peak, bandwidth, replay
    dist.barrier()
    precision = "bf16" if any(e.dtype == "bf16" for e in executions) else "fp32"
    peak = compute_peak(job.threads, precision, barrier=_barrier)
    dist.barrier()
    levels = tuple(CacheRoof.from_json(r) for r in level_roofs(sorted(os.sched_getaffinity(0)), job.threads))
    bandwidth = next((r.gbs for r in levels if r.level == "DRAM" and r.gbs), None) or stream_triad_gbs()
    replay = replay_shapes(ov.by_shape(executions), budget_s=cfg.replay_budget_s) if cfg.replay else []
    setting = ReplaySetting.from_json(replay_setting()) if replay else None
    dist.barrier()
    # The peak and the replay rows are built by protocol and profile_replay as dicts: read as records, they
    # keep those keys in that order.
    return Peak.from_json(peak), bandwidth, levels, tuple(ReplayRow.from_json(r) for r in replay), setting


def _gzip(path: Path) -> Path:
    import gzip
    import shutil

    target = path.with_name(path.name + ".gz")
    with path.open("rb") as src, gzip.open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return target

