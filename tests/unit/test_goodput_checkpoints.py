"""Checkpoint saves and loads as Megatron-LM, Megatron-DeepSpeed, Megatron-Bridge and NeMo 2 print
them: every wording, save times from stamped lines or from the log's own timers, confirmations
that add no time.

Lines come from the real logs in tests/data/training and ../shared/corpus. A few wordings appear
in no published log found; those lines are Megatron-LM's own format strings filled in (the source
is named where they are used).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nvcre.cli.analyze.goodput import analyze
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.goodput import GoodputParser, Window
from nvcre.measure.profile import CompiledProfile, compile_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "training"
CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"


def profile(name: str = "megatron-training") -> CompiledProfile:
    return next(compile_profile(p) for p in builtin_profiles() if p["metadata"]["name"] == name)


def lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def parse(text: list[str], name: str = "megatron-training") -> Window:
    return GoodputParser(profile(name)).feed_all(text)


def saves(w: Window) -> list[tuple[int, float | None]]:
    return [(c.step, round(c.save_duration, 6) if c.timed else None) for c in w.checkpoints]


HYPERPOD = lines("hyperpod-megatron-srun-label-old-wording-save-timer.log")
QWEN = lines("qwen30b-sft-megatron-untimed-save-logger-timer.log")


# --- save wordings -------------------------------------------------------------------------------


def test_the_2021_wording_at_iteration_is_a_save() -> None:
    # "0: saving checkpoint at iteration       1 to /fsx/checkpoints"
    # "0:   successfully saved checkpoint at iteration       1 to /fsx/checkpoints"
    w = parse(HYPERPOD[1:3])
    assert [(c.step, c.path) for c in w.checkpoints] == [(1, "/fsx/checkpoints")]
    assert w.pending_save is None


def test_the_2024_wording_from_iteration_with_the_parallel_ranks() -> None:
    # "  successfully saved checkpoint from iteration      35 to /root/.../checkpoints [ t 1/4, p 1/2 ]"
    w = parse(QWEN[1:4])
    assert [c.step for c in w.checkpoints] == [35]
    assert w.checkpoints[0].path.endswith("/run_20260602T155725Z/checkpoints")


def test_a_launcher_prefix_before_the_done_line() -> None:
    # "28_worker0/0   successfully saved checkpoint from iteration      40 to /gcsckpt/... [ t 1/2, p 1/4 ] "
    w = parse(lines("gpu-recipes-a4x-worker-prefix-save-done.log"))
    assert saves(w) == [(40, None)]


def test_deepspeeds_save_line_inside_megatrons_is_the_same_save() -> None:
    # Megatron's untimed "saving checkpoint at iteration   33241", DeepSpeed's stamped
    # "[2021-08-08 01:00:44,221] ... [Rank 0] Saving model checkpoint: .../global_step33241/...",
    # "successfully saved checkpoint at iteration   33241", "time (ms) | save-checkpoint: 57514.53"
    w = parse(lines("bigscience-tr1-13b-deepspeed-save-old-timer-exit.log"))
    assert saves(w) == [(33241, 57.51453)]
    # DeepSpeed's stamp is the only time the save lines show
    assert w.checkpoints[0].timestamp == datetime(2021, 8, 8, 1, 0, 44, 221000, UTC)


def test_deepspeeds_save_line_alone_opens_a_save() -> None:
    ds = lines("bigscience-tr1-13b-deepspeed-save-old-timer-exit.log")[3]
    w = parse([ds])
    assert w.pending_save is not None and w.pending_save.step == 33241


def test_megatron_source_wordings_no_published_log_shows() -> None:
    # megatron/training/checkpointing.py (NVIDIA/Megatron-LM core_v0.16 on): an async save
    # "scheduled" (the end of what blocks training), finalised by a later "successfully saved";
    # core_v0.9 on: "successfully saved local checkpoint from iteration N"
    w = parse(
        [
            "[2026-05-01 10:00:00.000000] saving checkpoint at iteration     200 to /ckpt in torch_dist format",
            "  [2026-05-01 10:00:02.500000] scheduled an async checkpoint save at iteration     200 to /ckpt",
            "  [2026-05-01 10:01:30.000000] successfully saved checkpoint from iteration     200 to /ckpt [ t 1/1, p 1/1 ]",
            "  successfully saved local checkpoint from iteration     300",
        ]
    )
    assert saves(w) == [(200, 2.5), (300, None)]


def test_an_async_save_finalised_while_the_next_save_runs_does_not_close_it() -> None:
    w = parse(
        [
            "[2026-05-01 10:00:00.000000] saving checkpoint at iteration     200 to /ckpt in torch_dist format",
            "  [2026-05-01 10:00:02.500000] scheduled an async checkpoint save at iteration     200 to /ckpt",
            "[2026-05-01 10:10:00.000000] saving checkpoint at iteration     300 to /ckpt in torch_dist format",
            "  [2026-05-01 10:10:01.000000] successfully saved checkpoint from iteration     200 to /ckpt [ t 1/1, p 1/1 ]",
            "  [2026-05-01 10:10:03.000000] scheduled an async checkpoint save at iteration     300 to /ckpt",
        ]
    )
    assert saves(w) == [(200, 2.5), (300, 3.0)]


def test_a_save_at_the_same_step_again_adds_its_time() -> None:
    # NeMo saves iteration 99 twice (top-k and -last): "Save duration: 1.718s", then "1.136s"
    w = parse(lines("bionemo-evo2-nemo2-indented-async-saves-excerpt.log"), "nemo-training")
    assert saves(w) == [(49, None), (99, 2.854)]


def test_nemo_confirmations_of_one_file_are_one_checkpoint() -> None:
    # "Successfully saved checkpoint from iteration 24 to /ckpt/step=24.ckpt" and "Async checkpoint
    # save for step 25 (/ckpt/step=24.ckpt) finalized successfully." after its Global Checkpoint Save
    w = parse(lines("gpu-recipes-nemo2-async-checkpoint-fixture.log"), "nemo-training")
    assert saves(w) == [(24, 25.537), (49, 5.33)]
    assert [c.path for c in w.checkpoints] == ["/ckpt/step=24.ckpt", "/ckpt/step=49.ckpt"]


def test_nemo_global_checkpoint_save_with_its_start_time() -> None:
    w = parse(lines("dgxc-nemotron4-15b-nemo2-global-checkpoint-save.log"), "nemo-training")
    assert saves(w) == [(50, 4.389)]


def test_lightning_counts_the_steps_done_and_nemo_names_the_last_step() -> None:
    """NeMo's resiliency demo (NeMo 2, 2025): the file of global_step 9 (10 x 512 samples) is
    finalised "for step 10"; after a crash the run restores it and goes on at global_step 10."""
    log = lines("nemo2-resiliency-demo-crash-ft-restart-restore.log")
    finalised = [line for line in log if "finalized successfully" in line]
    assert "Async checkpoint save for step 10 (" in finalised[0] and "-step=9-" in finalised[0]
    w = parse(finalised, "nemo-training")
    assert saves(w) == [(9, None), (19, None)]
    assert [c.path.rsplit("/", 1)[1] for c in w.checkpoints] == [
        "model_name=0--val_loss=0.00-step=9-consumed_samples=5120.0-last.ckpt",
        "model_name=0--val_loss=0.00-step=19-consumed_samples=10240.0-last.ckpt",
    ]
    restored = [line for line in log if "states from the checkpoint" in line]
    w = parse(restored, "nemo-training")
    assert w.restore is not None and w.restore.step == 9
    # a name without a step restores an unnamed step; "global_step=" is not the name's step
    w = parse(["Restoring states from the checkpoint path at /ckpt/global_step=5/last.ckpt"], "nemo-training")
    assert w.restore is not None and (w.restore.step, w.restore.path) == (0, "/ckpt/global_step=5/last.ckpt")
    # NeMo's own line for the file of iteration 24, then Lightning's "step 25": one checkpoint
    w = parse(lines("gpu-recipes-nemo2-async-checkpoint-fixture.log")[3:5], "nemo-training")
    assert saves(w) == [(24, None)]


def test_a_nemo_async_background_write_is_not_save_time() -> None:
    """Read as the controller reads it (kubelet times on every line): 48 s pass between "Scheduled
    async checkpoint save" and "Async checkpoint save for step 19 finalized", while step 19 trains."""
    corpus = CORPUS / "nemo" / "awsome-nemo2-nemorun-logs-l40s.log"
    if not corpus.exists():
        pytest.skip("the log corpus (../shared/corpus) is not here")
    real = [line for line in corpus.read_text().splitlines() if "(pretraining, pid=4112) " in line][-4:]
    start = datetime(2025, 5, 22, 20, 8, 53, tzinfo=UTC)
    stamped = [f"{(start + timedelta(seconds=16 * i)).isoformat()} {line}" for i, line in enumerate(real)]
    w = parse(stamped, "nemo-training")
    # Lightning's "step 19" counts the steps done: the file is "...-step=18-consumed_samples=9728.0"
    # (19 x 512 samples), the checkpoint of global_step 18, the last step before it
    assert saves(w) == [(18, None)]
    assert [s.global_step for s in w.steps] == [19, 29]


# --- save times from the timers ------------------------------------------------------------------


def test_an_untimed_save_takes_the_max_of_its_timer() -> None:
    # "1: (min, max) time across ranks (ms):" / "1:     save-checkpoint ....: (81611.24, 81611.82)"
    assert saves(parse(HYPERPOD)) == [(1, 81.61182)]


def test_timer_layouts() -> None:
    # the logger-prefixed header (Megatron core's logging), the header glued to its row, the 2021
    # "time (ms) | save-checkpoint" line, the done line and its timer joined on one line
    assert saves(parse(QWEN[:6])) == [(35, 109.33257)]
    assert saves(parse(lines("rocm-megablocks-gpt2-mi300x-glued-timer-line.log"))) == [(2000, 1.65885)]
    assert saves(parse(lines("bigscience-tr1-13b-deepspeed-save-old-timer-exit.log"))) == [(33241, 57.51453)]
    assert saves(parse(lines("dgxc-llama31-save-done-and-timer-one-line.log"))) == [(50, 24.89513)]


def test_the_max_only_and_non_persistent_timers() -> None:
    # megatron/core/timers.py: "--timing-log-option max" prints "    {name} ....: {max:.2f}";
    # training.py times a non-persistent save as "save-checkpoint-non-persistent"
    w = parse(
        [
            *HYPERPOD[1:3],
            "max time across ranks (ms):",
            "    save-checkpoint ................................: 18512.90",
            "saving checkpoint at iteration       2 to /local",
            "  successfully saved local checkpoint from iteration       2",
            "    save-checkpoint-non-persistent .................: (1.10, 1.25)",
        ]
    )
    assert saves(w) == [(1, 18.5129), (2, 0.00125)]


def test_stamped_save_lines_keep_their_own_time() -> None:
    # the CRE fixture's stamped save (361.44602 s), then a timer line: the stamps win
    n6 = (CORPUS / "megatron" / "cre-fixture-n6-full-sequence-k8s-ts-checkpoint.log").read_text().splitlines()
    w = parse([*n6[:5], *HYPERPOD[3:5]])
    assert saves(w) == [(100, 361.44602)]


def test_a_timer_without_the_save_lines_is_the_save_after_the_last_step() -> None:
    # the last rank's own log: its iteration line and its timer, the save lines being rank 0's
    last_rank = [line for line in HYPERPOD if line.startswith("1:")]
    assert saves(parse(last_rank)) == [(1, 81.61182)]


def test_timers_for_other_work_are_not_saves() -> None:
    # "(min, max) time across ranks (ms):" / "    evaluate ....: (2101.26, 2101.26)" and the setup timers
    w = parse(lines("nolebase-megatron-gpt2-1gpu-old-wording-timers-no-steps.log"))
    assert saves(w) == [(1, 21.02708)]
    assert w.pending_save is not None and w.pending_save.step == 2  # its done line is not in the log


def test_the_timers_turn_an_overstated_goodput_into_the_logs_own() -> None:
    """Stock Megatron-LM stamps its iteration lines but not its save lines: without the timer the
    save counts 0 s and goodput is overstated."""
    prof = profile()
    with_timer = analyze((str(DATA / "qwen30b-sft-megatron-untimed-save-logger-timer.log"),), prof)
    # [00:19:25] iteration 35 .. [after training is done] 00:21:16: t_w 111 s, t_save 109.33257 s
    assert (with_timer["trainingTimeSec"], with_timer["checkpointSaveTimeSec"]) == (
        "111.000000",
        "109.332570",
    )
    assert with_timer["result"] == "0.015022"  # (111 - 109.33257) / 111
    assert with_timer["checkpoints"] == [{"step": 35, "saveTimeSec": "109.332570"}]
    without = GoodputParser(prof).feed_all([line for line in QWEN if "save-checkpoint" not in line])
    assert [(c.step, c.save_duration, c.timed) for c in without.checkpoints] == [(35, 0.0, False)]


# --- loads ---------------------------------------------------------------------------------------


def test_a_load_and_its_timer() -> None:
    # " loading checkpoint from ./checkpoints/gpt-2 at iteration 3", "  successfully loaded
    # checkpoint from ./checkpoints/gpt-2 at iteration 3", "    load-checkpoint ....: (2086.04, 2086.04)"
    w = parse(lines("nolebase-megatron-gpt2-1gpu-resume-load-timer.log"))
    assert w.restore is not None
    assert (w.restore.step, w.restore.path, w.restore.load_duration) == (3, "./checkpoints/gpt-2", 2.08604)


def test_a_load_timer_with_nothing_loaded_is_no_load() -> None:
    # "will not load any checkpoints and will start from random" / "time (ms) | load-checkpoint: 0.35"
    assert parse(lines("bigscience-megatron-2021-gpt2-n4-old-timers-cancelled.log")).restore is None


def test_nemos_load_time() -> None:
    # Lightning's "Restoring states from the checkpoint path at {path}" (its format string), then
    # NeMo 2's line as NVIDIA/dgxc-benchmarking nemotron4-15b/README.md shows it
    w = parse(
        [
            "Restoring states from the checkpoint path at /ckpt/last.ckpt",
            "[NeMo I 2025-04-11 14:46:18 nemo_logging:393] Global Checkpoint Load : Rank : 0 : "
            "Start time : 1744407969.270s : Time spent in load_checkpoint: 9.712s",
        ],
        "nemo-training",
    )
    assert w.restore is not None and (w.restore.path, w.restore.load_duration) == ("/ckpt/last.ckpt", 9.712)


def test_the_distributed_checkpoint_load_wording() -> None:
    # megatron/training/checkpointing.py: f" loading {dist_infix}checkpoint from {load_dir} at
    # iteration {iteration}" with dist_infix "distributed " for torch_dist checkpoints
    w = parse([" loading distributed checkpoint from /ckpt at iteration 1000"])
    assert w.restore is not None and (w.restore.step, w.restore.path) == (1000, "/ckpt")


# --- time and steps ------------------------------------------------------------------------------


def test_the_print_datetime_lines_end_a_log_read_offline() -> None:
    w = parse(lines("rocm-megablocks-gpt2-mi300x-glued-timer-line.log"))
    # "[before the start of training step] datetime: 2025-02-05 21:20:40", "[after training is done]
    # datetime: 2025-02-05 21:43:14 " (a trailing space)
    assert w.application_start_time == datetime(2025, 2, 5, 21, 20, 40, tzinfo=UTC)
    assert w.last_time == datetime(2025, 2, 5, 21, 43, 14, tzinfo=UTC)


def test_megatron_deepspeed_step_lines_in_seconds_with_tflops() -> None:
    # "[default7]: iteration    31214/  115311 | ... elapsed time per iteration (s): 106.46 | ...
    # lm loss: 2.198845E+00 | ... TFLOPs: 147.29 |"
    w = parse(lines("bigscience-bloom176b-default7-seconds-tflops.log")[:1])
    (step,) = w.steps
    assert (step.global_step, step.step_timing, step.tflops, step.timestamp) == (31214, 106.46, 147.29, None)


def test_a_step_line_glued_to_the_next_print() -> None:
    # "[2025-12-19 10:49:15] iteration 1/ 1 | ... | number of nan iterations:   0 |Number of parameters ..."
    w = parse(lines("dgxc-llama31-bridge-resume-1iter-glued-params.log"))
    assert [(s.global_step, s.timestamp) for s in w.steps] == [
        (1, datetime(2025, 12, 19, 10, 49, 15, tzinfo=UTC))
    ]
    assert w.last_time == datetime(2025, 12, 19, 10, 49, 16, tzinfo=UTC)


def test_the_step_count_covers_every_step_line() -> None:
    w = parse(lines("bionemo-evo2-nemo2-indented-async-saves-excerpt.log"), "nemo-training")
    assert (w.step_count, w.steps[0].global_step, w.steps[-1].global_step) == (41, 59, 99)
