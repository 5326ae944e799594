"""The live oneDNN path of `orch profile`: a real rank, pinned as in a trial, with oneDNN's verbose mode on,
profiling a workload whose convolutions reach oneDNN on any x86 CPU (torch sends a CPU conv2d with a batch
above 1 to oneDNN, while fp32 linear layers go to BLAS: test_profile.py's classifier logs no primitive). The
rank's log holds convolution primitives, and a logged convolution replayed alone (profile_replay) runs the
same oneDNN kernel, by its implementation string, as it did inside the model."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import write_sweep

from orchestrator.cli import main
from orchestrator.core.profile import onednn_verbose as ov

pytestmark = [pytest.mark.ray]

# The smallest RetinaNet the workload accepts (image_size a multiple of 32), one thread, batch 2.
RETINANET = """
workload:
  name: retinanet
  params: {backbone: resnet18, trainable_layers: 5, image_size: 64, classes: 3, train_samples: 8,
           test_samples: 2}
grid: {ranks: [1], threads_per_rank: [1], local_batch: [2]}
profile: {layouts: [1x1x2], warmup_steps: 1, steps: 1}
"""


@pytest.fixture(scope="module")
def profiled(ray_local, tmp_path_factory):
    folder = tmp_path_factory.mktemp("profile-live")
    out = folder / "out"
    code = main(["profile", str(write_sweep(folder, "prof-live", RETINANET)), "--out", str(out)])
    assert code == 0
    result = json.loads((out / "1x1x2" / "profile-result.json").read_text())
    assert result["status"] == "ok", result.get("reason")
    log = gzip.decompress((out / "1x1x2" / "onednn-rank0.log.gz").read_bytes()).decode(errors="replace")
    return result["results"][0], log, result


def test_a_real_rank_records_onednn_convolutions_in_every_direction(profiled):
    rank0, log, _ = profiled
    executions, problems = ov.parse_lines(log.splitlines())
    assert problems == [] and rank0["onednn"]["executions"] == len(executions) > 0
    convs = [e for e in executions if e.kind == "convolution"]
    # Training runs each convolution forward, and backward for its weights; all but the first layer (whose
    # input, the image, needs no gradient) backward for their input too.
    assert {e.direction for e in convs} == {"forward", "backward_data", "backward_weights"}
    assert all(e.implementation and e.time_ms > 0 for e in convs)
    totals = {(t["kind"], t["direction"]) for t in rank0["onednn"]["totals"]}
    assert ("convolution", "forward") in totals
    replayed = [r for r in rank0["replay"] if r["kind"] == "convolution" and r["isolated_ms"] is not None]
    assert replayed and all(r["isolated_ms"] > 0 for r in replayed)


def test_a_replayed_convolution_runs_the_models_onednn_kernel(profiled, capfd):
    import torch

    from orchestrator.run.rank.profile_replay import replay_shapes

    _, log, _ = profiled
    executions, _ = ov.parse_lines(log.splitlines())
    shape = next(s for s in ov.by_shape(executions) if s.kind == "convolution" and s.direction == "forward")
    in_model = {e.implementation for e in executions
                if (e.kind, e.direction, e.problem) == ("convolution", "forward", shape.problem)}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # as the rank ran: oneDNN may pick another kernel for another thread count
    try:
        capfd.readouterr()
        with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
            (row,) = replay_shapes([shape])
        replay_log = capfd.readouterr().out
    finally:
        torch.set_num_threads(threads)
    assert row["isolated_ms"] is not None and row["isolated_ms"] > 0, row
    replayed = {e.implementation for e in ov.parse_lines(replay_log.splitlines())[0]
                if (e.kind, e.direction, e.problem) == ("convolution", "forward", shape.problem)}
    assert replayed and replayed == in_model, (shape.problem, replayed, in_model)


def test_the_replay_runs_on_the_ranks_threads_and_cpus(profiled):
    """The replay runs inside the rank process after its steps, so it inherits the rank's OpenMP threads and
    core binding; its recorded setting proves it, and the check that compares it with the placement passes.
    A replay moved to another process (or one that called set_num_threads) would fail here."""
    rank0, _, result = profiled
    (placed,) = result["placement"]
    assert rank0["replay_setting"] == {"threads": result["threads"], "cpus": sorted(placed["cpus"])}
    assert rank0["replay_setting"]["cpus"] == sorted(result["observed_cpus"][0])
