"""`orch predict`'s model plots: written only with --out, and what they draw is what the tables say."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from predict_results import write_results

from orchestrator.app.predict import predict as app_predict
from orchestrator.cli import main
from orchestrator.report.prediction_plots import epochs_figure, plotted_batch, throughput_figure

FULL = [(r, t, b) for r, t in ((1, 1), (1, 2), (2, 1), (2, 2)) for b in (8, 16, 32, 64, 128)]
PLOTS = ("prediction-throughput.png", "prediction-epochs.png", "prediction.png")


@pytest.fixture
def results(tmp_path):
    return write_results(tmp_path, layouts=FULL)


def options(results, **over) -> SimpleNamespace:
    base = dict(results=str(results), topology=None, nodes=None, local_batch=None, rcp=None, samples_per_epoch=None,
                calibration=[], deadline_h=None, budget_node_h=None)
    return SimpleNamespace(**{**base, **over})


def test_plots_are_written_with_out_and_only_with_it(results, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["predict", str(results), "--out", str(out)]) == 0
    for name in PLOTS:
        assert (out / name).stat().st_size > 1000, name
        assert f"![{name}]({name})" in (out / "prediction.md").read_text()
    before = set(tmp_path.rglob("*"))
    assert main(["predict", str(results), "--json"]) == 0
    assert set(tmp_path.rglob("*")) == before          # --json alone writes nothing
    capsys.readouterr()


def _by_gid(ax, gid):
    return next(a for a in [*ax.lines, *ax.collections, *ax.containers] if getattr(a, "get_gid", lambda: None)()
                == gid)


def test_throughput_lines_bands_and_points_are_the_tables_figures(results, tmp_path, capsys):
    report = app_predict(options(results))
    assert main(["predict", str(results), "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    rows = json.loads((tmp_path / "o" / "prediction.json").read_text())["layouts"]
    batch = plotted_batch(report)
    assert batch == 128                                  # the largest local batch predicted and measured
    table = {(r["ranks"], r["threads_per_rank"]): r for r in rows if r["local_batch"] == batch and r["nodes"] == 1}
    fig = throughput_figure(report)
    ax_cores, ax_ranks = fig.axes
    for t in (1, 2, 4):
        line = _by_gid(ax_ranks, f"predicted-t{t}")
        ranks = [r for r, tt in sorted(table) if tt == t]
        assert list(line.get_xdata()) == ranks
        assert list(line.get_ydata()) == [table[(r, t)]["samples_per_s"] for r in ranks]
        band_y = {round(v, 9) for v in _by_gid(ax_ranks, f"predicted-t{t}-band").get_paths()[0].vertices[:, 1]}
        for r in ranks:
            assert {round(table[(r, t)]["samples_per_s_low"], 9), round(table[(r, t)]["samples_per_s_high"], 9)} <= band_y
    fastest = _by_gid(ax_cores, "fastest-per-cores")
    for cores, rate in zip(fastest.get_xdata(), fastest.get_ydata()):
        same = [r["samples_per_s"] for k, r in table.items() if k[0] * k[1] == cores]
        assert rate == max(same)
    measured = _by_gid(ax_ranks, "measured").get_offsets()
    cells = sorted((c.layout.ranks, c.samples_per_s) for c in report.fitted.cells if c.layout.local_batch == batch)
    plotted = sorted(map(tuple, measured.tolist()))
    assert [x for x, _ in plotted] == [x for x, _ in cells]
    assert [y for _, y in plotted] == pytest.approx([y for _, y in cells])
    table_measured = {k: r["measured_samples_per_s"] for k, r in table.items() if r["measured_samples_per_s"]}
    assert sorted(table_measured.values()) == pytest.approx(sorted(v for _, v in cells))
    assert len(_by_gid(ax_ranks, "held-out").get_offsets()) == len(cells)


def test_epochs_curve_and_points_are_the_epochs_tables(results, tmp_path, capsys):
    report = app_predict(options(results))
    assert main(["predict", str(results), "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    table = json.loads((tmp_path / "o" / "prediction-epochs.json").read_text())["rows"]
    ax = epochs_figure(report).axes[0]
    curve = dict(zip(_by_gid(ax, "epochs-fitted").get_xdata(), _by_gid(ax, "epochs-fitted").get_ydata()))
    points = _by_gid(ax, "epochs-points")
    assert list(points.get_xdata()) == [int(r["label"]) for r in table]
    assert list(points.get_ydata()) == pytest.approx([r["cells"][0]["value"] for r in table])
    for r in table:                                      # the curve passes through the table's fitted column
        assert curve[int(r["label"])] == pytest.approx(r["cells"][1]["value"])
    band = _by_gid(ax, "epochs-band").get_paths()[0].vertices[:, 1]
    assert band.min() > 0 and band.max() > max(curve.values())


def test_no_convergence_data_draws_no_epochs_plot(tmp_path, capsys):
    results = write_results(tmp_path, layouts=FULL, convergence=False)
    report = app_predict(options(results))
    assert epochs_figure(report) is None and throughput_figure(report) is not None
    assert main(["predict", str(results), "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    assert not (tmp_path / "o" / "prediction-epochs.png").exists()
