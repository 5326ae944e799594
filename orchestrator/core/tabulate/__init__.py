"""The report's tables from the records: scalability, throughput, efficiency and hardware efficiency
(`throughput`), epochs to target and the RCP file (`convergence`), time to train (`time_to_train`). Pure:
records in, `text.table.Table`s out.

>>> from orchestrator.core.tabulate.throughput import layout_label
>>> from orchestrator.core.planning.trial import Trial
>>> layout_label(Trial(2, 4, 32))
'2×4×32'
"""
