"""The all-reduce calibration trials on a real local Ray: ranks pinned per link class, sizes timed, records
that `orch predict` fits; then `orch predict` on those real records."""

from __future__ import annotations

import pytest
from conftest import CPUS, EMULATED_2S1C, by_key, read_records, write_sweep

from orchestrator.cli import main
from orchestrator.core.execution.calibration import MESSAGE_BYTES

pytestmark = [pytest.mark.ray, pytest.mark.needs_cpus(2)]


def test_calibration_across_emulated_sockets_then_predict(ray_local, tmp_path, capsys):
    sweep = write_sweep(tmp_path, "calibrate", """
        workload: {name: classifier, params: {hidden: 128, train_samples: 2048}}
        grid: {ranks: [1, 2], threads_per_rank: [1], local_batch: [16, 64]}
        measure: {warmup_steps: 2, timed_steps: 20, repeats: 2, peak: false}
        """)
    results = tmp_path / "results"
    assert main(["sweep", str(sweep), "--topology", str(EMULATED_2S1C), "--results", str(results),
                 "--no-report"]) == 0
    records = by_key(read_records(results))
    # one core per socket: 2 ranks can only be calibrated across the two (emulated) sockets
    assert "allreduce-socket-n2-fp32" not in records
    cal = records["allreduce-sockets-n2-fp32"]
    assert cal["status"] == "ok", cal["reason"]
    section = cal["allreduce"]
    assert (section["link"], section["ranks"], section["dtype"], section["algorithm"]) == ("sockets", 2, "fp32", "ring")
    assert section["sizes_bytes"] == list(MESSAGE_BYTES)
    assert all(t > 0 for t in section["time_s"])
    assert section["time_s"][-1] > 10 * section["time_s"][0]      # 64 MiB takes far longer than 4 KiB
    assert sorted(r["socket"] for r in cal["placement"]) == [0, 1]
    assert sorted(r["observed_cpus"][0] for r in cal["placement"]) == CPUS[:2]
    multi = records["r2-t1-b16"]["throughput"]
    assert multi["gradient_bytes"] > 0 and sum(multi["ddp_bucket_bytes"]) >= multi["gradient_bytes"] * 0.99
    assert len(multi["ddp_bucket_ready_share"]) == len(multi["ddp_bucket_bytes"])
    assert multi["ddp_bucket_ready_share"][-1] == 1.0

    capsys.readouterr()
    assert main(["predict", str(results), "--validate", "--out", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "All-reduce calibration" in out and "across sockets" in out
    assert "leave one cell out" in out
