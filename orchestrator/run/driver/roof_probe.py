"""A CPU's roof on given cores, probed in a process of its own (its body: run.rank.roof_process): the compute roof
as `orch profile` measures it inside a rank, the roof's convolution in each direction (the projection scales each
direction by its own kernel's ratio) and the STREAM triad. A process of its own because ONEDNN_MAX_CPU_ISA and
ATEN_CPU_CAPABILITY only take effect when set before oneDNN and ATen start: the AVX2 cap's roof cannot be measured
in a process that already ran a kernel.

`measure_roofs` runs it pinned like a rank (OpenMP threads bound one per core) natively and under the cap,
alternately, and keeps each setting's best figures: on a shared machine another process's time slice only
ever lowers a rate, so the best of a few rounds is the least disturbed one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping

from orchestrator.core.json.values import JsonDict, JsonReadable
from orchestrator.io.isa import ISA_CAP_ENV_VARS

PROBE_ROUNDS = 2
# What an AVX2-only CPU runs, reproduced on a newer one (design.md); DNNL_ is oneDNN 2.x's spelling, removed too
AVX2_CAP_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
CAP_VARS = (*AVX2_CAP_ENV, *ISA_CAP_ENV_VARS)


Probe = Mapping[str, JsonReadable]   # one probe's JSON (roof_process's), or one setting's best (`measure_roofs`)


def roof_number(probe: Probe, key: str) -> float:
    """One figure of a probe (`gflops`, `triad_gbs`, ...), checked to be a number."""
    value = probe[key]
    if not isinstance(value, (int, float)):
        raise TypeError(f"the roof probe's {key} is not a number: {value!r}")
    return value


def class_gflops(probe: Probe) -> dict[str, float]:
    """A probe's roof per primitive class (`kind_gflops`: 'convolution forward' → GFLOP/s; none where absent)."""
    kinds = probe.get("kind_gflops", {})
    if not isinstance(kinds, Mapping):
        raise TypeError(f"the roof probe's kind_gflops is not an object: {kinds!r}")
    return {kind: roof_number(kinds, kind) for kind in kinds}


def probe_env(cpus: list[int], capped: bool) -> dict[str, str]:
    """The environment a one-rank job on `cpus` gets (launcher.rank_environment: OpenMP threads = cores, one
    bound per core), with the AVX2 cap added or removed."""
    from orchestrator.run.driver.launcher import rank_environment

    base = {k: v for k, v in os.environ.items() if k not in CAP_VARS}
    env = rank_environment(base, cpus=cpus, ccl_cpus_on_node=[], backend="gloo", rank=0, local_rank=0,
                           world_size=1, local_world_size=1, master_addr="127.0.0.1", master_port=0)
    if capped:
        env.update(AVX2_CAP_ENV)
    return env


def probe(cpus: list[int], precision: str, capped: bool, seconds: float = 1.0) -> JsonDict:
    """One probe process pinned to `cpus`; its JSON."""
    cmd = [sys.executable, "-m", "orchestrator.run.rank.roof_process", "--threads", str(len(cpus)),
           "--precision", precision, "--seconds", str(seconds)]
    from orchestrator.run.driver.launcher import start_prefix  # pinned in the new process: no preexec_fn in a driver

    done = subprocess.run([*start_prefix(cpus, normal_priority=False), *cmd], env=probe_env(cpus, capped),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the roof probe failed ({' '.join(cmd)}): {done.stderr.strip()[-500:]}")
    result: JsonDict = json.loads(done.stdout.strip().splitlines()[-1])   # the object roof_process printed
    return result


def measure_roofs(cpus: list[int], precision: str, rounds: int = PROBE_ROUNDS) -> dict[str, dict[str, JsonReadable]]:
    """{"native": ..., "avx2": ...}: each setting's best compute roof and best triad over `rounds`
    alternating probes, with every probe kept under "runs"."""
    runs: dict[str, list[JsonDict]] = {"native": [], "avx2": []}
    for _ in range(rounds):
        for name in runs:
            runs[name].append(probe(cpus, precision, capped=name == "avx2"))
    return {name: _best(found) for name, found in runs.items()}


def _best(found: list[JsonDict]) -> dict[str, JsonReadable]:
    """One setting's probes as one: the probe with the highest compute roof, with the best triad and the best
    roof per class of any, and every probe under "runs"."""
    kinds = [class_gflops(r) for r in found]
    best = max(found, key=lambda r: roof_number(r, "gflops"))
    return {**best,
            "triad_gbs": max(roof_number(r, "triad_gbs") for r in found),
            "kind_gflops": {k: max(c.get(k, 0.0) for c in kinds) for k in {k for c in kinds for k in c}},
            "runs": found}
