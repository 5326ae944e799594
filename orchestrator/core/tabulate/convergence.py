"""The convergence table (epochs to target per global batch, over seeds: core.measured.convergence) and the same
aggregates in the layout of MLPerf's RCP files, so the two can be compared. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.core.json.values import JsonMapping, JsonReadable
from orchestrator.core.measured.convergence import OLYMPIC_MIN_SEEDS, BatchConvergence, reference_batch
from orchestrator.core.tabulate.throughput import layout_label
from orchestrator.core.text.table import DASH, FAILED, Cell, Footnotes, Table

RCP_CREATOR = "orch"


def convergence_table(batches: Sequence[BatchConvergence], planned_seeds: Sequence[int] = ()) -> Table:
    """Global batch → epochs to target (mean ± SD), normalized to the smallest global batch, seeds
    converged / run, and the layout(s) (ranks×threads×local batch) that ran it.

    Example: global batches 32 (3.5 epochs) and 128 (7.0 epochs) → normalized 1.00 and 2.00.

    >>> from orchestrator.core.measured.convergence import SeedRun, aggregate
    >>> from orchestrator.core.planning.trial import Trial
    >>> runs = lambda b, epochs: [SeedRun(s, Trial(1, 1, b), "ok", e, 10.0) for s, e in enumerate(epochs)]
    >>> table = convergence_table([aggregate(32, runs(32, [3.0, 3.5, 4.0])), aggregate(128, runs(128, [7.0]))])
    >>> [(batch, cells[0].text, cells[1].text) for batch, cells in table.rows]
    [('32', '3.50 ± 0.41', '1.00'), ('128', '7.00', '2.00')]
    """
    notes = Footnotes()
    ref = reference_batch(batches)
    measured = any(r.noise is not None for b in batches for r in b.runs)   # older records: no column
    rows = []
    for b in batches:
        if b.mean_epochs is None:
            cap = f" by {b.max_epochs:g}" if b.max_epochs is not None else ""
            epochs = Cell(f"did not converge{cap}", None, FAILED)
        elif b.sd_epochs is not None:
            epochs = Cell(f"{b.mean_epochs:.2f} ± {b.sd_epochs:.2f}", b.mean_epochs)
        else:
            epochs = Cell(f"{b.mean_epochs:.2f}", b.mean_epochs)
        normalized = (Cell.number(b.mean_epochs / ref.mean_epochs)
                      if b.mean_epochs is not None and ref is not None and ref.mean_epochs is not None else Cell(DASH))
        why = [f"global batch {b.global_batch}: {r.why_not()}" for r in b.runs if not r.converged]
        ran = {r.seed for r in b.runs}
        why += [f"global batch {b.global_batch}: seed {s} not run yet" for s in planned_seeds if s not in ran]
        seeds_text = f"{b.converged}/{len(b.runs)}" + (f" {notes.letters(why)}" if why else "")
        seeds = Cell(seeds_text, None, FAILED if b.converged < len(b.runs) else None)
        layouts = Cell(", ".join(layout_label(p) for p in b.layouts))
        noise = (_noise_cell(b),) if measured else ()
        rows.append((str(b.global_batch), (epochs, normalized, seeds, layouts, *noise)))
    columns = ("epochs to target", "normalized", "seeds converged/run", "ran on (r×t×b)")
    caption = _caption(batches, ref) + (_noise_caption(batches) if measured else "")
    return Table(name="convergence", title="Convergence: epochs to target per global batch", corner="global batch",
                 columns=columns + (("B_simple [90%]",) if measured else ()), rows=tuple(rows),
                 footnotes=notes.lines(), caption=caption)


def _noise_cell(b: BatchConvergence) -> Cell:
    """The seeds' B_simple pooled (geometric mean, with the measurement's 90% interval)."""
    from orchestrator.core.predict.noise_prior import prior_of

    prior = prior_of([r.noise for r in b.runs if r.noise is not None])
    if prior is None:
        return Cell(DASH)
    return Cell(f"{prior.b_simple:.3g} [{prior.measured_low:.3g}–{prior.measured_high:.3g}]", prior.b_simple)


def _noise_caption(batches: Sequence[BatchConvergence]) -> str:
    from orchestrator.core.predict.noise_prior import prior_of

    prior = prior_of([r.noise for b in batches for r in b.runs if r.noise is not None])
    if prior is None:
        return ""
    return (" B_simple: the gradient noise scale (McCandlish et al. 2018, App. A.1), measured in each run from its "
            "local and all-reduced gradients (one rank: two micro-batches) where it stopped; the geometric mean "
            f"of the seeds with the measurement's 90% interval. Over every run: {prior.words()}; `orch predict` "
            "takes it as a prior on B_crit.")


def _caption(batches: Sequence[BatchConvergence], ref: BatchConvergence | None) -> str:
    if not batches:
        return "No convergence run has finished yet: no data yet."
    first = batches[0]
    target = (f"{first.metric} {first.target:g}" if first.metric is not None and first.target is not None
              else "the target")
    text = (f"Epochs to reach {target}, aggregated as MLPerf's RCP checker does: with {OLYMPIC_MIN_SEEDS} or more "
            "seeds the olympic mean (fastest and slowest seed dropped), else the plain mean; ± the population "
            "standard deviation over the converged seeds. A seed that did not converge (or did not finish) "
            "counts as infinitely slow, so one such seed of three or more is dropped; two make the row "
            "'did not converge'. Epochs depend on the global batch, not on threads, so each global batch ran "
            "once per seed, on the layout shown (ranks×threads×local batch).")
    if ref is None:
        return text + " No global batch converged, so nothing is normalized."
    if ref is not first:
        return text + (f" Normalized to global batch {ref.global_batch}, the smallest that converged "
                       f"(global batch {first.global_batch} did not).")
    return text + f" Normalized to the smallest global batch, {ref.global_batch}."


def rcp_dict(batches: Sequence[BatchConvergence], *, benchmark: str, platform: str = "",
             when: str = "", params: JsonMapping | None = None) -> dict[str, JsonReadable]:
    """The aggregates in the layout of MLPerf's `rcps_<benchmark>.json`: one entry per global batch with
    Benchmark, Creator, When, Platform, BS, Hyperparams and "Epochs to converge" (the converged seeds, as
    reference files list only converged runs). orch's own view (seeds, non-converged seeds, the olympic mean
    counting them, and the workload and `params` that ran, which `orch predict --rcp` checks against the
    workload it plans) goes under "orch", a key the checker does not read. Global batches without a converged
    seed are left out: a reference point needs at least one converged run.
    """
    out: dict[str, JsonReadable] = {}
    for b in batches:
        epochs = [r.epochs for r in b.runs if r.converged]
        if not epochs:
            continue
        out[f"{benchmark}_ref_{b.global_batch}"] = {
            "Benchmark": benchmark, "Creator": RCP_CREATOR, "When": when, "Platform": platform,
            "BS": b.global_batch, "Hyperparams": b.hyperparams.to_json(), "Epochs to converge": epochs,
            "orch": {
                "metric": b.metric, "target": b.target,
                "seeds": [r.seed for r in b.runs],
                "converged_seeds": [r.seed for r in b.runs if r.converged],
                "not_converged": [{"seed": r.seed, "status": r.status, "max_epochs": r.max_epochs}
                                  for r in b.runs if not r.converged],
                "olympic_mean_epochs": b.mean_epochs, "stdev_epochs": b.sd_epochs, "method": b.method,
                "layouts": [layout_label(p) for p in b.layouts],
                **({"workload": benchmark, "params": dict(params)} if params is not None else {}),
            },
        }
    return out
