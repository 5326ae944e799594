"""The body of a roof probe's process (run.driver.roof_probe starts it, pinned like a rank, natively or under the
AVX2 cap): the compute roof as `orch profile` measures it inside a rank (rank.roof.compute_peak: the best of the
median GEMM and several GEMMs and convolutions), the large convolution's rate per direction, and the STREAM triad,
printed as one JSON object. A process of its own because ONEDNN_MAX_CPU_ISA and ATEN_CPU_CAPABILITY only take
effect when set before oneDNN and ATen start.

    python -m orchestrator.run.rank.roof_process --threads 2 --precision fp32     # prints one JSON object
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from orchestrator.core.json.values import JsonReadable

PEAK_CONV = "mb8_ic256oc256_ih16oh16kh3sh1dh0ph1_iw16ow16kw3sw1dw0pw1"   # the convolution timed per direction


def conv_class_gflops(precision: str) -> dict[str, float]:
    """The large 3×3 convolution of the compute roof in each direction, replayed and timed by oneDNN itself as
    `orch profile`'s replay times a primitive (profile_replay.replay_shapes: its fastest logged call):
    'convolution forward' etc. → GFLOP/s. A kernel's ISA changes its efficiency per direction (see
    core/profile/projection.Roof)."""
    from orchestrator.core.profile import onednn_verbose as ov
    from orchestrator.core.profile.roofline import conv_flops, conv_problem
    from orchestrator.run.rank.profile_replay import replay_shapes

    dtype = "bf16" if precision == "bf16" else "f32"
    shapes = [ov.ShapeTotal("convolution", direction, PEAK_CONV, dtype, "acdb", 1, 0.0)
              for direction in ("forward", "backward_data", "backward_weights")]
    flops = conv_flops(conv_problem(PEAK_CONV))
    return {f"convolution {row['direction']}": flops / (row["isolated_min_ms"] / 1e3) / 1e9
            for row in replay_shapes(shapes) if row["isolated_min_ms"]}


def _measure(threads: int, precision: str, seconds: float) -> dict[str, JsonReadable]:
    import torch

    from orchestrator.run.rank.profile_replay import stream_triad_gbs
    from orchestrator.run.rank.roof import compute_peak

    torch.set_num_threads(threads)
    peak = compute_peak(threads, precision, seconds=seconds)
    return {"gemm_gflops": peak["gemm_gflops"], "conv_gflops": peak["conv_gflops"], "gflops": peak["gflops"],
            "roof_by_primitive": peak["roof_by_primitive"],
            "kind_gflops": conv_class_gflops(precision),
            "triad_gbs": stream_triad_gbs(), "threads": torch.get_num_threads(), "precision": precision,
            "aten_capability": torch.backends.cpu.get_cpu_capability(),
            "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"), "cpus": sorted(os.sched_getaffinity(0))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--precision", choices=("fp32", "bf16"), required=True)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    print(json.dumps(_measure(args.threads, args.precision, args.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
