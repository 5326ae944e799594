"""What a sweep measured: the typed record of a trial (`records`, `record_fields`), how a rank ended
(`rank_end`), throughput over repeats (`throughput`), GEMM peaks (`peaks`), the gradient noise scale
(`noise_scale`) and epochs to target aggregated over seeds (`convergence`). Records in, facts out; tables and
models stand on it.

>>> from orchestrator.core.measured.throughput import repeat_throughputs
>>> repeat_throughputs(8, 10, [[1.0, 2.0], [1.25, 1.6]])
[64.0, 40.0]
"""
