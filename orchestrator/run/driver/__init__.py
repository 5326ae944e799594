"""The driver's side of run/: what runs in orch's own process (the one that starts Ray), never in a rank. It plans
a sweep's work items (`kinds`), places and starts each trial's ranks on Ray (`trial`, `launcher`), supervises them
to their end (`supervision`), records each trial as it ends (`recording`, `sweep`, `adaptive`), and runs the
things around a sweep: the probe (`probe`), the time estimate (`estimate`), `orch profile` (`profile_run`,
`profile_projection`, `roof_probe`), Ray itself (`cluster`, `reaper`) and an emulated cluster (`emulated`).

It talks to a rank only through the wire format (run.job, run.reports) and imports nothing of run.rank: the
launcher names the rank's modules only on the rank's command line (an import contract holds it).
"""
