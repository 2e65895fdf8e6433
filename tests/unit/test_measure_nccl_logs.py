"""nvcre's nccl-tests table reader over the real logs this project collected (tests/data/nccl;
tests/data/nccl/README.md gives each file's source and traits): every figure the log states.

Each figure was checked by hand against the log text; see test_measure_nccl_corpus.py for the
shape of a case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nvcre.testing.nccl_cases import Case, check

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl"

CASES: dict[str, Case] = {
    "awsome-scatter-root0-srun-label-elided.log": Case(
        rows=4,
        sizes=4,
        first=(0, "0.00", "0.00", "0.00", "0.00", 1),
        last=(2147483648, "84.48", "79.20", "84.94", "79.63", 1),
        peak=(79.2, 84.48),
        avg=None,
        oob=None,
        complete=False,
    ),
    "azure-skill-gb200-no-units-elided.log": Case(
        rows=3,
        sizes=3,
        first=(0, "0.00", "0.00", "0.00", "0.00", 1),
        last=(17179869184, "939.58", "936.93", "939.19", "936.54", 1),
        peak=(936.93, 939.58),
        avg="487.265",
        oob=(0, "OK"),
        complete=True,
    ),
    "cluster-toolkit-placeholder-XXXXX.log": Case(rows=0, sizes=0, avg=None, oob=(0, "OK"), complete=False),
    "deepops-dgxa100-2node-k8s-error-column-crlf.log": Case(
        rows=30,
        sizes=30,
        first=(8, "0.00", "0.00", "0.00", "0.00", 1),
        last=(4294967296, "100.55", "188.53", "100.64", "188.70", 1),
        peak=(188.53, 100.55),
        avg="53.7098",
        oob=(0, "OK"),
        complete=True,
    ),
    "deepops-roce-k8s-error-column-narrow-type.log": Case(
        rows=29,
        sizes=29,
        first=(8, "0.00", "0.00", "0.00", "0.00", 1),
        last=(2147483648, "12.22", "22.92", "12.19", "22.85", 1),
        peak=(22.92, 12.22),
        avg="7.76739",
        oob=(0, "OK"),
        complete=True,
    ),
    "deepops-slurm-2019-error-column-title-first.log": Case(
        rows=10,
        sizes=10,
        first=(1048576, "5.45", "10.22", "5.42", "10.16", 1),
        last=(536870912, "28.83", "54.06", "28.66", "53.74", 1),
        peak=(54.06, 28.83),
        avg="35.3542",
        oob=(0, "OK"),
        complete=True,
    ),
    "deepops-slurm-4node-error-column.log": Case(
        rows=13,
        sizes=13,
        first=(1048576, "7.75", "15.02", "7.90", "15.31", 1),
        last=(4294967296, "98.61", "191.05", "98.87", "191.56", 1),
        peak=(191.05, 98.61),
        avg="113.289",
        oob=(0, "OK"),
        complete=True,
    ),
    "hyperpod-results-no-footer-misaligned.log": Case(
        rows=2,
        sizes=2,
        first=(1048576, "233.04", "436.95", "235.18", "440.96", 1),
        last=(2147483648, "233.49", "437.79", "233.54", "437.89", 1),
        peak=(437.79, 233.49),
        avg=None,
        oob=None,
        complete=False,
    ),
    "inc-rtx3090-2node-wrong-exponent-oob-failed.log": Case(
        rows=27,
        sizes=27,
        first=(8, "0.00", "0.00", "0.00", "0.00", 1),
        last=(536870912, "7.41", "7.41", "7.35", "7.35", 1),
        peak=(7.5, 7.5),
        avg="3.02663",
        oob=(108, "FAILED"),
        complete=True,
        ranks=2,
        hosts=2,
        wrong=1073741424,  # 4 + 8 + ... + 524288, then 1.04858e+06 ... 2.68435e+08, both halves
    ),
    "issue264-h100-cuda-not-initialized-before-table.log": Case(
        rows=0, sizes=0, avg=None, oob=None, complete=False, failures=2, test="all_reduce_perf", ranks=8
    ),
    "issue290-h100-2node-srun-label-wrong-NA.log": Case(
        rows=11,
        sizes=11,
        first=(8388608, "38.96", "73.04", "46.60", "87.38", 1),
        last=(8589934592, "82.97", "155.57", "82.96", "155.56", 1),
        peak=(166.22, 88.65),
        avg="142.735",
        oob=(0, "OK"),
        complete=True,
        ranks=16,
        hosts=2,
    ),
    "issue355-h800-alltoall-cuda-failure-mid-row.log": Case(
        rows=0,
        sizes=0,
        avg=None,
        oob=None,
        complete=False,
        failures=7,
        test="alltoall_perf",
        ranks=16,
        hosts=2,
    ),
    "oci-kueue-a100-known-hosts-warnings.log": Case(
        rows=3,
        sizes=3,
        first=(1073741824, "99.64", "186.83", "99.60", "186.75", 1),
        last=(4294967296, "101.34", "190.02", "101.38", "190.09", 1),
        peak=(190.02, 101.34),
        avg="188.648",
        oob=(0, "OK"),
        complete=True,
        ranks=16,
        hosts=2,
    ),
    "oci-oke-a100-mpijob-defaulted-container.log": Case(
        rows=31,
        sizes=31,
        first=(8, "0.00", "0.00", "0.00", "0.00", 1),
        last=(8589934592, "126.90", "237.94", "126.68", "237.52", 1),
        peak=(237.94, 126.9),
        avg="66.4834",
        oob=(0, "OK"),
        complete=True,
        ranks=16,
        hosts=2,
    ),
    "oci-oke-a100-step-bytes-10g.log": Case(
        rows=2,
        sizes=2,
        first=(1073741824, "91.20", "170.99", "91.19", "170.99", 1),
        last=(10737418240, "96.03", "180.06", "96.04", "180.08", 1),
        peak=(180.06, 96.03),
        avg="175.531",
        oob=(0, "OK"),
        complete=True,
        ranks=16,
        hosts=2,
    ),
    "oci-oke-gb200-128rank-rank-tail.log": Case(
        rows=33,
        sizes=33,
        first=(8, "0.00", "0.00", "0.00", "0.00", 1),
        last=(34359738368, "344.48", "683.57", "344.44", "683.49", 1),
        peak=(683.57, 344.48),
        avg="152.682",
        oob=(0, "OK"),
        complete=True,
        test="all_reduce_perf",
        ranks=128,
        hosts=1,
    ),
    "oci-oke-gb200-kubectl-tail-no-header.log": Case(
        rows=0, sizes=0, avg="260.778", oob=(0, "OK"), complete=False, ranks=8, headerless=33
    ),
    "oci-slinky-a100-sparse-ranks-no-title.log": Case(
        rows=2,
        sizes=2,
        first=(1073741824, "99.56", "186.67", "99.69", "186.92", 1),
        last=(10737418240, "101.98", "191.22", "101.98", "191.22", 1),
        peak=(191.22, 101.98),
        avg="189.005",
        oob=(0, "OK"),
        complete=True,
        test="all_reduce_perf",
        ranks=16,
        hosts=2,
    ),
    "oci-slinky-rccl-no-device-names.log": Case(
        rows=5,
        sizes=5,
        first=(1073741824, "186.64", "349.95", "186.59", "349.86", 1),
        last=(17179869184, "191.13", "358.37", "191.06", "358.24", 1),
        peak=(358.37, 191.13),
        avg="354.659",
        oob=(0, "OK"),
        complete=True,
        test="all_reduce_perf",
        ranks=16,
        hosts=2,
    ),
    "rccl-issue1562-mi300x-vf-old-rank-lines.log": Case(
        rows=25,
        sizes=25,
        first=(8, "0.00", "0.00", "0.00", "0.00", 1),
        last=(134217728, "167.47", "293.07", "165.48", "289.60", 1),
        peak=(293.07, 167.47),
        avg="54.8575",
        oob=(0, "OK"),
        complete=True,
        ranks=8,
        hosts=1,
    ),
    "skypilot-gke-h200-kubectl-exec-nccl-version.log": Case(
        rows=24,
        sizes=24,
        first=(1024, "0.04", "0.03", "0.04", "0.03", 1),
        last=(8589934592, "347.22", "325.52", "354.31", "332.16", 1),
        peak=(325.52, 347.22),
        avg="121.902",
        oob=(0, "OK"),
        complete=True,
        ranks=16,
        hosts=2,
    ),
    "skypilot-gke-h200-sky-head-mpi-tagged.log": Case(
        rows=24,
        sizes=24,
        first=(1024, "0.04", "0.03", "0.04", "0.03", 1),
        last=(8589934592, "347.44", "325.72", "354.75", "332.58", 1),
        peak=(325.72, 347.44),
        avg="122.073",
        oob=(0, "OK"),
        complete=True,
        ranks=16,
        hosts=2,
    ),
}


def test_every_collected_log_is_a_case() -> None:
    assert sorted(p.name for p in DATA.glob("*.log")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_collected_log(name: str) -> None:
    check(DATA / name, CASES[name])
