"""Record builders shared by the core, run and report tests: the smallest valid records (`orchestrator.core.measured.records.
Record`, keyed by the production key functions) carrying just the numbers a test computes by hand."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from orchestrator.core.measured import records as rec
from orchestrator.core.planning.trial import Trial

# Tests marked `needs_cpus(n)` skip where this process may use fewer than n CPUs. A CI runner that ought to
# have them sets ORCH_REQUIRE_CPUS=n: there a shortfall fails the test instead, so a one-CPU runner cannot
# pass CI by skipping every failure-injection test (as ORCH_REQUIRE_IPEX=1 does for the IPEX tests).
REQUIRE_CPUS_ENV_VAR = "ORCH_REQUIRE_CPUS"
DEFAULT_REQUIRE_CPUS = 0  # nothing required: tests that need more CPUs than there are skip


def required_cpus() -> int:
    text = os.environ.get(REQUIRE_CPUS_ENV_VAR, str(DEFAULT_REQUIRE_CPUS))
    try:
        return int(text)
    except ValueError:
        raise pytest.UsageError(f"{REQUIRE_CPUS_ENV_VAR}={text!r}: must be a whole number of CPUs") from None


# Tests marked `needs_pid_namespace(reason)` (the ones that stop a Ray of their own with `ray stop`, inside
# `unshare --pid`) skip where no PID namespace can be made; ORCH_REQUIRE_PID_NAMESPACE=1 makes that a failure, so
# a runner that ought to have one (root, or user namespaces: CI's) cannot pass them as skipped.
REQUIRE_PID_NAMESPACE_ENV_VAR = "ORCH_REQUIRE_PID_NAMESPACE"


def required_pid_namespace() -> bool:
    text = os.environ.get(REQUIRE_PID_NAMESPACE_ENV_VAR, "0")
    if text not in ("0", "1"):
        raise pytest.UsageError(f"{REQUIRE_PID_NAMESPACE_ENV_VAR}={text!r}: must be 0 or 1")
    return text == "1"


@functools.cache
def pid_namespace_available() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return probe.returncode == 0


def _namespace_missing(item) -> str | None:
    """Why a `needs_pid_namespace` test cannot run here, or None."""
    marker = item.get_closest_marker("needs_pid_namespace")
    if marker is None or pid_namespace_available():
        return None
    return marker.args[0] if marker.args else "needs a PID namespace (unshare --pid)"


# Tests marked `needs_netns(reason)` (an emulated cluster: network namespaces, veth, tc, as root) skip where this
# process cannot make them; ORCH_REQUIRE_NETNS=1 makes that a failure (CI runs as root, with iproute2).
REQUIRE_NETNS_ENV_VAR = "ORCH_REQUIRE_NETNS"


def required_netns() -> bool:
    text = os.environ.get(REQUIRE_NETNS_ENV_VAR, "0")
    if text not in ("0", "1"):
        raise pytest.UsageError(f"{REQUIRE_NETNS_ENV_VAR}={text!r}: must be 0 or 1")
    return text == "1"


@functools.cache
def netns_missing_here() -> str | None:
    """Why no emulated cluster can be made here (not root, no ip or tc, no network namespace), or None."""
    from orchestrator.io.netns import missing_requirements

    missing = missing_requirements()
    if missing:
        return f"needs {', '.join(missing)}"
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        return "needs a network namespace (`unshare --net true` failed)"
    return None


def _netns_missing(item) -> str | None:
    marker = item.get_closest_marker("needs_netns")
    if marker is None or (missing := netns_missing_here()) is None:
        return None
    return f"{marker.args[0] if marker.args else 'needs network namespaces'}: {missing}"


def pytest_configure(config):
    required_cpus()  # a bad value stops the run before any test, with the message above
    required_pid_namespace()
    required_netns()


def _cpu_shortfall(item) -> tuple[int, str] | None:
    """(CPUs needed, why this process lacks them) for a `needs_cpus(n)` test that cannot have them here."""
    marker = item.get_closest_marker("needs_cpus")
    if marker is None:
        return None
    needed = marker.args[0]
    cpus = sorted(os.sched_getaffinity(0))
    return None if len(cpus) >= needed else (needed, f"needs {needed} CPUs, this process may use {len(cpus)} ({cpus})")


@pytest.hookimpl(tryfirst=True)   # before -m deselects: a ray test's added slow mark must count
def pytest_collection_modifyitems(config, items):
    # A skip marker, not pytest.skip() in a hook: -ra then names the test's own line, not this file's.
    for item in items:
        if item.get_closest_marker("ray") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)     # a real Ray costs seconds to start: the second tier
        shortfall = _cpu_shortfall(item)
        if shortfall and required_cpus() < shortfall[0]:
            item.add_marker(pytest.mark.skip(
                reason=f"{shortfall[1]} (set {REQUIRE_CPUS_ENV_VAR}={shortfall[0]} to make this a failure)"))
        missing = _namespace_missing(item)
        if missing and not required_pid_namespace():
            item.add_marker(pytest.mark.skip(
                reason=f"{missing} (set {REQUIRE_PID_NAMESPACE_ENV_VAR}=1 to make this a failure)"))
        no_netns = _netns_missing(item)
        if no_netns and not required_netns():
            item.add_marker(pytest.mark.skip(reason=f"{no_netns} (set {REQUIRE_NETNS_ENV_VAR}=1 to make this a failure)"))


def pytest_runtest_setup(item):
    """Under ORCH_REQUIRE_CPUS, fail a `needs_cpus(n)` test that lacks its CPUs, before its fixtures start (a
    module's Ray instance included)."""
    shortfall = _cpu_shortfall(item)
    if shortfall and required_cpus() >= shortfall[0]:
        pytest.fail(f"{shortfall[1]}, and {REQUIRE_CPUS_ENV_VAR}={required_cpus()} says this runner has them",
                    pytrace=False)
    missing = _namespace_missing(item)
    if missing and required_pid_namespace():
        pytest.fail(f"{missing}, and {REQUIRE_PID_NAMESPACE_ENV_VAR}=1 says this runner can make one "
                    "(`unshare --pid --fork --mount-proc true` failed)", pytrace=False)
    no_netns = _netns_missing(item)
    if no_netns and required_netns():
        pytest.fail(f"{no_netns}, and {REQUIRE_NETNS_ENV_VAR}=1 says this runner can make them", pytrace=False)


# What a battery (tests/cli/test_bad_input_battery.py, tests/run/test_fault_battery.py) says at the end of the
# run: its counts, one line each, added by its `battery_counts` fixture.
BATTERY_LINES = pytest.StashKey[list]()


@pytest.fixture(scope="module")
def battery_counts(request):
    """Counts a battery module keeps ({"tried", "clean", "dirty"}); its line (the module's BATTERY name) is
    printed at the end of the run, after the test summary."""
    counts = {"tried": 0, "clean": 0, "dirty": []}
    yield counts
    line = f"{request.module.BATTERY}: {counts['tried']} cases tried, {counts['clean']} clean"
    if counts["dirty"]:
        line += f"; not clean: {', '.join(counts['dirty'])}"
    request.config.stash.setdefault(BATTERY_LINES, []).append(line)


def pytest_terminal_summary(terminalreporter):
    """One line that counts the skipped tests by reason (`-ra` lists them one location at a time), so that
    CI's log says at a glance what did not run and why; and each battery's counts."""
    for line in terminalreporter.config.stash.get(BATTERY_LINES, []):
        terminalreporter.write_line(line)
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: dict[str, int] = {}
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    detail = "; ".join(f"{count} × {reason}" for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]))
    terminalreporter.write_line(f"skipped: {len(skipped)} test(s): {detail}")


def _layout(ranks, threads, batch):
    return dict(ranks=ranks, threads_per_rank=threads, local_batch=batch, global_batch=ranks * batch)


def tp(ranks, threads, batch, samples_per_s, *, cv=0.01, flops=None, flops_rule="valid-taps"):
    """`flops_rule=None`: a record older than the rule's field (its FLOPs torch's own formula counted)."""
    return rec.Record(kind=rec.Kind.THROUGHPUT, key=Trial(ranks, threads, batch).key, status=rec.Status.OK,
                      **_layout(ranks, threads, batch),
                      throughput=rec.ThroughputSection(samples_per_s=samples_per_s, cv=cv,
                                                       train_flops_per_sample=flops,
                                                       train_flops_rule=flops_rule if flops else None))


def infeasible(ranks, threads, batch, *messages):
    return rec.Record(kind=rec.Kind.THROUGHPUT, key=Trial(ranks, threads, batch).key, status=rec.Status.INFEASIBLE,
                      **_layout(ranks, threads, batch),
                      reasons=tuple(rec.ReasonEntry(code="cores", message=m).only("code", "message")
                                    for m in messages))


def bad(ranks, threads, batch, status, reason=None):
    return rec.Record(kind=rec.Kind.THROUGHPUT, key=Trial(ranks, threads, batch).key, status=rec.Status(status),
                      **_layout(ranks, threads, batch), reason=reason)


def conv(global_batch, seed, epochs, *, max_epochs=10.0, status="ok", reason=None, layout=None, lr=0.1):
    """`epochs=None`: the seed ran to max_epochs without reaching the target."""
    ranks, threads, batch = layout or (1, 1, global_batch)
    return rec.Record(
        kind=rec.Kind.CONVERGENCE, key=rec.convergence_key(global_batch, seed), status=rec.Status(status), ranks=ranks,
        threads_per_rank=threads, local_batch=batch, global_batch=global_batch, seed=seed, reason=reason,
        convergence=rec.ConvergenceSection(metric="accuracy", target=0.9, converged=epochs is not None,
                                           epochs_to_target=epochs, max_epochs=max_epochs, lr_rule="linear",
                                           base_lr=0.1, base_batch=32, lr=lr, warmup_epochs=1.0))


def peak(threads, gflops, precision="fp32"):
    """A peak as orch recorded it before layouts were measured at once: one rank's, keyed without the ranks."""
    return rec.Record(kind=rec.Kind.PEAK, key=rec.one_rank_peak_key(threads, precision), status=rec.Status.OK,
                      ranks=1, threads_per_rank=threads,
                      peak=rec.PeakSection(precision=precision, gflops=gflops, gemm_size=4096)
                      .only("precision", "gflops", "gemm_size"))


def peak_at_once(ranks, threads, per_rank_gflops, precision="fp32"):
    """A layout's peak as orch now records it: every rank's GEMM rate while all of them ran at once."""
    return rec.Record(kind=rec.Kind.PEAK, key=rec.peak_key(ranks, threads, precision), status=rec.Status.OK, ranks=ranks,
                      threads_per_rank=threads,
                      peak=rec.PeakSection(precision=precision, gflops=sum(per_rank_gflops),
                                           best_gflops=sum(per_rank_gflops) * 1.02, gemm_size=2048,
                                           per_rank_gflops=list(per_rank_gflops), concurrent=True))


@pytest.fixture
def make():
    return SimpleNamespace(tp=tp, infeasible=infeasible, bad=bad, conv=conv, peak=peak, peak_at_once=peak_at_once)


def texts(table):
    """{(row label, column): cell text} for compact assertions."""
    return {(label, col): cell.text for label, cells in table.rows for col, cell in zip(table.columns, cells)}


@pytest.fixture
def cell_texts():
    return texts


@pytest.fixture(scope="session", autouse=True)
def probe_cache_of_the_suite(tmp_path_factory):
    """The suite's own probe cache (orchestrator.io.probe_cache): an `orch sweep` or `orch plan` of a workload that
    leaves its memory to the probe reads and writes here, never in the user's ~/.cache/orch, and sees no probe a
    user ran. Set in os.environ, so the `orch` processes the tests start inherit it."""
    from orchestrator.constants import CACHE_DIR_ENV_VAR

    saved = os.environ.get(CACHE_DIR_ENV_VAR)
    os.environ[CACHE_DIR_ENV_VAR] = str(tmp_path_factory.mktemp("orch-cache"))
    yield
    if saved is None:
        os.environ.pop(CACHE_DIR_ENV_VAR, None)
    else:
        os.environ[CACHE_DIR_ENV_VAR] = saved
