"""`orch sweep`'s adaptive side: the options an adaptive sweep runs with (the sweep file's `adaptive` section,
overridden by `--budget` and `--target-rel-width`; `--full` runs every trial), and `--replay FOLDER` (the policy
against a folder measured in full, no Ray)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.app.options import SweepOptions
from orchestrator.core.adaptive import replay as rp
from orchestrator.core.adaptive.answer import FASTEST, AdaptiveOptions
from orchestrator.core.adaptive.outcome import Measured
from orchestrator.core.json.schema import InvalidInput
from orchestrator.errors import InputError
from orchestrator.io.sweepfile import Sweep


def adaptive_options(sweep: Sweep, options: SweepOptions) -> AdaptiveOptions | None:
    """The adaptive options of `sweep` (its `adaptive` section, overridden by `budget_s` and `target_width`), or
    None for a full sweep. Raises InputError for a target topology that cannot be read or has too few nodes."""
    section = sweep.spec.adaptive
    budget_s, target_width = options.budget_s, options.target_width
    if options.full or (section is None and budget_s is None and target_width is None):
        return None
    budget = budget_s if budget_s is not None else (section.budget_s if section else None)
    width = target_width if target_width is not None else (section.target_rel_width if section else None)
    if section is None:
        return AdaptiveOptions(budget_s=budget, target_width=width)
    topology = None
    if section.target_topology:
        from orchestrator.io.topofile import load_topology

        try:
            topology = load_topology(section.target_topology)
        except InvalidInput as err:
            raise InputError(f"adaptive.target_topology: {err}") from None
        if section.nodes > len(topology.nodes):
            raise InputError(f"adaptive.nodes({section.nodes}) > the {len(topology.nodes)} node(s) of "
                             f"{section.target_topology}")
    return AdaptiveOptions(section.question, budget, width, topology, section.nodes)


def describe(options: AdaptiveOptions) -> str:
    """One line: what the adaptive sweep answers and when it stops."""
    from orchestrator.core.execution.eta import duration_text

    stops = [f"budget {duration_text(options.budget_s)}" if options.budget_s else "",
             f"target width {options.target_width:g}" if options.target_width else ""]
    target = " on the target topology" if options.target_topology is not None else ""
    return (f"adaptive: {options.question}{target}; one trial at a time, chosen by what it teaches per "
            f"core-second; stops at {', '.join(s for s in stops if s) or 'nothing left to teach'}")


@dataclass(frozen=True, slots=True)
class Replayed:
    """The adaptive policy replayed on a folder measured in full: each step, where it stopped, what it
    measured (every trial after the cold start, with why it was chosen)."""

    folder: str
    trajectory: rp.Trajectory
    measured: tuple[Measured, ...]


def replay(folder: str, options: SweepOptions, sweep: Sweep) -> Replayed:
    """`orch sweep SWEEP --replay FOLDER`: the adaptive policy (this sweep's question and stops) against
    FOLDER, read as if each chosen trial were measured now. InputError for a folder with nothing to replay."""
    from orchestrator.io.store import load_results

    chosen = adaptive_options(sweep, options) or AdaptiveOptions()
    if chosen.target_topology is not None:
        raise InputError("--replay answers over the folder's own grid: adaptive.target_topology does not apply")
    res = load_results(Path(folder))
    s = rp.setting_of(res.spec, res.derived.samples_per_epoch, res.topology, res.environment.precision_chosen)
    if not rp.measured_items(res.records):
        raise InputError(f"{folder}: no ok throughput or convergence record to replay")
    q = rp.question_of(res.records, chosen.question or FASTEST, s)
    t = rp.replay(res.records, q, s, rp.adaptive_policy(chosen.target_width, chosen.budget_s), rp.ADAPTIVE)
    return Replayed(folder, t, tuple(Measured(st.key, st.reason) for st in t.steps[1:]))
