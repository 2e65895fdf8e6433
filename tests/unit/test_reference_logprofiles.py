"""The reference chart's LogProfiles (nccl-all-reduce, nemo4) over the logs of the shared corpus.

Each figure was read by hand from the log text; files are read where they are (``../shared/corpus``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.goodput import GoodputParser, Window
from nvcre.measure.nccl import Aggregate, Parser, read
from nvcre.measure.profile import CompiledProfile, compile_profile

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="the log corpus (../shared/corpus) is not here")


def profile(name: str) -> CompiledProfile:
    return next(compile_profile(p) for p in builtin_profiles() if p["metadata"]["name"] == name)


def training(path: str) -> Window:
    return GoodputParser(profile("nemo4")).feed_all((CORPUS / path).read_text().splitlines())


def bandwidth(path: str) -> Aggregate:
    with open(CORPUS / path, errors="replace") as log:
        return read(log, Parser(profile("nccl-all-reduce")))


def test_nccl_all_reduce_reads_the_reference_real_log_out_of_place() -> None:
    found = bandwidth("nccl/cre-real-a100-allreduce-2node-pdt-timestamps.log")
    results = found.results()
    # "-07:00" kubelet prefixes; rows "8 2 float sum -1 387.62 0.00 0.00 ..." to
    # "67108864 16777216 float sum -1 2649049 0.03 0.03 ...": 24 sizes, once each.
    assert (found.rows, len(results)) == (24, 24)
    assert [(r.size_bytes, r.alg_bw, r.bus_bw, r.samples) for r in (results[0], results[-1])] == [
        (8, "0.00", "0.00", 1),
        (67108864, "0.03", "0.03", 1),
    ]
    assert results[0].in_alg_bw is None  # the in-place half is not the reference pattern's
    # "... [0] NCCL INFO Using network Socket"
    assert found.transport == ["Socket"]


def test_nccl_all_reduce_reads_a_clean_run() -> None:
    results = bandwidth("nccl/issue287-rtx5090-4gpu-nccl2262-ok.log").results()
    # last row "134217728 33554432 float sum -1 7382.7 18.18 27.26 0 ..."
    assert len(results) == 25
    assert (results[-1].size_bytes, results[-1].alg_bw, results[-1].bus_bw) == (134217728, "18.18", "27.26")


def test_nccl_all_reduce_takes_no_prefixed_row() -> None:
    # "0:           8             2     float     sum      -1 ...": an srun label is not a row to the
    # reference pattern (nccl-bandwidth's reader reads it).
    assert bandwidth("nccl/awsome-slurm-p5-2node-srun-label.log").rows == 0


def test_nemo4_reads_the_reference_fixture_with_tflops() -> None:
    w = training("nemo/cre-fixture-n4-training-steps-k8s-ts.log")
    # "2026-01-22T18:00:05.123456789Z ... global_step: 100 | ... reduced_train_loss: 2.345 | train_step_timing in s: 1.234 | TFLOPS_per_GPU: 36.27"
    assert [(s.global_step, s.step_timing, s.tflops, s.loss) for s in w.steps] == [
        (100, 1.234, 36.27, 2.345),
        (101, 1.1, 1145.0, 2.2),
    ]
    assert w.steps[0].timestamp == datetime(2026, 1, 22, 18, 0, 5, 123456, UTC)


def test_nemo4_reads_nemo2_steps_without_tflops() -> None:
    w = training("nemo/awsome-nemo2-sky-logs-l40s.log")
    # "(pretraining, pid=4112) Training epoch 2, iteration 7/999 | ... global_step: 45 | reduced_train_loss: 11.02 | train_step_timing in s: 47.12"
    assert [(s.global_step, s.step_timing, s.tflops) for s in w.steps] == [
        (45, 47.12, 0.0),
        (46, 47.15, 0.0),
        (48, 46.81, 0.0),
    ]
    # "Async checkpoint save for step 48 finalized successfully." is not the reference's done line
    assert not w.checkpoints


def test_nemo4_reads_no_nemo1_progress_bar() -> None:
    # "Epoch 0: :   0%| 2000/603000 [...train_step_timing in s=1.900 ... global_step=2e+3]": NeMo 1's
    # bar has neither "Training epoch" nor "global_step:" (nemo-training reads it).
    assert not training("nemo/awsome-nemo1-eks-tqdm-progress-bar.log").steps
