"""The strict loader's general features: nested lists, unions of a number and a list, lists of mappings."""

from __future__ import annotations

import dataclasses

from orchestrator.core.json.schema import InvalidInput, Problem, load, opt, to_plain


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Part:
    index: int = opt(0, "position", minimum=0)
    sizes: tuple[float, ...] = opt((), "sizes", minimum=0)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Whole:
    groups: tuple[tuple[int | tuple[int, ...], ...], ...] = opt((), "groups of ids", minimum=0)
    parts: tuple[Part, ...] = opt((), "parts")


def messages(data: object) -> list[str]:
    _, problems = load(Whole, data)
    return [str(p) for p in problems]


def test_bounds_hold_for_every_number_in_nested_lists_with_its_path():
    assert messages({"groups": [[0, [1, -2]], [-3]]}) == ["groups[0][1][1]: must be >= 0, got -2",
                                                          "groups[1][0]: must be >= 0, got -3"]


def test_a_number_or_a_list_of_numbers_is_taken_as_given():
    whole, problems = load(Whole, {"groups": [[0, [1, 2]], []]})
    assert problems == [] and whole.groups == ((0, (1, 2)), ())
    assert messages({"groups": [["a", [1, True]]]}) == ["groups[0][0]: must be int or list of int, got 'a'",
                                                        "groups[0][1]: must be int or list of int, got [1, True]"]


def test_lists_of_mappings_are_loaded_strictly_with_every_problem_and_its_path():
    whole, problems = load(Whole, {"parts": [{"index": 2, "sizes": [1, 2.5]}, {}]})
    assert problems == [] and whole.parts == (Part(index=2, sizes=(1.0, 2.5)), Part())
    assert messages({"parts": [{"index": -1, "size": 1}, "p", {"sizes": [-1]}]}) == [
        "parts[0].size: unknown key; valid keys are: index, sizes",
        "parts[0].index: must be >= 0, got -1",
        "parts[1]: must be a mapping, got 'p'",
        "parts[2].sizes[0]: must be >= 0, got -1.0",
    ]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Pair:
    first: tuple[int, ...] = opt((), "ids")
    second: tuple[int, ...] = opt((), "ids")

    def __post_init__(self) -> None:
        shared = sorted(set(self.first) & set(self.second))
        if shared:
            raise InvalidInput("Pair", [Problem(f"second[{self.second.index(i)}]", f"{i} is also in first")
                                        for i in shared] + [Problem("", "first and second overlap")])


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Pairs:
    pairs: tuple[Pair, ...] = opt((), "pairs")


def test_cross_field_problems_keep_the_key_paths_they_name_under_the_mapping_path():
    _, problems = load(Pairs, {"pairs": [{"first": [1]}, {"first": [1, 2], "second": [3, 2, 1]}, {"x": 1}]})
    assert [str(p) for p in problems] == [
        "pairs[1].second[2]: 1 is also in first",
        "pairs[1].second[1]: 2 is also in first",
        "pairs[1]: first and second overlap",
        "pairs[2].x: unknown key; valid keys are: first, second",
    ]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    # A field that says otherwise: infinity is a meaningful "no limit" here, NaN still is no number.
    cap: float = opt(1.0, "a cap; .inf for none", minimum=0, finite=False)
    sizes: tuple[float, ...] = opt((), "sizes", minimum=0)


def test_non_finite_numbers_in_a_list_are_found_wherever_they_sit():
    # NaN in the middle of a list: min() and max() of the list can both be finite, so the fast path must not
    # take the bounds check on them as a verdict.
    nan, inf = float("nan"), float("inf")
    _, problems = load(Limits, {"sizes": [1.0, nan, 2.0, inf, 3]})
    assert [str(p) for p in problems] == ["sizes[1]: must be a finite number, got nan",
                                          "sizes[3]: must be a finite number, got inf"]
    assert load(Limits, {"sizes": [1.0, 2, 3.5]}) == (Limits(sizes=(1.0, 2.0, 3.5)), [])


def test_a_field_with_finite_false_takes_infinity_and_keeps_its_other_bounds():
    assert load(Limits, {"cap": float("inf")})[0].cap == float("inf")
    assert [str(p) for p in load(Limits, {"cap": float("-inf")})[1]] == ["cap: must be >= 0, got -inf"]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    batch: int = opt(help="the global batch", minimum=1, key="BS")
    runs: tuple[float, ...] = opt((), "epochs", key="Epochs to converge")


def test_a_field_read_from_a_key_that_is_not_a_name_is_named_by_that_key():
    entry, problems = load(Entry, {"BS": 8, "Epochs to converge": [3, 4]})
    assert entry == Entry(batch=8, runs=(3.0, 4.0)) and problems == []
    _, problems = load(Entry, {"batch": 8, "Epochs to converge": ["x"]})
    assert [str(p) for p in problems] == ["batch: unknown key; valid keys are: BS, Epochs to converge",
                                          "BS: required (the global batch)",
                                          "Epochs to converge[0]: must be float, got 'x'"]
    assert to_plain(Entry(batch=8)) == {"BS": 8, "Epochs to converge": []}


def test_a_problem_carries_the_value_at_fault_for_a_reader_that_words_its_own_message():
    _, problems = load(Entry, {"BS": "16"})
    assert [(p.path, p.value) for p in problems] == [("BS", "16")]
    _, problems = load(Entry, {"BS": 0})
    assert [(p.path, p.value) for p in problems] == [("BS", 0)]
    _, problems = load(Entry, {})
    assert [(p.path, p.value) for p in problems] == [("BS", None)]     # missing: no value
