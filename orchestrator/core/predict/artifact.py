"""The saved part of a prediction, built from what `orch predict` predicted (`saved.SavedPrediction`): every layout
with the axes it lies beyond and the naive baselines' values from the same cells, and every global batch's
epochs with the epochs baselines. Provenance and input hashes come from the caller (they need the clock, git
and the files: the shell's). Pure.

>>> from orchestrator.core.predict.epochs import BatchPoint
>>> points = [BatchPoint(32, (2.0, 2.0, 2.0)), BatchPoint(64, (3.0, 3.0, 3.0))]
>>> epochs_baselines(256, points)
{'flat': 3.0, 'proportional': 12.0}
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from orchestrator.core.machine.topology import MIB_PER_GIB, Topology
from orchestrator.core.predict.bands import extrapolation_axes
from orchestrator.core.predict.capacity import Prediction
from orchestrator.core.predict.epochs import BatchPoint, EpochsModel
from orchestrator.core.predict.interval import Basis
from orchestrator.core.predict.predictors import label
from orchestrator.core.predict.saved import (
    AMDAHL,
    FLAT,
    LINEAR,
    ONE_NODE,
    PROPORTIONAL,
    SAME_CORES,
    Beyond,
    CellForecast,
    EpochsForecast,
    NodeShape,
)
from orchestrator.core.predict.step import Layout

# The registered predictors saved as baselines: a saved baseline's id is the predictor's.
_BASELINE_PREDICTORS = (LINEAR, AMDAHL)


def cell_forecasts(predictions: Sequence[Prediction], basis: Basis,
                   same_machine: bool = True) -> tuple[CellForecast, ...]:
    """Every predicted layout as saved: the central value, interval, predictor, the axes beyond the cells and the
    baselines (each as the same layout would be predicted by it from the same cells); a layout the cells measured is
    in the inputs only on the machine they measured it on."""
    out = []
    for p in predictions:
        lay = p.layout
        beyond = tuple(Beyond(axis=a.name, doublings=round(a.doublings, 6))
                       for a in extrapolation_axes(lay, basis.cells))
        out.append(CellForecast(ranks=lay.ranks, threads=lay.threads, local_batch=lay.local_batch, nodes=lay.nodes,
                                samples_per_s=p.samples_per_s, low=p.samples_per_s_low, high=p.samples_per_s_high,
                                no_interval=p.no_interval, predictor=label(p.predictor), beyond=beyond,
                                baselines=cell_baselines(lay, basis), notes=p.caveats,
                                in_inputs=same_machine and any(c.layout == lay for c in basis.cells)))
    return tuple(out)


def cell_baselines(lay: Layout, basis: Basis) -> dict[str, float]:
    """The baselines' samples/s of a layout: linear scaling and Amdahl's law (the registered predictors), the
    fastest measured cell with as many cores in all (any split, same batch and nodes), and, across nodes, the same
    ranks × threads × batch on one node with the network ignored (measured there, else orch's model)."""
    out = {p: basis.predictors[p](lay) for p in _BASELINE_PREDICTORS if p in basis.predictors}
    same = [c.samples_per_s for c in basis.cells if c.layout.cores == lay.cores and c.layout.nodes == lay.nodes
            and c.layout.local_batch == lay.local_batch and c.layout != lay]
    if same:
        out[SAME_CORES] = max(same)
    if lay.nodes > 1:
        one = [c.samples_per_s for c in basis.cells if c.layout.nodes == 1 and c.layout.ranks == lay.ranks
               and c.layout.threads == lay.threads and c.layout.local_batch == lay.local_batch]
        per_socket = min(lay.ranks, max(1, lay.ranks_per_socket))
        out[ONE_NODE] = one[0] if one else basis.model.samples_per_s(
            Layout(lay.ranks, lay.threads, lay.local_batch, 1, per_socket, "socket" if lay.ranks > 1 else None))
    return {k: v for k, v in out.items() if math.isfinite(v)}


def epochs_forecasts(predictions: Sequence[Prediction], model: EpochsModel | None,
                     points: Sequence[BatchPoint]) -> tuple[EpochsForecast, ...]:
    """Every global batch of the predicted layouts and of the measured points, its epochs as predicted (one row
    per batch, however many layouts share it)."""
    if not points:
        return ()
    batches = sorted({p.layout.global_batch for p in predictions} | {p.global_batch for p in points})
    converged = [p.global_batch for p in points if p.converged]
    measured = {p.global_batch for p in points}     # converged or not, the inputs ran it
    out = []
    for b in batches:
        e = model.predict(b) if model is not None else None
        far = (max(0.0, math.log2(b / max(converged)), math.log2(min(converged) / b)) if converged else 0.0)
        out.append(EpochsForecast(
            global_batch=b, epochs=None if e is None else e.epochs, low=None if e is None else e.low,
            high=None if e is None else e.high, status="no model" if e is None else e.status,
            p_converge=None if e is None else e.p_converge, doublings=round(far, 6),
            baselines=epochs_baselines(b, points), note="" if e is None else "; ".join(
                w for w in (e.note, e.no_interval) if w), in_inputs=b in measured))
    return tuple(out)


def epochs_baselines(global_batch: int, points: Sequence[BatchPoint]) -> dict[str, float]:
    """The epochs baselines at a batch: the nearest converged batch's olympic mean (flat) and that mean scaled in
    proportion to the batch (proportional: no gain at all from the larger batch)."""
    converged = [p for p in points if p.converged and math.isfinite(p.mean)]
    if not converged:
        return {}
    near = min(converged, key=lambda p: (abs(math.log2(p.global_batch / global_batch)), -p.global_batch))
    return {FLAT: near.mean, PROPORTIONAL: near.mean * global_batch / near.global_batch}


def node_shapes(topology: Topology) -> tuple[NodeShape, ...]:
    """The topology's nodes by shape (sockets, largest socket's cores, threads per core, memory, CPU), counted:
    what a later measurement's machine is matched against (a 10,000-node target stays a line).

    >>> from orchestrator.core.machine.topology import CompactTopology, build_compact
    >>> four = build_compact(CompactTopology(nodes=4, sockets=2, cores_per_socket=28, memory_gib=192))
    >>> [(n.count, n.shape) for n in node_shapes(four)]
    [(4, (2, 28, 1))]
    """
    counts = Counter((len(node.sockets), max((len(s.cores) for s in node.sockets), default=0), node.threads_per_core,
                      round(node.memory_mib / MIB_PER_GIB, 1), node.isa.cpu_model if node.isa is not None else "")
                     for node in topology.nodes)
    return tuple(NodeShape(count=n, sockets=s, cores_per_socket=c, threads_per_core=t, memory_gib=m, cpu=cpu)
                 for (s, c, t, m, cpu), n in counts.items())
