"""`orch score` / `orch.score`: a saved prediction (`orch predict --out DIR`) scored against results folders measured
later, e.g. the sweep that finally ran on the real cluster. Reads files and scores (core.predict.score); imports
neither torch nor Ray. A folder that measured something else than what was predicted (another workload, other
parameters, another precision or machine) is refused with every difference named: nothing is matched silently."""

from __future__ import annotations

from pathlib import Path

from orchestrator.app.options import ScoreOptions
from orchestrator.core.predict.artifact import node_shapes
from orchestrator.core.predict.saved import SavedPrediction, from_json
from orchestrator.core.predict.score import (
    FolderFacts,
    MeasuredBatch,
    MeasuredCell,
    ScoreReport,
    measured_batches,
    measured_cells,
    mismatches,
    score,
)
from orchestrator.errors import InputError
from orchestrator.io.files import UnreadableFile, read_json_input
from orchestrator.io.predict_inputs import source_cpu
from orchestrator.io.provenance import folder_hashes
from orchestrator.io.store import NotAResultsFolder, Results, load_results

PREDICTION_FILE = "prediction.json"


class ScoreInputError(InputError):
    """What `orch score` was given cannot be scored (exit 2)."""


def read_prediction(path: str) -> SavedPrediction:
    """The saved prediction at `path` (its prediction.json, or a folder holding one); ScoreInputError otherwise."""
    file = Path(path)
    if file.is_dir():
        file = file / PREDICTION_FILE
    try:
        data = read_json_input(file)
    except UnreadableFile as err:
        raise ScoreInputError(f"{file}: {err}") from None
    return from_json(data, str(file))


def folder_facts(results: Results) -> FolderFacts:
    """What a results folder measured: workload, parameters, precision, CPU and node shapes."""
    spec, topology = results.spec, results.topology
    if topology is None:
        raise ScoreInputError(f"{results.path}/topology.json: not there: the folder does not say what machine it "
                              "measured, so it cannot be matched with a prediction")
    cpu = source_cpu(results)
    return FolderFacts(str(results.path), results.derived.workload or spec.workload.name or "workload",
                       dict(spec.workload.params), cpu.precision, cpu.name, node_shapes(topology))


def score_prediction(options: ScoreOptions) -> ScoreReport:
    """The saved prediction scored against every folder; ScoreInputError for a folder that is not a results folder,
    measured something else, or measured none of the predicted layouts and batches."""
    saved = read_prediction(options.prediction)
    cells: dict[tuple[int, int, int, int], MeasuredCell] = {}
    batches: dict[int, MeasuredBatch] = {}
    problems = []
    for path in options.results:
        try:
            results = load_results(path)
        except NotAResultsFolder as err:
            raise ScoreInputError(str(err)) from None
        wrong = mismatches(saved, folder_facts(results))
        if wrong:
            problems.append(f"{path} measured something else than {options.prediction} predicted:\n  - "
                            + "\n  - ".join(wrong))
            continue
        for c in measured_cells(results.records):
            cells.setdefault(c.key, c)          # the first folder given wins a layout measured twice
        for b in measured_batches(results.records):
            batches.setdefault(b.global_batch, b)
    if problems:
        raise ScoreInputError("\n".join(problems))
    card = score(saved, list(cells.values()), list(batches.values()))
    if not card.rows:
        inputs = sum(c.in_inputs and c.key in cells for c in saved.cells)
        said = (f"; the {inputs} it shares with the prediction were in the prediction's inputs (data, not "
                "predictions)" if inputs else "")
        raise ScoreInputError(f"{', '.join(options.results)}: none of the {len(saved.cells)} predicted layout(s) and "
                              f"{len(saved.epochs_by_batch)} global batch(es) was measured there{said}"
                              + (f" (it measured {', '.join(card.not_predicted[:6])})" if card.not_predicted else ""))
    return ScoreReport(options.prediction, saved, tuple(options.results), _changed(saved), card)


def _changed(saved: SavedPrediction) -> tuple[str, ...]:
    """Input files that no longer hash as they did when the prediction was made (moved ones are not said)."""
    out = []
    for folder in saved.inputs:
        if folder.role == "rcp" or not Path(folder.path).is_dir():
            continue
        now = folder_hashes(Path(folder.path), tuple(folder.sha256))
        out += [f"{folder.path}/{name}" for name, digest in folder.sha256.items() if now.get(name, digest) != digest]
    return tuple(out)
