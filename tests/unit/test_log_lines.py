"""Log bytes into lines, each cut at MAX_LINE_BYTES: the one rule of the pod-log reader and of
``nvcrectl analyze``."""

from __future__ import annotations

import io
from pathlib import Path

from nvcre.cli.analyze.common import log_lines
from nvcre.measure.lines import MAX_LINE_BYTES, LineSplitter, Tail, read_lines, split_lines


def test_line_splitter_across_chunks_and_cuts_long_lines() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"ab") == []
    assert splitter.feed(b"c\r\nd\n\ne") == ["abc", "d", ""]
    long = b"x" * (MAX_LINE_BYTES * 3)
    assert splitter.feed(long[:10]) == []
    assert splitter.feed(long + b"\nnext\n") == ["e" + "x" * (MAX_LINE_BYTES - 1), "next"]
    assert splitter.feed("caf\u00e9 tail".encode()) == []
    assert splitter.close() == ["caf\u00e9 tail"]
    assert splitter.close() == []


def test_a_line_of_many_megabytes_is_cut_and_still_counts_as_one() -> None:
    """A progress bar that never prints a newline: 16 MiB in 64 KiB chunks, then two lines. What
    is held of it is the cap (the line's first bytes), the rest is dropped, the lines after it are
    whole."""
    chunk = b"\xe2\x96\x88" * (64 * 1024 // 3)  # a full block character, never split on a chunk edge
    chunks = [b"Epoch 0: |", *([chunk] * 256), b"| 10/10\nstep 1\r\nstep 2"]
    splitter = LineSplitter()
    lines = [line for piece in chunks for line in splitter.feed(piece)] + splitter.close()
    assert len(lines) == 3
    assert lines[1:] == ["step 1", "step 2"]
    assert len(lines[0].encode()) <= MAX_LINE_BYTES
    assert lines[0].startswith("Epoch 0: |\u2588")
    assert len(lines[0].encode()) > MAX_LINE_BYTES - 4, "cut at the cap, a split character replaced"


def test_one_chunk_holding_a_long_line_and_the_next_lines() -> None:
    data = b"a" * (3 * MAX_LINE_BYTES) + b"\n" + b"b\n" + b"c" * MAX_LINE_BYTES + b"d\nlast"
    assert list(split_lines([data])) == ["a" * MAX_LINE_BYTES, "b", "c" * MAX_LINE_BYTES, "last"]


def test_invalid_utf8_is_replaced_never_raised() -> None:
    assert list(read_lines(io.BytesIO(b"ok \xff\xfe\nnext\n"))) == ["ok \ufffd\ufffd", "next"]


def test_analyze_reads_files_with_the_same_cut(tmp_path: Path) -> None:
    """``nvcrectl analyze`` reads a file as the controller reads a pod's log (fails on main:
    a 5 MB line was read whole, and a lone \\r split a line the kubelet keeps whole)."""
    log = tmp_path / "launcher.log"
    log.write_bytes(
        b"x" * (5 * 1024 * 1024) + b"\n" + b"progress 1\rprogress 2\r\n#  Avg bus bandwidth : 1.0\n"
    )
    lines = list(log_lines([str(log)]))
    assert [len(line) for line in lines] == [MAX_LINE_BYTES, 21, 26]
    assert lines[1:] == ["progress 1\rprogress 2", "#  Avg bus bandwidth : 1.0"]


def test_a_tail_keeps_the_last_bytes_and_little_more() -> None:
    tail = Tail(10)
    for index in range(10_000):
        tail.add(f"line {index}")
        assert sum(len(line) for line in tail._lines) < 10 + len(f"line {index}\n")
    assert tail.text() == "line 9999\n"
    assert Tail(0).text() == ""


def test_a_tail_of_huge_lines_holds_the_cap_of_the_last_one() -> None:
    tail = Tail(32 * 1024)
    for line in split_lines([b"y" * (8 * 1024 * 1024) + b"\n" + b"z" * (8 * 1024 * 1024) + b"\nend\n"]):
        tail.add(line)
    assert tail.text() == "z" * (32 * 1024 - 4 - 1) + "\nend\n"
