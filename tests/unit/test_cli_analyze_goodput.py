"""``nvcrectl analyze goodput``: the controller's parser and calculator over a saved log."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import yaml

from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.goodput.sampling import NO_STEP_TIME
from tests.unit.analyze_cli import analyze

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="the log corpus (../shared/corpus) is not here")
N6 = str(CORPUS / "megatron" / "cre-fixture-n6-full-sequence-k8s-ts-checkpoint.log")
DATA = Path(__file__).resolve().parents[1] / "data" / "training"


run = partial(analyze, "goodput")


def test_the_megatron_fixture_as_the_controller_would_write_it() -> None:
    code, out, _ = run("-o", "json", N6)
    assert code == 0
    status = json.loads(out)
    # first iteration 16:03:52.889599 to the last line 17:14:00 (the end of the run)
    assert status["trainingTimeSec"] == "4207.110401"
    assert status["resumeTimeSec"] == "132.563344"  # 16:01:40.326255 -> 16:03:52.889599
    assert status["checkpointSaveTimeSec"] == "361.446020"  # save 17:07:36.379347 -> done 17:13:37.825367
    assert status["result"] == "0.882578"  # (4207.110401 - 132.563344 - 361.44602) / 4207.110401
    assert (status["currentStep"], status["highestStep"], status["lastCheckpointStep"]) == (2, 2, 100)
    assert status["avgTFLOPSPerGPU"] == "139.250000"  # (138.5 + 140.0) / 2
    assert "avgStepTimeSec" not in status  # both steps are warm-up under megatron-training (2)


def test_stdin_a_profile_file_and_yaml_output(tmp_path: Path) -> None:
    body = next(p for p in builtin_profiles() if p["metadata"]["name"] == "megatron-training")
    body["spec"]["warmupSteps"] = 1
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(body))
    code, out, _ = run("--profile", str(path), "-o", "yaml", "-", stdin=Path(N6).read_text())
    assert code == 0
    assert yaml.safe_load(out)["avgStepTimeSec"] == "5.000000"  # step 2 only: 5000.0 ms


def test_nemo_table_and_a_log_without_times() -> None:
    code, out, _ = run(
        "--profile", "nemo-training", str(CORPUS / "nemo" / "cre-fixture-n4-training-steps-k8s-ts.log")
    )
    assert code == 0
    assert "avgStepTimeSec              1.100000\n" in out  # global_step 101 (step 100 is warm-up)
    assert "trainingTimeSec             1.376544\n" in out  # 18:00:05.123456 -> 18:00:06.500000
    assert "goodputMeasurable           true\n" in out
    code, out, err = run(
        "--profile", "nemo-training", str(CORPUS / "nemo" / "awsome-nemo2-sky-logs-l40s.log")
    )
    # step times are measured, goodput is not: no time anywhere in the lines
    assert (
        code == 0
        and "currentStep                 48\n" in out
        and "avgStepTimeSec              46.980000\n" in out
    )
    assert "goodputMeasurable           false\n" in out
    assert "checkpoints                 step=47\n" in out  # "...-step=47-..." finalised "for step 48"
    assert err == f"Warning: goodput is not measurable from this log: {NO_STEP_TIME}\n"


def test_a_log_without_wall_clock_time_is_judged_on_what_it_measures() -> None:
    """BLOOM's log (Megatron-DeepSpeed, 2022) prints step times and TFLOP/s and no time of day."""
    bloom = str(DATA / "bigscience-bloom176b-default7-seconds-tflops.log")
    code, out, err = run(
        "-o",
        "json",
        "--threshold",
        "avgTFLOPsPerGPU=value >= 140",
        "--threshold",
        "avgStepTimeSec=value < 120",
        bloom,
    )
    status = json.loads(out)
    assert code == 0 and err == f"Warning: goodput is not measurable from this log: {NO_STEP_TIME}\n"
    assert status["verdict"] == {
        "failed": False,
        "reason": "ThresholdsMet",
        "message": "All performance thresholds satisfied",
    }
    assert (status["avgStepTimeSec"], status["avgTFLOPSPerGPU"]) == ("106.412222", "147.412727")
    assert status["goodputMeasurable"] is False and status["goodputNotMeasurableReason"] == NO_STEP_TIME
    assert "result" not in status and "trainingTimeSec" not in status
    code, out, err = run("-o", "json", "--threshold", "goodputRatio=value >= 0.9", bloom)
    message = f"No final value for threshold(s) [goodputRatio]: goodput is not measurable: {NO_STEP_TIME}"
    assert code == 1 and json.loads(out)["verdict"] == {
        "failed": True,
        "reason": "MeasurementUnavailable",
        "message": message,
    }
    assert err == f"Error: {message}\n"
    code, _, err = run("--threshold", "avgStepTimeSec=value < 100", bloom)  # 106.41 s
    assert code == 1
    assert err.endswith(
        'Error: Threshold "avgStepTimeSec" violated: measured 106.4122, expression: value < 100\n'
    )


def test_a_log_without_a_training_step_measures_nothing() -> None:
    code, out, err = run(
        "-o", "json", str(DATA / "nolebase-megatron-gpt2-1gpu-old-wording-timers-no-steps.log")
    )
    status = json.loads(out)
    assert code == 1
    assert err == (
        # the log ends at "saving checkpoint at iteration       2 to ./checkpoints/gpt-2"
        "Warning: the checkpoint save at step 2 starts and never ends in this log (no done line, no save "
        "timer): the run stopped during it, or its end is in another log\n"
        "Error: No final goodput data: the goodput measurement ended NoDataCollected: no training step "
        "with a step time or TFLOP/s recognised with profile megatron-training. "
        "Set goodputMeasurement.allowMissingData to make it informational\n"
    )
    assert status["checkpointSaveUnfinished"] == {"step": 2}
    assert status["goodputNotMeasurableReason"] == "no training step was recognised"
    assert status["checkpoints"] == [{"step": 1, "saveTimeSec": "21.027080"}]  # its save-checkpoint timer
    assert status["checkpointSaveTimeSec"] == "21.027080" and status["stepCount"] == 0


def test_bad_input_is_one_line() -> None:
    assert run("--profile", "nope", N6)[2].startswith("Error: nope: neither a built-in LogProfile")
    assert run("/no/such/log")[2].startswith("Error: /no/such/log: cannot read file")
    assert run("--profile", "nope", N6)[0] == 2
    assert run("-o", "xml", N6)[0] != 0


def test_a_goodput_threshold_sets_the_exit_code() -> None:
    code, out, _ = run("-o", "json", "--threshold", "goodputRatio=value >= 0.8", N6)
    assert code == 0 and json.loads(out)["verdict"]["reason"] == "ThresholdsMet"
    code, out, err = run("-o", "json", "--threshold", "goodputRatio=value >= 0.9", N6)
    assert code == 1 and json.loads(out)["verdict"]["reason"] == "ThresholdViolated"
    assert err == 'Error: Threshold "goodputRatio" violated: measured 0.8826, expression: value >= 0.9\n'


def test_a_save_the_log_starts_and_never_ends_is_shown_and_warned_of() -> None:
    """GPT-2 on 4 GPUs (Megatron-LM, 2024) crashes in its first save: "saving checkpoint at iteration
    50 ... in torch_dist format", then every rank's traceback and torchrun's ChildFailedError."""
    crashed = str(DATA / "kisti-megatron-tp4-fp16-skipped-crash-in-save.log")
    code, out, err = run(crashed)
    assert code == 0 and "checkpoints                 none\n" in out
    assert "checkpointSaveUnfinished    step=50\n" in out
    assert err == (
        "Warning: the checkpoint save at step 50 starts and never ends in this log (no done line, no save "
        "timer): the run stopped during it, or its end is in another log\n"
    )
    code, out, err = run("-o", "json", str(DATA / "dgxc-llama31-save-done-and-timer-one-line.log"))
    assert "checkpointSaveUnfinished" not in json.loads(out) and "never ends" not in err


def test_a_run_started_again_within_the_log_is_shown_and_warned_of() -> None:
    """NeMo's resiliency demo: every rank crashes after global_step 15, the fault-tolerance launcher
    restarts the workers in the same job, they restore step 9 and log global_step 10 to 19."""
    log = str(DATA / "nemo2-resiliency-demo-crash-ft-restart-restore.log")
    code, out, err = run("--profile", "nemo-training", "-o", "json", log)
    status = json.loads(out)
    assert code == 0 and status["stepBacks"] == [{"from": 15, "to": 10}]
    assert status["checkpointLoad"] == {"step": 9} and status["stepCount"] == 26
    assert (
        "Warning: the step goes back from 15 to 10 in this log: the run started again from a checkpoint "
        "within it (no restart of the Job), and goodput counts neither that interruption nor the steps "
        "done again as lost\n"
    ) in err
