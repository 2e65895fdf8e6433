"""The built-in training profiles over every Megatron and NeMo log of the corpus.

Each figure was read by hand from the log text; the comment names the line it comes from.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.goodput import GoodputParser, Window
from nvcre.measure.profile import CompiledProfile, compile_profile

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="the log corpus (../shared/corpus) is not here")


def profile(name: str) -> CompiledProfile:
    return next(compile_profile(p) for p in builtin_profiles() if p["metadata"]["name"] == name)


def parse(name: str, path: str) -> Window:
    lines = (CORPUS / path).read_text().splitlines()
    return GoodputParser(profile(name)).feed_all(lines)


def steps(window: Window) -> list[tuple[int, float]]:
    return [(s.global_step, round(s.step_timing, 6)) for s in window.steps]


def test_every_corpus_log_has_a_test() -> None:
    here = Path(__file__).read_text()
    logs = sorted(p.name for d in ("megatron", "nemo") for p in (CORPUS / d).glob("*.log"))
    assert len(logs) == 11
    assert [name for name in logs if name not in here] == []


def test_builtin_training_profiles_write_their_settings_out() -> None:
    by_name = {p["metadata"]["name"]: p["spec"] for p in builtin_profiles()}
    assert by_name["megatron-training"]["warmupSteps"] == 2
    assert by_name["megatron-training"]["logInterval"] == 1
    assert by_name["megatron-training"]["workerStrategy"]["trainingStepPod"] == "last"
    assert by_name["megatron-bridge"]["patterns"] == by_name["megatron-training"]["patterns"]
    assert by_name["nemo-training"]["warmupSteps"] == 1
    assert "logInterval" not in by_name["nemo-training"]
    assert all(
        "networkTransport" not in spec["patterns"]
        for spec in by_name.values()
        if "trainingStep" in spec["patterns"]
    )


# --- megatron ------------------------------------------------------------------------------------


def test_megatron_srun_label_prefix() -> None:
    w = parse("megatron-training", "megatron/awsome-megatron-gpt3-slurm-srun-label.log")
    # "1:  iteration 25/73242187 | ... elapsed time per iteration (ms): 87.0 | ... lm loss: 1.086954E+01"
    # and iterations 26 (86.5 ms) and 27 (88.4 ms).
    assert steps(w) == [(25, 0.087), (26, 0.0865), (27, 0.0884)]
    assert [s.loss for s in w.steps] == [10.86954, 10.86217, 10.87129]
    # No timestamps in this excerpt; the read starts mid-run, so 25 is the warm-up base (25, 26 warm).
    assert [s.timestamp for s in w.steps] == [None, None, None]
    assert [s.warmup for s in w.steps] == [True, True, False]


def test_megatron_startup_with_skipped_iterations_and_no_loss() -> None:
    w = parse("megatron-training", "megatron/awsome-megatron-gpt3-startup-abbrev-skipped.log")
    # "iteration 1/ 508626 | ... elapsed time per iteration (ms): 255940.5 |" (no lm loss field), 2: 243438.3, 3: 243344.4
    assert steps(w) == [(1, 255.9405), (2, 243.4383), (3, 243.3444)]
    assert [s.loss for s in w.steps] == [0.0, 0.0, 0.0]
    # "[after megatron is initialized] datetime: ..." is not the start marker.
    assert w.application_start_time is None


def test_megatron_fixture_full_sequence_with_checkpoint() -> None:
    w = parse("megatron-training", "megatron/cre-fixture-n6-full-sequence-k8s-ts-checkpoint.log")
    # line 1: "[before the start of training step] datetime: 2026-02-05 16:01:40.326255"
    assert w.application_start_time == datetime(2026, 2, 5, 16, 1, 40, 326255, UTC)
    # line 2: iteration 1 at [16:03:52.889599], 132563.1 ms, 138.5 TFLOP/s; line 3: iteration 2, 5000.0 ms, 140.0
    assert steps(w) == [(1, 132.5631), (2, 5.0)]
    assert w.steps[0].timestamp == datetime(2026, 2, 5, 16, 3, 52, 889599, UTC)
    assert [s.tflops for s in w.steps] == [138.5, 140.0]
    # lines 4-5: "saving checkpoint at iteration 100" is no step; save 17:07:36.379347, done 17:13:37.825367
    (checkpoint,) = w.checkpoints
    assert (checkpoint.step, checkpoint.path) == (100, "/mnt/workspace/checkpoints")
    assert checkpoint.save_duration == pytest.approx(361.44602)
    assert checkpoint.timestamp == datetime(2026, 2, 5, 17, 13, 37, 825367, UTC)
    # line 6: "2026-02-05T17:14:00.000000000Z some unrelated log line"
    assert w.last_log_timestamp == datetime(2026, 2, 5, 17, 14, tzinfo=UTC)


def test_megatron_core_in_nemo_all_iterations_skipped() -> None:
    w = parse("megatron-training", "megatron/nemo-mcore-rtxa1000-5iter-all-skipped.log")
    # "[before the start of training step] datetime: 2024-08-01 09:44:51" (no fraction)
    assert w.application_start_time == datetime(2024, 8, 1, 9, 44, 51, tzinfo=UTC)
    # " [2024-08-01 09:44:55] iteration 1/ 5 | ... (ms): 3902.7 | ... (TFLOP/s/GPU): 0.2" ... iteration 5: 624.4 ms, 1.2
    assert steps(w) == [(1, 3.9027), (2, 0.6894), (3, 0.6454), (4, 0.6135), (5, 0.6244)]
    assert [s.tflops for s in w.steps] == [0.2, 1.0, 1.1, 1.2, 1.2]
    assert w.steps[-1].timestamp == datetime(2024, 8, 1, 9, 44, 58, tzinfo=UTC)
    # "(after 1 iterations) memory (MB)" is no step either.
    assert len(w.steps) == 5


# --- nemo ----------------------------------------------------------------------------------------


def test_nemo1_tqdm_progress_bar_takes_the_exact_count() -> None:
    w = parse("nemo-training", "nemo/awsome-nemo1-eks-tqdm-progress-bar.log")
    # "| 2000/603000 [1:03:17<...  reduced_train_loss=2.600, global_step=2e+3, ..., train_step_timing in s=1.900"
    assert steps(w) == [(2000, 1.9)]
    assert w.steps[0].loss == 2.6


def test_nemo2_nemorun_global_step_is_the_step() -> None:
    w = parse("nemo-training", "nemo/awsome-nemo2-nemorun-logs-l40s.log")
    # "Training epoch 1, iteration 0/999 | ... global_step: 19 | reduced_train_loss: 11.03 | train_step_timing in s: 46.86"
    # "Training epoch 1, iteration 10/999 | ... global_step: 29 | ... train_step_timing in s: 46.84"
    assert steps(w) == [(19, 46.86), (29, 46.84)]
    assert [(s.epoch, s.iteration) for s in w.steps] == [(1, 0), (1, 10)]
    # "Scheduled async checkpoint save for .../...-step=18-consumed_samples=9728.0-last.ckpt" and
    # "Async checkpoint save for step 19 finalized successfully.": Lightning counts 19 steps done,
    # the checkpoint is of global_step 18 (no kubelet times here: no duration)
    assert [(c.step, c.save_duration) for c in w.checkpoints] == [(18, 0.0)]


def test_nemo2_wrapped_line_parses_from_its_global_step_part() -> None:
    w = parse("nemo-training", "nemo/awsome-nemo2-performance-wrapped-line.log")
    # line 2: "global_step: 29 | reduced_train_loss: 11.03 | train_step_timing in s: 46.84 | "
    assert steps(w) == [(29, 46.84)]
    assert w.steps[0].loss == 11.03


def test_nemo2_sky_logs_with_interleaved_checkpoints() -> None:
    w = parse("nemo-training", "nemo/awsome-nemo2-sky-logs-l40s.log")
    # global_step 45 (47.12 s), 46 (47.15 s), 48 (46.81 s); "Scheduled async checkpoint save for
    # .../...-step=47-consumed_samples=24576.0-last.ck" then "Async checkpoint save for step 48
    # finalized": 48 steps done (48 x 512 samples), the checkpoint of global_step 47
    assert steps(w) == [(45, 47.12), (46, 47.15), (48, 46.81)]
    assert [c.step for c in w.checkpoints] == [47]


def test_nemo_fixture_with_kubelet_times_and_tflops() -> None:
    w = parse("nemo-training", "nemo/cre-fixture-n4-training-steps-k8s-ts.log")
    # "2026-01-22T18:00:05.123456789Z ... global_step: 100 | ... reduced_train_loss: 2.345 | train_step_timing in s: 1.234 | TFLOPS_per_GPU: 36.27"
    # "2026-01-22T18:00:06.500000000Z ... global_step: 101 | ... 1.100 | TFLOPS_per_GPU: 1.145e+03"
    assert steps(w) == [(100, 1.234), (101, 1.1)]
    assert [s.tflops for s in w.steps] == [36.27, 1145.0]
    assert [s.loss for s in w.steps] == [2.345, 2.2]
    assert w.steps[0].timestamp == datetime(2026, 1, 22, 18, 0, 5, 123456, UTC)


def test_nemo2_default0_prefix_and_model_summary() -> None:
    w = parse("nemo-training", "nemo/nemo2-llama-nemotron-nano4b-retraining-default0-prefix.log")
    # "retraining/0 [default0]:Training epoch 0, iteration 0/99 | ... global_step: 0 | reduced_train_loss: 14.66 | train_step_timing in s: 5.276"
    # "... iteration 1/99 | ... global_step: 1 | reduced_train_loss: 15.07 | train_step_timing in s: 2.008 | consumed_samples: 8"
    assert steps(w) == [(0, 5.276), (1, 2.008)]
    assert [s.warmup for s in w.steps] == [True, False]


def test_nemo2_iso8601_offset_prefix() -> None:
    w = parse("nemo-training", "nemo/nemo2-llama3-8b-iso8601-offset-prefix.log")
    # "[2025-11-20T14:55:23+08:00] retraining/0 Training epoch 0, iteration 97/99 | ... global_step: 97 | ... 12.22"
    assert steps(w) == [(97, 12.22), (98, 12.21), (99, 12.21)]
    assert w.steps[0].timestamp == datetime(2025, 11, 20, 14, 55, 23, tzinfo=timezone(timedelta(hours=8)))
    assert [s.loss for s in w.steps] == [6.265, 6.181, 6.218]
