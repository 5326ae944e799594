"""orch in a notebook: load a results folder with the Python API, look at it as a DataFrame, and plot a
throughput table. Runs as a script, or cell by cell (the `# %%` markers: VS Code, Jupyter with jupytext):

    .venv/bin/python examples/notebook.py                                   # results/example-classifier
    .venv/bin/python examples/notebook.py results/example-retinanet --out retinanet.png

docs/python-api.md describes every function and column used here.
"""

# %% Load a results folder (finished or partial), as `orch report` reads it.
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")   # no display needed: the plot goes to a PNG
import matplotlib.pyplot as plt  # noqa: E402

import orch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("results", nargs="?", default=str(REPO / "results" / "example-classifier"))
parser.add_argument("--out", default="throughput.png", help="the plot's PNG (default: ./throughput.png)")
args = parser.parse_args()

results = orch.load(args.results)
print(results)

# %% One row per record, typed columns: the throughput trials that ran ok.
frame = results.to_frame("throughput")
ok = frame[frame["status"] == "ok"]
print(ok[["key", "ranks", "threads_per_rank", "local_batch", "samples_per_s", "cv", "step_ms", "peak_uss_mib"]]
      .round(3).to_string(index=False))

# %% The throughput table: threads per rank × ranks, one per local batch (samples/s, median of the repeats).
tables = {batch: group.pivot_table(index="threads_per_rank", columns="ranks", values="samples_per_s")
          for batch, group in ok.groupby("local_batch")}
for batch, table in tables.items():
    print(f"\nsamples/s at local batch {batch} (rows: threads per rank, columns: ranks)")
    print(table.round(1).to_string())

# %% The same tables as bars, the repeats' spread (CV) as error bars.
fig, axes = plt.subplots(1, len(tables), figsize=(4.5 * len(tables), 3.6), squeeze=False)
for ax, (batch, table) in zip(axes[0], tables.items()):
    spread = ok[ok["local_batch"] == batch].pivot_table(index="threads_per_rank", columns="ranks", values="cv")
    table.plot.bar(ax=ax, yerr=table * spread, capsize=3, rot=0)
    ax.set(title=f"local batch {batch}", xlabel="threads per rank", ylabel="samples/s")
    ax.legend(title="ranks")
fig.suptitle(f"{results.name}: throughput by layout")
fig.tight_layout()
fig.savefig(args.out, dpi=100)
print(f"\nwrote {args.out}")

# %% The report's own tables are DataFrames too (the numbers `orch report` writes as CSV and JSON).
for name, table in results.tables().items():
    if name.startswith("scalability"):
        print(f"\n{table.attrs['title']}")
        print(table.to_string())
