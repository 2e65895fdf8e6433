"""nvcre's nccl-tests table reader, layout by layout and prefix by prefix.

Lines are real ones, quoted from the shared corpus (``../shared/corpus/nccl``) or the project's
own collected logs (tests/data/nccl) with the file and line they come from. Where no published
log shows a layout (nccl-tests' per-iteration, ``-S`` timestamp and ``-C`` columns, rccl-tests'
in-place-only table, NCCL 1.x rows), the line is built with the very ``printf`` format of
NVIDIA/nccl-tests' (or ROCm/rccl-tests') source, named next to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nvcre.measure.nccl import Aggregate, Parser, Point, SizeResult, merge_provisional, read
from nvcre.measure.nccl.context import Sweep, is_failure
from nvcre.measure.nccl.layout import header
from nvcre.measure.profile import CompiledProfile
from nvcre.testing.nccl_cases import PROFILE, parse

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nccl"
DATA = Path(__file__).resolve().parents[1] / "data" / "nccl"


def printf(form: str, *args: object) -> str:
    """C's ``printf`` formatting, to build a line with the very format nccl-tests prints it with."""
    return form % args


def line(path: Path, number: int) -> str:
    """Line ``number`` (1-based) of a log, without its line end."""
    with open(path, newline="", errors="replace") as log:
        return log.read().splitlines()[number - 1]


def points(lines: list[str], profile: CompiledProfile = PROFILE) -> list[Point]:
    parser = Parser(profile)
    return [item for item in map(parser.parse_line, lines) if isinstance(item, Point)]


# -- headers: every layout names its columns ------------------------------------------------------

MODERN = line(CORPUS / "awsbatch-p5-mpi-tagged.log", 2)
ERROR_COLUMN = line(DATA / "deepops-slurm-4node-error-column.log", 3)
NCCL1 = line(CORPUS / "issue5-p100-nccl1-old-header-fail.log", 15)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (MODERN, "size count type redop root time algbw busbw #wrong time algbw busbw #wrong"),
        (ERROR_COLUMN, "size count type redop time algbw busbw error time algbw busbw error"),
        (
            line(CORPUS / "issue37-v100-allgather-old-error-column-FAILED.log", 3),
            "size count type time algbw busbw error time algbw busbw error",
        ),
        (NCCL1, "bytes N type op time algbw busbw res time algbw busbw res"),
        (
            line(CORPUS / "cre-fixture-mixed-k8s-timestamps-and-raw-lines.log", 2).split(" ", 1)[1],
            "size count type redop root time algbw busbw #wrong",
        ),
    ],
    ids=["nccl-tests-2.13+", "error-column-redop", "error-column-no-redop", "nccl-1.x", "author-cut"],
)
def test_a_header_line_names_the_columns(text: str, names: str) -> None:
    layout = header(text.split())
    assert layout is not None and layout.names == names


def test_lines_that_only_mention_the_words_are_no_header() -> None:
    assert header(["#", "Avg", "bus", "bandwidth", ":", "272.909"]) is None
    assert header(["size", "count", "algbw"]) is None  # no busbw
    assert (
        header(["#", "size", "count", "type", "algbw", "busbw", "algbw", "busbw", "algbw", "busbw"]) is None
    )  # three halves


def test_the_title_line_names_the_halves_and_a_cut_title_is_not_used() -> None:
    # rccl-tests without out-of-place runs (src/common.cu: "# %10s  %12s  %8s  %6s  %6s           in-place")
    title = printf("# %10s  %12s  %8s  %6s  %6s           in-place          ", "", "", "", "", "")
    names = printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s",
        *("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"),
    )
    row = printf("%12li  %12li  %8s  %6s  %6s", 1048576, 262144, "float", "sum", "-1") + printf(
        "  %7s  %6.2f  %6.2f  %5g", "12.5", 83.89, 146.81, 0
    )  # src/common.cu BenchTime: rccl-tests prints bandwidths with %6.2f
    (point,) = points([title, names, row])
    assert (point.alg_bw, point.bus_bw, point.in_alg_bw, point.in_bus_bw) == (83.89, 146.81, 83.89, 146.81)
    # issue252 L1 is a cut title: `     in-place` above a two-half header still reads out-of-place first
    log = CORPUS / "issue252-2node-ring-author-trimmed.log"
    first = points([line(log, n) for n in (1, 2, 3, 4)])[0]
    assert (first.alg_bw, first.bus_bw, first.in_alg_bw, first.in_bus_bw) == (
        53.41,
        93.46,
        55.48,
        97.09,
    )  # L4


def test_newer_columns_per_iteration_timestamp_and_cputime() -> None:
    """src/util.cu writeResultHeader/writeBenchmarkLineBody/writePerIterReport/writeTimestamp."""
    per_iter = printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s %*s",
        *("size", "count", "type", "redop", "root", "cputime", "algbw", "busbw", "#wrong"),
        *("i_min", "i_max", "i_p99", "i_cv%", "cputime", "algbw", "busbw", "#wrong"),
        *("i_min", "i_max", "i_p99", "i_cv%", 19, "timestamp"),
    )
    half = "  %7s  %6s  %6s  %6g" + "  %7s  %7s  %7s  %7s"
    row = (
        printf("%12li  %12li  %8s  %6s  %6s", 8589934592, 2147483648, "float", "sum", "-1")
        + printf(half, "45004", "190.87", "381.48", 0, "44000", "46000", "45900", "1.20")
        + printf(half, "44930", "191.19", "382.11", 1048576.0, "44100", "45800", "45700", "0.90")
        + printf("%21s", "2026-07-09 12:00:01")
    )
    (point,) = points([per_iter, row])
    assert (point.size_bytes, point.alg_bw, point.bus_bw, point.in_alg_bw, point.in_bus_bw) == (
        8589934592, 190.87, 381.48, 191.19, 382.11,
    )  # fmt: skip
    assert point.wrong == 1048580  # `%6g` of 1048576 prints 1.04858e+06: the log says 1048580


def test_a_reduction_op_printed_empty_leaves_its_cell_out() -> None:
    """A collective without a reduction passes ``""`` to ``%6s`` under the ``redop`` header
    (src/alltoall.cu and friends before nccl-tests 2.13.x's "none", src/hypercube.cu to this day):
    the row lacks that one cell and is read all the same, the other cells checked as ever."""
    alltoall = DATA / "superbench-a100-alltoall-blank-redop.log"
    got = points([line(alltoall, 14), line(alltoall, 16), line(alltoall, 48)])  # L16: 0 B; L48: 4 GiB
    assert [(p.size_bytes, p.alg_bw, p.bus_bw, p.in_alg_bw, p.in_bus_bw) for p in got] == [
        (0, 0.0, 0.0, 0.0, 0.0),
        (4294967296, 254.74, 222.90, 257.53, 225.34),
    ]
    modern = printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s",
        *("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"),
        *("time", "algbw", "busbw", "#wrong", 0, ""),
    )
    half = "  %7s  %6s  %6s  %6g"
    hypercube = printf("%12li  %12li  %8s  %6s  %6s", 1048576, 262144, "float", "", "-1") + printf(
        half + half, "25.10", "41.78", "31.33", 0, "25.20", "41.61", "31.21", 0
    )
    (point,) = points([modern, hypercube])
    assert (point.size_bytes, point.bus_bw, point.in_bus_bw, point.wrong) == (1048576, 31.33, 31.21, 0)
    no_type = hypercube.replace("float", "     ")  # any other missing cell is no row
    no_root = hypercube.replace("    -1", "      ")
    assert points([modern, no_type, no_root]) == []


# -- rows: whatever precedes them ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "header_line", "row_line", "expected"),
    [
        (
            CORPUS / "cre-fixture-mixed-k8s-timestamps-and-raw-lines.log",
            2,
            4,
            (8, 0.0, 0.0),
        ),  # `Z` kubelet time
        (
            CORPUS / "cre-real-a100-allreduce-2node-pdt-timestamps.log",
            94,
            131,
            (67108864, 0.03, 0.03),
        ),  # -07:00
        (CORPUS / "awsbatch-p5-mpi-tagged.log", 2, 35, (17179869184, 276.03, 483.05)),  # [1,0]<stdout>:
        (
            CORPUS / "awsome-eks-p5-2node-indented-elided.log",
            2,
            11,
            (2147483648, 233.49, 437.79),
        ),  # indent + tag
        (CORPUS / "awsome-slurm-p5-2node-srun-label.log", 1, 34, (17179869184, 259.78, 487.09)),  # `0: `
        (
            CORPUS / "gke-a3mega-2node-allgather-indented.log",
            2,
            34,
            (8589934592, 201.32, 188.73),
        ),  # misaligned
        # collected beside the corpus:
        (
            DATA / "skypilot-gke-h200-sky-head-mpi-tagged.log",
            26,
            51,
            (8589934592, 347.44, 325.72),
        ),  # SkyPilot + tag
        (DATA / "issue290-h100-2node-srun-label-wrong-NA.log", 22, 34, (8589934592, 82.97, 155.57)),  # ` 0: `
        (
            DATA / "deepops-dgxa100-2node-k8s-error-column-crlf.log",
            3,
            34,
            (4294967296, 100.55, 188.53),
        ),  # CRLF
    ],
    ids=lambda value: value.name if isinstance(value, Path) else None,
)
def test_a_row_is_read_whatever_prefix_precedes_it(
    path: Path, header_line: int, row_line: int, expected: tuple[int, float, float]
) -> None:
    (point,) = points([line(path, header_line), line(path, row_line)])
    assert (point.size_bytes, point.alg_bw, point.bus_bw) == expected


def test_prefixes_no_collected_log_shows() -> None:
    """pdsh (``host: ``), srun label around mpirun's tag, a CRI line, and a 12-digit size that
    ``%12li`` glues to the tag; the row is awsbatch-p5-mpi-tagged.log L35 (tag dropped)."""
    row = line(CORPUS / "awsbatch-p5-mpi-tagged.log", 35).removeprefix("[1,0]<stdout>:")
    big = printf("%12li  %12li  %8s  %6s  %6s", 137438953472, 34359738368, "float", "sum", "-1") + row[52:]
    lines = [
        MODERN,
        f"gpu-node-007: {row}",
        f"3: [1,24]<stdout>:{row}",
        f"2026-03-10T14:05:12.481920331Z stdout F {row}",
        f"[1,0]<stdout>:{big}",
    ]
    assert [(p.size_bytes, p.bus_bw) for p in points(lines)] == [(17179869184, 483.05)] * 3 + [
        (137438953472, 483.05)
    ]


def test_numbers_in_every_printf_form() -> None:
    log = CORPUS / "cre-real-a100-loopback-1gpu-pdt-two-passes.log"
    (point,) = points([line(log, 112), line(log, 169)])  # L169: in-place algbw `6e+06`
    assert (point.alg_bw, point.in_alg_bw) == (688.95, 6e06)


def test_na_and_error_cells() -> None:
    na = DATA / "issue290-h100-2node-srun-label-wrong-NA.log"
    (point,) = points([line(na, 22), line(na, 24)])  # every #wrong N/A: nothing was checked
    assert point.wrong is None
    sendrecv = CORPUS / "li-plus-a100-sendrecv-NA-inplace.log"
    (point,) = points([line(sendrecv, 4), line(sendrecv, 6)])  # in-place N/A, out-of-place 0
    assert point.wrong == 0
    error = DATA / "deepops-slurm-4node-error-column.log"
    (point,) = points([line(error, 3), line(error, 16)])  # L16: 1e-06 / 1e-06, no #wrong column
    assert (point.wrong, point.max_error) == (None, "1e-06")


def test_a_row_cut_short_or_a_template_is_never_read() -> None:
    failed = DATA / "issue355-h800-alltoall-cuda-failure-mid-row.log"
    assert points([line(failed, n) for n in range(1, 28)]) == []  # L27: `-1 node0: Test CUDA failure`
    template = DATA / "cluster-toolkit-placeholder-XXXXX.log"
    assert points([line(template, n) for n in range(1, 14)]) == []  # `XXXXX  XXX.XX  XXX.XX`


def test_rows_without_a_header_are_counted_never_read() -> None:
    aggregate = parse(DATA / "oci-oke-gb200-kubectl-tail-no-header.log")
    assert (aggregate.rows, aggregate.headerless) == (0, 33)
    assert aggregate.summary()["incompleteReason"] == (
        "33 rows were seen without a table header (nothing names their columns, so none was read)"
    )


# -- around the table ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("eunomia-rtx5090-allgather-LL-aborted.log", "the table stopped at 16777216 B before the footer; the sweep was to reach 134217728 B"),
        ("issue322-h100-1024rank-fail-after-16G.log", "no footer (# Out of bounds / # Avg bus bandwidth) after the table"),
        ("issue287-rtx5090-2gpu-fail-after-header.log", "the table header was printed but no row followed"),
        ("gcm-mpirun-not-enough-slots-failure.log", "no nccl-tests table header in the log"),
    ],
)  # fmt: skip
def test_why_a_log_is_incomplete(path: str, reason: str) -> None:
    summary = parse(CORPUS / path).summary()
    assert (summary["complete"], summary["incompleteReason"]) == (False, reason)


def test_the_sweep_s_last_size() -> None:
    # issue322: `minBytes 1073741824 maxBytes 34359738368 step: 2(factor)`, reduced to 27951912277
    sweep = Sweep(1073741824, 34359738368, 2, True, 1, 1).reduced(27951912277)
    assert sweep.last_sizes() == (17179869184, 8589934592)
    # oci-oke-a100-step-bytes-10g.log L3: step: 9663676416(bytes)
    assert Sweep(1073741824, 10737418240, 9663676416, False, 1, 1).last_sizes() == (10737418240, 1073741824)
    assert Sweep(2097152, 2097152, 0, False, 1, 1).last_sizes() == (2097152, None)  # issue355: step: 0(bytes)
    assert Sweep(0, 1024, 2, True, 1, 1).last_sizes() is None  # a factor from 0 never grows


def test_failure_lines_and_benign_warnings() -> None:
    warn = CORPUS / "issue287-rtx5090-2gpu-debug-info-warn-fail.log"
    assert not is_failure(line(warn, 27))  # NCCL WARN Could not find a path for pattern 4, falling back
    assert is_failure(line(warn, 67))  # NCCL WARN Cuda failure 1 'invalid argument'
    banner = CORPUS / "issue322-h100-1024rank-fail-after-16G.log"
    assert is_failure(
        line(banner, 194)
    )  # mpirun detected that one or more processes exited with non-zero status
    summary = parse(banner).summary()
    assert summary["failureLines"]["count"] == 78  # 39 Test NCCL failure + 38 traces + the mpirun banner
    assert summary["failureLines"]["lines"][0] == (
        "HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '"
    )


def test_an_average_nccl_tests_marked_failed_is_a_failure() -> None:
    """With ``NCCL_TESTS_MIN_BW`` set, src/util.cu writeResultFooter prints ``# %-20s : %g %s`` with
    ``OK`` or ``FAILED`` (below 90% of it; the binary then exits with an error)."""
    log = DATA / "spectrumx-ocp-h200-2node-datatype-all.log"
    table = [line(log, n) for n in range(9, 72)]  # L9 the sweep .. L71 Out of bounds: all but the average
    for verdict, failures in (("OK", 0), ("FAILED", 1)):
        footer = printf("# %-20s : %g %s", "Avg bus bandwidth", 433.477, verdict)
        summary = read([*table, footer], Parser(PROFILE)).summary()
        assert (summary["avgBusBandwidthGBps"], summary["complete"]) == ("433.477", True)
        assert summary["failureLines"] == {"count": failures, "lines": [footer] * failures}


def test_the_launcher_s_own_failures() -> None:
    lost = DATA / "issue299-prterun-lost-daemon-command-wrapped-in-binary-name.log"
    assert not is_failure(line(lost, 3))  # ssh: connect to host ...: a wrapper may try again
    assert is_failure(line(lost, 5))  # PRTE has lost communication with a remote daemon.
    assert not is_failure(line(lost, 13))  # therefore will terminate the job.
    assert not is_failure("ssh: connected; the daemon lost no time")


def test_a_command_line_cut_inside_the_binary_s_name() -> None:
    """issue 299 L1-L2: ``... -np 16 -N 8 -H hostfile ./build/all_`` then ``reduce_perf -b 8 ...``:
    the test is all_reduce_perf, not reduce_perf, and the launcher's ``-np`` is the cut line's."""
    lost = DATA / "issue299-prterun-lost-daemon-command-wrapped-in-binary-name.log"
    summary = parse(lost).summary()
    assert (summary["test"], summary["failureLines"]["count"]) == ("all_reduce_perf", 1)
    started = [line(lost, 1), line(lost, 2), line(CORPUS / "issue322-h100-1024rank-fail-after-16G.log", 1)]
    assert read(started, Parser(PROFILE)).summary()["ranks"] == 16
    for before in ("mpirun -np 16 ./build/", "mpirun -np 16 ./build/all", "mpirun -np 16 -x NCCL_"):
        # no cut word: the line's own binary, and one process
        assert read([before, "reduce_perf -b 8"], Parser(PROFILE)).summary()["test"] == "reduce_perf"


def test_ranks_from_a_launcher_command_when_no_device_list_is_shown() -> None:
    # nccl-tests issue 264, AddyLaddy 2024-11-14: the command; then a run's nThread line
    lines = [
        "/usr/lib64/openmpi/bin/mpirun -x NCCL_DEBUG=INFO --bind-to numa -np 16 -H jm01gp1jiobrain02:8,jm01gp1jiobrain03:8 \\",
        " --mca btl tcp,self --mca btl_tcp_if_include bond0.1239 ./build/all_reduce_perf -b8 -e16G -f2",
        line(CORPUS / "issue322-h100-1024rank-fail-after-16G.log", 1),
    ]
    summary = read(lines, Parser(PROFILE)).summary()
    assert (summary["test"], "ranks" in summary) == ("all_reduce_perf", False)  # -np is on another line
    lines = [lines[0].removesuffix(" \\") + lines[1], lines[2]]
    assert read(lines, Parser(PROFILE)).summary()["ranks"] == 16


def test_nccl_1_rank_lines_name_a_rank_and_no_host() -> None:
    """NCCL 1.x's own tests list ``#   Rank %2d uses device %2d [0x%02x] %s`` (NVIDIA/nccl
    test/single/all_reduce_test.cu, 1.0 to 1.3.x): a rank, and no host to count."""
    windows = DATA / "nccl134-windows-rtx5060ti-reduce-test-all-types-ops-roots.log"  # `#` taken out
    built = printf("#   Rank %2d uses device %2d [0x%02x] %s", 3, 3, 5, "GeForce GTX TITAN X")
    summary = read([line(windows, 3), line(windows, 4), built], Parser(PROFILE)).summary()
    assert (summary["ranks"], summary["hosts"]) == (4, [])
    assert "ranks" not in read(["#   Rank  0 uses device x"], Parser(PROFILE)).summary()


# -- provisional samples and the size cap ---------------------------------------------------------


def test_a_later_sample_reads_rows_with_the_layout_an_earlier_one_found() -> None:
    lines = (CORPUS / "cre-real-a100-allreduce-2node-pdt-timestamps.log").read_text().splitlines()
    cut = 120  # after the header (L92-L95) and the first rows
    first = Parser(PROFILE)
    early = read(lines[:cut], first)
    state = first.state()
    assert state == {
        "columns": "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
        "halves": "out-of-place in-place",
    }
    late = read(lines[cut:], Parser(PROFILE, resume=state))
    merged, dropped = merge_provisional(early.results(), late)
    whole = read(lines, Parser(PROFILE)).results()
    assert (merged, dropped) == (whole, 0)
    assert read(lines[cut:], Parser(PROFILE)).rows == 0  # without the layout: nothing is guessed


def test_sizes_beyond_the_cap_are_counted_not_kept() -> None:
    row = line(CORPUS / "awsbatch-p5-mpi-tagged.log", 35).removeprefix("[1,0]<stdout>:")
    rows = [f"{size:12d}{row[12:]}" for size in range(1, 5001)]
    aggregate = read([MODERN, *rows, *rows[:10]], Parser(PROFILE))
    assert (len(aggregate.results()), aggregate.dropped, aggregate.rows) == (4096, 904, 5010)
    assert aggregate.summary()["sizesDropped"] == 904
    stored = [SizeResult(size, "1.00", "1.00", 1) for size in range(100000, 104000)]
    merged, dropped = merge_provisional(stored, read([MODERN, *rows[:200]], Parser(PROFILE)))
    assert (len(merged), dropped) == (4096, 104)


def test_a_profile_s_own_patterns_say_nothing_of_tables() -> None:
    aggregate = Aggregate()
    aggregate.add(Point(8, 1.0, 1.0))
    assert aggregate.summary() == {"sizesDropped": 0}
