"""The BandwidthMeasurement controller on the real API server, reading launcher logs kwok serves.

The pods are those JobSet would run for the TrainJob nvcre rendered (``create_trainjob_pods``);
their logs are corpus nccl-tests logs (without the corpus' own kubelet prefix: kwok adds one).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, AsyncClient, Client
from lightkube.resources.core_v1 import Pod

from nvcre import resources
from nvcre.controllers.podlogs import LogsError, line_time, read_tail, stream_lines
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.nccl import Parser, read, strip_kubelet_prefix
from nvcre.measure.profile import compile_profile
from nvcre.testing.builders import pool_spec
from nvcre.testing.inspect import get, kubectl_get, trainjob_of, wait_true
from nvcre.testing.kwok import PHASE_ANNOTATION, after_last_entry, cri_log_lines, register_pod_log
from nvcre.testing.nccl_cases import status_row
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import create_trainjob_pods, finish_trainjob, pool_name, workflow

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nccl"
DATA = Path(__file__).resolve().parents[1] / "data" / "nccl"
PROFILE = next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth")


def corpus_lines(name: str) -> list[str]:
    return [strip_kubelet_prefix(line) for line in (CORPUS / name).read_text().splitlines()]


def data_lines(name: str) -> list[str]:
    """A log of tests/data/nccl (the project's own collected logs; see its README)."""
    return (DATA / name).read_text().splitlines()


def expected(lines: list[str]) -> list[dict[str, Any]]:
    return [r.to_status() for r in read(lines, Parser(compile_profile(PROFILE))).results()]


def start(
    kube: Client, kwok: Any, gpu_nodes: Any, namespace: str, name: str, profile: str
) -> tuple[str, list[str]]:
    """A 2-node MPI Workflow measuring bandwidth; returns the launcher pod and all its pods, Running."""
    pool = pool_name()
    gpu_nodes(2, pool_spec(pool))
    measurement = {"logProfileRef": profile, "sampleInterval": "5s", "testType": "all_reduce"}
    doc = workflow(name, namespace, pool, 2, mpi=True, job_spec={"bandwidthMeasurement": measurement})
    kube.create(resources.Workflow.from_dict(doc))
    trainjob_of(kube, namespace, f"{name}-job")
    pods = [p["metadata"]["name"] for p in create_trainjob_pods(kube, namespace, f"{name}-job-workload")]
    launcher = next(p for p in pods if "-launcher-" in p)
    for pod in pods:
        wait_for(lambda pod=pod: phase(kube, namespace, pod) == "Running", 30, what=f"pod {pod} Running")
    return launcher, pods


def phase(kube: Client, namespace: str, pod: str) -> str | None:
    found = kube.get(Pod, pod, namespace=namespace)
    return found.status.phase if found.status else None


def finish(kube: Client, namespace: str, name: str, pods: list[str], *, succeeded: bool) -> None:
    end = "Succeeded" if succeeded else "Failed"
    for pod in pods:
        kube.patch(Pod, pod, {"metadata": {"annotations": {PHASE_ANNOTATION: end}}}, namespace=namespace)
    for pod in pods:
        wait_for(lambda pod=pod: phase(kube, namespace, pod) == end, 30, what=f"pod {pod} {end}")
    finish_trainjob(kube, namespace, f"{name}-job-workload", succeeded=succeeded, measurements=False)
    wait_true(kube, resources.Job, f"{name}-job", namespace, "Succeeded" if succeeded else "Failed")


def measurement(kube: Client, namespace: str, name: str) -> dict[str, Any]:
    """The Job's BandwidthMeasurement; empty until the Job controller has created it."""
    try:
        return get(kube, resources.BandwidthMeasurement, f"{name}-job-bandwidth", namespace)
    except ApiError as error:
        if error.status.code == 404:
            return {}
        raise


def measured(
    kube: Client, kwok: Any, gpu_nodes: Any, namespace: str, name: str, lines: list[str]
) -> dict[str, Any]:
    """The completed measurement of a Job whose launcher logged ``lines`` and succeeded."""
    launcher, pods = start(kube, kwok, gpu_nodes, namespace, name, "nccl-bandwidth")
    kwok.write_pod_logs(kube, namespace, launcher, lines, container="launcher")
    finish(kube, namespace, name, pods, succeeded=True)
    return completed(kube, namespace, name)


def completed(kube: Client, namespace: str, name: str) -> dict[str, Any]:
    return wait_for(
        lambda: (
            ((condition(b := measurement(kube, namespace, name), "Complete") or ("",))[0] == "True") and b
        ),
        60,
        what=f"BandwidthMeasurement {name}-job-bandwidth Complete",
    )


def condition(bm: dict[str, Any], kind: str) -> tuple[str, str, str] | None:
    for c in (bm.get("status") or {}).get("conditions") or ():
        if c["type"] == kind:
            return c["status"], c["reason"], c["message"]
    return None


def test_provisional_samples_then_the_final_read_of_the_whole_launcher_log(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    lines = corpus_lines("cre-real-a100-allreduce-2node-pdt-timestamps.log")
    launcher, pods = start(kube, kwok, gpu_nodes, namespace, "ar", "nccl-bandwidth")
    cut = next(i for i, line in enumerate(lines) if line.strip().startswith("1024 "))  # after L114 (512 B)
    kwok.write_pod_logs(kube, namespace, launcher, lines[:cut], container="launcher")
    bm = wait_for(
        lambda: (b := measurement(kube, namespace, "ar")).get("status", {}).get("results") and b,
        60,
        what="provisional results",
    )
    assert condition(bm, "Measuring") == (
        "True",
        "JobRunning",
        "Referenced Job is running, measurement in progress",
    )
    assert condition(bm, "Complete") is None
    assert (
        kubectl_get(kube, resources.BandwidthMeasurement, namespace)["ar-job-bandwidth"]["REASON"]
        == "JobRunning"
    )
    assert bm["status"]["results"] == expected(lines[:cut])  # the 8 rows 8 B .. 512 B (L108-L115)
    assert bm["status"]["transport"] == ["Socket"]
    assert bm["status"]["tableLayout"] == {  # L94: the header the next sample reads rows with
        "columns": "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
        "halves": "out-of-place in-place",
    }
    kwok.write_pod_logs(kube, namespace, launcher, lines[cut:], container="launcher", append=True)
    wait_for(
        lambda: len(measurement(kube, namespace, "ar").get("status", {}).get("results") or ()) == 24,
        60,
        what="the rest of the rows merged provisionally, each once",
    )
    assert all(r["samples"] == 1 for r in measurement(kube, namespace, "ar")["status"]["results"])
    finish(kube, namespace, "ar", pods, succeeded=True)
    bm = completed(kube, namespace, "ar")
    status = bm["status"]
    assert status["results"] == expected(lines)  # L131 67108864 0.03 0.03 last
    assert status["results"][-1] == status_row(67108864, "0.03", "0.03", "0.03", "0.03")
    assert (status["transport"], status["wrongValues"]) == (["Socket"], 0)
    assert "tableLayout" not in status
    assert {k: status[k] for k in ("test", "ranks", "avgBusBandwidthGBps", "outOfBounds", "complete")} == {
        "test": "all_reduce_perf_mpi",  # L5
        "ranks": 2,  # L9-L10
        "avgBusBandwidthGBps": "0.0119653",  # L135
        "outOfBounds": {"count": 0, "status": "OK"},  # L134
        "complete": True,  # the footer, and 67108864 B is the sweep's maxBytes (L6)
    }
    assert status["hosts"] == [
        "r2-allreduce-communicatio-3af21-job-workload-node-0-0",
        "r2-allreduce-communicatio-3af21-job-workload-node-0-1",
    ]
    assert (status["failureLines"], status["sizesDropped"]) == ({"count": 0, "lines": []}, 0)
    message = f"Final results from the complete log of pod {namespace}/{launcher}: 24 rows, 24 message sizes"
    assert condition(bm, "Complete") == ("True", "JobSucceeded", message)
    assert condition(bm, "Measuring") == ("False", "JobSucceeded", message)
    shown = kubectl_get(kube, resources.BandwidthMeasurement, namespace, wide=True)["ar-job-bandwidth"]
    assert {k: v for k, v in shown.items() if k != "AGE"} == {
        "NAME": "ar-job-bandwidth",
        "COMPLETE": "True",
        "REASON": "JobSucceeded",
        "TEST": "all_reduce_perf_mpi",
        "RANKS": 2,
        "BUSBW-GB/S": "0.0119653",
        "LOG-COMPLETE": True,
        "INCOMPLETE-REASON": None,
        "JOB": "ar-job",
    }
    job = get(kube, resources.Job, "ar-job", namespace)
    succeeded = next(c for c in job["status"]["conditions"] if c["type"] == "Succeeded")
    assert status["completionTime"] == succeeded["lastTransitionTime"]
    assert status["startTime"] <= status["completionTime"]


def test_a_row_the_launcher_is_still_writing_is_read_whole_by_the_next_sample(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    """The kubelet serves the line a running container is writing as far as it got; a sample
    that took that part would move its cursor past the row and never read it whole (fails on
    main: the 1024 B row is lost, 23 rows)."""
    lines = corpus_lines("cre-real-a100-allreduce-2node-pdt-timestamps.log")
    launcher, _ = start(kube, kwok, gpu_nodes, namespace, "torn", "nccl-bandwidth")
    cut = next(i for i, line in enumerate(lines) if line.strip().startswith("1024 "))
    text = cri_log_lines(lines[: cut + 1])
    torn = len(text) - 1 - len(lines[cut]) // 2  # half of the 1024 B row, without its newline
    register_pod_log(kube, kwok.logs_dir, namespace, launcher, text[:torn], container="launcher")
    bm = wait_for(
        lambda: (b := measurement(kube, namespace, "torn")).get("status", {}).get("results") and b,
        60,
        what="provisional results",
    )
    assert bm["status"]["results"] == expected(lines[:cut])  # 8 B .. 512 B, nothing of the half row
    rest = text[torn:] + cri_log_lines(lines[cut + 1 :], start=after_last_entry(text))
    register_pod_log(kube, kwok.logs_dir, namespace, launcher, rest, container="launcher", append=True)
    wait_for(
        lambda: len(measurement(kube, namespace, "torn").get("status", {}).get("results") or ()) == 24,
        60,
        what="every row merged provisionally",
    )
    assert measurement(kube, namespace, "torn")["status"]["results"] == expected(lines)


def test_a_pod_with_the_launchers_labels_outside_its_owner_chain_is_never_read(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    """Beside the real launcher, a pod anyone could create with its labels (sorting first, on
    the same node, Running, with a log of its own): the measurement reads the real launcher,
    whose JobSet and batch Job lead to the Job's TrainJob (fails on main: chosen by labels)."""
    lines = corpus_lines("cre-real-a100-allreduce-2node-pdt-timestamps.log")
    launcher, pods = start(kube, kwok, gpu_nodes, namespace, "own", "nccl-bandwidth")
    real = kube.get(Pod, launcher, namespace=namespace).to_dict()
    forged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "a-forged-launcher",
            "namespace": namespace,
            "labels": real["metadata"]["labels"],
        },
        "spec": {"nodeName": real["spec"]["nodeName"], "containers": [{"name": "launcher", "image": "img"}]},
    }
    kube.create(Pod.from_dict(forged))
    wait_for(
        lambda: phase(kube, namespace, "a-forged-launcher") == "Running", 30, what="the forged pod Running"
    )
    row = "  8589934592  2147483648     float     sum      -1  99999.9  9999.99  9999.99      0"
    kwok.write_pod_logs(kube, namespace, "a-forged-launcher", [row], container="launcher")
    kwok.write_pod_logs(kube, namespace, launcher, lines, container="launcher")
    finish(kube, namespace, "own", [*pods, "a-forged-launcher"], succeeded=True)
    bm = completed(kube, namespace, "own")
    assert bm["status"]["results"] == expected(lines)
    message = f"Final results from the complete log of pod {namespace}/{launcher}: 24 rows, 24 message sizes"
    assert condition(bm, "Complete") == ("True", "JobSucceeded", message)


def test_an_old_layout_is_read_by_its_header_and_a_log_without_one_is_no_data_collected(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    old = corpus_lines("issue37-v100-allgather-old-error-column-FAILED.log")
    status = measured(kube, kwok, gpu_nodes, namespace, "old", old)["status"]
    assert status["results"] == [  # L5: no redop/root columns, the old float error column
        {
            "sizeBytes": 4294967296,
            "algBW": "129.05",
            "busBW": "129.05",
            "samples": 1,
            "inPlaceAlgBW": "128.84",
            "inPlaceBusBW": "128.84",
            "maxError": "1e+00",
        }
    ]
    assert (status["outOfBounds"], status["test"], status["ranks"]) == (
        {"count": 2, "status": "FAILED"},  # L6
        "all_gather_perf",  # L1, the command line
        8,  # -g 8
    )
    bm = measured(
        kube, kwok, gpu_nodes, namespace, "tail", data_lines("oci-oke-gb200-kubectl-tail-no-header.log")
    )
    message = "Job succeeded but no bandwidth data was parsed; check spec.logProfileRef"
    assert condition(bm, "Complete") == ("True", "NoDataCollected", message)
    assert bm["status"].get("results") in (None, [])
    assert (bm["status"]["rowsWithoutHeader"], bm["status"]["complete"]) == (33, False)


def test_a_missing_profile_waits_and_a_failed_job_completes_as_job_failed(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, kwok: Any
) -> None:
    profile = f"nccl-{namespace}"[:63]
    launcher, pods = start(kube, kwok, gpu_nodes, namespace, "late", profile)
    bm = wait_for(
        lambda: condition(b := measurement(kube, namespace, "late"), "Measuring") and b,
        60,
        what="the measurement's first status",
    )
    assert condition(bm, "Measuring") == ("False", "LogProfileNotFound", f'LogProfile "{profile}" not found')
    kwok.write_pod_logs(
        kube, namespace, launcher, corpus_lines("gcm-a100-2node-16gpu-pairwise.log"), container="launcher"
    )
    copy = {**PROFILE, "metadata": {"name": profile}}
    kube.create(resources.LogProfile.from_dict(copy))
    try:
        wait_for(
            lambda: (condition(measurement(kube, namespace, "late"), "Measuring") or ("",))[0] == "True",
            60,
            what="measuring once the profile exists",
        )
        finish(kube, namespace, "late", pods, succeeded=False)
        bm = completed(kube, namespace, "late")
    finally:
        kube.delete(resources.LogProfile, profile)
    message = "Referenced Job failed; results are not used for threshold evaluation"
    assert condition(bm, "Complete") == ("True", "JobFailed", message)
    # the best-effort read of the failed launcher's log: L30 1073741824 97.50 182.80 last
    assert bm["status"]["results"][-1] == status_row(1073741824, "97.50", "182.80", "96.74", "181.39")


def test_the_builtin_profiles_are_installed_and_kubectl_get_shows_what_each_reads(kube: Client) -> None:
    names = {p.metadata.name for p in kube.list(resources.LogProfile)}  # type: ignore[union-attr]
    assert {"nccl-bandwidth", "nccl-loopback"} <= names
    shown = kubectl_get(kube, resources.LogProfile)
    assert (shown["nccl-bandwidth"]["READER"], shown["nccl-bandwidth"]["WORKERS"]) == ("NcclTests", "Single")
    assert shown["nccl-bandwidth"]["REPLICATED-JOB"] == "launcher"
    assert (shown["megatron-training"]["READER"], shown["megatron-training"]["WORKERS"]) == (None, "Multi")


@pytest.mark.asyncio
async def test_podlogs_streams_with_timestamps_since_time_and_tail_lines(
    kube: Client, async_kube: AsyncClient, namespace: str, gpu_nodes: Any, kwok: Any
) -> None:
    """The shell both measurement controllers read logs with, against kwok's real log endpoint."""
    launcher, _ = start(kube, kwok, gpu_nodes, namespace, "logs", "nccl-bandwidth")
    old = datetime(2026, 3, 10, 14, 0, 0, tzinfo=UTC)
    later = old + timedelta(seconds=30)
    text = cri_log_lines(["first", "second"], start=old) + cri_log_lines(["third", "fourth"], start=later)
    register_pod_log(kube, kwok.logs_dir, namespace, launcher, text, container="launcher")

    async def lines(pod: str = launcher, **options: Any) -> list[str]:
        found = stream_lines(async_kube, pod, namespace, "launcher", **options)
        return [strip_kubelet_prefix(line) async for line in found]

    deadline = asyncio.get_running_loop().time() + 30
    while (every := await lines()) != ["first", "second", "third", "fourth"]:  # until kwok serves it
        assert asyncio.get_running_loop().time() < deadline, every
        await asyncio.sleep(0.2)
    stamped = [line async for line in stream_lines(async_kube, launcher, namespace, "launcher")]
    assert line_time(stamped[2]) == int(later.timestamp()) * 1_000_000_000
    assert await lines(since_time=later) == ["third", "fourth"]
    assert await lines(tail_lines=1) == ["fourth"]
    with pytest.raises(LogsError):
        await lines("no-such-pod")
    # the failure log's read: the last lines without timestamps, limitBytes honoured
    tail = await read_tail(async_kube, launcher, namespace, "launcher", lines=3, keep=1024, limit=1 << 20)
    assert tail == ("second\nthird\nfourth\n", False)
    cut = await read_tail(async_kube, launcher, namespace, "launcher", lines=3, keep=1024, limit=10)
    assert cut == ("second\nthi\n", True), "the window's first 10 bytes"
