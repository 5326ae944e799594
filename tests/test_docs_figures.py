"""Figures the docs state that the code or the committed folders decide: a constant of the code quoted on a page
(the time estimate's share of the GEMM rate, the stand-ins for a folder without a pair of cells, the watchdogs'
defaults), the default RetinaNet's FLOPs per sample, and the runtime table generated from the results folders.
A page that quotes one of them wrong fails here, so a constant that changes takes its pages with it. Also: no
page sends a user to the project's issue tracker, which users have never seen."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from orchestrator.core.execution import eta
from orchestrator.core.planning.spec import ConvergenceSpec, MeasureSpec
from orchestrator.core.predict import evidence

REPO = Path(__file__).resolve().parents[1]
PAGES = {p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8")
         for p in [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "results" / "README.md",
                   *sorted((REPO / "docs").glob("*.md"))]}
HISTORY = REPO / "benchmarks" / "ledger" / "history.md"


def load_benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def flat(text: str) -> str:
    return " ".join(text.split())


def stated(pattern: str) -> list[tuple[str, str]]:
    """(page, the number the pattern captured) for every match on every page, lines joined."""
    return [(page, m.group(1)) for page, text in PAGES.items() for m in re.finditer(pattern, flat(text))]


def test_the_runtime_table_in_costs_md_is_the_folders():
    table = load_benchmark("runtime_table").runtime_table()
    page = PAGES["docs/costs.md"]
    block = page.split("<!-- runtime-table:begin -->")[1].split("<!-- runtime-table:end -->")[0]
    assert block.strip() == table.strip(), \
        "docs/costs.md's runtime table is stale: paste `.venv/bin/python benchmarks/runtime_table.py` between its markers"


def test_the_readmes_durations_cover_every_committed_run_of_the_default_sweep():
    """The README labels the default sweep and its --no-convergence run with a range of minutes; every committed
    full run of the default sweep lies inside it (its trials, with a minute's slack for the probe and the report)."""
    runtime_table = load_benchmark("runtime_table")
    readme = flat(PAGES["README.md"])
    full = re.search(r"run the default sweep, [^(]*\((\d+) to (\d+) minutes", readme)
    short = re.search(r"without the six convergence runs \((\d+) to (\d+) minutes of trials", readme)
    assert full and short, "the README no longer states how long the default sweep takes"
    for name in runtime_table.FOLDERS:
        trials_s, timing_s = runtime_table.wall_times(name)
        for (low, high), seconds in ((full.groups(), trials_s), (short.groups(), timing_s)):
            assert int(low) * 60 - 60 <= seconds <= int(high) * 60 + 60, (name, seconds, low, high)


def test_the_estimates_share_of_the_gemm_rate_is_the_codes():
    """STEP_EFFICIENCY quoted as a percentage ("`STEP_EFFICIENCY` = 53%") or as "at N% of the … GEMM rate"."""
    found = stated(r"`?STEP_EFFICIENCY`? (?:=|is|of) (\d+)%") + stated(r"at (\d+)% of (?:the|its|that) (?:[\w']+ )*?(?:GEMM )?rate")
    assert found, "no page states STEP_EFFICIENCY any more: drop this test or the constant"
    wrong = [(page, f"{value}%") for page, value in found if int(value) != round(eta.STEP_EFFICIENCY * 100)]
    assert wrong == [], f"STEP_EFFICIENCY is {eta.STEP_EFFICIENCY:.0%} in orchestrator/core/execution/eta.py"


def test_the_epochs_growth_per_doubling_is_the_codes():
    per_doubling = 2 ** eta.EPOCHS_BATCH_EXPONENT
    exponents = stated(r"EPOCHS_BATCH_EXPONENT`? = (\d\.\d+)") + stated(r"× 2\^(\d\.\d+) per doubling")
    assert exponents and all(float(v) == eta.EPOCHS_BATCH_EXPONENT for _, v in exponents), exponents
    factors = stated(r"EPOCHS_BATCH_EXPONENT`? = [\d.]+, about × (\d\.\d\d)") + stated(r"× (\d\.\d\d) per doubling")
    wrong = [(page, v) for page, v in factors if abs(float(v) - per_doubling) > 0.005]
    assert wrong == [], f"2^{eta.EPOCHS_BATCH_EXPONENT} = {per_doubling:.3f} per doubling (orchestrator/core/execution/eta.py)"


@pytest.mark.parametrize(("name", "value"), [
    ("PRIOR_WORST_PER_DOUBLING", evidence.PRIOR_WORST_PER_DOUBLING),
    ("PRIOR_RATIO_LOW", evidence.PRIOR_RATIO_LOW),
    ("PRIOR_THREAD_RATIO", evidence.PRIOR_THREAD_RATIO),
    ("CROSS_AXIS", evidence.CROSS_AXIS),
])
def test_the_committed_folders_stand_ins_are_the_codes(name, value):
    quoted = stated(rf"`{name}` = (\d\.\d+)")
    assert quoted, f"docs/prediction.md no longer quotes {name}"
    assert all(float(v) == value for _, v in quoted), (name, value, quoted)


def test_the_stand_in_for_thread_scaling_is_quoted_as_the_code_has_it():
    """The central estimate's correction per doubling of the threads, where a folder has no thread pair."""
    quoted = stated(r"efficiency of the folder's thread pairs \((\d\.\d+), the committed folders'")
    assert quoted and all(float(v) == evidence.PRIOR_THREAD_RATIO for _, v in quoted), quoted


def default(spec: type, name: str) -> float:
    return next(f.default for f in dataclasses.fields(spec) if f.name == name)


def test_the_watchdog_defaults_in_troubleshooting_are_the_specs():
    page = flat(PAGES["docs/troubleshooting.md"])
    for field, value in (("measure.startup_timeout_s", default(MeasureSpec, "startup_timeout_s")),
                         ("measure.step_timeout_s", default(MeasureSpec, "step_timeout_s"))):
        row = re.search(rf"\| `{re.escape(field)}`[^|]*\| ([\d,]+) s \|", page)
        assert row, f"docs/troubleshooting.md has no row for {field}"
        assert float(row.group(1).replace(",", "")) == value, (field, value)
    walls = re.search(r"\| `measure.timeout_s` for a throughput trial, `convergence.timeout_s` for a convergence run "
                      r"\| ([\d,]+) s, ([\d,]+) s \|", page)
    assert walls, "docs/troubleshooting.md has no row for the wall-clock limits"
    assert [float(v.replace(",", "")) for v in walls.groups()] == [default(MeasureSpec, "timeout_s"),
                                                                   default(ConvergenceSpec, "timeout_s")]


def test_the_default_retinanets_gflop_per_sample_are_the_records():
    """Every "N GFLOP per sample/image" of the default sweep's RetinaNet on a page is what a committed record
    counted: orch's valid-tap count (13.04) or torch's own formula (14.76), or, with torch here, the workload's
    own count on the meta device (13.11)."""
    counts: dict[str, float] = {}
    for folder in ("retinanet-zen4", "example-retinanet"):
        for line in (REPO / "results" / folder / "trials.jsonl").read_text().splitlines():
            throughput = json.loads(line).get("throughput") or {}
            if throughput.get("train_flops_per_sample"):
                counts[throughput.get("train_flops_rule") or "torch"] = throughput["train_flops_per_sample"] / 1e9
    assert set(counts) == {"valid-taps", "torch"}, counts
    allowed = set(counts.values())
    try:
        import torch  # noqa: F401

        from workloads.retinanet.workload import RetinaNetParams, RetinaNetWorkload
    except ImportError:
        pass
    else:
        allowed.add(RetinaNetWorkload().train_flops_per_sample(RetinaNetParams(backbone="resnet18", image_size=128,
                                                                               classes=4)) / 1e9)
    wrong = []
    for page, text in PAGES.items():
        for line in text.splitlines():
            if "retinanet" not in line.lower():
                continue
            for figure in re.findall(r"(\d+\.\d+) GFLOP(?!/s)", line):
                places = len(figure.split(".")[1])
                if 10 < float(figure) < 20 and not any(round(a, places) == float(figure) for a in allowed):
                    wrong.append(f"{page}: {figure} GFLOP")
    assert wrong == [], f"the default RetinaNet's step counts {sorted(round(a, 3) for a in allowed)} GFLOP per sample"


ISSUE = re.compile(r"\b[Ii]ssues? #?\d+|(?<![\w/.-])#\d{2,}\b|\bthe issue\b|\bissue tracker\b")


def test_no_page_mentions_an_issue_number_or_the_tracker():
    pages = dict(PAGES)
    if HISTORY.is_file():
        pages[HISTORY.relative_to(REPO).as_posix()] = HISTORY.read_text(encoding="utf-8")
    found = [f"{page}: {m.group(0)!r}" for page, text in pages.items() for m in ISSUE.finditer(text)]
    assert found == []
