"""The GoodputMeasurement controller on the real API server: the Job nvcre renders, its pods as
JobSet would run them on kwok nodes, their logs served by kwok through the pod log API."""

from __future__ import annotations

import copy
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Pod

from nvcre import resources
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.goodput import fmt, goodput
from nvcre.testing.builders import pool_spec
from nvcre.testing.inspect import get, kubectl_get, trainjob_of, wait_true
from nvcre.testing.kwok import register_pod_log
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import create_trainjob_pods, finish_trainjob, pool_name, workflow


def install_profile(kube: Client, name: str, *, like: str = "megatron-training") -> None:
    """A built-in profile (or a copy of it under ``name``), installed as the setup installs them."""
    body = copy.deepcopy(next(p for p in builtin_profiles() if p["metadata"]["name"] == like))
    body["metadata"]["name"] = name
    try:
        kube.create(resources.LogProfile.from_dict(body))
    except ApiError as error:
        if error.status.code != 409:
            raise


def start(kube: Client, namespace: str, gpu_nodes: Any, name: str, profile: str) -> dict[str, Any]:
    """A one-node Workflow whose Job measures goodput every second; its running pod."""
    pool = pool_name()
    gpu_nodes(1, pool_spec(pool))
    spec = {"goodputMeasurement": {"logProfileRef": profile, "sampleInterval": "5s"}}
    kube.create(resources.Workflow.from_dict(workflow(name, namespace, pool, 1, job_spec=spec)))
    trainjob_of(kube, namespace, f"{name}-job")
    (pod,) = create_trainjob_pods(kube, namespace, f"{name}-job-workload")
    pod_name = pod["metadata"]["name"]

    def running() -> dict[str, Any] | None:
        live = kube.get(Pod, pod_name, namespace=namespace).to_dict()
        return live if (live.get("status") or {}).get("phase") == "Running" else None

    return wait_for(running, 30, what=f"pod {pod_name} running")


def write_log(kube: Client, kwok: Any, pod: dict[str, Any], lines: list[tuple[datetime, str]]) -> None:
    """CRI log lines at the given kubelet times (each line's own stamp too, where it has one)."""
    text = "".join(f"{when.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z stdout F {line}\n" for when, line in lines)
    meta = pod["metadata"]
    register_pod_log(kube, kwok.logs_dir, meta["namespace"], meta["name"], text, container="node")


def megatron(when: datetime, text: str) -> tuple[datetime, str]:
    return when, f" [{when.strftime('%Y-%m-%d %H:%M:%S.%f')}] {text}"


def iteration(n: int, ms: float, tflops: float) -> str:
    return (
        f"iteration {n:8d}/      10 | consumed samples: {8 * n:12d} | elapsed time per iteration (ms): {ms:.1f} "
        f"| throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | lm loss: 1.000000E+01 | loss scale: 1.0 |"
    )


def conditions(gm: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c["reason"], c["message"])
        for c in (gm.get("status") or {}).get("conditions") or ()
    }


def gm_where(kube: Client, namespace: str, name: str, predicate: Any, what: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        gm = get(kube, resources.GoodputMeasurement, name, namespace)
        return gm if predicate(gm.get("status") or {}) else None

    return wait_for(check, 60, what=what, ignore=(ApiError,))  # created once the workload is


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text)


def started(kube: Client, namespace: str, gpu_nodes: Any, name: str) -> tuple[dict[str, Any], datetime]:
    """A Job whose goodput ``megatron-training`` measures, its pod Running, and a moment just after
    the pod started (where its log begins)."""
    install_profile(kube, "megatron-training")
    pod = start(kube, namespace, gpu_nodes, name, "megatron-training")
    return pod, parse(pod["status"]["startTime"].replace("Z", "+00:00")) + timedelta(milliseconds=100)


def test_a_healthy_run_completes_job_succeeded_with_the_figures_of_its_log(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    pod, t0 = started(kube, namespace, gpu_nodes, "gp")
    ms = timedelta(milliseconds=10)
    write_log(
        kube,
        kwok,
        pod,
        [
            (t0, f"[before the start of training step] datetime: {t0.strftime('%Y-%m-%d %H:%M:%S.%f')}"),
            megatron(t0 + 2 * ms, iteration(1, 4000.0, 100.0)),
            megatron(t0 + 3 * ms, iteration(2, 1200.0, 110.0)),
            megatron(t0 + 4 * ms, iteration(3, 1000.0, 120.0)),
            megatron(t0 + 5 * ms, "saving checkpoint at iteration       3 to /ckpt in torch_dist format"),
            megatron(
                t0 + 8 * ms, "successfully saved checkpoint from iteration       3 to /ckpt [ t 1/1, p 1/1 ]"
            ),
            megatron(t0 + 9 * ms, iteration(4, 1100.0, 130.0)),
        ],
    )
    running = gm_where(kube, namespace, "gp-job-goodput", lambda s: s.get("currentStep") == 4, "step 4 seen")
    assert conditions(running)["Measuring"] == (
        "True",
        "JobRunning",
        "Referenced Job is running, measurement in progress",
    )
    status = running["status"]
    # iterations 1 and 2 are warm-up (warmupSteps 2): 3 and 4 give the step time, all four the TFLOP/s
    assert (status["avgStepTimeSec"], status["avgTFLOPSPerGPU"]) == ("1.050000", "115.000000")
    assert status["resumeTimeSec"] == "0.020000"  # first iteration - "before the start of training step"
    assert (status["checkpointSaveTimeSec"], status["lastCheckpointStep"]) == ("0.030000", 3)
    assert (status["nonWarmupTimeSec"], status["warmupTimeSec"]) == ("2.100000", "5.200000")
    assert parse(status["lastStepTimestamp"]) == t0 + 9 * ms
    assert parse(status["trainingStartTime"]) == t0 + 2 * ms

    # The Job's Succeeded time has whole seconds (metav1.Time), and a run ends after its last
    # logged step: let the clock pass that step's second before the workload finishes.
    last = t0 + 9 * ms
    wait_for(
        lambda: datetime.now(UTC) >= last.replace(microsecond=0) + timedelta(seconds=1), 5, what="next second"
    )
    finish_trainjob(kube, namespace, "gp-job-workload", succeeded=True, measurements=False)
    job = wait_true(kube, resources.Job, "gp-job", namespace, "Succeeded")
    anchor = next(c["lastTransitionTime"] for c in job["status"]["conditions"] if c["type"] == "Succeeded")
    done = gm_where(kube, namespace, "gp-job-goodput", lambda s: "completionTime" in s, "the terminal write")
    assert conditions(done) == {
        "Measuring": ("False", "JobSucceeded", "Measurement completed"),
        "Complete": ("True", "JobSucceeded", "Referenced Job completed successfully"),
    }
    final = done["status"]
    assert final["completionTime"] == anchor
    t_w = (parse(anchor) - (t0 + 2 * ms)).total_seconds()
    assert final["trainingTimeSec"] == fmt(t_w)
    assert final["result"] == fmt(goodput(t_w, 0, 0, 0.02, 0.03))
    assert 0 < float(final["result"]) <= 1
    shown = kubectl_get(kube, resources.GoodputMeasurement, namespace, wide=True)["gp-job-goodput"]
    assert {k: v for k, v in shown.items() if k != "AGE"} == {
        "NAME": "gp-job-goodput",
        "COMPLETE": "True",
        "REASON": "JobSucceeded",
        "GOODPUT": final["result"],
        "STEP": 4,
        "STEP-TIME-S": "1.050000",
        "INTERRUPTIONS": final.get("interruptionCount"),
        "TFLOPS/GPU": "115.000000",
        "JOB": "gp-job",
    }
    owner = done["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Workflow", "gp")
    series = {"namespace": namespace, "measurement": "gp-job-goodput", "job": "gp-job", "workflow": "gp"}
    assert manager.metric("nvcre_goodput_ratio", **series) == float(final["result"])
    assert manager.metric("nvcre_goodput_avg_step_time_seconds", **series) == 1.05
    assert manager.metric("nvcre_goodput_avg_tflops_per_gpu", **series) == 115.0


def test_a_missing_profile_waits_and_a_run_without_steps_is_no_data_collected(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    profile = f"goodput-{secrets.token_hex(3)}"
    pod = start(kube, namespace, gpu_nodes, "nd", profile)
    missing = gm_where(
        kube, namespace, "nd-job-goodput", lambda s: bool(s.get("conditions")), "the missing profile reported"
    )
    assert conditions(missing) == {
        "Measuring": (
            "False",
            "LogProfileNotFound",
            f'LogProfile "{profile}" not found',
        )
    }
    write_log(
        kube,
        kwok,
        pod,
        [(parse(pod["status"]["startTime"].replace("Z", "+00:00")), "some unrelated log line")],
    )
    install_profile(kube, profile)
    measuring = gm_where(
        kube,
        namespace,
        "nd-job-goodput",
        lambda s: any(c["type"] == "Measuring" and c["status"] == "True" for c in s.get("conditions") or ()),
        "measuring once the profile exists",
    )
    assert "result" not in measuring["status"]
    finish_trainjob(kube, namespace, "nd-job-workload", succeeded=True, measurements=False)
    done = gm_where(kube, namespace, "nd-job-goodput", lambda s: "completionTime" in s, "the terminal write")
    assert conditions(done)["Complete"] == (
        "True",
        "NoDataCollected",
        "Job succeeded but no goodput was computed; check spec.logProfileRef",
    )


def test_a_failed_job_completes_job_failed_with_its_interruption(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    pod, t0 = started(kube, namespace, gpu_nodes, "gf")
    write_log(
        kube,
        kwok,
        pod,
        [megatron(t0 + timedelta(milliseconds=i), iteration(i, 1000.0, 100.0)) for i in (1, 2, 3)],
    )
    gm_where(kube, namespace, "gf-job-goodput", lambda s: s.get("currentStep") == 3, "step 3 seen")
    finish_trainjob(kube, namespace, "gf-job-workload", succeeded=False)
    done = gm_where(kube, namespace, "gf-job-goodput", lambda s: "completionTime" in s, "the terminal write")
    assert conditions(done)["Complete"] == ("True", "JobFailed", "Referenced Job failed")
    status = done["status"]
    assert status["interruptionCount"] == 1
    assert status["pendingInterruption"]["reason"] == "JobFailed"
    assert status["pendingInterruption"]["lastStep"] == 3
