"""The example package (`examples/my-model/`), end to end as a user meets it: installed into this environment
with pip (its own pyproject.toml, its entry point in the `orch.workloads` group), then `orch sweep` on its
sweep file (throughput and convergence cells), `orch report` and `orch predict` on the results, each a real
`orch` process. Nothing under orchestrator/ or workloads/ names the workload: it is found by its entry point."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "examples" / "my-model"
DIST = "orch-example-my-model"
EMULATED_2S1C = REPO / "sweeps" / "topologies" / "emulated-2s1c.yaml"

pytestmark = pytest.mark.ray


def _installed_here() -> bool:
    """Whether this environment holds the example as an editable install of this checkout's folder."""
    try:
        direct_url = importlib.metadata.distribution(DIST).read_text("direct_url.json") or "{}"
    except importlib.metadata.PackageNotFoundError:
        return False
    return json.loads(direct_url).get("url") == PACKAGE.as_uri()


@pytest.fixture(scope="module")
def installed():
    """pip install -e examples/my-model into the suite's environment, once (idempotent: skipped when this
    folder is installed already). Without build isolation when setuptools is here (no download), else plain."""
    if not _installed_here():
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
        done = subprocess.run([*pip, "--no-build-isolation", "-e", str(PACKAGE)], capture_output=True, text=True)
        if done.returncode != 0:
            done = subprocess.run([*pip, "-e", str(PACKAGE)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert _installed_here()


def orch(*args: str, timeout_s: float = 900) -> subprocess.CompletedProcess:
    """`orch ARGS` in a fresh interpreter (an editable install takes effect at interpreter start)."""
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout_s)


def test_the_installed_package_is_listed_as_a_workload_of_its_own_distribution(installed):
    out = orch("workloads", timeout_s=120)
    assert out.returncode == 0, out.stderr
    listed = " ".join(out.stdout.split())
    assert "stripes: a small CNN on synthetic stripes" in listed
    assert f"from {DIST} 0.1.0: my_model.workload:workload" in listed


def test_sweep_report_and_predict_run_end_to_end_on_the_example(installed, tmp_path):
    results = tmp_path / "stripes"
    swept = orch("sweep", str(PACKAGE / "stripes.yaml"), "--topology", str(EMULATED_2S1C), "--results", str(results))
    assert swept.returncode == 0, swept.stdout[-3000:] + swept.stderr[-3000:]
    records = [json.loads(line) for line in (results / "trials.jsonl").read_text().splitlines() if line.strip()]
    throughput = [r for r in records if r["kind"] == "throughput"]
    convergence = [r for r in records if r["kind"] == "convergence"]
    assert sorted((r["ranks"], r["local_batch"]) for r in throughput) == [(1, 16), (1, 32), (2, 16), (2, 32)]
    assert all(r["status"] == "ok" for r in throughput), [r["status"] for r in throughput]
    assert sorted(r["global_batch"] for r in convergence) == [16, 32, 64]
    assert all(r["status"] == "ok" for r in convergence), [r.get("error") for r in convergence]
    assert json.loads((results / "spec.json").read_text())["spec"]["workload"]["name"] == "stripes"

    reported = orch("report", str(results), timeout_s=300)
    assert reported.returncode == 0, reported.stderr
    assert "Scalability" in reported.stdout and (results / "report" / "report.md").is_file()

    predicted = orch("predict", str(results), timeout_s=300)
    assert predicted.returncode == 0, predicted.stdout[-3000:] + predicted.stderr[-3000:]
    assert "samples/s" in predicted.stdout
