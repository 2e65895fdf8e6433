"""timeoutPerJob is a Go duration stored as Go prints it (metav1.Duration)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvcre.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("24h", "24h0m0s"),
        ("30m", "30m0s"),
        ("1h30m", "1h30m0s"),
        ("1.5h", "1h30m0s"),
        ("90s", "1m30s"),
        ("1.5s", "1.5s"),
        ("500ms", "500ms"),
        ("0", "0s"),
        ("2h45m30.5s", "2h45m30.5s"),
    ],
)
def test_go_round_trip(text: str, printed: str) -> None:
    assert format_duration(parse_duration(text)) == printed


@pytest.mark.parametrize("text", ["", "1", "1d", "h", "-", "1hh", "one hour"])
def test_go_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@given(st.integers(min_value=0, max_value=10**15))
def test_printed_form_parses_back(ns: int) -> None:
    assert parse_duration(format_duration(ns)) == ns
