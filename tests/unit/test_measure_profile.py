"""LogProfile compilation: Go layouts, RE2 translation, typed captures, errors naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from nvcre.measure.profile import (
    ProfileCache,
    ProfileError,
    capture_float,
    capture_int,
    capture_seconds,
    compile_profile,
    translate_re2,
)
from nvcre.measure.timelayout import LayoutError, compile_layout

MEGATRON_STEP = (
    r"\[(?P<timestamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+)\]\s+iteration\s+(?P<iteration>\d+)/\s*\d+\s*\|"
    r".*elapsed time per iteration \(ms\):\s*(?P<elapsedTime>[\d.]+)\s*\|"
    r".*throughput per GPU \(TFLOP/s/GPU\):\s*(?P<tflops>[\d.]+)\s*\|.*lm loss:\s*(?P<loss>[\d.eE+\-]+)"
)
MEGATRON_LINE = (
    "[2026-03-10 14:04:24.172217] iteration       20/     500 | consumed samples:         5120 | "
    "elapsed time per iteration (ms): 2130.2 | throughput per GPU (TFLOP/s/GPU): 802.1 | "
    "learning rate: 5.999E-05 | global batch size:   256 | lm loss: 7.655310E+00 | loss scale: 1.0 |"
)


def profile(
    patterns: dict[str, object], layout: str = "2006-01-02 15:04:05.999999", **spec: object
) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "resourceVersion": "1"},
        "spec": {"timestamp": {"layout": layout}, "patterns": patterns, **spec},
    }


@pytest.mark.parametrize(
    ("layout", "text", "expected"),
    [
        (
            "2006-01-02 15:04:05.999999",
            "2026-03-10 14:04:24.172217",
            datetime(2026, 3, 10, 14, 4, 24, 172217, UTC),
        ),
        ("2006-01-02 15:04:05.999999", "2026-03-10 14:04:24", datetime(2026, 3, 10, 14, 4, 24, tzinfo=UTC)),
        (
            "2006-01-02T15:04:05.999999999Z",
            "2026-02-05T16:01:40.326255000Z",
            datetime(2026, 2, 5, 16, 1, 40, 326255, UTC),
        ),
        (
            "2006-01-02T15:04:05Z07:00",
            "2026-08-06T09:30:29.569516911-07:00",
            datetime(2026, 8, 6, 9, 30, 29, 569516, timezone(-timedelta(hours=7))),
        ),
        ("2006-01-02T15:04:05Z07:00", "2026-08-06T09:30:29Z", datetime(2026, 8, 6, 9, 30, 29, tzinfo=UTC)),
        ("Jan _2 15:04:05 2006", "Mar  9 07:08:09 2026", datetime(2026, 3, 9, 7, 8, 9, tzinfo=UTC)),
        ("02/01/06 3:04PM", "10/03/26 2:05PM", datetime(2026, 3, 10, 14, 5, tzinfo=UTC)),
        ("2006-01-02 15:04:05,000", "2026-03-10 14:04:24,120", datetime(2026, 3, 10, 14, 4, 24, 120000, UTC)),
    ],
)
def test_go_layouts_parse_like_time_parse(layout: str, text: str, expected: datetime) -> None:
    assert compile_layout(layout).parse(text) == expected


def test_a_value_that_does_not_fit_the_layout_is_none_not_an_error() -> None:
    layout = compile_layout("2006-01-02 15:04:05.000")
    assert layout.parse("2026-03-10 14:04:24") is None, ".000 demands exactly three digits"
    assert layout.parse("2026-13-40 14:04:24.000") is None
    assert layout.parse("garbage") is None


def test_a_layout_without_a_date_or_time_is_refused() -> None:
    with pytest.raises(LayoutError, match="no date or time element"):
        compile_layout("yyyy-mm-dd")


def test_megatron_step_captures_are_typed_and_units_normalised() -> None:
    compiled = compile_profile(
        profile(
            {
                "trainingStep": {
                    "regex": MEGATRON_STEP,
                    "example": MEGATRON_LINE,
                    "units": {"elapsedTime": "ms"},
                }
            }
        )
    )
    step = compiled.pattern("trainingStep")
    assert step is not None
    match = step.search("2026-03-10T14:04:24.172601338Z " + MEGATRON_LINE)
    assert match is not None, "an unanchored search, as Go's FindStringSubmatch"
    assert capture_int(match, "iteration") == 20
    assert capture_seconds(step, match, "elapsedTime") == pytest.approx(2.1302)
    assert capture_float(match, "tflops") == 802.1
    assert capture_float(match, "loss") == pytest.approx(7.65531)
    assert capture_int(match, "globalStep") == 0, "an absent group is 0"
    assert compiled.parse_time(match["timestamp"]) == datetime(2026, 3, 10, 14, 4, 24, 172217, UTC)


def test_classes_are_ascii_only_as_in_re2() -> None:
    compiled = compile_profile(profile({"trainingStep": {"regex": r"step (?P<globalStep>\d+)"}}))
    step = compiled.pattern("trainingStep")
    assert step is not None
    assert step.search("step ٣") is None, "an Arabic-Indic digit is not \\d in RE2"


@pytest.mark.parametrize(
    ("re2", "python"),
    [
        (r"(?<size>\d+)", r"(?P<size>\d+)"),
        (r"(?<=a)b(?<!c)", r"(?<=a)b(?<!c)"),
        (r"end\z", r"end\Z"),
        (r"\\z", r"\\z"),
        (r"\Qa.b*\E+", r"a\.b\*+"),
        (r"[[:digit:][:upper:]]+", r"[0-9A-Z]+"),
    ],
)
def test_re2_syntax_is_translated(re2: str, python: str) -> None:
    assert translate_re2(re2) == python


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        (
            {"trainingStep": {"regex": "a", "example": "b"}},
            "pattern trainingStep: example does not match regex",
        ),
        (
            {"bandwidthResult": {"regex": r"(?P<size>\d+) (?P<algBW>\S+)"}},
            r"spec.patterns.bandwidthResult.regex: must capture the named group\(s\) \['busBW'\]",
        ),
        (
            {"networkTransport": {"regex": "Using network"}},
            r"networkTransport.regex: must capture .*'transport'",
        ),
        ({"trainingStep": {"regex": "(unclosed"}}, "spec.patterns.trainingStep.regex: missing \\)"),
        ({"trainingStep": {"regex": r"\p{Greek}"}}, "spec.patterns.trainingStep.regex: Unicode classes"),
        (
            {"trainingStep": {"regex": "a", "units": {"stepTiming": "h"}}},
            "spec.patterns.trainingStep.units: unknown unit",
        ),
        ({"bogus": {"regex": "a"}}, r"spec.patterns: unknown pattern\(s\) \['bogus'\]"),
    ],
)
def test_bad_profiles_fail_naming_the_field(patterns: dict[str, object], message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        compile_profile(profile(patterns))


def test_a_missing_layout_is_named() -> None:
    with pytest.raises(ProfileError, match=r"spec\.timestamp\.layout: required"):
        compile_profile(profile({}, layout=""))


def test_worker_strategy_and_counters_default_as_the_spec_says() -> None:
    compiled = compile_profile(profile({}, warmupSteps=3, logInterval=10))
    assert (compiled.worker_strategy.type, compiled.worker_strategy.replicated_job_name) == ("Single", None)
    assert (compiled.warmup_steps, compiled.log_interval) == (3, 10)
    multi = compile_profile(profile({}, workerStrategy={"type": "Multi", "trainingStepPod": "last"}))
    assert (multi.worker_strategy.lifecycle_pod, multi.worker_strategy.training_step_pod) == ("first", "last")


def test_the_cache_recompiles_when_the_resource_version_changes() -> None:
    cache = ProfileCache()
    first = profile({"trainingStep": {"regex": "a"}})
    compiled = cache.get(first)
    assert cache.get(first) is compiled
    edited = profile({"trainingStep": {"regex": "b"}})
    edited["metadata"] = {"name": "p", "resourceVersion": "2"}
    recompiled = cache.get(edited)
    assert recompiled is not compiled
    pattern = recompiled.pattern("trainingStep")
    assert pattern is not None and pattern.regex.pattern == "b"


def test_a_layout_with_two_seconds_or_fractions_compiles() -> None:
    # Found by hack/fuzz/parsers.py: the second fraction redefined the regex group.
    layout = compile_layout("2006 15:04:05.000 05 .999")
    assert layout.parse("2026 10:11:07.123 07 .5") == datetime(2026, 1, 1, 10, 11, 7, 123000, UTC)
    twice = compile_layout("2006 15:04:05 05")
    assert twice.parse("2026 10:11:12.5 12") == datetime(2026, 1, 1, 10, 11, 12, 500000, UTC)
