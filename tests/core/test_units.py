"""Values with units, one form everywhere a command takes them (core.text.units): durations (`30m`, `2h`,
`1h30m`, `250us`, a bare number in seconds), tc's rates (`25gbit`) and node-hours (`200node-h`); what is not one
is refused with the forms that are."""

from __future__ import annotations

import pytest

from orchestrator.core.text.units import parse_duration, parse_node_hours, parse_rate, positive_duration


@pytest.mark.parametrize("text, seconds", [("30m", 1800.0), ("2h", 7200.0), ("1h30m", 5400.0), ("90s", 90.0),
                                           ("1800", 1800.0), ("2.5h", 9000.0), ("1d", 86400.0), ("30min", 1800.0),
                                           ("1ms", 0.001), ("250us", 0.00025), ("1h 30m 10s", 5410.0), ("0", 0.0)])
def test_a_duration_is_its_pieces_added_up(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "5 parsecs", "-3m", "1 minute", "1m30", "inf", "30 30"])
def test_what_is_not_a_duration_is_refused_with_the_forms(text):
    with pytest.raises(ValueError, match="is not a duration: give 30m, 2h, 1h30m"):
        parse_duration(text)


def test_a_budget_or_a_deadline_is_more_than_nothing():
    with pytest.raises(ValueError, match="must be more than 0 seconds"):
        positive_duration("0s")


@pytest.mark.parametrize("text, bits", [("25gbit", 25e9), ("200mbit", 2e8), ("1.5Gbit", 1.5e9), ("800kbit", 8e5)])
def test_rates_are_read_in_tcs_bit_units(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize("text", ["1gbps", "fast", "0gbit", "-1gbit", "1 gigabit", ""])
def test_rates_in_bytes_or_without_a_unit_are_refused_with_the_units(text):
    with pytest.raises(ValueError, match=r"bit, kbit, mbit, gbit, tbit \(bits per second"):
        parse_rate(text)


@pytest.mark.parametrize("text", ["200", "200h", "0node-h", "nan node-h", "-1node-h"])
def test_node_hours_come_with_their_unit(text):
    with pytest.raises(ValueError, match="is not a cost in node-hours: give a positive number and its unit"):
        parse_node_hours(text)
