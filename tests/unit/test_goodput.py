"""The goodput parser, formula and status transitions (spec measurements 3.1-3.5, cases 10 and 11)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.goodput import (
    GoodputParser,
    finish,
    fmt,
    goodput,
    interrupt,
    no_data,
    observe,
    restart_seen,
)
from nvcre.measure.goodput.parser import Window
from nvcre.measure.goodput.transitions import profile_missing, running, terminal
from nvcre.measure.profile import CompiledProfile, compile_profile
from nvcre.sandbox import Member, node_model, simulate

# The reference's Megatron profile (spec 1.2), with warmupSteps 1 as case 10 sets it.
TS = r"\[(?P<timestamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+)\]"
MEGATRON_SPEC = {
    "metadata": {"name": "nemotron-6-megatron", "resourceVersion": "1"},
    "spec": {
        "timestamp": {"layout": "2006-01-02 15:04:05.999999"},
        "warmupSteps": 1,
        "patterns": {
            "trainingStep": {
                "regex": TS
                + r"\s+iteration\s+(?P<iteration>\d+)/\s*\d+\s*\|.*elapsed time per iteration \(ms\):"
                r"\s*(?P<elapsedTime>[\d.]+)\s*\|.*throughput per GPU \(TFLOP/s/GPU\):\s*(?P<tflops>[\d.]+)\s*\|"
                r".*lm loss:\s*(?P<loss>[\d.eE+\-]+)",
                "units": {"elapsedTime": "ms"},
            },
            "checkpointSave": {
                "regex": TS + r"\s+saving checkpoint at iteration\s+(?P<step>\d+)\s+to\s+(?P<path>\S+)"
            },
            "checkpointDone": {
                "regex": TS
                + r"\s+successfully saved checkpoint from iteration\s+(?P<step>\d+)\s+to\s+(?P<path>\S+)"
            },
            "applicationStart": {
                "regex": r"\[before the start of training step\]\s+datetime:\s+"
                r"(?P<timestamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+)"
            },
        },
    },
}
FIXTURE = """\
2026-02-05T16:01:40.326255000Z [before the start of training step] datetime: 2026-02-05 16:01:40.326255
2026-02-05T16:03:52.889599000Z [2026-02-05 16:03:52.889599] iteration        1/  158945 | consumed samples: 768 | elapsed time per iteration (ms): 132563.1 | throughput per GPU (TFLOP/s/GPU): 138.5 | lm loss: 1.218472E+01
2026-02-05T16:05:00.000000000Z [2026-02-05 16:05:00.000000] iteration        2/  158945 | consumed samples: 1536 | elapsed time per iteration (ms): 5000.0 | throughput per GPU (TFLOP/s/GPU): 140.0 | lm loss: 1.100000E+01
2026-02-05T17:07:36.379347000Z [2026-02-05 17:07:36.379347] saving checkpoint at iteration     100 to /mnt/workspace/checkpoints in torch_dist format
2026-02-05T17:13:37.825367000Z [2026-02-05 17:13:37.825367] successfully saved checkpoint from iteration     100 to /mnt/workspace/checkpoints
2026-02-05T17:14:00.000000000Z some unrelated log line
""".splitlines()


def spec_profile(**spec: Any) -> CompiledProfile:
    body = json.loads(json.dumps(MEGATRON_SPEC))
    body["spec"].update(spec)
    return compile_profile(body)


def builtin(name: str) -> CompiledProfile:
    return next(compile_profile(p) for p in builtin_profiles() if p["metadata"]["name"] == name)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- case 10 -------------------------------------------------------------------------------------


def test_case_10_megatron_parse_with_checkpoint() -> None:
    w = GoodputParser(spec_profile()).feed_all(FIXTURE)
    assert w.application_start_time == at("2026-02-05T16:01:40.326255")
    assert [(s.global_step, round(s.step_timing, 6), s.tflops, s.loss) for s in w.steps] == [
        (1, 132.5631, 138.5, 12.18472),
        (2, 5.0, 140.0, 11.0),
    ]
    (checkpoint,) = w.checkpoints
    assert (checkpoint.step, checkpoint.path, checkpoint.timestamp) == (
        100,
        "/mnt/workspace/checkpoints",
        at("2026-02-05T17:13:37.825367"),
    )
    assert checkpoint.save_duration == pytest.approx(361.44602)
    assert w.last_log_timestamp == at("2026-02-05T17:14:00")
    assert [s.warmup for s in w.steps] == [True, False]
    status = observe({}, w, now=at("2026-02-05T17:14:05"), log_interval=0)
    assert status["avgStepTimeSec"] == "5.000000"
    assert status["avgTFLOPSPerGPU"] == "139.250000"  # warm-up included
    assert status["resumeTimeSec"] == "132.563344"
    assert status["applicationStartTime"] == "2026-02-05T16:01:40.326255Z"
    assert status["lastStepTimestamp"] == "2026-02-05T16:05:00.000000Z"  # step 2: not warm-up
    assert (status["currentStep"], status["lastCheckpointStep"], status["checkpointSaveTimeSec"]) == (
        2,
        100,
        "361.446020",
    )


def test_a_saving_checkpoint_line_is_not_an_iteration_line() -> None:
    for name in ("megatron-training", "megatron-bridge"):
        w = GoodputParser(builtin(name)).feed_all(FIXTURE[3:5])
        assert list(w.steps) == [] and [c.step for c in w.checkpoints] == [100]


# --- case 11 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ((3600, 0, 0, 120, 60), "0.950000"),
        ((7200, 300, 120, 180, 0), "0.932203"),
        ((100, 0, 100, 0, 0), "0.000000"),
        ((100, 0, 0, 150, 0), "0.000000"),
    ],
    ids=["a", "b", "c-denominator", "d-negative-numerator"],
)
def test_case_11_goodput_formula(terms: tuple[float, float, float, float, float], expected: str) -> None:
    t_w, t_ch, t_re, t_rm, t_save = terms
    assert fmt(goodput(t_w, t_ch, t_re, t_rm, t_save)) == expected


def test_case_11_succeeded_training_time_and_no_data() -> None:
    running = observe(
        {}, GoodputParser(spec_profile()).feed_all(FIXTURE), now=at("2026-02-05T17:14:05"), log_interval=0
    )
    anchor = at("2026-02-05T18:03:52.889599")
    done = finish(running, "Succeeded", anchor=anchor)
    assert done["trainingTimeSec"] == "7200.000000"  # anchor - first step (16:03:52.889599)
    assert done["result"] == fmt((7200 - 132.563344 - 361.44602) / 7200)
    assert done["completionTime"] == "2026-02-05T18:03:52Z"
    assert not no_data(done)
    assert finish(running, "Succeeded", anchor=anchor) == done  # a replay is the same status
    assert no_data(finish({}, "Succeeded", anchor=anchor))  # no step: no result
    assert no_data({"result": "0.000000"})


# --- windows, warm-up and interruptions -----------------------------------------------------------


def test_the_warmup_base_survives_a_read_without_the_start_line() -> None:
    profile = spec_profile(warmupSteps=2)
    first = GoodputParser(profile).feed_all(FIXTURE[:2])  # start + step 1 (the base)
    status = observe({}, first, now=at("2026-02-05T16:04:00"), log_interval=0)
    assert status["warmupBaseStep"] == 1 and "lastStepTimestamp" not in status
    second = GoodputParser(profile, warmup_base=1).feed_all(FIXTURE[2:3])  # step 2, no start line
    assert [s.warmup for s in second.steps] == [True]  # 2 - 1 < 2
    third = GoodputParser(profile, warmup_base=1).feed_all(
        [FIXTURE[2].replace("iteration        2/", "iteration        3/")]
    )
    assert [s.warmup for s in third.steps] == [False]


def test_an_open_save_is_carried_to_the_next_read() -> None:
    profile = spec_profile()
    first = GoodputParser(profile).feed_all(FIXTURE[:4])
    assert first.pending_save is not None and first.pending_save.step == 100
    second = GoodputParser(profile, pending_save=first.pending_save).feed_all(FIXTURE[4:])
    assert [round(c.save_duration, 5) for c in second.checkpoints] == [361.44602]


def test_overlapping_reads_count_each_checkpoint_and_step_once() -> None:
    profile = spec_profile()
    now = at("2026-02-05T17:14:05")
    once = observe({}, GoodputParser(profile).feed_all(FIXTURE), now=now, log_interval=0)
    again = observe(
        once, GoodputParser(profile, warmup_base=1).feed_all(FIXTURE[1:]), now=now, log_interval=0
    )
    assert again == once


def test_an_interruption_then_the_next_run() -> None:
    profile = spec_profile()
    status = observe(
        {}, GoodputParser(profile).feed_all(FIXTURE), now=at("2026-02-05T17:14:05"), log_interval=0
    )
    assert not restart_seen(status, 0) and restart_seen(status, 1)
    stopped = interrupt(status, reason="WorkloadRestarted", at=at("2026-02-05T17:23:37.825367"))
    assert stopped["interruptionCount"] == 1
    assert stopped["lostWorkTimeSec"] == "600.000000"  # 17:23:37.825367 - checkpoint 17:13:37.825367
    assert stopped["pendingInterruption"]["checkpointStep"] == 100
    assert "lastStepTimestamp" not in stopped and "avgStepTimeSec" not in stopped
    assert interrupt(stopped, reason="WorkloadRestarted", at=at("2026-02-05T17:30:00"))[
        "lostWorkTimeSec"
    ] == ("600.000000")
    rerun = [
        "2026-02-05T17:25:37.825367Z [before the start of training step] datetime: 2026-02-05 17:25:37.825367",
        "2026-02-05T17:26:07.825367Z [2026-02-05 17:26:07.825367] iteration      101/  158945 | consumed samples: 1 "
        "| elapsed time per iteration (ms): 30000.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | lm loss: 1.0E+01",
    ]
    resumed = observe(
        stopped, GoodputParser(profile).feed_all(rerun), now=at("2026-02-05T17:26:10"), log_interval=0
    )
    assert "pendingInterruption" not in resumed
    assert resumed["rescheduleTimeSec"] == "120.000000"  # new app start - interruption
    assert resumed["resumeTimeSec"] == fmt(132.563344 + 30)  # start-up + (first step - app start)
    assert (resumed["currentStep"], resumed["highestStep"], resumed["warmupBaseStep"]) == (101, 101, 101)


def test_a_failed_job_is_an_interruption_at_its_last_log_read() -> None:
    status = observe(
        {}, GoodputParser(spec_profile()).feed_all(FIXTURE), now=at("2026-02-05T17:14:05"), log_interval=0
    )
    failed = finish(status, "Failed", anchor=at("2026-02-05T17:20:00"))
    assert failed["pendingInterruption"]["reason"] == "JobFailed"
    assert failed["pendingInterruption"]["tInterrupt"] == "2026-02-05T17:14:05.000000Z"  # applicationStopTime
    assert failed["trainingTimeSec"] == fmt(
        (at("2026-02-05T17:14:05") - at("2026-02-05T16:03:52.889599")).total_seconds()
    )


def test_the_terminal_read_drops_lines_after_the_anchor_and_never_regresses() -> None:
    profile = spec_profile()
    status = observe(
        {}, GoodputParser(profile).feed_all(FIXTURE), now=at("2026-02-05T17:14:05"), log_interval=0
    )
    late = FIXTURE[2].replace("16:05:00", "18:00:00").replace("iteration        2/", "iteration      300/")
    window = GoodputParser(profile, warmup_base=1, until=at("2026-02-05T17:30:00")).feed_all(
        [*FIXTURE[2:], late]
    )
    assert window.last_step is not None and window.last_step.global_step == 2
    final = observe(status, window, now=at("2026-02-05T17:30:00"), log_interval=0, final=True)
    assert final["currentStep"] == 2 and final["applicationStopTime"] == status["applicationStopTime"]
    older = GoodputParser(profile, warmup_base=1).feed_all(FIXTURE[1:2])  # only step 1
    assert observe(final, older, now=at("2026-02-05T17:30:00"), log_interval=0, final=True) == final


def test_log_interval_drops_boundary_lines_and_is_persisted() -> None:
    profile = spec_profile(logInterval=10)
    lines = [FIXTURE[1].replace("iteration        1/", f"iteration {n:8d}/") for n in (1, 10, 20)]
    w = GoodputParser(profile).feed_all(lines)
    assert [s.global_step for s in w.steps] == [10, 20]
    assert observe({}, w, now=at("2026-02-05T17:00:00"), log_interval=10)["logInterval"] == 10


# --- the simulated accelerator's logs -----------------------------------------------------------


GROUP = [Member(f"n{i}", node_model(f"n{i}", "NVIDIA-H100-80GB-HBM3", "aws")) for i in range(2)]
MEGATRON_RUN = (
    '"$MEGATRON/pretrain_mamba.py" --num-layers 24 --hidden-size 2048 --seq-length 8192 --global-batch-size 64 '
    "--log-interval 1 --train-iters 20 --save /ckpt --save-interval 10"
)


def kubelet_lines(script: str, rank: int) -> list[str]:
    sim = simulate(["/bin/bash", "-c", script], GROUP, (), seed=5, rank=rank, env={})
    start = at("2026-03-01T10:00:00")
    return [
        f"{(start + timedelta(seconds=line.offset_s)).isoformat().replace('+00:00', 'Z')} {line.text}"
        for line in sim.lines
    ]


def test_the_simulated_megatron_logs_parse_with_megatron_training() -> None:
    profile = builtin("megatron-training")
    steps = GoodputParser(profile).feed_all(kubelet_lines(MEGATRON_RUN, rank=1))  # the last rank: steps
    lifecycle = GoodputParser(profile).feed_all(kubelet_lines(MEGATRON_RUN, rank=0))  # rank 0: checkpoints
    assert [s.global_step for s in steps.steps] == list(range(1, 21))
    assert all(s.step_timing > 0 and s.tflops > 0 and s.timestamp for s in steps.steps)
    assert [c.step for c in lifecycle.checkpoints] == [10, 20]
    assert all(c.save_duration == pytest.approx(4.0) for c in lifecycle.checkpoints)
    status = observe({}, steps.with_lifecycle(lifecycle), now=at("2026-03-01T11:00:00"), log_interval=1)
    assert status["lastCheckpointStep"] == 20 and float(status["resumeTimeSec"]) > 0
    assert 0 < float(finish(status, "Succeeded", anchor=at("2026-03-01T10:30:00"))["result"]) <= 1


def test_the_simulated_nemo_logs_parse_with_nemo_training() -> None:
    lines = kubelet_lines("nemo llm pretrain trainer.max_steps=5 model.global_batch_size=64", rank=0)
    w = GoodputParser(builtin("nemo-training")).feed_all(lines)
    assert [s.global_step for s in w.steps] == [0, 1, 2, 3, 4]
    assert all(s.step_timing > 0 and s.timestamp for s in w.steps)
    assert [s.warmup for s in w.steps] == [True, False, False, False, False]


def test_nemo1_progress_bar_reads_a_float_global_step_as_the_step() -> None:
    """NeMo 1's bar prints the batches done ("50/50") and global_step as a float ("49.00" after 50
    steps from 0): the step is 49, as NeMo 2's last line of a 50-step run says ("iteration 49/49 |
    ... global_step: 49"); tqdm's inexact "2e+3" still falls back to the bar's count."""
    bar = "Epoch 0: : 100%|██████████| {done}/50 [23:22<00:00, reduced_train_loss=0.186, global_step={step}, train_step_timing in s=24.00]"
    w = GoodputParser(builtin("nemo-training")).feed_all(
        [
            bar.format(done=50, step="49.00"),
            bar.format(done=50, step="50.0"),
            bar.format(done=2000, step="2e+3"),
        ]
    )
    assert [(s.global_step, s.step_timing) for s in w.steps] == [(49, 24.0), (50, 24.0), (2000, 24.0)]


# --- fuzzing -------------------------------------------------------------------------------------

PIECES = st.sampled_from(
    [
        *FIXTURE,
        "2026-02-05T17:14:00Z ",
        "iteration 5/ 10 |",
        "global_step: 7 | train_step_timing in s: 1e400",
        "saving checkpoint at iteration 9999999999999999999999 to /x",
        "successfully saved checkpoint from iteration 1 to",
        "Global Checkpoint Save : Rank: 0 : Iteration: 3 : Save duration: nans",
        "Training epoch 0, iteration 1/9 | global_step: 1 | train_step_timing in s: 0.5",
        "[before the start of training step] datetime: 2026-13-45 99:99:99.1",
        "\x00\ufffd",
    ]
)


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.one_of(PIECES, st.text(max_size=200), PIECES.map(lambda s: s[: len(s) // 2])), max_size=30)
)
def test_garbage_and_truncated_logs_never_raise(lines: list[str]) -> None:
    now = at("2026-02-05T18:00:00")
    for profile in (spec_profile(), builtin("megatron-training"), builtin("nemo-training")):
        parser = GoodputParser(profile)
        window: Window = parser.feed_all(lines)
        status = observe({}, window, now=now, log_interval=profile.log_interval)
        status = observe(
            status, GoodputParser(profile).feed_all(lines[::-1]), now=now, log_interval=1, final=True
        )
        for outcome in ("Succeeded", "Failed"):
            done = finish(status, outcome, anchor=now)  # type: ignore[arg-type]
            assert 0.0 <= float(done.get("result") or 0) <= 1.0


# --- conditions (3.5) ----------------------------------------------------------------------------


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def test_running_then_the_terminal_freeze_and_its_replay() -> None:
    profile = spec_profile()
    window = GoodputParser(profile).feed_all(FIXTURE)
    live = running({}, window, now=at("2026-02-05T17:14:05"), log_interval=0, generation=1)
    assert conditions(live) == {
        "Measuring": ("True", "JobRunning", "Referenced Job is running, measurement in progress")
    }
    assert live["startTime"] == "2026-02-05T17:14:05Z"
    anchor = at("2026-02-05T18:03:52")
    final = GoodputParser(profile, warmup_base=1, until=anchor).feed_all(FIXTURE)
    done = terminal(live, final, "Succeeded", anchor=anchor, terminated=None, log_interval=0, generation=1)
    assert conditions(done) == {
        "Measuring": ("False", "JobSucceeded", "Measurement completed"),
        "Complete": ("True", "JobSucceeded", "Referenced Job completed successfully"),
    }
    assert done["completionTime"] == "2026-02-05T18:03:52Z"
    again = terminal(live, final, "Succeeded", anchor=anchor, terminated=None, log_interval=0, generation=1)
    assert json.dumps(again, sort_keys=True) == json.dumps(done, sort_keys=True)  # byte-identical
    assert (
        terminal(
            done,
            None,
            "Failed",
            anchor=at("2026-02-05T19:00:00"),
            terminated=None,
            log_interval=0,
            generation=2,
        )
        == done
    )


def test_a_success_without_goodput_is_no_data_collected() -> None:
    done = terminal(
        {}, None, "Succeeded", anchor=at("2026-02-05T18:00:00"), terminated=None, log_interval=0, generation=1
    )
    assert conditions(done)["Complete"] == (
        "True",
        "NoDataCollected",
        "Job succeeded but no goodput was computed; check spec.logProfileRef",
    )
    assert "result" not in done


def test_a_failed_job_completes_job_failed() -> None:
    live = running(
        {},
        GoodputParser(spec_profile()).feed_all(FIXTURE),
        now=at("2026-02-05T17:14:05"),
        log_interval=0,
        generation=1,
    )
    done = terminal(
        live, None, "Failed", anchor=at("2026-02-05T17:20:00"), terminated=None, log_interval=0, generation=1
    )
    assert conditions(done)["Complete"] == ("True", "JobFailed", "Referenced Job failed")
    assert done["interruptionCount"] == 1


def test_a_missing_profile_is_not_terminal() -> None:
    missing = profile_missing({}, 'LogProfile "nope" not found', now=at("2026-02-05T17:00:00"), generation=1)
    assert conditions(missing) == {
        "Measuring": ("False", "LogProfileNotFound", 'LogProfile "nope" not found')
    }
