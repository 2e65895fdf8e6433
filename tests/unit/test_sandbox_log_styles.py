"""The simulated launcher's log styles and nccl-tests layouts, checked against real logs' lines
(the corpus in ../shared/corpus/nccl) and nccl-tests' own format strings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvcre.sandbox import Member, node_model, parse_faults, simulate
from nvcre.sandbox.nccl_args import parse_command
from nvcre.sandbox.nccl_log import LAYOUTS, RowCells
from nvcre.sandbox.styles import LogStyle, LogStyleError, parse_log_style

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "nccl"
needs_corpus = pytest.mark.skipif(not CORPUS.exists(), reason="the log corpus (../shared/corpus) is not here")
GROUP = [
    Member(f"gpu-node-00{i}", node_model(f"gpu-node-00{i}", "NVIDIA-H100-80GB-HBM3", "aws")) for i in range(2)
]
MPIRUN = ["/opt/amazon/openmpi/bin/mpirun", "-N", "2", "-x", "NCCL_DEBUG=INFO"]
SWEEP = ["-b", "8", "-e", "1M", "-f", "8", "-n", "20"]


def log(style: str, *faults: str, command: list[str] | None = None) -> list[tuple[str, str]]:
    cmd = command or [*MPIRUN, "/opt/nccl-tests/build/all_reduce_perf", *SWEEP]
    sim = simulate(cmd, GROUP, parse_faults(faults), seed=3, style=parse_log_style(style))
    return [(line.stream, line.text) for line in sim.lines]


def real(name: str) -> list[str]:
    return (CORPUS / name).read_text().splitlines()


def test_log_styles_parse_and_refuse_what_they_do_not_know() -> None:
    assert parse_log_style("") == parse_log_style("plain") == LogStyle()
    assert parse_log_style("timestamps, srun ,nccl-2.4") == LogStyle("srun", True, "nccl-2.4")
    assert str(parse_log_style("nccl-2.4,timestamps,mpi")) == "timestamps,mpi,nccl-2.4"
    with pytest.raises(LogStyleError, match="'mpi' and 'pdsh' are both launcher prefixes"):
        parse_log_style("mpi,pdsh")
    with pytest.raises(LogStyleError, match="unknown part 'slurm'; known: mpi, skypilot, pdsh, srun"):
        parse_log_style("slurm")


@needs_corpus
def test_open_mpi_tags_each_line_with_the_process_that_printed_it() -> None:
    """As awsbatch-p5-mpi-tagged.log and eunomia's stderr noise: ``[1,R]<stdout>:``/``<stderr>:``;
    mpirun's own banner is untagged."""
    tagged = re.compile(r"^\[1,(\d+)\]<(stdout|stderr)>:")
    assert all(tagged.match(line) for line in real("awsbatch-p5-mpi-tagged.log") if line)
    table = [text for _, text in log("mpi") if re.search(r"^\S+\s+\d+\s+\d+\s+float", text)]
    assert table and all(text.startswith("[1,0]<stdout>:") for text in table)
    lines = log("mpi", "gpu-node-001=nccl-error@1s")
    failure = next(text for _, text in lines if "Test NCCL failure" in text)
    assert failure.startswith("[1,2]<stdout>:gpu-node-001: Test NCCL failure")  # node 1's first process
    info = {tagged.match(text).group(1) for _, text in lines if "NCCL INFO Bootstrap" in text}  # type: ignore[union-attr]
    assert info == {"0", "1", "2", "3"}
    banner = [text for stream, text in lines if stream == "stderr"]
    assert banner and not any(tagged.match(text) for text in banner)


def test_skypilot_prefixes_every_line_of_the_head_then_open_mpi_tags() -> None:
    """The issue's SkyPilot run: ``(head, rank=0, pid=3808) `` before Open MPI's ``[1,0]<stdout>:``."""
    lines = log("skypilot")
    shape = re.compile(r"^\(head, rank=0, pid=\d+\) \[1,\d+\]<stdout>:")
    assert all(shape.match(text) for stream, text in lines if stream == "stdout")
    ssh = [text for stream, text in lines if stream == "stderr"]  # ssh's, as mpirun reaches a host
    assert ssh and all(re.match(r"^\(head, rank=0, pid=\d+\) Warning: Permanently added", t) for t in ssh)
    assert any(re.match(r"^\(head, rank=0, pid=\d+\) \[1,0\]<stdout>:\s+8\s+2\s+float", t) for _, t in lines)


@needs_corpus
def test_srun_labels_each_line_with_its_task_right_aligned() -> None:
    """As awsome-slurm-*-srun-label.log: ``0: `` before rank 0's lines."""
    assert all(line.startswith("0: ") for line in real("awsome-slurm-p5-2node-srun-label.log") if line)
    lines = log("srun")
    assert all(re.match(r"^[0-3]: ", text) for stream, text in lines if stream == "stdout")
    sixteen = simulate(
        ["/usr/local/mpi/bin/mpirun", "-N", "8", "/usr/local/bin/all_reduce_perf_mpi", *SWEEP],
        GROUP,
        style=parse_log_style("srun"),
    )
    assert all(line.text.startswith(" 0: ") for line in sixteen.lines if line.origin == 0)  # 16 tasks


@needs_corpus
def test_timestamps_are_kubectls_rfc3339_nanoseconds() -> None:
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ")
    assert stamp.match(real("cre-fixture-mixed-k8s-timestamps-and-raw-lines.log")[0])
    lines = log("timestamps,mpi")
    assert all(re.match(stamp.pattern + r"\[1,\d+\]<std(out|err)>:|" + stamp.pattern, t) for _, t in lines)
    assert all(stamp.match(text) for _, text in log("timestamps"))


def test_pdsh_names_the_head_host_on_every_line() -> None:
    assert all(text.startswith("gpu-node-000: ") for _, text in log("pdsh"))


@needs_corpus
def test_the_nccl_2_4_layout_is_issue_37s_table() -> None:
    """nccl-tests 2.4 all_gather: no redop/root column, ``%5.0le`` error, fixed-decimal times; the
    corpus copy lost its leading ``#`` and trailing blanks."""
    corpus = real("issue37-v100-allgather-old-error-column-FAILED.log")
    test = parse_command(["all_gather_perf", "-g", "8", "-b", "4294967296", "-e", "4294967296", "-n", "100"])
    assert test is not None
    layout = LAYOUTS["nccl-2.4"]
    header = [line.removeprefix("#").rstrip() for line in layout.table_header(test)[1:]]
    assert header == corpus[1:4]
    cells = RowCells(4294967296, 134217728, (29122.0, 29169.0), (129.05, 128.84), (129.05, 128.84), (1, 1))
    assert layout.row(test, cells) == corpus[4]
    assert [line.removeprefix("#").rstrip() for line in layout.footer(test, 2, 128.942)[:2]] == corpus[5:7]


@needs_corpus
def test_the_current_layout_is_nccl_tests_2_17_8s_table() -> None:
    """The CRE pod log of nccl-tests 2.17.8: header lines and a row, byte for byte."""
    corpus = [line.split(" ", 1)[1] for line in real("cre-real-a100-allreduce-2node-pdt-timestamps.log")[1:]]
    test = parse_command(["all_reduce_perf_mpi", "-b", "8", "-e", "64M", "-f", "2", "-n", "5"])
    assert test is not None
    layout = LAYOUTS["current"]
    assert all(line in corpus for line in layout.table_header(test))
    row = RowCells(8, 2, (387.62, 382.48), (0.0, 0.0), (0.0, 0.0), (0, 0))
    assert layout.row(test, row) in corpus
    assert layout.preamble(test)[2].replace("maxBytes 67108864", "") in [
        c.replace("maxBytes 67108864", "") for c in corpus
    ]


def test_wrong_counts_print_as_percent_g_like_nccl_tests() -> None:
    """``#wrong`` is ``%6g``: a million wrong elements read ``1.04858e+06``."""
    test = parse_command(["all_reduce_perf", "-b", "8", "-e", "8"])
    assert test is not None
    row = LAYOUTS["current"].row(test, RowCells(8, 2, (10.0, 10.0), (0.0, 0.0), (0.0, 0.0), (1048576, 3)))
    assert row.split()[8:] == ["1.04858e+06", "10.00", "0.00", "0.00", "3"]
