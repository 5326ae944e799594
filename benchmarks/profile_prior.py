"""Does a profile help `orch predict`'s compute term on held-out cells?

The step model's compute term is (a·U(T; σ_a) + c·b·U(T; σ)) (core/predict/step.py): a fixed part and a
per-sample part, each with its own serial fraction. A profile splits one step into parts by what they scale
with: oneDNN primitives and the ATen ops between them work on every sample; the optimizer's update and the
Python between ops (profile.analysis's `optimizer` category and "other (between ops)") do not. Profiles of
the same model at 1 and at 2 threads per rank (same local batch) then give, without any cell:

- σ from the per-sample part's speed-up, σ_a from the fixed part's (step.sigma_from_speedup);
- a (seconds per step, 1 thread) from the fixed part's share of the 1-thread plain step.

Each prior is applied by freezing those parameters in the fit (the model's `free_parameters` wrapped here,
nothing in orchestrator changed), and the hold-out validation orch predict runs (leave one cell out, leave the
largest level out; validate_step) is repeated: without a prior, with σ and σ_a from the profile, with a too.

    .venv/bin/python benchmarks/profile_prior.py results/example-predict-retinanet PROFILE_DIR \\
        --one 1x1x8 --two 1x2x8

PROFILE_DIR is an `orch profile` output of the sweep's model at those two layouts (same precision, same
machine: e.g. `orch profile sweeps/retinanet.yaml --layout 1x1x8 --layout 1x2x8 --no-replay --out DIR`).
A target that failed its own checks (profile.checks: a rank short of its CPUs, ...) gives no prior: on a
contended run the 2-thread step came out slower than the 1-thread one (σ = 1), and that prior made every
hold-out error several times worse. `--allow-disturbed` uses it anyway, to see that.

Read the hold-out schemes with care: a profile at 2 threads is itself a measurement at 2 threads, so in
"largest threads" it carries information about the held-out level (as a cheaper measurement than a cell:
one rank, a few steps). The question it answers is whether such a profile can stand in for cells.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.core.predict import step as st  # noqa: E402
from orchestrator.core.predict.fit import fit_all  # noqa: E402
from orchestrator.core.predict.validate import AMDAHL, LINEAR, MODEL, validate_step  # noqa: E402
from orchestrator.core.profile import analysis as pa  # noqa: E402
from orchestrator.core.profile.checks import check_target  # noqa: E402
from orchestrator.core.profile.result import ProfiledTarget  # noqa: E402
from orchestrator.io.store import load_results  # noqa: E402

FIXED = ("optimizer", pa.OTHER)   # the categories that do not grow with the local batch


def split_ms(target: ProfiledTarget) -> tuple[float, float]:
    """(fixed, per-sample) ms of the slowest rank's plain step, in the profiled step's proportions."""
    cats = pa.categories(target)
    fixed = sum(v for k, v in cats.items() if k in FIXED)
    share = fixed / sum(cats.values())
    plain = pa.summary(target).plain_step_ms
    return plain * share, plain * (1 - share)


def priors(profile_dir: Path, one: str, two: str, allow_disturbed: bool) -> dict[str, dict[str, float]]:
    targets = {label: ProfiledTarget.from_json(json.loads((profile_dir / label / "profile-result.json").read_text()))
               for label in (one, two)}
    findings = [f for t in targets.values() for f in check_target(t)]
    for f in findings:
        print(f"prior: {f.target} disturbed: {f.check}: {f.detail}", file=sys.stderr)
    if findings and not allow_disturbed:
        raise SystemExit("prior: the profile is disturbed; re-run it on a quiet machine (or --allow-disturbed)")
    threads = targets[two].threads // targets[one].threads
    (f1, s1), (f2, s2) = split_ms(targets[one]), split_ms(targets[two])
    sigma = st.sigma_from_speedup(threads, s1 / s2)
    sigma_a = st.sigma_from_speedup(threads, f1 / f2)
    print(f"prior: 1 thread fixed {f1:.0f} ms + per-sample {s1:.0f} ms; {threads} threads fixed {f2:.0f} ms "
          f"(×{f1 / f2:.2f}) + per-sample {s2:.0f} ms (×{s1 / s2:.2f}): σ {sigma:.3f}, σ_a {sigma_a:.3f}, "
          f"a {f1 / 1e3:.4f} s; CPU shares {[pa.cpu_share(t) for t in targets.values()]}")
    return {"no prior": {}, "σ, σ_a from the profile": {"sigma": sigma, "sigma_a": sigma_a},
            "σ, σ_a and a from the profile": {"sigma": sigma, "sigma_a": sigma_a, "a_s": f1 / 1e3}}


def _with(frozen_extra: dict[str, float]):
    original = st.free_parameters

    def free_parameters(cells, comm_modelled, thread_prior):
        _free, frozen, why = original(cells, comm_modelled, thread_prior)
        frozen = {**frozen, **frozen_extra}
        why = {**why, **{k: "profile prior" for k in frozen_extra}}
        return [p for p in st.PARAMS if p not in frozen], frozen, why

    return original, free_parameters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results")
    parser.add_argument("profile", type=Path)
    parser.add_argument("--one", default="1x1x8")
    parser.add_argument("--two", default="1x2x8")
    parser.add_argument("--allow-disturbed", action="store_true", help="use a profile that failed its checks")
    args = parser.parse_args(argv)
    fitted = fit_all(load_results(args.results).records)
    rows = []
    for name, frozen in priors(args.profile, args.one, args.two, args.allow_disturbed).items():
        original, patched = _with(frozen)
        st.free_parameters = patched
        try:
            schemes = validate_step(fitted.cells, fitted.links, fitted.buckets, fitted.thread_prior)
        finally:
            st.free_parameters = original
        for s in schemes:
            rows.append({"prior": name, "scheme": s.scheme, "cells": len(s.held_out),
                         **{p: f"{s.scores[p].median_abs_pct:.1f} / {s.scores[p].max_abs_pct:.1f}"
                            for p in (MODEL, LINEAR, AMDAHL)}})
    width = max(len(r["scheme"]) for r in rows)
    print(f"{'prior':32} {'scheme':{width}} cells  {'model (median / max |error| %)':32} linear / Amdahl")
    for r in rows:
        print(f"{r['prior']:32} {r['scheme']:{width}} {r['cells']:5}  {r[MODEL]:32} {r[LINEAR]} / {r[AMDAHL]}")
    medians = {name: statistics.median(float(r[MODEL].split(" / ")[0]) for r in rows if r["prior"] == name)
               for name in dict.fromkeys(r["prior"] for r in rows)}
    print("median over schemes of the model's median |error| %: " +
          ", ".join(f"{k} {v:.1f}" for k, v in medians.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
