"""examples/: the notebook-style script runs on a committed results folder and plots its throughput table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "results" / "example-classifier"


def test_the_notebook_plots_the_throughput_table_of_a_committed_folder(tmp_path):
    png = tmp_path / "throughput.png"
    out = subprocess.run([sys.executable, str(REPO / "examples" / "notebook.py"), str(EXAMPLE), "--out", str(png)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    ok = [json.loads(line) for line in (EXAMPLE / "trials.jsonl").read_text().splitlines()
          if '"kind":"throughput"' in line and '"status":"ok"' in line]
    for record in ok:   # every measured cell is in the printed table, rounded as printed
        assert f"{record['throughput']['samples_per_s']:.1f}" in out.stdout
    assert "samples/s at local batch 32" in out.stdout and "samples/s at local batch 128" in out.stdout
