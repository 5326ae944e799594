"""The machine a sweep runs on: its nodes, sockets, cores and memory (`topology`), what its CPUs compute natively
(`isa`), where each rank's cores go (`placement`), and an emulated cluster's request (`emulation`). Knows no
sweep: planning stands on it.

>>> from orchestrator.core.machine.topology import cpu_ranges
>>> cpu_ranges([8, 0, 1, 2, 3, 10, 11])
'0-3,8,10-11'
"""
