"""The built-in ``nccl-bandwidth`` profile over every nccl-tests log of the shared corpus.

Each figure was checked by hand against the log text; the comment names the row (line number
in the file) it comes from. Files are read where they are (``../shared/corpus/nccl``), never
copied. ``peak`` is (busBandwidthGBps, algBandwidthGBps), the maximum over sizes.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.nccl import Parser, peak, read
from nvcre.measure.profile import compile_profile

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nccl"
(_MANIFEST,) = [p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth"]
PARSER = Parser(compile_profile(_MANIFEST))

Row = tuple[int, str, str, int]  # sizeBytes, algBW, busBW, samples


class Case(NamedTuple):
    rows: int
    sizes: int
    first: Row
    last: Row
    peak: tuple[float, float]
    transport: tuple[str, ...] = ()


CASES: dict[str, Case] = {
    # L4 `[1,0]<stdout>:  8 ... 0.00 0.00`; L35 17179869184 out-of-place 276.03 483.05 (the peak)
    "awsbatch-p5-mpi-tagged.log": Case(
        32, 32, (8, "0.00", "0.00", 1), (17179869184, "276.03", "483.05", 1), (483.05, 276.03)
    ),
    # L4 indented tagged 0-byte row; `...` elision; L11 2147483648 233.49 437.79
    "awsome-eks-p5-2node-indented-elided.log": Case(
        7, 7, (0, "0.00", "0.00", 1), (2147483648, "233.49", "437.79", 1), (437.79, 233.49)
    ),
    # L3 8 B; L6 17179869184 186.39 369.86
    "awsome-p5en-topology-aware-elided.log": Case(
        3, 3, (8, "0.00", "0.00", 1), (17179869184, "186.39", "369.86", 1), (369.86, 186.39)
    ),
    # `0: ` srun labels; L3 8 B; L31 2147483648 41.78 78.33
    "awsome-slurm-p4de-2node-srun-label.log": Case(
        29, 29, (8, "0.00", "0.00", 1), (2147483648, "41.78", "78.33", 1), (78.33, 41.78)
    ),
    # L3 8 B; L34 `0:  17179869184 ... 259.78 487.09`
    "awsome-slurm-p5-2node-srun-label.log": Case(
        32, 32, (8, "0.00", "0.00", 1), (17179869184, "259.78", "487.09", 1), (487.09, 259.78)
    ),
    # L5 536870912 75.53 150.95; L10 17179869184 203.01 405.74
    "coreweave-gb200-20racks.log": Case(
        6, 6, (536870912, "75.53", "150.95", 1), (17179869184, "203.01", "405.74", 1), (405.74, 203.01)
    ),
    # L6 536870912 248.92 493.94; L11 17179869184 408.40 810.41
    "coreweave-gb200-2racks.log": Case(
        6, 6, (536870912, "248.92", "493.94", 1), (17179869184, "408.40", "810.41", 1), (810.41, 408.40)
    ),
    # L6 536870912 297.16 586.06; L10 8589934592 423.16 834.57; peak L9 4294967296 425.49 839.16
    "coreweave-gb200-nvl72-1rack.log": Case(
        5, 5, (536870912, "297.16", "586.06", 1), (8589934592, "423.16", "834.57", 1), (839.16, 425.49)
    ),
    # L7 536870912 179.88 356.01; L11 8589934592 195.31 386.56
    "coreweave-h100-64gpu-kubectl-sharp.log": Case(
        5, 5, (536870912, "179.88", "356.01", 1), (8589934592, "195.31", "386.56", 1), (386.56, 195.31)
    ),
    # L4 `Z`-prefixed 8 B; L7 the raw unprefixed 17179869184 row 476.36 922.94 (acceptance case 1)
    "cre-fixture-mixed-k8s-timestamps-and-raw-lines.log": Case(
        4, 4, (8, "0.00", "0.00", 1), (17179869184, "476.36", "922.94", 1), (922.94, 476.36)
    ),
    # -07:00 prefixes, INFO lines between header and rows; L108 8 B; L131 67108864 0.03 0.03; `Using network Socket`
    "cre-real-a100-allreduce-2node-pdt-timestamps.log": Case(
        24, 24, (8, "0.00", "0.00", 1), (67108864, "0.03", "0.03", 1), (0.03, 0.03), ("Socket",)
    ),
    # two passes under one header: L114 and its repeat 8 B twice; 1073741824 = mean of L141 688.75 and L169 688.95
    "cre-real-a100-loopback-1gpu-pdt-two-passes.log": Case(
        56, 28, (8, "0.00", "0.00", 2), (1073741824, "688.85", "0.00", 2), (0.0, 688.85), ("Socket",)
    ),
    # interrupted: L10 8388608 0.11 0.05; L11 16777216 0.06 0.03
    "eunomia-rtx5090-allgather-LL-aborted.log": Case(
        2, 2, (8388608, "0.11", "0.05", 1), (16777216, "0.06", "0.03", 1), (0.05, 0.11)
    ),
    # L10 1048576 0.48 0.24; L17 134217728 4.94 2.47; peak L16 67108864 5.00 2.50
    "eunomia-rtx5090-allgather-condensed-gbps-suffix.log": Case(
        8, 8, (1048576, "0.48", "0.24", 1), (134217728, "4.94", "2.47", 1), (2.50, 5.00)
    ),
    # L20 tagged 1048576 0.48 0.24; L27 134217728 4.60 2.30
    "eunomia-rtx5090-allgather-mpi-tagged.log": Case(
        8, 8, (1048576, "0.48", "0.24", 1), (134217728, "4.60", "2.30", 1), (2.30, 4.60)
    ),
    # stderr noise; L20 1048576 0.24 0.24; L27 134217728 2.30 2.30
    "eunomia-rtx5090-allreduce-mpi-tagged-stderr-noise.log": Case(
        8, 8, (1048576, "0.24", "0.24", 1), (134217728, "2.30", "2.30", 1), (2.30, 2.30)
    ),
    # L7 8 B; L31 134217728 2.59 2.59; peak L30 67108864 2.67 2.67
    "eunomia-rtx5090-allreduce-noheader-units.log": Case(
        25, 25, (8, "0.00", "0.00", 1), (134217728, "2.59", "2.59", 1), (2.67, 2.67)
    ),
    # L10 1048576 0.39 0.20; L17 134217728 5.46 2.73
    "eunomia-rtx5090-reducescatter-condensed.log": Case(
        8, 8, (1048576, "0.39", "0.20", 1), (134217728, "5.46", "2.73", 1), (2.73, 5.46)
    ),
    # L17 33554432 97.32 170.31; L22 1073741824 132.41 231.72
    "gcm-a100-1node-8gpu-nccl-version-line.log": Case(
        6, 6, (33554432, "97.32", "170.31", 1), (1073741824, "132.41", "231.72", 1), (231.72, 132.41)
    ),
    # L25 33554432 51.61 96.76; L30 1073741824 97.50 182.80
    "gcm-a100-2node-16gpu-pairwise.log": Case(
        6, 6, (33554432, "51.61", "96.76", 1), (1073741824, "97.50", "182.80", 1), (182.80, 97.50)
    ),
    # L24 8 B (after header lines that lost their `#`); L54 8589934592 180.71 338.82
    "gcp-a3mega-2node-h100-hash-stripped.log": Case(
        31, 31, (8, "0.00", "0.00", 1), (8589934592, "180.71", "338.82", 1), (338.82, 180.71)
    ),
    # every #wrong N/A; L6 1048576 1.05 0.99; L15 536870912 75.63 70.90
    "gke-a3high-2node-allgather-tcpx-NA.log": Case(
        10, 10, (1048576, "1.05", "0.99", 1), (536870912, "75.63", "70.90", 1), (70.90, 75.63)
    ),
    # L4-L8 five 0-byte rows (one size, 5 samples); L34 misaligned 8589934592 201.32 188.73
    "gke-a3mega-2node-allgather-indented.log": Case(
        31, 27, (0, "0.00", "0.00", 5), (8589934592, "201.32", "188.73", 1), (188.73, 201.32)
    ),
    # L3 1024 0.02 0.02; L26 8589934592 350.77 328.85
    "gke-dws-flexstart-2node-allgather-kubectl.log": Case(
        24, 24, (1024, "0.02", "0.02", 1), (8589934592, "350.77", "328.85", 1), (328.85, 350.77)
    ),
    # L4 536870912 53.41 93.46; L8 8589934592 54.34 95.10; peak L7 4294967296 55.64 97.37
    "issue252-2node-ring-author-trimmed.log": Case(
        5, 5, (536870912, "53.41", "93.46", 1), (8589934592, "54.34", "95.10", 1), (97.37, 55.64)
    ),
    # L11 the single row 33554432 1715.44 0.00 (in-place 43046.10 never read)
    "issue287-rtx5090-1gpu-alltoall-NA.log": Case(
        1, 1, (33554432, "1715.44", "0.00", 1), (33554432, "1715.44", "0.00", 1), (0.0, 1715.44)
    ),
    # L10 8 B; L34 134217728 764.34 0.00; peak algbw L31 16777216 863.04
    "issue287-rtx5090-1gpu-avg0-inplace-anomaly.log": Case(
        25, 25, (8, "0.00", "0.00", 1), (134217728, "764.34", "0.00", 1), (0.0, 863.04)
    ),
    # L13 8 B; L37 134217728 18.18 27.26
    "issue287-rtx5090-4gpu-nccl2262-ok.log": Case(
        25, 25, (8, "0.00", "0.00", 1), (134217728, "18.18", "27.26", 1), (27.26, 18.18)
    ),
    # L111 1073741824 55.48 110.84; L115 17179869184 183.83 367.29, then failures
    "issue322-h100-1024rank-fail-after-16G.log": Case(
        5, 5, (1073741824, "55.48", "110.84", 1), (17179869184, "183.83", "367.29", 1), (367.29, 183.83)
    ),
    # L6 134217728 110.81 110.81 (in-place #wrong N/A); L9 1073741824 195.10 195.10
    "li-plus-a100-sendrecv-NA-inplace.log": Case(
        4, 4, (134217728, "110.81", "110.81", 1), (1073741824, "195.10", "195.10", 1), (195.10, 195.10)
    ),
}

NO_ROWS: dict[str, tuple[str, ...]] = {
    "gcm-mpirun-not-enough-slots-failure.log": (),  # mpirun failed before nccl-tests started
    "issue287-rtx5090-2gpu-debug-info-warn-fail.log": (
        "Socket",
    ),  # fails after the header; L16 `Using network Socket`
    "issue287-rtx5090-2gpu-fail-after-header.log": (),
    "issue37-v100-allgather-old-error-column-FAILED.log": (),  # no redop/root columns: L5 is not read as a row
    "issue5-p100-nccl1-old-header-fail.log": (),  # NCCL 1.x layout
}


def test_every_corpus_file_is_a_case() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.log")) == sorted([*CASES, *NO_ROWS])


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_log(name: str) -> None:
    case = CASES[name]
    with open(CORPUS / name, errors="replace") as log:
        aggregate = read(log, PARSER)
    results = aggregate.results()
    assert (aggregate.rows, len(results)) == (case.rows, case.sizes)
    first, last = results[0], results[-1]
    assert (first.size_bytes, first.alg_bw, first.bus_bw, first.samples) == case.first
    assert (last.size_bytes, last.alg_bw, last.bus_bw, last.samples) == case.last
    assert peak(results) == case.peak
    assert aggregate.transport == list(case.transport)
    assert aggregate.wrong_values == 0  # no corpus run reported a wrong value (N/A counts 0)


@pytest.mark.parametrize("name", sorted(NO_ROWS))
def test_corpus_log_without_bandwidth_rows(name: str) -> None:
    with open(CORPUS / name, errors="replace") as log:
        aggregate = read(log, PARSER)
    assert (aggregate.rows, aggregate.results()) == (0, [])
    assert aggregate.transport == list(NO_ROWS[name])
