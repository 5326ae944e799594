"""The GEMM proxy, corrected for its measured bias: the central estimate where an axis of a layout has one measured
level (`interval`'s bounds), chosen by held-out error over the committed folders (benchmarks/predict_coverage.py
with each candidate; docs/prediction.md): one level out, it was off by a median 6.4% on threads and 7.4% on ranks
(10 of 68 cells over 15%), Amdahl's law in total cores fitted to the other axis by 15.0% and 7.4% (32), orch's
model, which takes the GEMM peak's thread scaling uncorrected, by 12.2% and 12.7% (25). Pure.

From a measured anchor (a layout the target contains, at its local batch): the anchor's compute time (its step
less its all-reduce as calibrated × ρ) scaled by the GEMM peaks of the two layouts, each measured with all ranks at
once (so the sharing of the same cores is in them), and per doubling of the threads by the measured step ÷ GEMM
efficiency of thread pairs (a step's serial and memory-bound parts, which a GEMM has not: the proxy's bias); then
the layout's own all-reduce added, not overlapped. Nothing where a GEMM peak of either layout is missing.

>>> from orchestrator.core.predict.evidence import evidence_of
>>> from orchestrator.core.predict.step import Cell, Layout, fit_step_model
>>> cells = [Cell(Layout(1, 1, b), b / (0.01 + 0.002 * b)) for b in (8, 16)]
>>> evidence = evidence_of(cells, {(1, 1): 50.0, (1, 2): 90.0})
>>> value, how = PREDICTOR.scale(evidence, fit_step_model(cells, {}, []), Layout(1, 2, 16), Layout(1, 1, 16), 381.0)
>>> round(value / 381.0, 4), how.startswith(": 1×1×16 × the GEMM peaks' 1.80×")   # 1.8 × the thread ratio, 0.81
(1.458, True)
"""

from __future__ import annotations

import math

from orchestrator.core.predict.evidence import Evidence
from orchestrator.core.predict.step import Layout, StepModel

GEMM_PROXY = "gemm_proxy"


class GemmProxy:
    id = GEMM_PROXY
    label = "GEMM peak (bias-corrected)"

    def scale(self, evidence: Evidence, model: StepModel, lay: Layout, anchor: Layout,
              anchor_samples_per_s: float) -> tuple[float, str] | None:
        speedup = evidence.gemm_speedup(lay, anchor)
        if speedup is None:
            return None
        q = evidence.thread_ratio
        comm_anchor, comm_lay = model.comm(anchor)[0], model.comm(lay)[0]
        compute_anchor = max(anchor.global_batch / anchor_samples_per_s - comm_anchor,
                             0.5 * anchor.global_batch / anchor_samples_per_s)
        rate = anchor.global_batch / compute_anchor * speedup * q ** math.log2(lay.threads / anchor.threads)
        source = (f"median of {len(evidence.thread_ratios)} thread pair(s) here" if evidence.thread_ratios
                  else "the committed folders': no thread pair here")
        why = (f": {anchor.label} × the GEMM peaks' {speedup:.2f}× × {q:.2f} per doubling of the threads (step ÷ "
               f"GEMM efficiency, {source})" + (", plus the all-reduce as calibrated" if comm_lay > 0 else ""))
        return lay.global_batch / (lay.global_batch / rate + comm_lay), why


PREDICTOR = GemmProxy()
