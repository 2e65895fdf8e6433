"""The simulated nccl-tests log against the real ones in the corpus, and its bandwidth model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from nvcre.sandbox import Member, node_model, parse_faults, simulate
from nvcre.sandbox.nccl import group_bandwidth
from nvcre.sandbox.nccl_args import CommandError, parse_command
from nvcre.sandbox.runner import node_member
from nvcre.sandbox.script import resolve
from nvcre.testing.nodes import platform_nodes

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "nccl"
#: The newest nccl-tests layout in the corpus (2.17.8, a real pod log with k8s timestamps).
REFERENCE = CORPUS / "cre-real-a100-allreduce-2node-pdt-timestamps.log"
SIZE_16G = 17179869184

#: One regex per line kind, applied to the corpus and to the simulation alike.
HEADER = re.compile(
    r"^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\) "
    r"warmup iters: (\d+) iters: (\d+) agg iters: (\d+) validation: (\d+) graph: (\d+)$"
)
RANK = re.compile(r"^#  Rank +(\d+) Group +(\d+) Pid +(\d+) on +(\S+) device +(\d+) \[([0-9a-fx:]+)\] (.+)$")
ROW = re.compile(
    r"^ *(\d+) +(\d+) +(\w+) +(\w+) +(-?\d+)"
    r" +([\d.e+]+) +([\d.e+]+) +([\d.e+]+) +(\d+|N/A) +([\d.e+]+) +([\d.e+]+) +([\d.e+]+) +(\d+|N/A)$"
)
FOOTER = re.compile(r"^# (Out of bounds values : \d+ OK|Avg bus bandwidth    : [\d.e+-]+ ?)$")
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d) ")

MPIRUN = ["timeout", "1800", "/opt/amazon/openmpi/bin/mpirun", "-N", "8", "--allow-run-as-root"]
ALL_REDUCE = [*MPIRUN, "-x", "NCCL_DEBUG=INFO", "/opt/nccl-tests/build/all_reduce_perf"]
SWEEP = ["-b", "8", "-e", "16G", "-f", "2", "-n", "20", "-N", "1"]


def h100_group(n: int = 2, platform: str = "aws") -> list[Member]:
    return [
        Member(f"gpu-node-{i:03d}", node_model(f"gpu-node-{i:03d}", "NVIDIA-H100-80GB-HBM3", platform))
        for i in range(n)
    ]


def texts(command: list[str], members: list[Member], *faults: str, seed: int = 7) -> list[str]:
    return [line.text for line in simulate(command, members, parse_faults(faults), seed=seed).lines]


def busbw_at(lines: list[str], size: int) -> tuple[float, float]:
    (row,) = [m for m in map(ROW.match, lines) if m and int(m.group(1)) == size]
    return float(row.group(8)), float(row.group(12))


def corpus_lines(path: Path) -> list[str]:
    return [TIMESTAMP.sub("", line) for line in path.read_text().splitlines()]


needs_corpus = pytest.mark.skipif(
    not REFERENCE.exists(), reason="the log corpus (../shared/corpus) is not here"
)


@needs_corpus
def test_header_columns_and_footer_lines_are_the_real_ones() -> None:
    real = corpus_lines(REFERENCE)
    sim = texts(ALL_REDUCE + SWEEP, h100_group())
    real_table = [line for line in real if (line.startswith("#  ") and "size" in line) or "(B)" in line]
    sim_table = [line for line in sim if (line.startswith("#  ") and "size" in line) or "(B)" in line]
    assert sim_table == real_table  # column header and units line, character for character
    title = next(line for line in real if "out-of-place" in line)
    assert title in sim
    for fixed in ("# Using devices", "# Out of bounds values : 0 OK", "#"):
        assert fixed in real and fixed in sim
    assert (
        next(line for line in sim if line.startswith("# nccl-tests version")).split()[:4]
        == next(line for line in real if line.startswith("# nccl-tests version")).split()[:4]
    )
    assert "# Collective test concluded: all_reduce_perf" in sim


@needs_corpus
@pytest.mark.parametrize(
    "path", sorted(CORPUS.glob("*.log")) if CORPUS.exists() else [], ids=lambda p: p.name
)
def test_the_same_regexes_read_the_corpus_and_the_simulation(path: Path) -> None:
    """Every corpus line of a kind the simulator writes parses with the regex the sim passes."""
    real = [re.sub(r"^(?:\s*\[1,0\]<stdout>:|\d+: )", "", line) for line in corpus_lines(path)]
    for line in real:
        if line.startswith("# nThread") and "agg iters" in line and "graph" in line:
            assert HEADER.match(line.rstrip()), line
    sim = texts(ALL_REDUCE + SWEEP, h100_group())
    assert sum(bool(HEADER.match(line)) for line in sim) == 1
    assert sum(bool(RANK.match(line)) for line in sim) == 16
    assert sum(bool(ROW.match(line)) for line in sim) == 32
    assert sum(bool(FOOTER.match(line)) for line in sim) == 2


@needs_corpus
def test_rows_have_the_real_column_widths() -> None:
    """Field ends fall in the same columns as nccl-tests 2.17 prints them."""
    real_row = next(line for line in corpus_lines(REFERENCE) if ROW.match(line))
    sim_row = next(line for line in texts(ALL_REDUCE + SWEEP, h100_group()) if ROW.match(line))

    def ends(line: str) -> list[int]:
        return [m.end() for m in re.finditer(r"\S+", line)]

    assert ends(sim_row) == ends(real_row)


def test_healthy_two_node_h100_busbw_at_16gib_is_in_the_published_range() -> None:
    for platform in ("aws", "azure", "oci"):
        out_of_place, in_place = busbw_at(texts(ALL_REDUCE + SWEEP, h100_group(2, platform)), SIZE_16G)
        assert 350.0 <= out_of_place <= 505.0 and 350.0 <= in_place <= 505.0, platform


def test_slow_nic_on_one_member_halves_the_group_busbw() -> None:
    healthy = busbw_at(texts(ALL_REDUCE + SWEEP, h100_group()), SIZE_16G)
    slow = busbw_at(texts(ALL_REDUCE + SWEEP, h100_group(), "gpu-node-001=slow-nic:0.5"), SIZE_16G)
    for h, s in zip(healthy, slow, strict=True):
        assert 0.45 <= s / h <= 0.55


def test_slow_nvlink_limits_a_single_node_run_and_not_the_network() -> None:
    one = h100_group(1)
    loopback = ["/usr/local/bin/all_reduce_perf_mpi", "-b", "8", "-e", "16G", "-f", "2", "-g", "8"]
    healthy = busbw_at(texts(loopback, one), SIZE_16G)[0]
    slow = busbw_at(texts(loopback, one, "gpu-node-000=slow-nvlink:0.25"), SIZE_16G)[0]
    assert 430.0 <= healthy <= 490.0
    assert 0.2 <= slow / healthy <= 0.3


def test_a_bad_link_slows_only_groups_that_span_it() -> None:
    four = h100_group(4)
    fault = "link:gpu-node-000,gpu-node-001:0.5"
    spanning = busbw_at(texts(ALL_REDUCE + SWEEP, four[:2], fault), SIZE_16G)[0]
    other = busbw_at(texts(ALL_REDUCE + SWEEP, four[2:], fault), SIZE_16G)[0]
    healthy = busbw_at(texts(ALL_REDUCE + SWEEP, four[2:]), SIZE_16G)[0]
    assert spanning < 0.6 * healthy
    assert abs(other - healthy) / healthy < 0.07


def test_same_seed_same_log_other_seed_other_numbers() -> None:
    assert texts(ALL_REDUCE + SWEEP, h100_group(), seed=3) == texts(ALL_REDUCE + SWEEP, h100_group(), seed=3)
    assert texts(ALL_REDUCE + SWEEP, h100_group(), seed=3) != texts(ALL_REDUCE + SWEEP, h100_group(), seed=4)


def test_cycles_repeat_the_rows_under_one_header() -> None:
    lines = texts([*ALL_REDUCE, "-b", "1M", "-e", "4M", "-f", "2", "-N", "3"], h100_group())
    sizes = [int(m.group(1)) for m in map(ROW.match, lines) if m]
    assert sizes == [1 << 20, 2 << 20, 4 << 20] * 3
    assert sum(line.startswith("# Collective test starting") for line in lines) == 1


def test_rank_lines_name_every_host_and_gpu() -> None:
    lines = texts(ALL_REDUCE + SWEEP, h100_group())
    ranks = [RANK.match(line) for line in lines if RANK.match(line)]
    assert [(int(m.group(1)), m.group(4), int(m.group(5))) for m in ranks if m] == [
        (r, f"gpu-node-{r // 8:03d}", r % 8) for r in range(16)
    ]
    assert all(m.group(7) == "NVIDIA H100 80GB HBM3" for m in ranks if m)


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        ("aws", ["NET/OFI Selected Provider is efa", "Using network AWS Libfabric"]),
        ("azure", ["NET/IB : Using [0]mlx5_0:1/IB", "Using network IB"]),
    ],
)
def test_nccl_info_lines_name_the_network_transport(platform: str, expected: list[str]) -> None:
    lines = texts(ALL_REDUCE + SWEEP, h100_group(2, platform))
    for text in expected:
        assert any(text in line and "NCCL INFO" in line for line in lines), text
    quiet = texts([*MPIRUN, "/opt/nccl-tests/build/all_reduce_perf", *SWEEP], h100_group(2, platform))
    assert not any("NCCL INFO" in line for line in quiet)


def test_per_collective_counts_redops_roots_and_in_place_columns() -> None:
    def first_row(binary: str, *extra: str) -> re.Match[str]:
        lines = texts([*MPIRUN, binary, "-b", "1M", "-e", "1M", *extra], h100_group())
        row = next(m for m in map(ROW.match, lines) if m)
        return row

    gather = first_row("all_gather_perf")
    assert (int(gather.group(2)), gather.group(4), gather.group(13)) == ((1 << 20) // 4 // 16, "none", "0")
    alltoall = first_row("alltoall_perf", "-d", "uint8")
    assert (alltoall.group(3), alltoall.group(4), alltoall.group(13)) == ("uint8", "none", "N/A")
    bcast = first_row("broadcast_perf")
    assert (bcast.group(5), float(bcast.group(8)) == float(bcast.group(7))) == ("0", True)
    unchecked = first_row("all_reduce_perf", "-c", "0")
    assert (unchecked.group(9), unchecked.group(13)) == ("N/A", "N/A")


def test_avg_bus_bandwidth_is_the_mean_of_both_columns() -> None:
    lines = texts(ALL_REDUCE + SWEEP, h100_group())
    rows = [m for m in map(ROW.match, lines) if m]
    mean = sum(float(m.group(8)) + float(m.group(12)) for m in rows) / (2 * len(rows))
    (avg,) = [float(line.split(":")[1]) for line in lines if line.startswith("# Avg bus bandwidth")]
    assert abs(avg - mean) < 0.01 * mean


def test_the_render_command_of_the_catalog_parses() -> None:
    """The argv shape nvcre's nccl-mpi body renders: launcher flags, binary, sweep, mpirun -N."""
    test = parse_command(
        [
            "timeout", "1800", "/usr/local/mpi/bin/mpirun", "-N", "8", "--allow-run-as-root", "--mca",
            "plm_rsh_args", "-o StrictHostKeyChecking=no", "-x", "NCCL_DEBUG=INFO",
            "/usr/local/bin/alltoall_perf_mpi", "-d", "uint8", "-b", "8", "-e", "16G", "-f", "2",
            "-n", "20", "-N", "2",
        ]
    )  # fmt: skip
    assert test is not None
    assert (test.binary, test.collective.name, test.datatype, test.max_bytes, test.cycles) == (
        "alltoall_perf_mpi", "alltoall", "uint8", SIZE_16G, 2,
    )  # fmt: skip
    assert (test.procs_per_host, test.debug) == (8, "INFO")
    (removal, program) = resolve(
        ["sh", "-c", "rm -rf /opt/amazon; /usr/local/bin/all_reduce_perf_mpi -b 8 -e 1G -g 4"]
    ).invocations
    shell = parse_command(program.argv)
    assert parse_command(removal.argv) is None
    assert shell is not None and (shell.max_bytes, shell.ngpus) == (1 << 30, 4)
    assert parse_command(["sleep", "60"]) is None


def test_bad_nccl_tests_arguments_fail_like_the_binary() -> None:
    with pytest.raises(CommandError, match="invalid option -- 'q'"):
        parse_command(["all_reduce_perf", "-q", "1"])
    with pytest.raises(CommandError, match="invalid size '12X'"):
        parse_command(["all_reduce_perf", "-e", "12X"])
    sim = simulate(["all_reduce_perf", "-d", "complex"], h100_group(1))
    assert sim.exit_code == 1 and "invalid type" in sim.lines[0].text


def test_sizes_above_gpu_memory_are_reduced_as_the_real_tool_does() -> None:
    lines = texts([*ALL_REDUCE, "-b", "16G", "-e", "32G", "-f", "2"], h100_group())
    assert any(line.startswith("# Reducing maxBytes to ") for line in lines)
    assert [int(m.group(1)) for m in map(ROW.match, lines) if m] == [SIZE_16G]


@pytest.mark.parametrize(
    "sweep",
    [
        ["-b", "0", "-e", "8", "-f", "2"],
        ["-b", "8", "-e", "8", "-i", "0"],
        ["-b", "64", "-e", "8", "-N", "0"],
    ],
)
def test_degenerate_sweeps_end(sweep: list[str]) -> None:
    sim = simulate([*ALL_REDUCE, *sweep], h100_group(), horizon_s=60.0)
    assert len([line for line in sim.lines if ROW.match(line.text)]) <= 1


def _members_of(nodes: list[Any]) -> list[Member]:
    return [node_member(str(n.metadata.name), n.to_dict()) for n in nodes]


def test_a_network_block_is_not_an_nvlink_domain_so_a_slow_nic_slows_its_group() -> None:
    # Four aws H100 nodes in one network block (the sandbox's default domain): their GPUs still
    # talk over EFA, so slow-nic:0.5 on one halves the group's ceiling.
    members = _members_of(platform_nodes(4, "aws", "NVIDIA-H100-80GB-HBM3", domain_size=8))
    assert {m.node.domain for m in members} != {None}, "the nodes carry the platform's network block"
    healthy, _ = group_bandwidth(members, [], 0.0)
    slow, _ = group_bandwidth(members, parse_faults(["gpu-node-001=slow-nic:0.5"]), 0.0)
    assert slow == pytest.approx(healthy / 2)
    assert " MNNVL 0" in "\n".join(texts(ALL_REDUCE + SWEEP, members))


def test_a_gb200_clique_talks_over_nvlink_whatever_its_nics() -> None:
    members = _members_of(platform_nodes(2, "aws", "NVIDIA-GB200", domain_size=2))
    assert {m.node.nvlink_domain for m in members} != {None}
    healthy, _ = group_bandwidth(members, [], 0.0)
    assert group_bandwidth(members, parse_faults(["gpu-node-001=slow-nic:0.5"]), 0.0)[0] == healthy
    four_per_node = [
        ("4" if a == "8" and b == "-N" else a) for b, a in zip(["", *ALL_REDUCE], ALL_REDUCE, strict=False)
    ]
    assert " MNNVL 1" in "\n".join(texts(four_per_node + SWEEP, members))
