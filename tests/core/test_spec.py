"""Sweep spec strictness: unknown keys, wrong types, impossible values, every problem at once with its path."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from orchestrator.core.json.schema import InvalidInput, Problem, field_help, load, opt, to_plain
from orchestrator.core.planning.spec import ConvergenceSpec, GridSpec, SweepSpec, WorkloadSpec, parse_spec

VALID = {
    "name": "table3",
    "workload": {"name": "classifier", "params": {"hidden": 64}},
    "grid": {"ranks": [1, 2], "threads_per_rank": [1, 2], "local_batch": [32]},
    "convergence": {"metric": "accuracy", "target": 0.9, "base_lr": 0.1, "base_batch": 32},
}


def with_(**changes):
    """VALID with dotted-path changes; a value of `...` deletes the key."""
    data = copy.deepcopy(VALID)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = data
        for key in parents:
            target = target.setdefault(key, {})
        if value is ...:
            target.pop(last, None)
        else:
            target[last] = value
    return data


def problems(data) -> list[str]:
    spec, found = parse_spec(data)
    assert spec is None, "expected the spec to be rejected"
    return [str(p) for p in found]


def test_valid_spec_gets_defaults_from_fields():
    spec, found = parse_spec(VALID)
    assert found == []
    assert spec.grid.ranks == (1, 2)                 # lists become tuples: the spec is frozen
    assert spec.backend == "auto"
    assert spec.measure.repeats == 3 and spec.measure.data == "memory"
    assert spec.convergence.seeds == (0, 1, 2) and spec.convergence.lr_rule == "linear"
    assert spec.constraints.memory_headroom == 0.9 and spec.constraints.hyperthreads is False
    assert spec.workload.params == {"hidden": 64}
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"


def test_empty_sections_and_null_optionals_take_defaults():
    spec, found = parse_spec(with_(measure=None, constraints={"rank_memory_mib": None}, convergence=None))
    assert found == []
    assert spec.measure.timed_steps == 10
    assert spec.constraints.rank_memory_mib is None
    assert spec.convergence is None


def test_auto_axes_accepted():
    spec, found = parse_spec(with_(grid__ranks="auto", grid__threads_per_rank=...))
    assert found == [] and spec.grid.ranks == "auto" and spec.grid.threads_per_rank == "auto"


def test_unknown_key_lists_the_valid_keys():
    assert problems(with_(nodes=4)) == [
        "nodes: unknown key; valid keys are: adaptive, backend, constraints, convergence, grid, measure, name, profile, tracking, workload"]


def test_unknown_nested_key_has_its_path_and_the_sections_valid_keys():
    assert problems(with_(measure__repeat=3)) == [
        "measure.repeat: unknown key; valid keys are: allreduce, data, isolation, peak, probe, repeats, "
        "startup_timeout_s, step_timeout_s, timed_steps, timeout_s, warmup_steps"]


@pytest.mark.parametrize("change, expected", [
    ({"grid__ranks": "four"}, "grid.ranks: must be 'auto' or list of int, got 'four'"),
    ({"grid__ranks": 4}, "grid.ranks: must be 'auto' or list of int, got 4"),
    ({"grid__local_batch": [1, 2.5]}, "grid.local_batch[1]: must be int, got 2.5"),
    ({"measure__timed_steps": "10"}, "measure.timed_steps: must be int, got '10'"),
    ({"measure__timed_steps": True}, "measure.timed_steps: must be int, got True"),
    ({"constraints__hyperthreads": "on"}, "constraints.hyperthreads: must be bool, got 'on'"),
    ({"constraints__rank_memory_mib": "2G"}, "constraints.rank_memory_mib: must be float or null, got '2G'"),
    ({"backend": "nccl"}, "backend: must be one of 'auto', 'ccl', 'gloo'; got 'nccl'"),
    ({"measure__data": "disk"}, "measure.data: must be one of 'memory', 'stream'; got 'disk'"),
    ({"workload": "classifier"}, "workload: must be a mapping, got 'classifier'"),
    ({"workload__params": [1]}, "workload.params: must be a mapping, got [1]"),
    ({"name": 3}, "name: must be str, got 3"),
    ({"convergence__seeds": 0}, "convergence.seeds: must be a list, got 0"),
])
def test_wrong_types(change, expected):
    assert problems(with_(**change)) == [expected]


@pytest.mark.parametrize("change, expected", [
    ({"grid__ranks": [0, 2]}, "grid.ranks[0]: must be >= 1, got 0"),
    ({"grid__threads_per_rank": [-1]}, "grid.threads_per_rank[0]: must be >= 1, got -1"),
    ({"grid__local_batch": [32, -8]}, "grid.local_batch[1]: must be >= 1, got -8"),
    ({"constraints__memory_headroom": 1.5}, "constraints.memory_headroom: must be <= 1, got 1.5"),
    ({"constraints__memory_headroom": 0}, "constraints.memory_headroom: must be > 0, got 0.0"),
    ({"constraints__ccl_workers": -1}, "constraints.ccl_workers: must be >= 0, got -1"),
    ({"constraints__memory_budget_mib": 0}, "constraints.memory_budget_mib: must be > 0, got 0.0"),
    ({"measure__timeout_s": 0}, "measure.timeout_s: must be > 0, got 0.0"),
    # a year at most: above ~4e13 s every rank's wait overflowed (OverflowError), failing every trial
    ({"measure__timeout_s": 1e14}, "measure.timeout_s: must be <= 31536000.0, got 100000000000000.0"),
    ({"measure__step_timeout_s": 1e14}, "measure.step_timeout_s: must be <= 31536000.0, got 100000000000000.0"),
    ({"measure__startup_timeout_s": 1e14},
     "measure.startup_timeout_s: must be <= 31536000.0, got 100000000000000.0"),
    ({"convergence__timeout_s": 1e14}, "convergence.timeout_s: must be <= 31536000.0, got 100000000000000.0"),
    ({"convergence__eval_every_epochs": 2}, "convergence.eval_every_epochs: must be <= 1, got 2.0"),
    ({"convergence__base_batch": 0}, "convergence.base_batch: must be >= 1, got 0"),
])
def test_impossible_values_are_reported_with_the_number(change, expected):
    assert problems(with_(**change)) == [expected]


@pytest.mark.parametrize("change, expected", [
    ({"grid__ranks": []}, "grid: grid.ranks: must list at least one value"),
    ({"grid__local_batch": []}, "grid: grid.local_batch: must list at least one value"),
    ({"grid__threads_per_rank": [2, 1, 2]}, "grid: grid.threads_per_rank: [2, 1, 2] lists a value twice"),
    ({"convergence__seeds": []}, "convergence: convergence.seeds: must list at least one seed"),
    ({"convergence__seeds": [1, 1]}, "convergence: convergence.seeds: [1, 1] lists a seed twice"),
    ({"convergence__warmup_epochs": 20, "convergence__max_epochs": 10},
     "convergence: convergence.warmup_epochs(20.0) >= max_epochs(10.0): training would end during warm-up"),
    ({"name": "my sweep"}, "<top>: name: 'my sweep' must be letters, digits, '.', '_' or '-', starting with a "
                           "letter or a digit (it names the results folder)"),
    ({"name": "x" * 101}, "<top>: name: 'xxxxxxxxxxxxxxxxxxxx'... is 101 characters long, more than 100 "
                          "(it names the results folder)"),
    ({"convergence__seeds": list(range(101))}, "convergence: convergence.seeds: 101 seeds, more than 100"),
])
def test_cross_field_checks(change, expected):
    assert problems(with_(**change)) == [expected]


def test_empty_and_duplicate_grid_lists_reported_together():
    assert problems(with_(grid__ranks=[], grid__threads_per_rank=[1, 1])) == [
        "grid: grid.ranks: must list at least one value",
        "grid: grid.threads_per_rank: [1, 1] lists a value twice"]


def test_required_fields_named_with_their_help():
    got = problems({"name": "x"})
    assert got == ["workload: required (the workload to train)",
                   "grid: required (the ranks × threads × local batch grid)"]
    assert problems(with_(grid__local_batch=...)) == ["grid.local_batch: required (samples per rank per step)"]


def test_every_problem_in_every_section_reported_at_once():
    data = with_(color="red", grid__ranks=[0], grid__local_batch="big", measure__repeats=0,
                 measure__warmup=1, constraints__memory_headroom=2, convergence__metric=5,
                 convergence__target=..., backend="mpi")
    got = problems(data)
    assert got == [
        "color: unknown key; valid keys are: adaptive, backend, constraints, convergence, grid, measure, name, profile, tracking, workload",
        "grid.ranks[0]: must be >= 1, got 0",
        "grid.local_batch: must be a list, got 'big'",
        "backend: must be one of 'auto', 'ccl', 'gloo'; got 'mpi'",
        "measure.warmup: unknown key; valid keys are: allreduce, data, isolation, peak, probe, repeats, "
        "startup_timeout_s, step_timeout_s, timed_steps, timeout_s, warmup_steps",
        "measure.repeats: must be >= 1, got 0",
        "convergence.metric: must be str, got 5",
        "convergence.target: required (value of the metric that counts as converged)",
        "constraints.memory_headroom: must be <= 1, got 2.0",
    ]


def test_top_level_must_be_a_mapping():
    assert problems(["name", "x"]) == ["<top>: must be a mapping, got ['name', 'x']"]


def test_invalid_input_message_lists_every_problem():
    err = InvalidInput("sweep file s.yaml", [Problem("grid.ranks[0]", "must be >= 1, got 0", 7),
                                             Problem("", "the file is empty")])
    assert str(err) == ("sweep file s.yaml: 2 problem(s):\n  - grid.ranks[0] (line 7): must be >= 1, got 0\n"
                        "  - <top>: the file is empty")
    with pytest.raises(ValueError, match=r"2 problem\(s\)"):
        raise err


def test_field_help_is_the_single_source_of_defaults():
    rows = {name: (default, help_) for name, default, help_ in field_help(ConvergenceSpec)}
    assert rows["seeds"] == ("(0, 1, 2)", "one run per seed and global batch (at most 100 seeds)")
    assert rows["metric"][0] == "required"
    assert set(rows) == {f.name for f in dataclasses.fields(ConvergenceSpec)}


def test_opt_rejects_mutable_defaults():
    with pytest.raises(TypeError, match="use a tuple or factory="):
        opt([1, 2], "a list default")


def test_load_handles_a_dataclass_defined_elsewhere():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Measure:
        timed_steps: int = opt(20, "timed steps per repeat", minimum=1)

    assert load(Measure, {"timed_steps": 0}, "measure") == (
        None, [Problem("measure.timed_steps", "must be >= 1, got 0")])
    assert load(Measure, None)[0] == Measure(timed_steps=20)


def test_to_plain_round_trips_through_parse_spec():
    spec, _ = parse_spec(VALID)
    again, found = parse_spec(to_plain(spec))
    assert found == [] and again == spec


def test_dataclasses_validate_when_built_directly():
    with pytest.raises(ValueError, match=r"grid.ranks: must list at least one value"):
        GridSpec(ranks=(), local_batch=(1,))
    with pytest.raises(ValueError, match=r"'a/b' must be letters"):
        SweepSpec(name="a/b", workload=WorkloadSpec(name="classifier"), grid=GridSpec(local_batch=(1,)))


@pytest.mark.parametrize("profile, expected", [
    ({"variants": {"../../x": {}}}, "profile: profile.variants: '../../x' must be letters, digits, '.', '_' or '-', "
                                    "starting with a letter or a digit"),
    ({"variants": {"a/b": {}}}, "profile: profile.variants: 'a/b' must be letters, digits, '.', '_' or '-', "
                                "starting with a letter or a digit"),
    ({"variants": {".hidden": {}}}, "profile: profile.variants: '.hidden' must be letters, digits, '.', '_' or '-', "
                                    "starting with a letter or a digit"),
    ({"variants": {f"v{i}": {} for i in range(17)}}, "profile: profile.variants: 17 variants, more than 16"),
    ({"layouts": [f"1x1x{b}" for b in range(1, 34)]}, "profile: profile.layouts: 33 layouts, more than 32"),
])
def test_profile_variant_names_become_folders_so_they_are_checked_and_bounded(profile, expected):
    assert problems(with_(profile=profile)) == [expected]
