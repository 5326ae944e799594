"""Everything orch prints reads at 80 columns: each command runs in a real pseudo-terminal 80
columns wide, as a user's default terminal is, and no line may run past it or be cut with an ellipsis ("lea…",
"24.…": rich's way of squeezing a column that does not fit)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from rich.cells import cell_len

REPO = Path(__file__).resolve().parents[2]
ORCH = str(Path(sys.executable).parent / "orch")
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]|\x1b\][^\x07]*\x07")
WIDTH = 80


def in_terminal(argv: list[str], columns: int = WIDTH) -> tuple[int, list[str]]:
    """(exit status, the lines a terminal of `columns` shows) for `orch ARGV` run on a pseudo-terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen([ORCH, *argv], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO,
                            close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:     # EIO: the terminal's other end closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    rc = proc.wait(timeout=120)
    text = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r", "")
    return rc, text.splitlines()


COMMANDS = {
    "report": ["report", "results/example-predict-retinanet", "--format", "terminal"],
    "report-retinanet": ["report", "results/example-retinanet", "--format", "terminal"],
    "predict-cluster": ["predict", "results/example-predict-retinanet", "--rcp", "tests/data/rcp/rcps_retinanet.json",
                        "--topology", "sweeps/topologies/cluster-64x2s28c.yaml", "--nodes", "1,8,64"],
    "predict-validate": ["predict", "results/example-predict-retinanet", "--validate"],
    "plan": ["plan", "sweeps/retinanet-table3.yaml", "--topology", "sweeps/topologies/xeon-2s28c-smt.yaml"],
    "replay": ["sweep", "sweeps/retinanet.yaml", "--replay", "results/retinanet-zen3-full"],
    "topology": ["topology", "--topology", "sweeps/topologies/cluster-4x2s28c.yaml"],
    "score": ["score", "benchmarks/ledger/cases/epochs-classifier-linear/prediction",
              "benchmarks/ledger/cases/epochs-classifier-linear/measured/held"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_line_fits_80_columns_uncut(name):
    rc, lines = in_terminal(COMMANDS[name])
    assert rc == 0, "\n".join(lines)
    assert len(lines) > 10                                       # it printed its tables
    too_wide = [line for line in lines if cell_len(line) > WIDTH]
    cut = [line for line in lines if "…" in line]
    assert not too_wide and not cut, "\n".join(too_wide + cut)


def test_a_table_too_wide_keeps_its_key_columns_and_names_the_rest():
    """The held-out validation table has 11 columns: at 80 columns it keeps what `orch predict` prints ('printed',
    'inside', 'width') and orch's own model, and says where every column is."""
    _, lines = in_terminal(COMMANDS["predict-validate"])
    text = " ".join(" ".join(lines).split())
    header = next(line for line in lines if "held out" in line and "┃" in line)
    assert all(name in header for name in ("orch model", "printed", "inside", "width"))
    assert "more column(s) at 80 columns: linear scaling, Amdahl (total cores)," in text
    assert "every column is in prediction-validation.csv" in text


def test_a_wide_terminal_shows_every_column():
    _, lines = in_terminal(COMMANDS["predict-validate"], columns=200)
    assert not any("more column(s)" in line for line in lines)
    assert any("Kendall" in line for line in lines)
