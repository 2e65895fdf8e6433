"""Fuzzing the NCCL parser: garbage, truncation and mutated rows never raise (hypothesis)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.nccl import Aggregate, Parser, Point, SizeResult, merge_provisional, peak, read
from nvcre.measure.profile import compile_profile

BUILTIN = compile_profile(next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth"))
"""The built-in profile (nvcre's table reader); a reader is stateful, so each example gets its own."""
SPEC = Parser(  # stateless: a profile's own pattern
    compile_profile(
        {
            "metadata": {"name": "spec"},
            "spec": {
                "timestamp": {"layout": "2006-01-02T15:04:05Z07:00"},
                "patterns": {
                    "bandwidthResult": {
                        "regex": r"^\s*(?P<size>\d+)\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+(?P<algBW>[\d.]+)\s+(?P<busBW>[\d.]+)"
                    }
                },
            },
        }
    )
)

HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
ROW = "  17179869184    4294967296     float     sum      -1  36065.1  476.36  922.94       0  36071.8  476.27  922.77       0"
SAMPLE = (
    Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nccl" / "awsbatch-p5-mpi-tagged.log"
).read_text()

row_like = st.lists(
    st.one_of(
        st.sampled_from(
            ["8", "99999999999999999999999", "-1", "1e+06", "N/A", "nan", "inf", "float", "sum", "#"]
        ),
        st.text(alphabet="0123456789.e+-/NA ", max_size=12),
    ),
    max_size=16,
).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=200), row_like), max_size=30))
def test_any_lines_parse_without_raising(lines: list[str]) -> None:
    for parser in (Parser(BUILTIN), SPEC):
        aggregate = read(lines, parser)
        results = aggregate.results()
        assert len(results) == len(aggregate.sums) and aggregate.rows >= 0
        peak(results)
        for result in results:
            assert float(result.alg_bw) >= 0 and float(result.bus_bw) >= 0


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=len(SAMPLE)), st.integers(min_value=0, max_value=len(SAMPLE)))
def test_a_truncated_or_cut_log_never_raises(start: int, end: int) -> None:
    aggregate = read(SAMPLE[start:end].splitlines(), Parser(BUILTIN))
    aggregate.results()
    summary = aggregate.summary()
    assert summary["complete"] is (summary.get("incompleteReason") is None)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(row_like, st.text(max_size=120)), max_size=20))
def test_rows_under_a_real_header_never_raise_and_never_go_negative(lines: list[str]) -> None:
    aggregate = read([HEADER, *lines], Parser(BUILTIN))
    for result in aggregate.results():
        assert float(result.alg_bw) >= 0 and float(result.bus_bw) >= 0
        assert result.wrong is None or result.wrong >= 0
    assert aggregate.wrong_values >= 0


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.text(max_size=40) | st.integers(),
        lambda c: st.dictionaries(st.text(max_size=8), c, max_size=3),
    )
)
def test_any_stored_table_layout_resumes_or_is_ignored(state: object) -> None:
    parser = Parser(BUILTIN, resume=state if isinstance(state, dict) else None)
    parser.parse_line(ROW)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=len(ROW) - 1), st.characters())
def test_a_row_with_one_character_changed_never_raises(index: int, char: str) -> None:
    mutated = ROW[:index] + char + ROW[index + 1 :]
    parser = Parser(BUILTIN)
    parser.parse_line(HEADER)
    found = parser.parse_line(mutated)
    assert found is None or isinstance(found, (Point, str))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(
            SizeResult, st.integers(0, 1 << 40), st.text(max_size=8), st.text(max_size=8), st.integers(1, 100)
        ),
        max_size=5,
    ),
    st.lists(st.builds(Point, st.integers(0, 1 << 40), st.floats(0, 1e6), st.floats(0, 1e6)), max_size=10),
)
def test_provisional_merge_of_any_stored_status_never_raises(
    stored: list[SizeResult], new: list[Point]
) -> None:
    aggregate = Aggregate()
    for point in new:
        aggregate.add(point)
    merged, dropped = merge_provisional(stored, aggregate)
    assert [r.size_bytes for r in merged[: len(stored)]] == [r.size_bytes for r in stored]
    assert dropped == 0
