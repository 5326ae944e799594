"""The emulated cluster's plan: rates and latencies as tc writes them, namespaces, addresses, cores, shapers."""

from __future__ import annotations

import signal

import pytest

from orchestrator.core.machine.emulation import (
    ClusterRequest,
    CommandEnd,
    Owner,
    OwnerMark,
    OwnerState,
    cluster_of,
    is_cluster_namespace,
    kept_by_down,
    owner_of,
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


ALIVE, DETACHED, GONE, UNKNOWN = OwnerState.ALIVE, OwnerState.DETACHED, OwnerState.GONE, OwnerState.UNKNOWN


def test_an_owner_mark_reads_back_as_written_and_anything_else_is_no_mark():
    mark = OwnerMark(123456, 1712345678.87, detached=True)   # psutil's create_time: a float kept exactly
    assert OwnerMark.parse(mark.words()) == mark and len(mark.words()) < 256   # the kernel's IFALIASZ
    assert [OwnerMark.parse(t) for t in ("", "orch-owner pid=12", "orch-owner pid=x started=1 detached=0")] == [None] * 3
    assert [cluster_of(ns) for ns in ("orch-ab12-n10", "orch-c-sw", "orch-c-n", "orch-Ab-n0")] == ["ab12", "c", None, None]


@pytest.mark.parametrize("claims, expected", [
    ([], Owner(UNKNOWN)),
    ([Owner(GONE, 7)], Owner(GONE, 7)),
    # a state file here whose owner is gone, a namespace another folder's live owner made again: that one's
    ([Owner(GONE, 7), Owner(ALIVE, 9), Owner(GONE, 7)], Owner(ALIVE, 9)),
    ([Owner(GONE, 7), Owner(DETACHED, 8)], Owner(DETACHED, 8)),
    ([Owner(DETACHED, 8), Owner(ALIVE, 9)], Owner(ALIVE, 9)),
])
def test_a_live_or_detached_owner_wins_over_a_gone_one(claims, expected):
    assert owner_of(claims) == expected


@pytest.mark.parametrize("owner", [Owner(ALIVE, 41), Owner(DETACHED, 42), Owner(GONE, 43), Owner(UNKNOWN)])
def test_bare_down_removes_only_a_gone_owners_cluster_by_name_or_all_any(owner):
    kept = kept_by_down("ci", owner, by_name=False, every=False)
    assert (kept is None) == (owner.state is GONE)
    if kept is not None:
        assert kept.startswith("kept cluster ci: ") and "`orch cluster down --name ci`" in kept and "`--all`" in kept
        assert owner.pid is None or f"pid {owner.pid}" in kept
    assert kept_by_down("ci", owner, by_name=True, every=False) is None
    assert kept_by_down("ci", owner, by_name=False, every=True) is None


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSEGV, signal.SIGHUP])
def test_a_command_killed_by_a_signal_exits_as_a_shell_says_with_the_signal_named(sig):
    end = CommandEnd(-sig)
    assert end.exit_status == 128 + sig
    assert end.words() == f"the command was killed by {sig.name} (signal {int(sig)}): exit status {128 + sig}"
    assert "passed on" in (CommandEnd(-sig, forwarded=(int(sig),)).words() or "")


def test_an_exit_status_passes_through_unsaid_and_a_nameless_signal_by_number():
    assert [(CommandEnd(c).exit_status, CommandEnd(c).words()) for c in (0, 1, 137)] == [(0, None), (1, None),
                                                                                        (137, None)]
    assert CommandEnd(-35).exit_status == 163 and "killed by signal 35: exit status 163" in (CommandEnd(-35).words() or "")
