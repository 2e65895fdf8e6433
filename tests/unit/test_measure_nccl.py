"""The NCCL parser and aggregation (spec 2.2-2.5, acceptance cases 1-5) and the built-in profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nvcre.measure.builtin import builtin_profiles, main
from nvcre.measure.nccl import (
    Aggregate,
    Parser,
    Point,
    SizeResult,
    merge_provisional,
    peak,
    read,
    strip_kubelet_prefix,
)
from nvcre.measure.profile import CompiledProfile, ProfileError, compile_profile
from nvcre.testing.nccl_cases import status_row

SPEC_REGEX = r"^\s*(?P<size>\d+)\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+(?P<algBW>[\d.]+)\s+(?P<busBW>[\d.]+)"
"""The reference ``nccl-bandwidth`` regex of spec 1.2."""


def _profile(patterns: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"timestamp": {"layout": "2006-01-02T15:04:05.999999999Z07:00"}, "patterns": patterns},
    }


SPEC = compile_profile(_profile({"bandwidthResult": {"regex": SPEC_REGEX}}))
BUILTIN = compile_profile(next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth"))
"""Profiles: a reader is stateful (the table layout in force), so every read gets a new one."""

HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
"""The column header nccl-tests 2.13+ prints (awsbatch-p5-mpi-tagged.log L2, prefix dropped)."""


CASE_1 = [
    "2026-02-16T10:00:00.000000000Z nccl-node-0:1295:1295 [0] NCCL INFO Bootstrap: Using eth0",
    "2026-02-16T10:00:01.000000000Z #       size         count      type   redop    root     time   algbw   busbw  #wrong",
    "2026-02-16T10:00:01.000000000Z #        (B)    (elements)                               (us)  (GB/s)  (GB/s)",
    "2026-02-16T10:00:02.000000000Z            8             2     float     sum      -1    58.31    0.00    0.00       0    58.40    0.00    0.00       0",
    "2026-02-16T10:00:03.000000000Z        65536         16384     float     sum      -1    58.16    1.13    2.18       0    58.12    1.13    2.18       0",
    "2026-02-16T10:00:04.000000000Z   8589934592    2147483648     float     sum      -1  18551.0  463.04  897.15       0  18510.2  464.07  899.13       0",
    "  17179869184    4294967296     float     sum      -1  36065.1  476.36  922.94       0  36071.8  476.27  922.77       0",
]


def points(parser: Parser, lines: list[str]) -> list[tuple[int, float, float]]:
    found = [parser.parse_line(line) for line in lines]
    return [(p.size_bytes, p.alg_bw, p.bus_bw) for p in found if isinstance(p, Point)]


@pytest.mark.parametrize("profile", [SPEC, BUILTIN], ids=["spec-regex", "builtin"])
def test_case_1_mixed_lines_give_exactly_the_out_of_place_points(profile: CompiledProfile) -> None:
    assert points(Parser(profile), CASE_1) == [
        (8, 0.0, 0.0),
        (65536, 1.13, 2.18),
        (8589934592, 463.04, 897.15),
        (17179869184, 476.36, 922.94),
    ]  # never the in-place 464.07/899.13


@pytest.mark.parametrize("profile", [SPEC, BUILTIN], ids=["spec-regex", "builtin"])
def test_case_2_offset_zone_prefix_row_kept_with_zero_busbw(profile: CompiledProfile) -> None:
    line = (
        "2026-08-06T09:30:31.128034512-07:00   1073741824     268435456     float     sum      -1  "
        "1558.51  688.95    0.00       0     0.18   6e+06    0.00       0"
    )
    assert points(Parser(profile), [HEADER, line]) == [(1073741824, 688.95, 0.0)]


@pytest.mark.parametrize("profile", [SPEC, BUILTIN], ids=["spec-regex", "builtin"])
def test_case_3_non_data_lines_give_nothing(profile: CompiledProfile) -> None:
    lines = [
        "# Avg bus bandwidth    : 272.909",
        "# Out of bounds values : 0 OK",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong",
    ]
    assert points(Parser(profile), lines) == []


def test_case_3_a_profile_without_bandwidth_result_cannot_make_a_parser() -> None:
    profile = compile_profile(_profile({"applicationStart": {"regex": "start"}}))
    with pytest.raises(ProfileError, match=r"^spec\.patterns\.bandwidthResult: required"):
        Parser(profile)


def test_the_reader_is_chosen_by_the_profile() -> None:
    manifest = _profile({"applicationStart": {"regex": "start"}})
    manifest["spec"]["reader"] = "NcclTests"
    assert Parser(compile_profile(manifest)).table is not None  # no bandwidthResult needed
    manifest["spec"]["reader"] = "Tables"
    with pytest.raises(
        ProfileError, match=r"^spec\.reader: 'Tables' is not one of \['Patterns', 'NcclTests'\]"
    ):
        compile_profile(manifest)


@pytest.mark.parametrize("profile", [SPEC, BUILTIN], ids=["spec-regex", "builtin"])
def test_case_4_final_aggregation_averages_per_size_in_first_appearance_order(
    profile: CompiledProfile,
) -> None:
    row = "  17179869184    4294967296     float     sum      -1  36065.1  {}  {}       0  36071.8  476.27  922.77       0"
    lines = [
        HEADER,
        "           8             2     float     sum      -1    58.31    0.00    0.00       0    58.40    0.00    0.00       0",
        row.format("476.36", "922.94"),
        row.format("476.80", "923.80"),
    ]
    results = [r.to_status() for r in read(lines, Parser(profile)).results()]
    assert [{k: r[k] for k in ("sizeBytes", "algBW", "busBW", "samples")} for r in results] == [
        {"sizeBytes": 8, "algBW": "0.00", "busBW": "0.00", "samples": 1},
        {"sizeBytes": 17179869184, "algBW": "476.58", "busBW": "923.37", "samples": 2},
    ]
    if profile is BUILTIN:  # the in-place half, averaged the same way
        assert (results[1]["inPlaceAlgBW"], results[1]["inPlaceBusBW"], results[1]["wrong"]) == (
            "476.27",
            "922.77",
            0,
        )


def test_case_5_provisional_running_merge_from_the_stored_rounded_value() -> None:
    stored = [SizeResult(8589934592, "463.04", "897.15", 1)]
    new = Aggregate()
    new.add(Point(8589934592, 464.10, 899.15))
    assert merge_provisional(stored, new) == ([SizeResult(8589934592, "463.57", "898.15", 2)], 0)


def test_provisional_merge_keeps_old_sizes_and_appends_new_ones_in_order() -> None:
    stored = [SizeResult(8, "0.00", "0.00", 1)]
    new = Aggregate()
    for point in (Point(65536, 1.0, 2.0), Point(16, 0.5, 0.5), Point(65536, 2.0, 4.0)):
        new.add(point)
    assert merge_provisional(stored, new) == (
        [
            SizeResult(8, "0.00", "0.00", 1),
            SizeResult(65536, "1.50", "3.00", 2),
            SizeResult(16, "0.50", "0.50", 1),
        ],
        0,
    )


def test_provisional_merge_carries_the_in_place_half_wrong_and_error() -> None:
    stored = [SizeResult(8, "1.00", "2.00", 1, "3.00", "4.00", 1, "1e-07")]
    new = Aggregate()
    new.add(Point(8, 2.0, 4.0, 2, 5.0, 6.0, "5e-07"))
    assert merge_provisional(stored, new) == (
        [SizeResult(8, "1.50", "3.00", 2, "4.00", "5.00", 3, "5e-07")],
        0,
    )


def test_kubelet_prefix_rule() -> None:
    assert strip_kubelet_prefix("2026-02-16T10:00:02.000000000Z  8 2") == " 8 2"
    assert strip_kubelet_prefix("2026-08-06T09:30:29.569516911-07:00 x") == "x"
    assert strip_kubelet_prefix("         8             2     float") == "         8             2     float"
    assert strip_kubelet_prefix("2026-02-16T10") == "2026-02-16T10"  # not longer than 20


def test_wrong_values_total_both_columns_and_na_counts_zero() -> None:
    lines = [
        HEADER,
        "     1048576        262144     float     sum      -1    95.40   10.99   20.61      3    95.12   11.02   20.67      4",
        "   134217728      33554432     float     sum      -1   1211.2  110.81  110.81      2   1211.8  110.76  110.76    N/A",
        "     1048576         16384     float    none      -1    996.7    1.05    0.99    N/A   1007.1    1.04    0.98    N/A",
    ]
    assert read(lines, Parser(BUILTIN)).wrong_values == 3 + 4 + 2


def test_transport_is_the_sorted_union_of_using_network_names() -> None:
    lines = [
        "2026-03-10T14:05:12.481920331Z nccl-ar-node-0-0:41:41 [0] NCCL INFO Using network AWS Libfabric",
        "host:1:1 [0] NCCL INFO Using network Socket   ",
        "host:2:2 [0] NCCL INFO Using network AWS Libfabric",
    ]
    assert read(lines, Parser(BUILTIN)).transport == ["AWS Libfabric", "Socket"]


def test_spec_sample_final_status_and_threshold_inputs() -> None:
    """Spec 2.3: 8 sizes, the last 17179869184 at 260.11/487.70; peaks 487.70 and 260.11."""
    rows = [
        ("1048576", "262144", "10.99", "20.61"),
        ("4194304", "1048576", "29.92", "56.09"),
        ("16777216", "4194304", "58.74", "110.14"),
        ("67108864", "16777216", "122.26", "229.24"),
        ("268435456", "67108864", "183.01", "343.14"),
        ("1073741824", "268435456", "243.45", "456.47"),
        ("4294967296", "1073741824", "255.46", "479.00"),
        ("17179869184", "4294967296", "260.11", "487.70"),
    ]
    lines = [HEADER] + [
        f"2026-03-10T14:05:12.481920331Z {size:>12} {count:>13}     float     sum      -1  1.0  {alg}  {bus}      0  1.0  1.0  1.0      0"
        for size, count, alg, bus in rows
    ]
    results = read(lines, Parser(BUILTIN)).results()
    assert len(results) == 8 and all(r.samples == 1 for r in results)
    assert results[-1].to_status() == status_row(17179869184, "260.11", "487.70", "1.00", "1.00")
    assert peak(results) == (487.70, 260.11)


def test_builtin_profiles_compile_and_loopback_reads_the_node_pod() -> None:
    manifests = {p["metadata"]["name"]: p for p in builtin_profiles()}
    bandwidth, loopback = manifests["nccl-bandwidth"], manifests["nccl-loopback"]
    for manifest in (bandwidth, loopback):
        assert manifest["kind"] == "LogProfile" and "namespace" not in manifest["metadata"]
        assert "networkTransport" in manifest["spec"]["patterns"]
        compile_profile(manifest)  # every example matches its regex
    assert compile_profile(bandwidth).worker_strategy.replicated_job_name == "launcher"
    assert compile_profile(loopback).worker_strategy.replicated_job_name == "node"
    assert loopback["spec"]["patterns"] == bandwidth["spec"]["patterns"]  # one row format


def test_the_deployable_manifests_are_up_to_date() -> None:
    """``config/logprofiles`` is what ``kubectl apply -f`` installs; regenerate with
    ``python -m nvcre.measure.builtin``."""
    config = Path(__file__).resolve().parents[2] / "config" / "logprofiles"
    assert main(["--check", str(config)]) == 0


def _simulated(*faults: str) -> list[str]:
    from nvcre.sandbox import Member, node_model, parse_faults, simulate

    members = [
        Member(f"gpu-node-{i:03d}", node_model(f"gpu-node-{i:03d}", "NVIDIA-H100-80GB-HBM3", "aws"))
        for i in range(2)
    ]
    command = [
        *("/opt/amazon/openmpi/bin/mpirun", "-N", "8", "-x", "NCCL_DEBUG=INFO"),
        *("/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2"),
    ]
    return [line.text for line in simulate(command, members, parse_faults(faults), seed=7).lines]


def test_the_sandbox_s_simulated_log_is_read_whole() -> None:
    aggregate = read(_simulated(), Parser(BUILTIN))
    summary = aggregate.summary()
    assert (aggregate.rows, aggregate.transport, aggregate.results()[-1].size_bytes) == (
        32,
        ["AWS Libfabric"],
        17179869184,
    )
    assert all(r.in_alg_bw is not None and r.wrong == 0 for r in aggregate.results())
    assert {k: summary[k] for k in ("test", "ranks", "hosts", "complete")} == {
        "test": "all_reduce_perf",
        "ranks": 16,
        "hosts": ["gpu-node-000", "gpu-node-001"],
        "complete": True,
    }
    assert (
        summary["outOfBounds"] == {"count": 0, "status": "OK"} and float(summary["avgBusBandwidthGBps"]) > 0
    )


def test_the_sandbox_s_nccl_error_is_an_incomplete_table_with_failure_lines() -> None:
    summary = read(_simulated("gpu-node-001=nccl-error"), Parser(BUILTIN)).summary()
    assert summary["complete"] is False
    assert summary["failureLines"]["count"] >= 2
    assert any("Test NCCL failure" in text for text in summary["failureLines"]["lines"])
