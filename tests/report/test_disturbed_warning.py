"""A sweep's own report warns of a disturbed machine in the words `orch predict` uses: the committed
folder whose GEMM peaks slow down on more cores (example-ipex: 1×2 below 1×1) says so in report.md and in the
terminal report that ends `orch sweep`; a quiet folder says nothing of the kind."""

from __future__ import annotations

import shutil
from pathlib import Path

from orchestrator.cli import main

RESULTS = Path(__file__).resolve().parents[2] / "results"
WARNING = "scaling evidence: the GEMM peak on 1×2 (20.5 GFLOP/s) is below the one on 1×1 (26.2)"


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_disturbed_folders_report_and_terminal_say_what_predict_says(tmp_path, capsys):
    folder = tmp_path / "example-ipex"
    shutil.copytree(RESULTS / "example-ipex", folder, ignore=shutil.ignore_patterns("report"))
    assert main(["report", str(folder), "--format", "md", "--format", "terminal"]) == 0
    terminal = flat(capsys.readouterr().out)
    report = flat((folder / "report" / "report.md").read_text())
    assert f"warning: {WARNING}" in terminal
    assert f"**Warning:** {WARNING}" in report
    assert report.index("**Warning:**") < report.index("## Scalability")      # said before the tables it concerns

    assert main(["predict", str(folder)]) == 0
    assert WARNING in flat(capsys.readouterr().err)                           # the same words


def test_a_quiet_folder_has_no_warning(tmp_path, capsys):
    folder = tmp_path / "example-classifier"
    shutil.copytree(RESULTS / "example-classifier", folder, ignore=shutil.ignore_patterns("report"))
    assert main(["report", str(folder), "--format", "md", "--format", "terminal"]) == 0
    assert "warning" not in capsys.readouterr().out.lower()
    assert "Warning" not in (folder / "report" / "report.md").read_text()
