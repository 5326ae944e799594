"""The results folder's refusal to mix incomparable trials (orchestrator.io.store), on real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.io.store import SpecChanged, load_results, prepare_folder, spec_changes

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "results" / "example-retinanet"   # written before measure.isolation existed


def _spec(**measure) -> dict:
    return {"name": "x", "workload": {"name": "w", "params": {}}, "measure": {"repeats": 3, **measure}}


def test_a_setting_added_later_compares_as_the_value_older_results_were_measured_under():
    old = _spec()                                   # no isolation key: every trial ran alone
    assert spec_changes(old, _spec(isolation="node"), {}, {}) == []
    assert spec_changes(old, _spec(isolation="none"), {}, {}) == ["measure.isolation: 'node' → 'none'"]


def test_results_from_before_the_ddp_switches_compare_as_ddps_defaults():
    def spec(**params) -> dict:
        return {**_spec(isolation="node"), "workload": {"name": "w", "params": params}}

    defaults = {"ddp_comm_hook": "none", "ddp_bucket_mb": 25.0, "ddp_grad_as_bucket_view": False}
    assert spec_changes(spec(), spec(**defaults), {}, {}) == []
    assert spec_changes(spec(), spec(**{**defaults, "ddp_comm_hook": "bf16"}), {}, {}) == [
        "workload.params.ddp_comm_hook: 'none' → 'bf16'"]


def test_the_calibration_switches_may_change_but_a_measurement_setting_may_not():
    assert spec_changes(_spec(peak=True), _spec(peak=False), {}, {}) == []
    # when the workload is probed: what the time estimate rests on, not what a trial measures (older: no key)
    assert spec_changes(_spec(), _spec(probe="always"), {}, {}) == []
    assert spec_changes(_spec(probe="auto"), _spec(probe="always"), {}, {}) == []
    assert spec_changes(_spec(), _spec(repeats=5), {}, {}) == ["measure.repeats: 3 → 5"]


def test_a_results_folder_from_before_concurrency_resumes_with_the_default_isolation(tmp_path):
    folder = tmp_path / "example"
    shutil.copytree(EXAMPLE, folder)
    before = (folder / "trials.jsonl").read_text()
    old = load_results(folder)
    assert "isolation" not in old.spec["spec"]["measure"]
    spec = json.loads(json.dumps(old.spec["spec"]))
    spec["measure"]["isolation"] = "node"
    records = prepare_folder(folder, spec, old.spec["derived"], old.topology, {})
    assert len(records) == len(old.records) and (folder / "trials.jsonl").read_text() == before
    spec["measure"]["isolation"] = "socket"
    with pytest.raises(SpecChanged, match="measure.isolation: 'node' → 'socket'"):
        prepare_folder(folder, spec, old.spec["derived"], old.topology, {})
