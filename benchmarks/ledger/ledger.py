"""The ledger: predictions orch saved before what they predict was measured, each scored against that measurement.

    python benchmarks/ledger/ledger.py predict CASE        # once, before the measurement: save the case's prediction
    python benchmarks/ledger/ledger.py score               # re-score every case: scores.json, docs/validation.md
    python benchmarks/ledger/ledger.py score --check       # what CI runs: both files as a re-score writes them

A case is a folder under `benchmarks/ledger/cases/` with a `case.yaml`:

    id, kind (threads | ranks | nodes | links | epochs | cpu), title, source (where its data come from),
    shaped_nothing (false where the data chose a model's form, a constant or a gate: said on its row),
    type: orch   predict: [orch predict's arguments, paths relative to the case folder]
                 measured: [results folders measured after the prediction]
    type: table  predict: {predictor: a name in TABLE_PREDICTORS, input: a table file}
                 measured: a table file ({"rows": [{"label", "measured"}]})

`predict` writes `prediction/prediction.json` (orch predict's saved prediction, or a table prediction with the same
provenance: orch's version and commit). Its commit must precede the commit that adds anything under `measured/`;
tests/test_ledger.py checks it with git, and that the inputs still hash as the prediction saw them. `score` scores
every case twice: the committed prediction (the honest check: made before the measurement) and the current code's
prediction from the same inputs (made after it: not a held-out check, but a change that makes a case worse shows
here and must say so in its commit body). No training: seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from orchestrator.core.predict.score import Row, summarise  # noqa: E402

LEDGER = REPO / "benchmarks" / "ledger"
CASES = LEDGER / "cases"
SCORES = LEDGER / "scores.json"
PAGE = REPO / "docs" / "validation.md"
TEMPLATE = LEDGER / "validation.template.md"
PREDICTION = Path("prediction") / "prediction.json"
KINDS = ("threads", "ranks", "nodes", "links", "epochs", "cpu")
TABLE_FORMAT = "orch-ledger-table"


@dataclass(frozen=True)
class Case:
    folder: Path
    id: str
    kind: str
    title: str
    source: str
    shaped_nothing: bool
    type: str
    predict: object
    measured: object
    note: str = ""

    @property
    def prediction(self) -> Path:
        return self.folder / PREDICTION


def load_case(folder: Path) -> Case:
    data = yaml.safe_load((folder / "case.yaml").read_text())
    wanted = {"id", "kind", "title", "source", "shaped_nothing", "type", "predict", "measured"}
    missing = wanted - set(data)
    if missing or data["kind"] not in KINDS or data["type"] not in ("orch", "table"):
        raise SystemExit(f"{folder}/case.yaml: missing {sorted(missing)} or a bad kind/type")
    if data["id"] != folder.name:
        raise SystemExit(f"{folder}/case.yaml: id {data['id']!r} is not its folder's name")
    return Case(folder, data["id"], data["kind"], data["title"], data["source"], bool(data["shaped_nothing"]),
                data["type"], data["predict"], data["measured"], str(data.get("note") or ""))


def cases() -> list[Case]:
    return [load_case(f) for f in sorted(CASES.iterdir()) if (f / "case.yaml").is_file()]


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def first_commit(path: Path) -> str | None:
    """The commit that first added any file at or under `path` (None: not committed)."""
    out = git("log", "--diff-filter=A", "--format=%H", "--", str(path.relative_to(REPO)))
    return out.splitlines()[-1] if out else None


# --- predicting ----------------------------------------------------------------------------------------------

def predict_case(case: Case) -> None:
    """Save the case's prediction with the code as it is now (refused once anything is measured)."""
    measured = [case.folder / m for m in _measured_paths(case)]
    if any(p.exists() for p in measured):
        raise SystemExit(f"{case.id}: its measurement exists already: a prediction made now would not be one")
    case.prediction.parent.mkdir(parents=True, exist_ok=True)
    if case.type == "orch":
        from orchestrator.cli import main

        argv = [str(case.folder / a) if (case.folder / a).exists() else str(a) for a in case.predict]
        out = case.folder / "prediction" / "full"
        if main(["predict", *argv, "--out", str(out)]) != 0:
            raise SystemExit(f"{case.id}: orch predict failed")
        data = json.loads((out / "prediction.json").read_text())
        data["provenance"]["command"] = ["orch", "predict", *[str(a) for a in case.predict]]
        data["inputs"] = [{**i, "path": os.path.relpath(Path(i["path"]).resolve(), case.folder)}
                          for i in data["inputs"]]
        case.prediction.write_text(json.dumps(data, indent=1) + "\n")
        _remove_tree(out)
    else:
        case.prediction.write_text(json.dumps(table_prediction(case), indent=1) + "\n")
    print(f"{case.id}: saved {case.prediction.relative_to(REPO)}; commit it before measuring")


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


def _measured_paths(case: Case) -> list[str]:
    return [str(m) for m in case.measured] if isinstance(case.measured, list) else [str(case.measured)]


def table_prediction(case: Case) -> dict[str, object]:
    from table_predictors import TABLE_PREDICTORS

    from orchestrator import __version__
    from orchestrator.io.provenance import code_commit, sha256_of

    spec = dict(case.predict)   # type: ignore[call-overload]
    source = case.folder / spec["input"]
    rows = TABLE_PREDICTORS[spec["predictor"]](json.loads(source.read_text()))
    commit, dirty = code_commit()
    return {"format": TABLE_FORMAT, "format_version": 1,
            "provenance": {"orch_version": __version__, "commit": commit, "commit_dirty": dirty,
                           "predictor": spec["predictor"]},
            "inputs": [{"path": spec["input"], "sha256": sha256_of(source)}], "rows": rows}


# --- scoring ---------------------------------------------------------------------------------------------------

def rows_of_table(prediction: dict, measured: dict) -> list[Row]:
    got = {r["label"]: r["measured"] for r in measured["rows"]}
    return [Row(r["what"], r["label"], tuple(r["axes"]), float(r["doublings"]), float(got[r["label"]]),
                r["predicted"], r.get("low"), r.get("high"), dict(r.get("baselines") or {}), r.get("note", ""))
            for r in prediction["rows"] if r["label"] in got]


def committed_rows(case: Case) -> list[Row]:
    """The committed prediction against the measurement."""
    if case.type == "table":
        return rows_of_table(json.loads(case.prediction.read_text()),
                             json.loads((case.folder / str(case.measured)).read_text()))
    from orchestrator.app.options import ScoreOptions
    from orchestrator.app.score import score_prediction

    folders = tuple(str(case.folder / m) for m in _measured_paths(case))
    return list(score_prediction(ScoreOptions(prediction=str(case.prediction), results=folders)).card.rows)


def current_rows(case: Case) -> list[Row]:
    """The current code's prediction from the same inputs against the measurement (made after it)."""
    if case.type == "table":
        spec = dict(case.predict)   # type: ignore[call-overload]
        from table_predictors import TABLE_PREDICTORS

        rows = TABLE_PREDICTORS[spec["predictor"]](json.loads((case.folder / spec["input"]).read_text()))
        return rows_of_table({"rows": rows}, json.loads((case.folder / str(case.measured)).read_text()))
    from orchestrator.app.options import PredictOptions
    from orchestrator.app.predict import predict
    from orchestrator.app.score import folder_facts
    from orchestrator.cli import build_parser
    from orchestrator.cli.options import options_from
    from orchestrator.core.predict.score import measured_batches, measured_cells, score
    from orchestrator.io.store import load_results

    argv = [str(case.folder / a) if (case.folder / a).exists() else str(a) for a in case.predict]
    options = options_from(PredictOptions, build_parser().parse_args(["predict", *argv]))
    saved = predict(options, command=["orch", "predict"]).saved
    assert saved is not None
    cells, batches = [], []
    for m in _measured_paths(case):
        results = load_results(case.folder / m)
        folder_facts(results)
        cells += measured_cells(results.records)
        batches += measured_batches(results.records)
    return list(score(saved, cells, batches).rows)


def _clean(value: object) -> object:
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 6)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def scored(rows: list[Row]) -> dict[str, object]:
    axes = summarise(rows)
    return _clean({
        "rows": [{"what": r.what, "label": r.label, "axes": list(r.axes), "doublings": r.doublings,
                  "measured": r.measured, "predicted": r.predicted, "low": r.low, "high": r.high,
                  "error_pct": r.error_pct, "inside": r.inside, "baselines": r.baselines} for r in rows],
        "axes": [{"axis": a.axis, "rows": a.rows, "median_abs_pct": a.median_abs_pct, "max_abs_pct": a.max_abs_pct,
                  "inside": a.inside, "with_interval": a.with_interval, "median_width": a.median_width,
                  "baselines": {k: list(v) for k, v in a.baselines.items()}, "beaten_by": a.beaten_by()}
                 for a in axes]})  # type: ignore[return-value]


def measured(case: Case) -> bool:
    return all((case.folder / m).exists() for m in _measured_paths(case))


def score_case(case: Case) -> dict[str, object]:
    """The case's scores: the committed prediction's and today's code's; a case whose measurement is still to come
    is listed as pending."""
    prediction = json.loads(case.prediction.read_text())
    made_by = prediction["provenance"]
    head = {"id": case.id, "kind": case.kind, "title": case.title, "source": case.source,
            "shaped_nothing": case.shaped_nothing, "note": case.note,
            "prediction_commit": first_commit(case.prediction), "code_commit": made_by.get("commit"),
            "code_dirty": made_by.get("commit_dirty")}
    if not measured(case):
        return {**head, "pending": True}
    commits = [first_commit(case.folder / m) for m in _measured_paths(case)]
    return {**head, "pending": False, "measurement_commit": commits[0] if len(set(commits)) == 1 else commits,
            "committed": scored(committed_rows(case)), "current": scored(current_rows(case))}


def score_all() -> dict[str, object]:
    return {"cases": [score_case(c) for c in cases()]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("predict", help="save a case's prediction (before it is measured)")
    p.add_argument("case")
    s = sub.add_parser("score", help="re-score every case; write scores.json and docs/validation.md")
    s.add_argument("--check", action="store_true", help="fail if the committed files differ from a re-score")
    args = parser.parse_args(argv)
    if args.verb == "predict":
        predict_case(load_case(CASES / args.case))
        return 0
    from render import render_page

    scores = score_all()
    page = render_page(scores, TEMPLATE.read_text())
    if args.check:
        return check(scores, page)
    SCORES.write_text(json.dumps(scores, indent=1) + "\n")
    PAGE.write_text(page)
    print(f"wrote {SCORES.relative_to(REPO)} and {PAGE.relative_to(REPO)}: {len(scores['cases'])} case(s)")
    return 0


def check(scores: dict[str, object], page: str) -> int:
    """0 when the committed scores equal a re-score (numbers within 1e-6 relative: BLAS differs across CPUs) and the
    committed page is what they render to."""
    from render import render_page

    committed = json.loads(SCORES.read_text())
    problems = list(differences(committed, scores, "scores"))
    if PAGE.read_text() != render_page(committed, TEMPLATE.read_text()):
        problems.append(f"{PAGE.relative_to(REPO)} is not what {SCORES.relative_to(REPO)} renders to")
    for p in problems[:20]:
        print(f"ledger: {p}", file=sys.stderr)
    if problems:
        print("ledger: run `python benchmarks/ledger/ledger.py score` and say in the commit what moved",
              file=sys.stderr)
    return 1 if problems else 0


def differences(a: object, b: object, where: str):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in ("prediction_commit", "measurement_commit"):
                continue                # a shallow or rewritten history moves these; the test checks them apart
            yield from differences(a.get(k), b.get(k), f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        if not math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9):
            yield f"{where}: committed {a}, re-scored {b}"
    elif a != b:
        yield f"{where}: committed {a!r}, re-scored {b!r}"


if __name__ == "__main__":
    sys.exit(main())
