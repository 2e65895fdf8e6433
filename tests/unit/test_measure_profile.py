"""LogProfile compilation: Go layouts, RE2 patterns, typed captures, errors naming the field."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import re2

from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.profile import (
    Pattern,
    ProfileCache,
    ProfileError,
    capture_float,
    capture_int,
    capture_seconds,
    compile_profile,
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


def search(regex: str, line: str) -> dict[str, str | None] | None:
    pattern = compile_profile(profile({"trainingStep": {"regex": regex}})).pattern("trainingStep")
    assert pattern is not None
    match = pattern.search(line)
    return None if match is None else match.groupdict()


@pytest.mark.parametrize(
    ("regex", "line", "groups"),
    [
        (r"(?<size>\d+) B", "size 512 B", {"size": "512"}),
        (r"(?P<size>\d+) B", "size 512 B", {"size": "512"}),
        (r"end\z", "the end", {}),
        (r"\Qa.b*\E+", "xa.b**", {}),
        (r"[[:digit:][:upper:]]+(?P<rest>[[:^alpha:]]+)", "AB12 34x", {"rest": " 34"}),
        (r"\p{Greek}+(?P<n>\d)", "\u03b1\u03b27", {"n": "7"}),
        (r"(?i)BUSBW (?P<v>[\d.]+)", "busbw 487.09", {"v": "487.09"}),
        (r"a(?P<opt>x)?b", "ab", {"opt": None}),
    ],
)
def test_re2_syntax_is_matched_by_re2(regex: str, line: str, groups: dict[str, str | None]) -> None:
    """Go's syntax as written: both named-group forms, \\z, \\Q..\\E, POSIX classes (negated
    too), Unicode classes; a group that takes no part is None (fails on main: ``[:^alpha:]``
    and ``\\p{Greek}`` were refused by the translation to Python's ``re``)."""
    assert search(regex, line) == groups


def test_end_of_text_is_not_before_a_final_newline() -> None:
    assert search(r"end\z", "the end\n") is None, "RE2's \\z, unlike Python's $"


def test_captures_of_non_ascii_lines_are_whole_characters() -> None:
    assert search(r"loss: (?P<loss>\S+) (?P<unit>\S+)", "loss: 7.6 µs — ok") == {"loss": "7.6", "unit": "µs"}


@pytest.mark.parametrize(
    ("regex", "message"),
    [
        (r"(?<=a)b", r"spec\.patterns\.trainingStep\.regex: invalid perl operator: \(\?<="),
        (r"(?P<x>a)(?P=x)", r"spec\.patterns\.trainingStep\.regex: invalid (perl operator|named capture)"),
        (r"(a)\1", r"spec\.patterns\.trainingStep\.regex: invalid escape sequence: \\1"),
        (r"a{1001}", r"spec\.patterns\.trainingStep\.regex: invalid repetition size: \{1001\}"),
        (r"\pL{1000}\pL{1000}\pL{1000}", r"spec\.patterns\.trainingStep\.regex: pattern too large"),
        (r"end\Z", r"spec\.patterns\.trainingStep\.regex: invalid escape sequence: \\Z"),
    ],
)
def test_what_re2_cannot_compile_is_refused_naming_the_field(regex: str, message: str) -> None:
    """Look-around and back-references are PCRE, not RE2 (fails on main: ``(?<=a)`` and
    ``(?P=x)`` and ``\\1`` compiled with Python's ``re``, and backtracked)."""
    with pytest.raises(ProfileError, match=message):
        compile_profile(profile({"trainingStep": {"regex": regex}}))


@pytest.mark.parametrize(
    "line",
    [
        " " * (1 << 20),
        "1" * (1 << 20),
        "Epoch 0: |" + "█" * (1 << 18) + "| 10/100 [00:01<00:09, train_step_timing in s=",
        "  8  2  float  sum  -1" + " " * (1 << 20) + "x",
    ],
    ids=["spaces", "digits", "progress-bar", "near-miss-row"],
)
def test_adversarial_lines_through_every_builtin_pattern_match_as_expected(line: str) -> None:
    """Lines that sent the backtracking engine into minutes (64 KiB of spaces: 18 s through
    ``nccl-bandwidth``; a NeMo progress bar: 391 s through ``nemo-training``) now match in one
    linear pass; the result is the same as for a short line of the same shape: no row, no step."""
    for manifest in builtin_profiles():
        for key, pattern in compile_profile(manifest).patterns.items():
            match = pattern.search(line)
            if key in ("bandwidthResult", "trainingStep"):
                assert match is None, (manifest["metadata"]["name"], key)


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
        ({"trainingStep": {"regex": 7}}, "spec.patterns.trainingStep.regex: must be a string"),
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


CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"


def _groups(pattern: Pattern, line: str) -> dict[str, str | None] | None:
    match = pattern.search(line)
    return None if match is None else match.groupdict()


def test_the_prefilter_never_changes_what_a_pattern_finds() -> None:
    """One RE2 set pass per line says which patterns can match; every corpus line (and its
    kubelet-stripped form) through every built-in pattern gives what the pattern alone gives."""
    lines = [
        line for log in sorted(CORPUS.rglob("*.log")) for line in log.read_text(errors="replace").splitlines()
    ]
    assert len(lines) > 1000
    for manifest in builtin_profiles():
        patterns = compile_profile(manifest).patterns
        assert len({id(p.prefilter) for p in patterns.values()}) == 1, "one set per profile"
        for line in lines:
            for pattern in patterns.values():
                assert _groups(pattern, line) == _groups(replace(pattern, prefilter=None), line), line


def test_when_the_set_gives_up_every_pattern_is_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(re2.Set, "Match", lambda self, text: None)  # as RE2 answers out of memory
    step = compile_profile(profile({"trainingStep": {"regex": MEGATRON_STEP}})).pattern("trainingStep")
    assert step is not None and step.prefilter is not None
    match = step.search(MEGATRON_LINE)
    assert match is not None and match["iteration"] == "20"
