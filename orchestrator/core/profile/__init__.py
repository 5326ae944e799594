"""What `orch profile` measures, read and judged: pure (no torch, no files, no clock).

- `layout`: the `RxTxB` strings that name a profiled layout;
- `onednn_verbose`: oneDNN's verbose lines parsed and aggregated per kind and per problem;
- `events`: layer times and step coverage from the profiler's ranges;
- `roofline`: FLOPs and bytes of a primitive as benchdnn counts them, and the roofline;
- `levels`: the memory level a primitive's working set fits in, whose bandwidth roof bounds it;
- `analysis`: `orch profile`'s tables from the ranks' profile results;
- `checks`: the physical bounds that mark a measurement disturbed;
- `projection`: a profiled step projected onto another CPU from its primitives;
- `result`: a profiled target as saved (`profile-result.json`) and every rank's profile, typed
  (`core.json.jsonobject`: read from JSON and written back byte for byte, as the trial records are);
- `row`: the base of the analysis's table rows, written as the dict of their fields.

A layout's name and its parts:

>>> from orchestrator.core.planning.layout import layout_label, parse_layout
>>> trial = parse_layout("2x14x8")
>>> trial.ranks, trial.threads_per_rank, trial.local_batch, layout_label(trial)
(2, 14, 8, '2x14x8')
"""
