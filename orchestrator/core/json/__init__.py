"""What orch reads and writes as JSON, typed: the value types (`values`), frozen dataclasses that keep a JSON
object's bytes (`jsonobject`), and the strict loader of plain data into frozen dataclasses (`schema`). Nothing
here knows a sweep, a record or a machine: every other package of the core stands on this one.

>>> from orchestrator.core.json.schema import load
>>> from orchestrator.core.planning.spec import GridSpec
>>> load(GridSpec, {"local_batch": [8, 16]})[0].local_batch
(8, 16)
"""
