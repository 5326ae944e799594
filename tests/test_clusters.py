"""The cluster recipes under clusters/, checked without a cluster: the KubeRay RayJob against KubeRay's own
schema (kubectl's client dry run needs an API server that knows the CRD) and against what whole-node CPU
training needs; the SLURM script's refusals of bad settings, before it starts anything."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
RAYJOB = REPO / "clusters" / "kuberay" / "rayjob.yaml"
# KubeRay's RayJob schema; its "$comment" names the repository, file and commit it was taken from.
SCHEMA = REPO / "tests" / "data" / "kuberay" / "rayjob-v1.schema.json"
SBATCH = REPO / "clusters" / "slurm" / "orch-sweep.sbatch"
STANDIN = REPO / "tests" / "run" / "slurm_standin"


def strict(schema):
    """The schema with unknown fields refused, as the API server's strict field validation (kubectl's default)
    does: a CRD schema does not say additionalProperties: false, so plain JSON Schema would accept a typo."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA.read_text())
    assert "ray-project/kuberay" in schema["$comment"] and "ray.io_rayjobs.yaml" in schema["$comment"]
    return jsonschema.Draft7Validator(strict(schema))


@pytest.fixture(scope="module")
def rayjob():
    documents = list(yaml.safe_load_all(RAYJOB.read_text()))
    (job,) = [d for d in documents if d["kind"] == "RayJob"]
    assert [d["kind"] for d in documents if d is not job] == ["PersistentVolumeClaim"]
    return job


def errors(validator, document) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def test_rayjob_matches_kuberays_schema(validator, rayjob):
    assert rayjob["apiVersion"] == "ray.io/v1"
    assert errors(validator, rayjob) == []


@pytest.mark.parametrize("path, value, message", [
    (("spec", "rayClusterSpec", "headGroupSpec", "rayStartParam"), {}, "Additional properties"),  # a typo
    (("spec", "shutdownAfterJobFinishes"), "yes", "is not of type 'boolean'"),
    (("spec", "rayClusterSpec", "workerGroupSpecs"), {"groupName": "x"}, "is not of type 'array'"),
])
def test_the_schema_check_catches_mistakes(validator, rayjob, path, value, message):
    broken = copy.deepcopy(rayjob)
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert any(message in e for e in errors(validator, broken)), errors(validator, broken)


def pods(job):
    cluster = job["spec"]["rayClusterSpec"]
    return [("head", cluster["headGroupSpec"], 1)] + [
        (group["groupName"], group, group["replicas"]) for group in cluster["workerGroupSpecs"]]


def test_every_ray_pod_owns_whole_cores_and_says_so_to_ray(rayjob):
    images = set()
    for name, group, _ in pods(rayjob):
        (container,) = group["template"]["spec"]["containers"]
        images.add(container["image"])
        requests, limits = container["resources"]["requests"], container["resources"]["limits"]
        # Guaranteed QoS with whole CPUs: the static CPU manager's exclusive cores
        assert requests == limits, name
        assert re.fullmatch(r"[1-9][0-9]*", str(requests["cpu"])), f"{name}: cpu {requests['cpu']} is not whole"
        assert group["rayStartParams"]["num-cpus"] == str(requests["cpu"]), name
    assert len(images) == 1, f"one image everywhere, not {images}"


def test_the_sweep_waits_for_every_node_and_writes_to_the_volume(rayjob):
    entrypoint = rayjob["spec"]["entrypoint"].split()
    assert entrypoint[:2] == ["orch", "sweep"]
    nodes = sum(replicas for _, _, replicas in pods(rayjob))
    assert entrypoint[entrypoint.index("--min-nodes") + 1] == str(nodes)
    results = entrypoint[entrypoint.index("--results") + 1]
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    (mount,) = [m for m in head["containers"][0]["volumeMounts"] if m["name"] == "results"]
    assert results.startswith(mount["mountPath"] + "/")
    (volume,) = [v for v in head["volumes"] if v["name"] == "results"]
    assert volume["persistentVolumeClaim"]["claimName"] == "orch-results"


def run_sbatch(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SBATCH), *args], capture_output=True, text=True, timeout=30, cwd=cwd,
                          env={"PATH": f"{STANDIN}:{os.environ['PATH']}", **env})


@pytest.mark.parametrize("args, env, message", [
    ((), {}, "usage: sbatch"),
    (("s.yaml", "out"), {}, "not inside a SLURM job"),
    (("s.yaml", "out"), {"ORCH_RAY_PORT_STRIDE": "500"}, "ORCH_RAY_PORT_STRIDE=500: 0, or at least 1000"),
    (("s.yaml", "out"), {"ORCH_RAY_PORT_BASE": "65000"}, "do not fit in 1024..65535"),
    (("s.yaml", "out"), {"ORCH": "no-such-orch"}, "'no-such-orch' not found"),
])
def test_the_sbatch_script_refuses_bad_settings_before_starting_anything(tmp_path, args, env, message):
    job = {} if message == "not inside a SLURM job" else {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[0-1]"}
    done = run_sbatch(tmp_path, *args, **job, **env)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert not (tmp_path / "out").exists()       # the results folder is made only once all is checked
