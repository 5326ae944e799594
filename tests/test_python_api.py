"""The notebook API (`orch.plan`, `orch.load`, `orch.predict`, their typed results and DataFrames) against the
commands it sits under: each function's output is compared with what the CLI prints or writes for the same
input. `orch.sweep` and `orch.track` run on a real Ray in tests/run/test_tracking_sweep.py."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

import orch
from orchestrator.cli import main
from orchestrator.core.measured.record_fields import FIELDS

REPO = Path(__file__).resolve().parents[1]
CLASSIFIER = REPO / "sweeps" / "classifier.yaml"
EMULATED = REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml"
EXAMPLE = REPO / "results" / "example-classifier"
EXAMPLE_PREDICT = REPO / "results" / "example-predict"


def cli_stdout(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out


def test_importing_orch_and_its_workload_door_stays_light():
    code = ("import sys, orch, orch.workload; light = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pandas', 'torch', 'ray', 'mlflow', 'tensorboard') or m in ('orch.api', 'orch.results')); "
            "orch.plan; print(light, 'orch.api' in sys.modules, [m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'ray', 'pandas')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[] True []"
    assert set(orch.__all__) <= set(dir(orch))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        orch.nope   # noqa: B018


def test_plan_is_what_orch_plan_json_prints(capsys):
    printed = json.loads(cli_stdout(capsys, ["plan", str(CLASSIFIER), "--topology", str(EMULATED), "--json"]))
    plan = orch.plan(CLASSIFIER, topology=EMULATED)
    assert json.loads(json.dumps(plan.to_dict())) == printed
    assert plan.errors == () and set(plan.feasible) == {t["key"] for t in printed["trials"] if t["feasible"]}
    frame = plan.to_frame()
    assert list(frame["key"]) == [t["key"] for t in printed["trials"]]
    assert str(frame["ranks"].dtype) == "Int64" and str(frame["feasible"].dtype) == "boolean"
    spans = frame.set_index("key").loc["r1-t2-b32"]
    assert not spans["feasible"] and "spans_sockets" in spans["reason_codes"] and spans["cores"] == 2
    assert frame["feasible"].sum() == 4 and frame.loc[frame["feasible"], "nodes"].eq(1).all()
    assert "4 of 8 grid points feasible" in repr(plan)


def test_load_gives_one_typed_row_per_record():
    results = orch.load(EXAMPLE)
    lines = [json.loads(line) for line in (EXAMPLE / "trials.jsonl").read_text().splitlines() if line.strip()]
    last = {r["key"]: r for r in lines}   # a later record of a key replaces an earlier one
    frame = results.to_frame()
    assert list(frame.columns) == [f.name for f in FIELDS]
    assert sorted(frame["key"]) == sorted(last)
    dtypes = {name: str(dtype) for name, dtype in frame.dtypes.items()}
    assert dtypes["ranks"] == "Int64" and dtypes["samples_per_s"] == "float64" and dtypes["kind"] == "category"
    assert dtypes["converged"] == "boolean" and dtypes["started_at"].startswith("datetime64") and "UTC" in dtypes["started_at"]
    by_key = frame.set_index("key")
    for key, record in last.items():
        row = by_key.loc[key]
        assert row["status"] == record["status"] and row["kind"] == record["kind"]
        if record["throughput"]:
            assert row["samples_per_s"] == record["throughput"]["samples_per_s"]
            assert row["step_ms"] == max(record["throughput"]["step_ms_median"])
            assert row["cores"] == record["ranks"] * record["threads_per_rank"]
        if record["convergence"] and record["status"] == "ok":
            assert row["epochs_to_target"] == record["convergence"]["epochs_to_target"]
    throughput = results.to_frame("throughput")
    assert set(throughput["kind"]) == {"throughput"} and len(throughput) == sum(
        r["kind"] == "throughput" for r in last.values())
    assert results.name == "classifier" and results.summary is None and not results.failed


def test_tables_are_the_numbers_orch_report_writes(tmp_path, capsys):
    import pandas as pd

    out = tmp_path / "report"
    assert main(["report", str(EXAMPLE), "--format", "json", "--out", str(out)]) == 0
    tables = orch.load(EXAMPLE).tables()
    written = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json") if not p.name.startswith("rcps_")}
    assert set(tables) == set(written) and "scalability-b32" in tables
    for name, table in written.items():
        df = tables[name]
        assert list(df.columns) == table["columns"] and list(df.index) == [r["label"] for r in table["rows"]]
        assert df.attrs["text"] == [[c["text"] for c in r["cells"]] for r in table["rows"]]
        for i, row in enumerate(table["rows"]):
            for j, cell in enumerate(row["cells"]):
                value = df.iloc[i, j]
                if any(r["cells"][j]["value"] is not None for r in table["rows"]):   # a column of numbers
                    assert pd.isna(value) if cell["value"] is None else value == pytest.approx(cell["value"])
                else:
                    assert value == cell["text"]
    scalability = tables["scalability-b32"]
    assert scalability.index.name == "threads \\ ranks" and scalability.loc["1", "1"] == pytest.approx(1.0)


def test_predict_is_what_orch_predict_json_prints(capsys):
    printed = json.loads(cli_stdout(capsys, ["predict", str(EXAMPLE_PREDICT), "--nodes", "1", "--json"]))
    prediction = orch.predict(EXAMPLE_PREDICT, nodes=[1])
    made = json.loads(json.dumps(prediction.to_dict()))
    # the two calls are made seconds apart: their times may differ (a loaded CI machine is slow), nothing else
    times = [dt.datetime.fromisoformat(d["provenance"].pop("made_at")) for d in (made, printed)]
    assert abs((times[0] - times[1]).total_seconds()) < 120 and times[0].tzinfo is not None
    assert made == printed
    frame = prediction.to_frame()
    assert len(frame) == len(printed["layouts"]) and str(frame["nodes"].dtype) == "Int64"
    assert list(frame["samples_per_s"]) == pytest.approx([p["samples_per_s"] for p in printed["layouts"]])
    assert set(prediction.tables()) == {t["name"] for t in printed["tables"]}


def test_bad_input_is_a_value_error_with_the_commands_message(tmp_path):
    with pytest.raises(ValueError, match="not a results folder"):
        orch.load(tmp_path)
    with pytest.raises(orch.InputError, match=r"nodes=\[0\]: expected positive whole numbers"):
        orch.predict(EXAMPLE_PREDICT, nodes=[0])
    with pytest.raises(orch.InputError, match="nothing to log to"):
        orch.track(EXAMPLE)


def test_a_dataframe_without_pandas_says_how_to_install_it(monkeypatch):
    results = orch.load(EXAMPLE)
    monkeypatch.setitem(sys.modules, "pandas", None)   # import pandas now fails, as where it is not installed
    with pytest.raises(ModuleNotFoundError, match=r"need pandas.*\.venv/bin/pip install -e '\.\[notebook\]'"):
        results.to_frame()


def test_the_column_table_of_the_docs_is_generated_from_the_fields():
    from orchestrator.core.measured.record_fields import columns_markdown

    page = (REPO / "docs" / "python-api.md").read_text()
    block = page.split("<!-- columns:begin")[1].split("-->", 1)[1].split("<!-- columns:end -->")[0]
    assert block.strip() == columns_markdown().strip(), \
        "docs/python-api.md's columns are stale: paste orchestrator.core.measured.record_fields.columns_markdown() there"


def _result_folders() -> list[Path]:
    return sorted(p.parent for p in (REPO / "results").glob("*/spec.json"))


@pytest.mark.parametrize("folder", _result_folders(), ids=lambda p: p.name)
def test_every_committed_folder_reads_back_as_a_typed_spec_and_topology(folder):
    results = orch.load(folder)
    spec = json.loads((folder / "spec.json").read_text())["spec"]
    assert isinstance(results.spec, orch.SweepSpec) and results.spec.name == spec["name"] == results.name
    assert results.spec.grid.local_batch == tuple(spec["grid"]["local_batch"])
    assert results.spec.workload.params == spec["workload"].get("params", {})
    assert isinstance(results.topology, orch.Topology)
    assert len(results.topology.nodes) == len(json.loads((folder / "topology.json").read_text())["nodes"])


def test_a_spec_that_does_not_read_as_a_sweep_is_said_with_its_file(tmp_path):
    folder = tmp_path / "edited"
    subprocess.run(["cp", "-r", str(EXAMPLE), str(folder)], check=True)
    data = json.loads((folder / "spec.json").read_text())
    data["spec"]["grid"]["local_batch"] = [0]           # below its minimum of 1
    data["spec"]["grid"]["threads"] = [1]               # no such key
    (folder / "spec.json").write_text(json.dumps(data))
    with pytest.raises(orch.NotAResultsFolder) as raised:   # checked once, at load: never a half-read folder
        orch.load(folder)
    message = str(raised.value)
    assert str(folder / "spec.json") in message and "2 problem(s)" in message
    assert "grid.local_batch" in message and "threads" in message


def test_a_folder_s_topology_and_environment_are_typed_at_load(tmp_path):
    folder = tmp_path / "edited"
    subprocess.run(["cp", "-r", str(EXAMPLE), str(folder)], check=True)
    env = json.loads((folder / "environment.json").read_text())
    results = orch.load(folder)
    assert results.environment.cpu_model == env["cpu_model"] and results.environment.torch == env["torch"]
    assert results.environment.backend.chosen == env["backend"]["chosen"]
    (folder / "environment.json").write_text(json.dumps({**env, "cpu_model": 7, "backend": {"chosen": ["gloo"]}}))
    with pytest.raises(orch.NotAResultsFolder, match="environment.json: cpu_model: must be a string or null, not "
                                                     "int; backend.chosen: must be a string or null, not list"):
        orch.load(folder)
    (folder / "environment.json").unlink()
    assert orch.load(folder).environment.keys() == ()     # an older folder without one: empty, not an error
    (folder / "topology.json").write_text(json.dumps({"nodes": [{"name": "n", "sockets": "many"}]}))
    with pytest.raises(orch.NotAResultsFolder, match=r"(?s)topology.json: 2 problem.*sockets: must be a list"):
        orch.load(folder)
    (folder / "topology.json").unlink()
    assert orch.load(folder).topology is None
