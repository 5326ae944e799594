"""Running a plan: which trials may run at once and where (`schedule`), how long they take (`eta`, refined by
the records as they come), and the all-reduce calibration trials (`calibration`). Stands on `planning` and
`measured`.

>>> from orchestrator.core.execution.eta import duration_text
>>> duration_text(5400)
'1 h 30 min'
"""
