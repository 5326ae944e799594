"""`orch probe`: what a sweep's workload does not declare (one rank's memory per local batch, its training FLOPs
per sample, its samples per epoch) measured with one rank on this machine and cached for `orch plan` and
`orch sweep` (which probes itself where it must). No Ray. It plans for the machine `orch plan` reads
(`planned_machine`), so the probe is measured in the precision the plan will look it up in."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.app.options import ProbeOptions
from orchestrator.errors import InputError
from orchestrator.io.sweepfile import Sweep, load_sweep
from orchestrator.io.topofile import planned_machine

if TYPE_CHECKING:   # the run layer: imported when a probe runs
    from orchestrator.core.planning.probe import ProbePoint
    from orchestrator.run.driver.probe import Probed, ProbeSetup


def probe(options: ProbeOptions, *, on_start: Callable[[Sweep, ProbeSetup, str], None] | None = None,
          on_point: Callable[[ProbePoint], None] | None = None) -> Probed:
    """The sweep's probe: measured now (`options.force`, or nothing cached), else the cached one, else none
    needed (`Probed.sweep.probe` is None: the workload declares every figure). `on_start` hears where the rank
    runs and in which precision, `on_point` each local batch as it is measured. Raises ProbeFailed (bad input,
    with the rank's error) or InputError when a figure is unknown and no probe can run."""
    from orchestrator.io.backends import ccl_installed
    from orchestrator.run.driver.probe import probe_for

    sweep = load_sweep(options.sweep)
    topology = planned_machine(options.topology)

    def started(setup: ProbeSetup, precision: str) -> None:
        if on_start is not None:
            on_start(sweep, setup, precision)

    probed = probe_for(sweep, topology, ccl_installed(), force=options.force, on_start=started, on_point=on_point)
    if probed.skipped:
        raise InputError(f"no probe: {probed.skipped}")
    return probed
