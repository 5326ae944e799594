"""The `ipex` switch without IPEX: when it counts as usable (read from package metadata, nothing imported),
and the memory it adds to the estimates only where it will apply."""

from __future__ import annotations

import pytest

from orchestrator.io.workload_finder import find_workload, parse_params
from workloads import ipex as ipex_module


def fake_install(monkeypatch, ipex_version: str, torch_version: str) -> None:
    monkeypatch.setattr(ipex_module.importlib.util, "find_spec", lambda name: object())
    versions = {"intel_extension_for_pytorch": ipex_version, "torch": torch_version}
    monkeypatch.setattr(ipex_module.importlib.metadata, "version", versions.__getitem__)


@pytest.mark.parametrize(("ipex_version", "torch_version", "usable"), [
    ("2.8.0+cpu", "2.8.0+cu128", True), ("2.8.0+cpu", "2.8.1", True), ("2.8.0+cpu", "2.14.1", False),
    ("2.7.0", "2.8.0", False)])
def test_usable_only_with_the_torch_release_it_was_built_for(monkeypatch, ipex_version, torch_version, usable):
    fake_install(monkeypatch, ipex_version, torch_version)
    assert ipex_module.ipex_applies("auto") is usable
    assert ipex_module.ipex_applies("off") is False
    if not usable:
        assert ipex_module.ipex_unavailable_reason() == (
            f"intel_extension_for_pytorch {ipex_version} is built for torch {ipex_version[:3]}, "
            f"this is torch {torch_version}")


@pytest.mark.parametrize(("name", "params", "batch"), [
    ("classifier", {}, 64), ("retinanet", {"backbone": "resnet18", "image_size": 128, "classes": 4}, 8)])
def test_memory_estimate_adds_ipex_only_where_it_applies(monkeypatch, name, params, batch):
    workload = find_workload(name).workload

    def estimate(ipex: str) -> float:
        p, problems = parse_params(workload, {**params, "ipex": ipex})
        assert problems == []
        return workload.memory_estimate_mib(p, batch)

    fake_install(monkeypatch, "2.8.0+cpu", "2.14.1")       # installed, but for another torch: never applies
    assert estimate("auto") == estimate("off")
    fake_install(monkeypatch, "2.8.0+cpu", "2.8.0")
    assert estimate("auto") - estimate("off") == pytest.approx(ipex_module.IPEX_USS_MIB)
