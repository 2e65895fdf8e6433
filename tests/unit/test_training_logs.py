"""Every real training log (../shared/corpus and tests/data/training) read with the figures it states.

Each row was written from the log text by hand: the step numbers and the per-step times and
TFLOP/s as printed, each checkpoint save with the time its own line or timer states (None: the
log states none), the checkpoint load and its timer, and whether the log carries the wall-clock
time goodput needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nvcre.cli.analyze.goodput import analyze
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.goodput import GoodputParser, Window
from nvcre.measure.profile import CompiledProfile, compile_profile

HERE = Path(__file__).resolve().parents[1] / "data" / "training"
CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
MEGATRON, NEMO = "megatron-training", "nemo-training"


def ms(pairs: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Steps as Megatron prints them, in milliseconds."""
    return [(step, value / 1000) for step, value in pairs]


@dataclass(frozen=True)
class Log:
    path: Path
    profile: str
    steps: list[tuple[int, float]] = field(default_factory=list)
    """(step, seconds per step) of every step line."""
    tflops: list[float] = field(default_factory=list)
    saves: list[tuple[int, float | None]] = field(default_factory=list)
    """(step, seconds) of every checkpoint save; saves of one step are one checkpoint."""
    load: tuple[int, float | None] | None = None
    measurable: bool = False
    """The steps carry wall-clock time and the log goes on after the first: goodput is measurable."""
    unfinished_save: int | None = None
    """The step of a save the log starts and never ends (no done line, no timer)."""
    step_backs: list[tuple[int, int]] = field(default_factory=list)
    """(step, lower step after it): the run started again from a checkpoint within the log."""


LOGS = [
    # --- ../shared/corpus/megatron --------------------------------------------------------------
    Log(
        CORPUS / "megatron/awsome-megatron-gpt3-slurm-srun-label.log",
        MEGATRON,
        ms([(25, 87.0), (26, 86.5), (27, 88.4)]),
    ),
    Log(
        CORPUS / "megatron/awsome-megatron-gpt3-startup-abbrev-skipped.log",
        MEGATRON,
        ms([(1, 255940.5), (2, 243438.3), (3, 243344.4)]),
    ),
    Log(
        CORPUS / "megatron/cre-fixture-n6-full-sequence-k8s-ts-checkpoint.log",
        MEGATRON,
        ms([(1, 132563.1), (2, 5000.0)]),
        [138.5, 140.0],
        saves=[(100, 361.44602)],  # save [17:07:36.379347] to done [17:13:37.825367]
        measurable=True,
    ),
    Log(
        CORPUS / "megatron/nemo-mcore-rtxa1000-5iter-all-skipped.log",
        MEGATRON,
        ms([(1, 3902.7), (2, 689.4), (3, 645.4), (4, 613.5), (5, 624.4)]),
        [0.2, 1.0, 1.1, 1.2, 1.2],
        measurable=True,
    ),
    # --- ../shared/corpus/nemo -------------------------------------------------------------------
    Log(CORPUS / "nemo/awsome-nemo1-eks-tqdm-progress-bar.log", NEMO, [(2000, 1.9)]),
    Log(
        CORPUS / "nemo/awsome-nemo2-nemorun-logs-l40s.log",
        NEMO,
        [(19, 46.86), (29, 46.84)],
        # "Scheduled async checkpoint save for ...-step=18-consumed_samples=9728.0-last.ckpt", then
        # "Async checkpoint save for step 19 finalized" (Lightning counts the 19 steps done): the
        # checkpoint of global_step 18, finalised; the log states no blocking time
        saves=[(18, None)],
    ),
    Log(CORPUS / "nemo/awsome-nemo2-performance-wrapped-line.log", NEMO, [(29, 46.84)]),
    Log(
        CORPUS / "nemo/awsome-nemo2-sky-logs-l40s.log",
        NEMO,
        [(45, 47.12), (46, 47.15), (48, 46.81)],
        saves=[(47, None)],  # "...-step=47-consumed_samples=24576.0-last.ck", "for step 48 finalized"
    ),
    Log(
        CORPUS / "nemo/cre-fixture-n4-training-steps-k8s-ts.log",
        NEMO,
        [(100, 1.234), (101, 1.1)],
        [36.27, 1145.0],
        measurable=True,
    ),
    Log(
        CORPUS / "nemo/nemo2-llama-nemotron-nano4b-retraining-default0-prefix.log",
        NEMO,
        [(0, 5.276), (1, 2.008)],
    ),
    Log(
        CORPUS / "nemo/nemo2-llama3-8b-iso8601-offset-prefix.log",
        NEMO,
        [(97, 12.22), (98, 12.21), (99, 12.21)],
        measurable=True,
    ),
    # --- tests/data/training ---------------------------------------------------------------------
    Log(
        HERE / "hyperpod-megatron-srun-label-old-wording-save-timer.log",
        MEGATRON,
        ms([(1, 440352.6)]),
        saves=[(1, 81.61182)],  # "save-checkpoint ...: (81611.24, 81611.82)": the max
    ),
    Log(
        HERE / "nolebase-megatron-gpt2-1gpu-old-wording-timers-no-steps.log",
        MEGATRON,
        saves=[(1, 21.02708)],
        unfinished_save=2,  # the log ends at "saving checkpoint at iteration       2"
    ),
    Log(
        HERE / "nolebase-megatron-gpt2-1gpu-resume-load-timer.log",
        MEGATRON,
        load=(3, 2.08604),  # "load-checkpoint ...: (2086.04, 2086.04)"
        unfinished_save=4,  # the log ends at "saving checkpoint at iteration       4"
    ),
    Log(
        HERE / "rocm-megablocks-gpt2-mi300x-glued-timer-line.log",
        MEGATRON,
        ms([(100, 660.6), (1000, 657.0), (2000, 657.1)]),
        saves=[(2000, 1.65885)],  # the timer of the first save; the re-save at the end states none
    ),
    Log(
        HERE / "rocm-megablocks-moe-gpt2-mi300x-save-timer.log",
        MEGATRON,
        ms([(200, 580.2), (1100, 820.3), (2000, 582.8)]),
        saves=[(2000, 293.63873)],
    ),
    Log(HERE / "dgxc-llama31-save-done-and-timer-one-line.log", MEGATRON, saves=[(50, 24.89513)]),
    Log(
        HERE / "dgxc-llama31-bridge-resume-1iter-glued-params.log",
        MEGATRON,
        ms([(1, 20289.1)]),
        measurable=True,  # [10:49:15] iteration 1, [after training is done] 10:49:16
    ),
    Log(
        HERE / "qwen30b-sft-megatron-untimed-save-logger-timer.log",
        MEGATRON,
        ms([(35, 3649.8)]),
        saves=[(35, 109.33257)],
        measurable=True,
    ),
    Log(
        HERE / "bigscience-tr1-13b-interval10-empty-timers.log",
        MEGATRON,
        ms(
            [
                (29020, 22306.6),
                (29030, 22336.4),
                (29040, 22332.6),
                (29050, 22148.5),
                (29060, 22181.7),
                (29070, 22107.1),
                (29080, 22131.2),
                (29090, 22119.2),
            ]
        ),
    ),
    Log(
        HERE / "bigscience-tr1-13b-deepspeed-save-old-timer-exit.log",
        MEGATRON,
        ms([(33240, 23491.4)]),
        saves=[(33241, 57.51453)],  # "time (ms) | save-checkpoint: 57514.53"
    ),
    Log(
        HERE / "bigscience-bloom176b-default7-seconds-tflops.log",
        MEGATRON,
        [
            (31214, 106.46),
            (31215, 105.90),
            (31216, 106.40),
            (31217, 106.33),
            (31218, 107.53),
            (31219, 106.36),
            (31220, 106.30),
            (31221, 106.13),
            (31222, 106.44),
            (31250, 106.09),
            (31251, 106.13),
        ],
        [147.29, 148.06, 147.37, 147.46, 145.82, 147.43, 147.51, 147.74, 147.31, 147.80, 147.75],
    ),
    Log(
        HERE / "bigscience-megatron-2021-gpt2-n4-old-timers-cancelled.log",
        MEGATRON,
        ms(
            [
                (10, 2152.2),
                (20, 1354.9),
                (30, 1376.1),
                (40, 1379.8),
                (50, 1377.4),
                (60, 1378.0),
                (70, 1380.0),
                (80, 1380.6),
                (90, 1378.9),
                (100, 1379.8),
                (110, 1564.1),
                (120, 1380.4),
                (130, 1380.6),
                (140, 1380.9),
                (150, 1382.0),
                (160, 1383.3),
                (170, 1381.9),
                (180, 1382.1),
                (190, 1381.7),
                (200, 1382.2),
            ]
        ),
    ),
    Log(HERE / "dgxc-nemotron4-15b-nemo2-global-checkpoint-save.log", NEMO, saves=[(50, 4.389)]),
    Log(HERE / "dgxc-llama31-nemo2-grep-step-line.log", NEMO, [(49, 12.39)]),
    Log(
        HERE / "gpu-recipes-nemo2-async-checkpoint-fixture.log",
        NEMO,
        saves=[(24, 25.537), (49, 5.33)],  # each file's later messages only confirm it
    ),
    Log(HERE / "gpu-recipes-a4x-worker-prefix-save-done.log", MEGATRON, saves=[(40, None)]),
    Log(
        HERE / "bionemo-evo2-nemo2-indented-async-saves-excerpt.log",
        NEMO,
        [
            (59, 0.4548),
            (60, 0.4651),
            (61, 0.479),
            (62, 0.4226),
            (63, 0.2902),
            (64, 0.2374),
            (65, 0.2455),
            (66, 0.2503),
            (67, 0.2569),
            (68, 0.2526),
            (69, 0.2423),
            (70, 0.2459),
            (71, 0.2419),
            (72, 0.2557),
            (73, 0.2385),
            (74, 0.245),
            (75, 0.2687),
            (76, 0.2488),
            (77, 0.2331),
            (78, 0.2372),
            (79, 0.2702),
            (80, 0.2481),
            (81, 0.2361),
            (82, 0.2447),
            (83, 0.2405),
            (84, 0.2574),
            (85, 0.2498),
            (86, 0.2515),
            (87, 0.2456),
            (88, 0.2315),
            (89, 0.2256),
            (90, 0.2389),
            (91, 0.2343),
            (92, 0.2349),
            (93, 0.2382),
            (94, 0.2584),
            (95, 0.2356),
            (96, 0.2629),
            (97, 0.2319),
            (98, 0.24),
            (99, 0.261),
        ],
        # the iteration-49 save finalised (no blocking time stated); at 99 two saves (top-k and
        # -last) blocked 1.718 s and 1.136 s
        saves=[(49, None), (99, 2.854)],
    ),
    Log(
        HERE / "deepseek-v2-lite-megatron-interval5-stamped-tflops.log",
        MEGATRON,
        ms([(220, 61272.8), (225, 61195.4), (230, 61112.0)]),
        [68.6, 68.7, 68.8],
        measurable=True,  # [21:47:03] iteration 220 to [21:57:14] iteration 230
    ),
    Log(
        HERE / "ling-v2-megatron-mtp-zloss-throughput-per-gpu.log",
        MEGATRON,
        ms(
            [
                (1, 79489.9),
                (2, 11182.0),
                (3, 10883.5),
                (4, 10840.4),
                (5, 10765.6),
                (6, 10827.5),
                (7, 10767.4),
                (8, 10758.5),
                (9, 10727.4),
                (10, 10720.6),
            ]
        ),
        [18.0, 128.2, 131.7, 132.2, 133.1, 132.4, 133.1, 133.2, 133.6, 133.7],
        measurable=True,
    ),
    Log(
        HERE / "mindcluster-reschedule-rank-warnings-load-timer-elided.log",
        MEGATRON,
        ms([(10, 6932.5), (11, 1981.0)]),
        # "load-checkpoint ...: (32107.12, 32108.53)" with no loading line (the last rank's log; rank
        # 0 prints the load): the log names no checkpoint, and Megatron prints the timer also when
        # nothing is loaded
        load=None,
        measurable=True,  # [11:37:00] iteration 10, [11:37:03] iteration 11
    ),
    Log(
        HERE / "kisti-megatron-tp4-fp16-skipped-crash-in-save.log",
        MEGATRON,
        # iteration 10: all 10 skipped (no lm loss); the save at 50 never ends: every rank's
        # AttributeError, then torchrun's ChildFailedError
        ms([(10, 995.3), (20, 457.6), (30, 464.2), (40, 437.8), (50, 436.9)]),
        measurable=True,
        unfinished_save=50,
    ),
    # "MnRtt/Rnk: 3453.08ms/8 | ... | MnEtpt/Rnk: 296.02TF/0": the straggler detector's report is no step
    Log(HERE / "megatron-straggler-detector-report-no-steps.log", MEGATRON),
    # "| 50/50 [...] global_step=49.00, ... train_step_timing in s=24.00]": the step is 49, 50 batches done
    Log(HERE / "dgxc-grok1-nemo1-tqdm-float-global-step.log", NEMO, [(49, 24.0)]),
    Log(HERE / "dgxc-gpt3-175b-nemo1-tqdm-val-loss.log", NEMO, [(50, 5.9)]),  # "global_step=50.0"
    Log(
        HERE / "alcf-megatron-deepspeed-polaris-ds-timer-lines-save-elided.log",
        MEGATRON,
        ms([(199, 14287.5), (200, 14541.4)]),
        [69.85, 68.63],  # "TFLOPs: 69.85 |" after lm loss
        # DeepSpeed's "[2024-03-07 15:27:15,063] ... step=200, skipped=4" lines carry the time, the
        # iteration lines none; "saving checkpoint at iteration     200" then the author's "# ..."
        unfinished_save=200,
    ),
    Log(
        HERE / "nemo2-resiliency-demo-crash-ft-restart-restore.log",
        NEMO,
        [
            (0, 10.51),
            (1, 7.667),
            (2, 7.582),
            (3, 7.585),
            (4, 7.588),
            (5, 7.587),
            (6, 7.588),
            (7, 7.584),
            (8, 7.589),
            (9, 7.588),
            (10, 7.589),
            (11, 7.59),
            (12, 7.59),
            (13, 7.63),
            (14, 7.587),
            (15, 7.589),
            # every rank's traceback, "Worker group FAILED. 3/3 attempts left; will restart worker
            # group", the restore of step 9, and global_step 10 to 19 again
            (10, 10.26),
            (11, 7.581),
            (12, 7.593),
            (13, 7.592),
            (14, 7.591),
            (15, 7.593),
            (16, 7.603),
            (17, 7.59),
            (18, 7.591),
            (19, 7.592),
        ],
        # "Scheduled async checkpoint save for ...-step=9-consumed_samples=5120.0-last.ckpt", then
        # "Async checkpoint save for step 10 (...step=9...) finalized"; the same for step=19 at the
        # end: no blocking time stated
        saves=[(9, None), (19, None)],
        # "Restoring states from the checkpoint path at ...-step=9-consumed_samples=5120.0-last/weights"
        load=(9, None),
        step_backs=[(15, 10)],  # global_step 15, then the restart's 10
    ),
    Log(
        HERE / "nemo2-resiliency-demo-straggler-reports-async-saves.log",
        NEMO,
        [
            (0, 10.4),
            (1, 7.615),
            (2, 7.625),
            (3, 7.618),
            (4, 7.624),
            (5, 7.629),
            (6, 7.63),
            (7, 7.632),
            (8, 7.636),
            (9, 7.625),
            (10, 7.633),
            (11, 7.626),
            (12, 7.629),
            (13, 7.637),
            (14, 7.626),
            (15, 7.637),
            (16, 7.635),
            (17, 7.632),
            (18, 7.637),
            (19, 7.73),  # "Training epoch 1, iteration 0/19 | ... global_step: 19"
        ],
        # the files "...-step=9-..." (finalised "for step 10") and "...-step=18-..." ("for step 19")
        saves=[(9, None), (18, None)],
    ),
    Log(
        HERE / "nemo2-resiliency-demo-straggler-detected-terminating.log",
        NEMO,
        [
            (0, 10.4),
            (1, 7.591),
            (2, 7.593),
            (3, 7.59),
            (4, 7.595),
            (5, 7.599),
            (6, 7.605),
            (7, 7.61),
            (8, 7.608),
            (9, 7.6),
            (10, 7.599),
            (11, 7.6),
            (12, 7.6),
            (13, 7.604),
            (14, 7.605),
            (15, 7.611),
        ],
        # "...-step=9-consumed_samples=5120.0-last.ckpt" finalised "for step 10"; after "Detected
        # stragglers. Terminating training..." the save of "...-step=16-consumed_samples=8704.0-last"
        # (17 x 512) finalised "for step 17", whose step line was never printed
        saves=[(9, None), (16, None)],
    ),
    Log(
        HERE / "nemo2-resiliency-demo-preemption-sigterm-save.log",
        NEMO,
        [(0, 10.43), (1, 7.6), (2, 7.599)],
        # "Received signal 15, initiating graceful stop", then the save of
        # "...-step=3-consumed_samples=2048.0-last.ckpt" (4 x 512) finalised "for step 4"
        saves=[(3, None)],
    ),
    Log(
        HERE / "nemo2-embedding-finetune-validation-saves-selective-restore.log",
        NEMO,
        [
            (0, 4.49),
            (1, 2.744),
            (2, 0.5949),
            (3, 0.7147),
            (4, 0.5878),
            (5, 1.206),
            (6, 0.5924),
            (7, 0.599),
            (8, 0.846),
            (9, 0.5919),
            (10, 1.9),
            (11, 2.262),
            (12, 2.389),
            (13, 1.287),
            (14, 1.298),
            (15, 0.6122),
            (16, 0.6112),
            (17, 0.8414),
            (18, 0.6303),
            (19, 0.8786),
            (20, 1.857),
            (21, 2.682),
            (22, 1.819),
            (23, 1.247),
            (24, 0.7425),
            (25, 0.7011),
            (26, 0.761),
            (27, 0.6045),
            (28, 0.6273),
            (29, 0.6023),
            (30, 2.869),
            (31, 2.175),
            (32, 2.185),
            (33, 2.129),
            (34, 0.7587),
            (35, 0.8925),
            (36, 0.83),
            (37, 0.6128),
            (38, 0.6144),
            (39, 0.6094),
            (40, 2.64),
            (41, 1.816),
            (42, 2.562),
            (43, 1.195),
            (44, 1.514),
            (45, 0.6167),
            (46, 1.527),
            (47, 1.227),
            (48, 0.6098),
            (49, 0.6074),
            (50, 1.452),
            (51, 1.338),
            (52, 0.6187),
            (53, 0.9179),
            (54, 0.7666),
            (55, 0.6211),
            (56, 0.6096),
            (57, 1.494),
            (58, 0.6648),
            (59, 0.6153),
            (60, 1.892),
            (61, 2.633),
            (62, 1.857),
            (63, 1.121),
            (64, 0.794),
            (65, 0.6096),
            (66, 1.128),
            (67, 0.8455),
            (68, 0.6099),
            (69, 0.6547),
            (70, 2.667),
            (71, 2.345),
            (72, 2.278),
            (73, 2.14),
            (74, 0.7182),
            (75, 0.9539),
            (76, 0.9047),
            (77, 0.6625),
            (78, 0.8748),
            (79, 0.6022),
            (80, 2.118),
            (81, 2.529),
            (82, 1.771),
            (83, 2.112),
            (84, 0.9113),
            (85, 1.229),
            (86, 0.9413),
            (87, 0.6013),
            (88, 0.61),
            (89, 0.5991),
            (90, 2.622),
            (91, 2.118),
            (92, 2.29),
            (93, 1.486),
            (94, 0.8018),
            (95, 0.8777),
            (96, 0.8661),
            (97, 0.6424),
            (98, 0.6063),
            (99, 0.6147),
        ],
        # "Global Checkpoint Save : ... Iteration: 10 : ... Save duration: 0.232s" and so on: after a
        # validation NeMo's iteration counts the steps done (file "...-step=9-consumed_samples=640.0",
        # Lightning's "for step 10"), at 49 and 99 the step's own index (Lightning's "for step 50")
        saves=[
            (10, 0.232),
            (20, 0.175),
            (30, 0.180),
            (40, 0.178),
            (49, 1.369),
            (60, 0.180),
            (70, 0.183),
            (80, 0.838),
            (90, 0.182),
            (99, 0.755),
        ],
        # "Global Checkpoint Load : ... Time spent in load_checkpoint: 2.614s" loads the pretrained
        # model (a selective RestoreConfig) before the first step: no "Restoring states" of a run
    ),
]


def profile(name: str) -> CompiledProfile:
    return next(compile_profile(p) for p in builtin_profiles() if p["metadata"]["name"] == name)


def parse(log: Log) -> Window:
    return GoodputParser(profile(log.profile)).feed_all(log.path.read_text().splitlines())


def test_every_log_has_a_row() -> None:
    rows = {log.path.resolve() for log in LOGS}
    logs = sorted(HERE.glob("*.log"))
    if CORPUS.exists():
        logs += sorted(p for d in ("megatron", "nemo") for p in (CORPUS / d).glob("*.log"))
    assert [p.name for p in logs if p.resolve() not in rows] == []
    assert len(list(HERE.glob("*.log"))) == 30


@pytest.mark.parametrize("log", LOGS, ids=lambda log: log.path.name)
def test_each_log_parses_with_the_figures_it_states(log: Log) -> None:
    if not log.path.exists():
        pytest.skip("the log corpus (../shared/corpus) is not here")
    w = parse(log)
    assert [(s.global_step, s.step_timing) for s in w.steps] == [
        (step, pytest.approx(seconds, abs=1e-9)) for step, seconds in log.steps
    ]
    assert [s.tflops for s in w.steps if s.tflops] == log.tflops
    saves = [(c.step, c.save_duration if c.timed else None) for c in w.checkpoints]
    assert saves == [(step, None if t is None else pytest.approx(t, abs=1e-6)) for step, t in log.saves]
    load = (w.restore.step, w.restore.load_duration or None) if w.restore else None
    assert load == (None if log.load is None else (log.load[0], pytest.approx(log.load[1], abs=1e-6)))
    assert (w.pending_save.step if w.pending_save else None) == log.unfinished_save
    assert list(w.step_backs) == log.step_backs
    status = analyze((str(log.path),), profile(log.profile))
    assert status["stepCount"] == len(log.steps)
    assert status["goodputMeasurable"] is log.measurable
    assert [c["step"] for c in status["checkpoints"]] == [step for step, _ in log.saves]
    assert status.get("checkpointSaveUnfinished", {}).get("step") == log.unfinished_save
    assert [(b["from"], b["to"]) for b in status.get("stepBacks", [])] == log.step_backs
