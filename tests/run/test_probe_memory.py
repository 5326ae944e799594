"""How orch measures a process's memory (run.procmem): its private memory (resident less file-backed pages) and
its libraries' pages, which the ranks of a node share. On hand-made /proc files first, then for real: a probe
beside another torch process, whose presence must not move the figure that the probe and the records share."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import write_sweep

from orch import decide_precision
from orchestrator.io.sweepfile import load_sweep
from orchestrator.run.driver.probe import ProbeSetup, run_probe
from orchestrator.run.procmem import ProcMemory, parse_status, read_memory
from orchestrator.run.rank.probe import own_peak_private_mib

pytestmark = pytest.mark.slow   # real processes, seconds each: the second tier

TINYNET = Path(__file__).resolve().parents[1] / "data" / "own_model" / "tinynet.py"
# VmHWM 1,024 MiB, resident now 900 MiB of which 330 MiB file-backed (torch's libraries, libc, the interpreter)
STATUS = ("Name:\tpython\nVmPeak:\t 9000000 kB\nVmHWM:\t  1048576 kB\nVmRSS:\t   921600 kB\nRssAnon:\t  583680 kB\n"
          "RssFile:\t  337920 kB\nRssShmem:\t       0 kB\n")


def test_private_memory_is_the_resident_set_less_its_file_backed_pages_and_its_peak_the_high_water_mark_less_them(
        tmp_path):
    read = parse_status(STATUS)
    assert read == ProcMemory(hwm_mib=1024.0, rss_mib=900.0, file_mib=330.0)
    assert read.private_mib == 570.0            # RssAnon + RssShmem
    assert read.peak_private_mib == 1024 - 330  # the peak of the whole set, less the files' pages mapped now
    (tmp_path / "status").write_text(STATUS)
    assert own_peak_private_mib(tmp_path) == (694.0, 330.0)


def test_without_proc_there_is_no_figure(tmp_path):
    assert own_peak_private_mib(tmp_path / "missing") == (None, 0.0)
    assert read_memory(tmp_path / "missing") is None
    assert parse_status("Name:\tkthreadd\n") is None   # a kernel thread has no memory counters


def test_this_process_reads_its_own_counters():
    read = read_memory()
    assert read is not None and 0 < read.file_mib < read.rss_mib <= read.hwm_mib
    assert read.private_mib > 0 and read.peak_private_mib >= read.private_mib


# Another torch process, as a notebook or another sweep would be: torch imported, a model like the probe's trained
# a few steps (so that it maps the same library pages the rank runs), held until its stdin closes.
NEIGHBOUR = textwrap.dedent("""
    import sys
    import torch
    from torch import nn
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        nn.functional.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 2, (16,))).backward()
        opt.step()
    print("ready", flush=True)
    sys.stdin.read()
""")


def _probe(tmp_path: Path, name: str):
    sweep = load_sweep(write_sweep(tmp_path, name, f"""
        workload: {{name: "{TINYNET}:workload"}}
        grid: {{ranks: [1], threads_per_rank: [1], local_batch: [16]}}
        measure: {{warmup_steps: 2, timed_steps: 5, repeats: 1, peak: false, allreduce: false}}
        """))
    sweep = dataclasses.replace(sweep, params=decide_precision(sweep.params))   # as `orch probe` decides `auto`
    return run_probe(sweep, "gloo", ProbeSetup((0,), (0,), 4000.0, "the test's"))


@pytest.mark.slow
def test_another_torch_process_beside_the_probe_moves_neither_its_figure_nor_the_records(tmp_path, monkeypatch):
    """Real processes: the probe's ranks beside a torch process that shares their libraries' pages, then without
    it. The rank's own private peak (what the probe fits) and the launcher's watch (what a sweep's records keep)
    agree within 10% beside it, where unique memory (orch's measure before) differed by the libraries' size; and
    the probe's figure moves by much less than the libraries' size when the neighbour leaves."""
    monkeypatch.setattr("orchestrator.run.driver.probe.WORK_ROOT", tmp_path / "work")
    neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
    try:
        assert neighbour.stdout is not None and neighbour.stdout.readline().strip() == "ready"
        beside = _probe(tmp_path, "beside")
    finally:
        neighbour.communicate(timeout=60)   # closes its stdin: it ends
    alone = _probe(tmp_path, "alone")
    libraries = beside.memory.libraries_mib
    assert libraries > 100, "torch's libraries are file-backed pages of a few hundred MiB"
    for point in beside.points:
        assert point.rank_peak_private_mib is not None and point.watched_peak_private_mib is not None
        assert abs(point.watched_peak_private_mib / point.rank_peak_private_mib - 1) <= 0.10, point
    for with_one, without in zip(beside.points, alone.points, strict=True):
        moved = abs(with_one.peak_mib - without.peak_mib)
        assert moved <= 0.10 * without.peak_mib and moved < 0.25 * libraries, (with_one, without)
