"""The typed profile reads every committed profile-result.json and writes it back byte for byte, older
results lacking later keys included, and a result built in code writes the keys the rank always wrote."""

import copy
import json
from pathlib import Path

import pytest

from orchestrator.core.profile.onednn_verbose import ShapeTotal
from orchestrator.core.profile.result import CoverageJson, ProfiledTarget, RankProfile

REPO = Path(__file__).resolve().parents[2]
RESULTS = sorted((REPO / "results").rglob("profile-result.json"))


def test_there_are_committed_profiles_to_read():
    assert len(RESULTS) >= 10


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(REPO / "results")))
def test_a_committed_result_reads_and_writes_back_the_same_bytes(path):
    text = path.read_text()
    target = ProfiledTarget.from_json(json.loads(text))
    assert json.dumps(target.to_json(), indent=1) == text
    assert isinstance(target.results[0].onednn.shapes[0], ShapeTotal)
    assert target.results[0].peak is not None and target.results[0].peak.gflops > 0


def test_an_older_result_lacking_later_keys_writes_back_without_them():
    raw = json.loads(RESULTS[0].read_text())
    old = copy.deepcopy(raw)
    rank = old["results"][0]
    del old["passes"], old["disturbed_passes"], rank["replay_setting"], rank["profiler"]["coverage"]["allreduce_wait_ms"]
    for shape in rank["onednn"]["shapes"]:
        del shape["min_ms"], shape["median_ms"], shape["dst_layout"]
    rank["surprise"] = {"kept": [1, 2]}          # a key this code does not know is kept, in its place
    target = ProfiledTarget.from_json(old)
    assert target.runs == 1 and target.results[0].onednn.shapes[0].min_ms == 0.0
    assert not target.results[0].onednn.shapes[0].has("min_ms")
    assert json.dumps(target.to_json(), indent=1) == json.dumps(old, indent=1)


def test_a_rank_profile_built_in_code_writes_every_key_in_the_ranks_order():
    rank = RankProfile(plain_step_ms=(1.0, 2.0), verbose_step_ms=(1.5,), steps=2)
    assert list(rank.to_json()) == ["plain_step_ms", "verbose_step_ms", "steps", "plain_cpu_share",
                                    "verbose_cpu_share", "profiler_cpu_share", "onednn", "profiler", "peak",
                                    "stream_triad_gbs", "replay", "replay_setting"]
    assert rank.to_json()["plain_step_ms"] == [1.0, 2.0]
    assert CoverageJson(3.0, 2.0, 1.0).to_json() == {"step_ms": 3.0, "named_ms": 2.0, "other_ms": 1.0,
                                                     "allreduce_wait_ms": 0.0}
    target = ProfiledTarget(label="1x1x8", results=(rank,))
    assert "log_tail" not in target.to_json() and "passes" not in target.to_json()
