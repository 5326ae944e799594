"""The ledger's rules (benchmarks/ledger/): each prediction was saved, by committed code, before what it predicts was
measured; its inputs are what it read; nothing measured is among its inputs; and docs/validation.md is what a
re-score of every case with the current code gives. The commits are read from git, not from the cases' own files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks" / "ledger"))

import ledger  # noqa: E402

from orchestrator.io.provenance import folder_hashes, sha256_of  # noqa: E402

CASES = ledger.cases()


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)


@pytest.fixture(scope="module", autouse=True)
def full_history() -> None:
    if git("rev-parse", "--is-shallow-repository").stdout.strip() != "false":
        pytest.fail("the ledger's order is read from git: this needs a clone with its history (not --depth)")


def is_ancestor(older: str, newer: str) -> bool:
    return git("merge-base", "--is-ancestor", older, newer).returncode == 0


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_prediction_was_committed_by_committed_code_before_the_measurement(case):
    saved = json.loads(case.prediction.read_text())
    made_by = saved["provenance"]
    predicted = ledger.first_commit(case.prediction)
    assert predicted, f"{case.id}: its prediction is not committed"
    assert made_by["commit"], f"{case.id}: made outside a git checkout"
    assert is_ancestor(made_by["commit"], predicted), f"{case.id}: the code that predicted comes after the file"
    if made_by["commit_dirty"]:
        # the checkout had uncommitted changes then: acceptable only where no code differs between the commit that
        # made it and the one that saved it (a deleted data file once marked a checkout dirty)
        changed = git("diff", "--name-only", made_by["commit"], predicted, "--", "*.py", "pyproject.toml").stdout
        assert not changed.strip(), f"{case.id}: made by uncommitted code ({changed.split()[:3]})"
    if not ledger.measured(case):
        return                                   # pending: predicted, to be measured
    for path in ledger._measured_paths(case):
        measured = ledger.first_commit(case.folder / path)
        assert measured, f"{case.id}: {path} is not committed"
        assert measured != predicted and is_ancestor(predicted, measured), (
            f"{case.id}: {path} was committed in {measured[:9]}, not after the prediction's {predicted[:9]}")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_inputs_are_what_the_prediction_read_and_hold_nothing_measured(case):
    saved = json.loads(case.prediction.read_text())
    if case.type == "table":
        (read,) = saved["inputs"]
        assert sha256_of(case.folder / read["path"]) == read["sha256"]
        rows = json.loads((case.folder / read["path"]).read_text())["rows"]
        if ledger.measured(case):
            held = {r["label"] for r in json.loads((case.folder / str(case.measured)).read_text())["rows"]}
            assert not held & {r["label"] for r in rows if "ms" in r}, "a measured row is among the inputs"
        return
    inputs = [case.folder / i["path"] for i in saved["inputs"] if i["role"] != "rcp"]
    for read, folder in zip((i for i in saved["inputs"] if i["role"] != "rcp"), inputs):
        assert folder_hashes(folder, tuple(read["sha256"])) == read["sha256"], f"{folder} changed since"
    if not ledger.measured(case):
        return
    seen = {line for f in inputs for line in measurements(f)}
    for path in ledger._measured_paths(case):
        assert not seen & measurements(case.folder / path), f"{case.id}: a record of {path} is among the inputs"


def measurements(folder: Path) -> set[str]:
    """The lines of a folder's records that measured something (an infeasible point's line is the plan's verdict,
    the same wherever it was planned)."""
    return {line for line in (folder / "trials.jsonl").read_text().splitlines()
            if line.strip() and json.loads(line).get("status") == "ok"}


def test_the_published_page_is_a_rescore_with_the_current_code():
    assert ledger.main(["score", "--check"]) == 0


def test_the_ledger_holds_cases_of_every_kind_and_from_outside():
    """At least 12 cases, of at least 4 kinds among threads, ranks, nodes and links, and epochs; at least 3 measured
    outside this repository (public data, named) or on hardware no model was fitted on."""
    kinds = {c.kind for c in CASES}
    assert len(CASES) >= 12, [c.id for c in CASES]
    assert len(kinds & {"threads", "ranks", "nodes", "links", "epochs"}) >= 4, kinds
    outside = [c.id for c in CASES if c.source.startswith("public:") or c.kind == "cpu"]
    assert len(outside) >= 3, outside
