"""Turn what the ranks reported into trial records (orchestrator.core.measured.records)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict, TypeVar

from orchestrator.core.json.values import JsonDict
from orchestrator.core.machine.topology import Topology
from orchestrator.core.measured import records as rec
from orchestrator.core.measured.throughput import summarize
from orchestrator.core.planning.plan import PlannedTrial
from orchestrator.core.planning.spec import ConvergenceSpec, MeasureSpec
from orchestrator.core.planning.view import placement_to_list
from orchestrator.run.driver.launcher import Outcome
from orchestrator.run.driver.trial import TrialRun
from orchestrator.run.job import RankResult
from orchestrator.run.reports import ThroughputReport

Report = TypeVar("Report")


class CommonFields(TypedDict):
    """The fields every trial's record has (`common_fields`), as rec.Record takes them."""

    ranks: int
    threads_per_rank: int
    local_batch: int
    global_batch: int
    status: rec.Status
    reason: str | None
    backend: str
    communication: rec.CommunicationSection | None
    placement: tuple[rec.PlacementEntry, ...]
    started_at: str
    wall_s: float
    startup_s: float | None
    applied: JsonDict | None
    log_tail: str | None
    memory: rec.MemorySection


def infeasible_record(p: PlannedTrial, backend: str) -> rec.Record:
    t = p.trial
    return rec.Record(kind=rec.Kind.THROUGHPUT, key=t.key, status=rec.Status.INFEASIBLE, backend=backend,
                      reason="\n".join(r.message for r in p.reasons),
                      reasons=tuple(rec.ReasonEntry.from_json(r.to_dict()) for r in p.reasons),
                      ranks=t.ranks, threads_per_rank=t.threads_per_rank, local_batch=t.local_batch,
                      global_batch=t.global_batch)


def _result(outcome: Outcome | None) -> RankResult:
    """An ok rank's result; every rank of an ok trial has one."""
    if outcome is None or outcome.result is None:
        raise ValueError("an ok rank reported no result")
    return outcome.result


def rank_reports(run: TrialRun, section: Callable[[RankResult], Report | None], name: str) -> list[Report]:
    """Every rank's report of an ok trial (`section` picks it from the rank's result; a kind module's record uses
    `lambda r: r.report_of(REPORT)`)."""
    reports = [section(_result(o)) for o in run.outcomes]
    if any(r is None for r in reports):
        raise ValueError(f"an ok rank reported no {name} section")
    return [r for r in reports if r is not None]


def _placement(p: PlannedTrial, topology: Topology, run: TrialRun) -> tuple[rec.PlacementEntry, ...]:
    """The planned placement, with what each rank process really had (read from the OS inside it)."""
    placed = [rec.PlacementEntry.from_json(entry) for entry in placement_to_list(p.placement, topology)]
    for i, outcome in enumerate(run.outcomes[:len(placed)]):
        if outcome is None:
            continue
        entry = placed[i].with_fields(pin=outcome.pin, pid=outcome.pid)
        result = outcome.result
        if result:
            entry = entry.with_fields(
                observed_cpus=result.affinity["threads"], observed_main_thread_cpus=result.affinity["main_thread"],
                torch_threads=result.threads)
            if result.startup_breakdown_s:   # where this rank's start-up went (rank.process.StartupClock)
                entry = entry.with_fields(startup_breakdown_s=result.startup_breakdown_s)
            check = result.throughput.allreduce_check if result.throughput is not None else None
            if check:
                entry = entry.with_fields(allreduce_check=check)
        placed[i] = entry
    if run.node_ids:
        placed = [entry.with_fields(ray_node_id=node_id) for entry, node_id in zip(placed, run.node_ids)] + \
            placed[len(run.node_ids):]
    return tuple(placed)


def _communication(run: TrialRun) -> rec.CommunicationSection | None:
    """The first reporting rank's backend, version and CCL settings (the others differ only in CCL_LOCAL_RANK)."""
    return next((o.result.communication for o in run.outcomes if o and o.result and o.result.communication), None)


def common_fields(p: PlannedTrial, topology: Topology, run: TrialRun, backend: str,
                  started_at: float) -> CommonFields:
    """The fields every trial's record has (a training trial's: layout, status, placement, memory, ...); the
    kind adds its key and section."""
    failing = run.outcomes[run.failing_rank] if run.failing_rank is not None else None
    applied_by_rank = next((o.result.applied for o in run.outcomes if o and o.result), None)
    applied: JsonDict | None = None if applied_by_rank is None else {**applied_by_rank}
    t = p.trial
    memory = rec.MemorySection(peak_private_mib=[o.peak_private_mib if o else None for o in run.outcomes],
                               shared_mib=[o.shared_mib if o else None for o in run.outcomes],
                               budget_mib=list(p.memory_budget_mib), estimate_mib=p.rank_memory_mib,
                               library_mib=p.library_mib)
    return CommonFields(ranks=t.ranks, threads_per_rank=t.threads_per_rank, local_batch=t.local_batch,
                        global_batch=t.global_batch, status=rec.Status(run.status), reason=run.reason,
                        backend=backend, communication=_communication(run),
                        placement=_placement(p, topology, run), started_at=rec.utc_timestamp(started_at),
                        wall_s=run.wall_s, startup_s=run.ready_s, applied=applied,
                        log_tail=failing.log_tail if failing else None, memory=memory)


def _throughput(p: PlannedTrial, run: TrialRun, measure: MeasureSpec) -> rec.ThroughputSection:
    """The trial's throughput from its ranks' reports: the slowest rank's time per repeat sets the rate."""
    reports = rank_reports(run, lambda r: r.throughput, "throughput")
    summary = summarize(p.trial.global_batch, measure.timed_steps, [r.repeat_s for r in reports])
    total_timed = sum(r.timed_s for r in reports)
    first = reports[0]
    return rec.ThroughputSection(
        samples_per_s=summary.samples_per_s, samples_per_s_repeats=summary.samples_per_s_repeats, cv=summary.cv,
        timed_s_repeats=summary.timed_s_repeats, warmup_steps=measure.warmup_steps, timed_steps=measure.timed_steps,
        repeats=measure.repeats,
        step_ms_median=[r.step_ms_median for r in reports], step_ms_p90=[r.step_ms_p90 for r in reports],
        data_wait_share=_data_wait_share(reports, total_timed),
        train_flops_per_sample=first.train_flops_per_sample,
        train_flops_rule=first.train_flops_rule if first.train_flops_per_sample else None,
        # what the gradient all-reduce moves, for orch predict
        gradient_bytes=first.gradient_bytes, ddp_bucket_bytes=first.ddp_bucket_bytes,
        # with a 16-bit communication hook (workload switch ddp_comm_hook) a bucket moves half its bytes
        ddp_wire_dtype=first.ddp_wire_dtype, ddp_wire_bucket_bytes=first.ddp_wire_bucket_bytes,
        # when each bucket became ready in a step, for the overlap of the all-reduce with the backward pass
        ddp_bucket_ready_share=first.ddp_bucket_ready_share)


def _data_wait_share(reports: list[ThroughputReport], total_timed: float) -> float | None:
    """The share of the timed region spent waiting for batches; None where a rank could not tell (a script's
    loop loads its data inside its step, which orch times as a whole)."""
    waits = [r.data_wait_s for r in reports]
    if any(w is None for w in waits):
        return None
    return sum(w for w in waits if w is not None) / total_timed if total_timed else 0.0


def throughput_record(p: PlannedTrial, run: TrialRun, *, topology: Topology, backend: str, measure: MeasureSpec,
                      started_at: float) -> rec.Record:
    fields = common_fields(p, topology, run, backend, started_at)
    throughput = _throughput(p, run, measure) if run.status == rec.Status.OK else None
    return rec.Record(kind=rec.Kind.THROUGHPUT, key=p.trial.key, **fields, throughput=throughput)


def convergence_record(key: str, p: PlannedTrial, seed: int, run: TrialRun, *, topology: Topology, backend: str,
                       spec_convergence: ConvergenceSpec, started_at: float) -> rec.Record:
    fields = common_fields(p, topology, run, backend, started_at)
    c = spec_convergence
    section = rec.ConvergenceSection(metric=c.metric, target=c.target, max_epochs=c.max_epochs, lr_rule=c.lr_rule,
                                     base_lr=c.base_lr, base_batch=c.base_batch, warmup_epochs=c.warmup_epochs,
                                     eval_every_epochs=c.eval_every_epochs)
    if run.status == rec.Status.OK:
        report = rank_reports(run, lambda r: r.convergence, "convergence")[0]
        section = section.with_fields(
            converged=report.converged, epochs_to_target=report.epochs_to_target, epochs_run=report.epochs_run,
            curve=report.curve, lr=report.lr, train_s=report.train_s, steps_per_epoch=report.steps_per_epoch)
        if report.noise_scale is not None:
            section = section.with_fields(noise_scale=report.noise_scale)
        if report.edge is not None:
            section = section.with_fields(edge=report.edge)
    else:
        section = section.only(*rec.CONVERGENCE_SPEC_KEYS)
    return rec.Record(kind=rec.Kind.CONVERGENCE, key=key, seed=seed, **fields, convergence=section)


def peak_record(key: str, p: PlannedTrial, run: TrialRun, *, topology: Topology, started_at: float) -> rec.Record:
    """The layout's peak: the sum of what its ranks multiplied while all of them ran the GEMM at once."""
    failing = run.outcomes[run.failing_rank] if run.failing_rank is not None else None
    peak = None
    if run.status == rec.Status.OK:
        reports = rank_reports(run, lambda r: r.peak, "peak")
        peak = rec.PeakSection(precision=reports[0].precision, gemm_size=reports[0].gemm_size,
                               gflops=sum(r.gflops for r in reports), best_gflops=sum(r.best_gflops for r in reports),
                               per_rank_gflops=[r.gflops for r in reports], concurrent=True)
        roof = layout_roof([r.roof_by_primitive for r in reports])
        if roof:
            peak = peak.with_fields(roof_gflops=max(roof.values()), roof_by_primitive=roof)
    return rec.Record(kind=rec.Kind.PEAK, key=key, ranks=p.trial.ranks, threads_per_rank=p.trial.threads_per_rank,
                      status=rec.Status(run.status), reason=run.reason, placement=_placement(p, topology, run),
                      started_at=rec.utc_timestamp(started_at), wall_s=run.wall_s, startup_s=run.ready_s, peak=peak,
                      log_tail=failing.log_tail if failing else None)


def layout_roof(per_rank: list[dict[str, float] | None]) -> dict[str, float]:
    """Each primitive's rate summed over the ranks (they ran it at once), for the primitives every rank ran;
    empty when a rank measured no roof.

    >>> layout_roof([{"gemm 512": 40.0, "conv": 50.0}, {"gemm 512": 38.0, "conv": 49.0}])
    {'gemm 512': 78.0, 'conv': 99.0}
    """
    measured = [r for r in per_rank if r]
    if not measured or len(measured) < len(per_rank):
        return {}
    names = [n for n in measured[0] if all(n in r for r in measured)]
    return {n: sum(r[n] for r in measured) for n in names}


def allreduce_record(key: str, link: str, p: PlannedTrial, run: TrialRun, *, topology: Topology, backend: str,
                     started_at: float) -> rec.Record:
    """One calibration trial: per message size, the slowest rank's median all-reduce time."""
    section = None
    if run.status == rec.Status.OK:
        reports = rank_reports(run, lambda r: r.allreduce, "allreduce")
        sizes = reports[0].sizes_bytes
        section = rec.AllreduceSection(
            link=link, ranks=p.trial.ranks, dtype=reports[0].dtype,
            # gloo's CPU all-reduce is a ring; ccl picks by size, so its fit is an effective ring
            algorithm="ring" if backend == "gloo" else f"{backend} (auto)",
            sizes_bytes=sizes, time_s=[max(r.time_s[i] for r in reports) for i in range(len(sizes))])
    return rec.Record(
        kind=rec.Kind.ALLREDUCE, key=key, ranks=p.trial.ranks, threads_per_rank=1, status=rec.Status(run.status),
        reason=run.reason, backend=backend, communication=_communication(run), placement=_placement(p, topology, run),
        started_at=rec.utc_timestamp(started_at), wall_s=run.wall_s, startup_s=run.ready_s, allreduce=section,
        log_tail=next((o.log_tail for o in run.outcomes if o and run.status != rec.Status.OK), None))
