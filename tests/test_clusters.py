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


def fake_hostname(folder: Path, all_addresses: str, resolved: str) -> Path:
    """A `hostname` that answers --all-ip-addresses and --ip-address as a node with these addresses would."""
    folder.mkdir()
    (folder / "hostname").write_text(f'#!/bin/sh\ncase "$1" in --all-ip-addresses) echo "{all_addresses}";; '
                                     f'--ip-address) echo "{resolved}";; *) echo node0;; esac\n')
    (folder / "hostname").chmod(0o755)
    return folder


@pytest.mark.parametrize("all_addresses, resolved, head", [
    ("10.9.8.7 fe80::1", "127.0.1.1", "10.9.8.7"),     # Ubuntu's /etc/hosts entry: the interfaces' address wins
    ("fe80::1", "192.0.2.5", "192.0.2.5"),            # no IPv4 on the interfaces: the resolved one, not loopback
])
def test_the_slurm_head_address_is_never_loopback(tmp_path, all_addresses, resolved, head):
    bin_dir = fake_hostname(tmp_path / "bin", all_addresses, resolved)
    done = subprocess.run(["bash", str(SBATCH), "s.yaml", "out"], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={"PATH": f"{bin_dir}:{STANDIN}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
                                             "SLURM_JOB_NODELIST": "n[0-1]", "ORCH": "true", "RAY": "false",
                                             "ORCH_RAY_TMP": str(tmp_path / "ray")})
    assert f"Ray head at {head}:20000" in done.stderr, done.stderr
    assert done.returncode == 1 and "the Ray head failed to start" in done.stderr   # RAY=false: nothing started


def test_the_slurm_script_refuses_a_node_with_only_loopback_addresses(tmp_path):
    bin_dir = fake_hostname(tmp_path / "bin", "", "127.0.1.1")
    done = run_sbatch(tmp_path, "s.yaml", "out", PATH=f"{bin_dir}:{STANDIN}:{os.environ['PATH']}", SLURM_JOB_ID="7",
                      SLURM_JOB_NODELIST="n[0-1]")
    assert done.returncode == 2
    assert "no IPv4 address other than loopback" in done.stderr and "set ORCH_RAY_HEAD_IP" in done.stderr


# --- every path a recipe names exists ---------------------------------------------------------------------
DOCKERFILE = REPO / "clusters" / "Dockerfile"
RECIPES = [RAYJOB, SBATCH, DOCKERFILE, REPO / "docs" / "clusters.md", REPO / "docs" / "cluster-quickstart.md"]
# A path into this checkout: a top-level folder of the repository, then a file or folder name; or the same under
# the image's copy of it (/opt/orch/...). Paths the user chooses (/shared/results/..., REGISTRY/...) are not these.
REPO_PATH = re.compile(r"(?<![\w./-])(?P<image>/opt/orch/)?(?P<path>(?:sweeps|clusters|orchestrator|workloads|scripts"
                       r"|docs|tests|benchmarks)/[\w./-]*[\w])")


def image_copies() -> dict[str, str]:
    """{folder in the image: folder in the repository} from the Dockerfile's WORKDIR and COPY lines."""
    workdir, copies = "/", {}
    for line in DOCKERFILE.read_text().splitlines():
        words = line.split()
        if words[:1] == ["WORKDIR"]:
            workdir = words[1]
        elif words[:1] == ["COPY"] and not any(w.startswith("--") for w in words):
            *sources, target = words[1:]
            for source in sources:
                copies[os.path.normpath(os.path.join(workdir, target))] = source
    return copies


def named_paths(recipe: Path) -> list[tuple[str, str]]:
    """(path as written, where it must exist in the repository) for every repository path `recipe` names."""
    found = []
    copies = image_copies()
    for match in REPO_PATH.finditer(recipe.read_text()):
        path = match["path"]
        if match["image"]:
            top = f"/opt/orch/{path.split('/')[0]}"
            assert top in copies, f"{recipe.name} names {match[0]}, but the Dockerfile copies no {top} into the image"
            path = path.replace(path.split("/")[0], copies[top], 1)
        found.append((match[0], path))
    return found


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_every_path_a_recipe_names_exists_in_the_repository_or_the_image(recipe):
    named = named_paths(recipe)
    missing = [written for written, path in named if not (REPO / path).exists()]
    assert missing == [], f"{recipe.relative_to(REPO)} names paths that do not exist: {missing}"
    if recipe in (RAYJOB, SBATCH):   # each names the sweep file it runs (or shows how to run one)
        assert any(path.startswith("sweeps/") and path.endswith(".yaml") for _, path in named), named


def test_the_path_check_sees_a_missing_sweep_file_and_the_images_copy(tmp_path):
    recipe = tmp_path / "job.yaml"
    recipe.write_text("entrypoint: orch sweep /opt/orch/sweeps/table3.yaml --results /results/x\n"
                      "# or: orch sweep sweeps/retinanet-table3.yaml\n")
    assert named_paths(recipe) == [("/opt/orch/sweeps/table3.yaml", "sweeps/table3.yaml"),
                                   ("sweeps/retinanet-table3.yaml", "sweeps/retinanet-table3.yaml")]
    assert not (REPO / "sweeps/table3.yaml").exists()


# --- the RayJob authenticates, runs as no root, and opens only what it needs -------------------------------
def test_the_rayjob_uses_rays_token_authentication(rayjob):
    cluster = rayjob["spec"]["rayClusterSpec"]
    assert cluster["authOptions"]["mode"] == "token"
    # token authentication arrived in Ray 2.52; the image's Ray is the one pyproject.toml pins
    version = tuple(int(v) for v in cluster["rayVersion"].split("."))
    assert version >= (2, 52)
    pinned = re.search(r'"ray==([0-9.]+)"', (REPO / "pyproject.toml").read_text())[1]
    assert cluster["rayVersion"] == pinned


def test_no_ray_server_listens_beyond_the_pod_without_the_token(rayjob):
    cluster = rayjob["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]
    assert head.get("serviceType", "ClusterIP") == "ClusterIP"    # never a NodePort or LoadBalancer
    assert not head.get("enableIngress", False)
    hosts = [group["rayStartParams"].get("dashboard-host", "localhost") for _, group, _ in pods(rayjob)]
    if "0.0.0.0" in hosts:
        assert cluster.get("authOptions", {}).get("mode") == "token", "a dashboard on 0.0.0.0 needs the token"
    (container,) = head["template"]["spec"]["containers"]
    assert sorted(p["containerPort"] for p in container["ports"]) == [6379, 8265]   # GCS and dashboard only


def test_every_rayjob_container_runs_as_the_images_non_root_user(rayjob):
    uid = dockerfile_user()
    for name, group, _ in pods(rayjob):
        spec = group["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] == uid != 0, name
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            assert not context.get("privileged", False), name


def dockerfile_user() -> int:
    """The uid the image runs as: its last USER line (root when it has none)."""
    users = [line.split()[1] for line in DOCKERFILE.read_text().splitlines() if line.startswith("USER ")]
    user = users[-1].split(":")[0] if users else "0"
    assert user.isdigit(), f"USER {user}: a numeric uid, so that runAsNonRoot can check it"
    return int(user)


def test_the_image_runs_as_a_non_root_user():
    assert dockerfile_user() != 0
    text = DOCKERFILE.read_text()
    # the user comes after every install: nothing it runs can change the installed code
    assert text.rindex("USER ") > text.rindex("pip install")


def test_the_slurm_script_authenticates_and_starts_no_dashboard():
    text = SBATCH.read_text()
    assert "export RAY_AUTH_MODE=token" in text
    assert "--include-dashboard=false" in text and "dashboard-host" not in text


@pytest.mark.parametrize("all_ips, head", [("", None), ("127.0.0.1 ::1", None), ("127.0.1.1 10.9.8.7", "10.9.8.7")])
def test_the_head_address_is_never_loopback(tmp_path, all_ips, head):
    """`hostname --ip-address` says 127.0.1.1 on Debian-like nodes (/etc/hosts' line for the host's own name),
    which no other node reaches: the head's address is the node's first address that is not loopback, and a
    node with none is refused before anything starts (a stub `ray` keeps the address it was given)."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "hostname").write_text(f'#!/bin/sh\ncase "$1" in --all-ip-addresses) echo "{all_ips}" ;; '
                                    '*) echo 127.0.1.1 ;; esac\n')
    (stubs / "ray").write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/ray-args\nexit 1\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    job = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[0-1]", "ORCH": "true", "RAY": str(stubs / "ray"),
           "ORCH_RAY_TMP": str(tmp_path / "ray")}
    done = subprocess.run(["bash", str(SBATCH), "s.yaml", "out"], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={"PATH": f"{stubs}:{STANDIN}:{os.environ['PATH']}", **job})
    if head is None:
        assert done.returncode == 2 and "this node has no IPv4 address other than loopback" in done.stderr, done.stderr
        assert not (tmp_path / "ray-args").exists()
    else:
        assert f"--node-ip-address={head} " in (tmp_path / "ray-args").read_text(), done.stderr
