"""The emulated cluster's plan: rates and latencies as tc writes them, namespaces, addresses, cores, shapers."""

from __future__ import annotations

import pytest

from orchestrator.core.machine.emulation import (
    ClusterRequest,
    is_cluster_namespace,
    plan_cluster,
    shapers,
    tbf_args,
)

CORES_4 = [(0, 4), (1, 5), (2, 6), (3, 7)]     # 4 physical cores with their hyperthreads


def test_every_node_gets_its_namespace_address_and_whole_cores():
    plan = plan_cluster(ClusterRequest(nodes=2, cores_per_node=2, rate_bits_per_s=1e9, name="ab", subnet="10.9.0.0/29"),
                        CORES_4)
    assert [n.namespace for n in plan.nodes] == ["orch-ab-n0", "orch-ab-n1"] and plan.switch_namespace == "orch-ab-sw"
    assert [n.address for n in plan.nodes] == ["10.9.0.1", "10.9.0.2"] and plan.head_address == "10.9.0.1:6379"
    assert [n.cpus for n in plan.nodes] == [(0, 1, 4, 5), (2, 3, 6, 7)]   # hyperthreads stay with their core
    assert plan.namespaces == ("orch-ab-n0", "orch-ab-n1", "orch-ab-sw") and not plan.shared_cores
    assert all(is_cluster_namespace(ns, "ab") for ns in plan.namespaces)
    assert not is_cluster_namespace("orch-ab-n0", "other") and not is_cluster_namespace("myns")


def test_too_few_cores_are_refused_with_the_numbers_unless_sharing_is_asked():
    request = dict(nodes=3, cores_per_node=1)
    with pytest.raises(ValueError, match=r"nodes\(3\) × cores_per_node\(1\) = 3 > 2 physical core\(s\)"):
        plan_cluster(ClusterRequest(**request), CORES_4[:2])
    shared = plan_cluster(ClusterRequest(**request, share_cores=True), CORES_4[:2])
    assert [n.cpus for n in shared.nodes] == [(0, 4), (1, 5), (0, 4)] and shared.shared_cores


@pytest.mark.parametrize("fields, message", [
    (dict(nodes=0), r"nodes\(0\) must be 1..64"),
    (dict(name="Big-Name"), "name 'Big-Name': 1 to 8 lowercase letters"),
    (dict(subnet="8.8.8.0/24"), "subnet 8.8.8.0/24: not a private range"),
    (dict(subnet="10.0.0.0/30", nodes=3), r"subnet 10.0.0.0/30: 2 host address\(es\) for 3 node\(s\)"),
    (dict(subnet="10.0.0.1/24"), "has host bits set"),
])
def test_bad_requests_say_what_is_wrong(fields, message):
    with pytest.raises(ValueError, match=message):
        ClusterRequest(**{"nodes": 2, "cores_per_node": 1, **fields})


def test_each_link_is_shaped_both_ways_and_latency_only_with_netem():
    plan = plan_cluster(ClusterRequest(nodes=2, cores_per_node=1, rate_bits_per_s=1e10, latency_s=2e-3), CORES_4)
    plain = shapers(plan, with_netem=False)
    assert [(s.namespace, s.device) for s in plain] == [("orch-c-n0", "orch0"), ("orch-c-sw", "n0"),
                                                        ("orch-c-n1", "orch0"), ("orch-c-sw", "n1")]
    assert all(s.qdiscs == (("root", *tbf_args(1e10)),) for s in plain)
    assert " ".join(tbf_args(1e10)) == "tbf rate 10000000000bit burst 1250000 latency 50ms"   # 1 ms of burst
    delayed = shapers(plan, with_netem=True)[0].qdiscs
    assert delayed[0] == ("root", "handle", "1:", "netem", "delay", "1000us")    # half of the one-way latency
    assert delayed[1][:4] == ("parent", "1:1", "handle", "10:")
    unshaped = plan_cluster(ClusterRequest(nodes=2, cores_per_node=1), CORES_4)
    assert shapers(unshaped, with_netem=True) == []
