"""From a sweep file to what runs: the sweep's fields (`spec`), the names that become paths (`names`), its grid
points (`trial`, `grid`, `layout`), which points a machine can host (`constraints`), the workload's figures
(`facts`, `probe`), the learning-rate rule (`lr`), a script's arguments (`script`), the plan (`plan`) and its
views (`view`). Stands on `machine` and `json`; knows nothing of records.

>>> from orchestrator.core.planning.trial import Trial
>>> Trial(2, 4, 16).key
'r2-t4-b16'
"""
