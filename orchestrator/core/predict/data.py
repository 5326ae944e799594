"""From records to what the models fit: measured cells, DDP bucket sizes, GEMM-peak thread scaling."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence

from orchestrator.core.measured.peaks import peak_index
from orchestrator.core.measured.records import Kind, PlacementEntry, Record, Records
from orchestrator.core.predict.comm import NODES, SOCKET, SOCKETS, ddp_buckets
from orchestrator.core.predict.step import Cell, Layout


def layout_on_sockets(ranks: int, threads: int, local_batch: int, sockets: Iterable[tuple[int, int]]) -> Layout:
    """The model's view of where the ranks sit, given each rank's (node, socket): nodes used, the most ranks
    on one socket, and the slowest link class the ring crosses.

    >>> layout_on_sockets(4, 1, 8, [(0, 0), (0, 0), (0, 1), (1, 0)])
    Layout(ranks=4, threads=1, local_batch=8, nodes=2, ranks_per_socket=2, link='nodes', threads_per_core=1)
    """
    per_socket = Counter(sockets)
    if not per_socket:
        return Layout(ranks, threads, local_batch)
    nodes = len({node for node, _ in per_socket})
    link = None
    if ranks > 1:
        link = NODES if nodes > 1 else SOCKETS if len(per_socket) > 1 else SOCKET
    return Layout(ranks, threads, local_batch, nodes, max(per_socket.values()), link)


def layout_of(ranks: int, threads: int, local_batch: int, placement: Iterable[PlacementEntry] | None) -> Layout:
    """The layout of a record's `placement`."""
    return layout_on_sockets(ranks, threads, local_batch, ((r.node, r.socket) for r in placement or ()))


def cells_from_records(records: Iterable[Record]) -> list[Cell]:
    """Every ok throughput record as a measured cell, in (ranks, threads, local batch) order."""
    cells = []
    for r in Records.of(records).ok(Kind.THROUGHPUT):
        if r.throughput is None:
            continue
        lay = layout_of(r.ranks or 0, r.threads_per_rank or 0, r.local_batch or 0, r.placement)
        cells.append(Cell(lay, float(r.throughput.samples_per_s), float(r.throughput.cv or 0.0)))
    return sorted(cells, key=lambda c: (c.layout.ranks, c.layout.threads, c.layout.local_batch, c.layout.nodes))


def gradient_buckets(records: Iterable[Record]) -> tuple[int, ...]:
    """DDP's bucket sizes as a multi-rank trial reported them (the bytes on the wire, which a 16-bit
    communication hook halves, where the record says), else derived from the gradient bytes any trial reported
    (`comm.ddp_buckets`); empty when no record says (records older than the field)."""
    gradient_bytes = None
    for r in Records.of(records).ok():
        t = r.throughput
        if t is None:
            continue
        if t.ddp_wire_bucket_bytes:
            return tuple(int(b) for b in t.ddp_wire_bucket_bytes)
        if t.ddp_bucket_bytes:
            return tuple(int(b) for b in t.ddp_bucket_bytes)
        gradient_bytes = t.gradient_bytes or gradient_bytes
    return tuple(ddp_buckets(int(gradient_bytes))) if gradient_bytes else ()


def bucket_ready_shares(records: Iterable[Record], buckets: Sequence[int]) -> tuple[float, ...]:
    """When each DDP bucket became ready in a step, over the last bucket (`run.rank.overlap`): the median per bucket
    over the multi-rank throughput records that measured it for `buckets` (`gradient_buckets`: as many); empty
    where none did (one rank, records older than the field)."""
    shares = [t.ddp_bucket_ready_share for r in Records.of(records).ok(Kind.THROUGHPUT)
              if (t := r.throughput) is not None and t.ddp_bucket_ready_share
              and len(t.ddp_bucket_ready_share) == len(buckets)]
    if not shares:
        return ()
    return tuple(statistics.median(float(s[i]) for s in shares) for i in range(len(buckets)))


def thread_speedups(records: Iterable[Record]) -> dict[int, float]:
    """GEMM peak on T threads over the peak on one thread, from single-rank peak records (the highest
    precision measured at 1 thread)."""
    peaks: dict[tuple[str, int], float] = {}
    for r in Records.of(records).ok(Kind.PEAK):
        if r.peak is not None and (r.ranks or 1) == 1:
            peaks[(r.peak.precision, int(r.threads_per_rank or 0))] = float(r.peak.gflops)
    for precision in sorted({k[0] for k in peaks}):
        base = peaks.get((precision, 1))
        if base:
            return {t: g / base for (prec, t), g in peaks.items() if prec == precision}
    return {}


def gemm_peaks(records: Iterable[Record]) -> dict[tuple[int, int], float]:
    """GFLOP/s of the GEMM peak by (ranks, threads per rank), as measured with all ranks at once (one rank's
    peak for 1 rank), in the precision `thread_speedups` uses: what `evidence` compares a step's scaling with.
    Older records without concurrent peaks give only the 1-rank entries."""
    index = peak_index(records)
    for precision in sorted({p for _, p in index.one_rank}):
        if (1, precision) in index.one_rank:
            out = {(1, t): g for (t, p), g in index.one_rank.items() if p == precision}
            out.update({(r, t): g for (r, t, p), g in index.layouts.items() if p == precision})
            return out
    return {}
