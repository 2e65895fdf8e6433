"""Properties of the render over generated WorkloadRuns (hypothesis).

For any valid run, on any platform and architecture, resolved or not:
* the render is deterministic (same input, same Workflow, byte for byte as JSON);
* with gangScheduler, every pod template of the runtime carries its schedulerName and queue label;
* no workloadMetadata label reaches a pod template or a runtime job template.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.platform import PLATFORMS
from nvcre.render.workloadrun import build_workflow

ARCHES = ["a100", "b200", "b300", "gb200", "gb300", "h100", "h200", "l40", "l40s", "rtxpro6000"]
NAME = st.from_regex(r"[a-z]([a-z0-9-]{0,14}[a-z0-9])?", fullmatch=True)
TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.=/", min_size=1, max_size=12)
LABEL_KEY = st.from_regex(r"(example\.com/)?[a-z][a-z0-9]{0,10}", fullmatch=True)
LABEL_VALUE = st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)
ENV_NAME = st.from_regex(r"[A-Z][A-Z0-9_]{0,15}", fullmatch=True)


@st.composite
def frameworks(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["mpi", "torch", "exec"]))
    args = draw(st.lists(TOKEN, max_size=3))
    if kind == "mpi":
        mpi_args = draw(st.lists(st.sampled_from(["-x", "NCCL_ALGO=Ring", "--bind-to", "none"]), max_size=4))
        return {
            "mpi": {"mpirunPath": "/usr/bin/mpirun", "binary": "/bin/nccl", "args": args, "mpiArgs": mpi_args}
        }
    if kind == "torch":
        if draw(st.booleans()):
            return {"torch": {"module": "pkg.train", "args": args}}
        return {"torch": {"script": "train.py", "args": args}}
    return {"exec": {"command": ["sh", "-c", "true"], "args": args}}


@st.composite
def runs(draw: st.DrawFn) -> tuple[WorkloadRun, str, str, bool]:
    platform = draw(st.sampled_from(PLATFORMS))
    arch = draw(st.sampled_from(ARCHES))
    spec: dict[str, Any] = {"image": "nvcr.io/nvidia/pytorch:26.01-py3", "framework": draw(frameworks())}
    spec["numNodes"] = draw(st.integers(1, 64))
    if draw(st.booleans()):
        spec["env"] = [
            {"name": n, "value": v} for n, v in draw(st.dictionaries(ENV_NAME, TOKEN, max_size=4)).items()
        ]
    if draw(st.booleans()):
        gang = {
            "schedulerName": draw(st.sampled_from(["kai-scheduler", "runai-scheduler"])),
            "queue": draw(st.sampled_from(["", "team-a", "q1"])),
            "queueLabelKey": draw(st.sampled_from([None, "kai.scheduler/queue", "runai/queue"])),
        }
        spec["gangScheduler"] = {k: v for k, v in gang.items() if v is not None}
    labels = draw(st.dictionaries(LABEL_KEY, LABEL_VALUE, max_size=5))
    labels = {k: v for k, v in labels.items() if k not in ("kai.scheduler/queue", "runai/queue")}
    if labels:
        spec["workloadMetadata"] = {"labels": labels}
    if draw(st.booleans()):
        spec["volumes"] = [{"name": "data", "emptyDir": {}}]
        spec["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    if draw(st.booleans()):
        spec["config"] = {"inline": {"run.sh": "echo hi"}}
    scale = draw(st.sampled_from([None, "intra-node", "intra-rack", "full-scale"]))
    placement = draw(
        st.sampled_from([None, "Pinned"] + ([] if scale in ("intra-node", "intra-rack") else ["Unpinned"]))
    )
    orchestration = {k: v for k, v in {"testScale": scale, "placement": placement}.items() if v}
    if orchestration:
        spec["orchestration"] = orchestration
    if draw(st.booleans()):
        spec["mlnxPerNode"] = draw(st.integers(0, 8))
    if platform == "onprem" and arch in ("gb200", "gb300", "b200", "b300"):
        spec["nicResourceName"] = "rdma/ib"
    run = WorkloadRun.model_validate({"metadata": {"name": draw(NAME), "namespace": "ns"}, "spec": spec})
    return run, platform, arch, draw(st.booleans())


def render(run: WorkloadRun, platform: str, arch: str, resolve: bool) -> dict[str, Any]:
    return build_workflow(
        run, None, resolve=resolve, platform=platform if resolve else None, gpu_arch=arch
    ).workflow


def runtime_jobs(workflow: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for dependency in workflow["spec"].get("dependencies", []):
        if dependency["kind"] == "TrainingRuntime":
            yield from dependency["spec"]["template"]["spec"]["replicatedJobs"]


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(runs())
def test_render_is_deterministic(case: tuple[WorkloadRun, str, str, bool]) -> None:
    run, platform, arch, resolve = case
    first = json.dumps(render(run, platform, arch, resolve), sort_keys=False)
    again = json.dumps(render(run.model_copy(deep=True), platform, arch, resolve), sort_keys=False)
    assert first == again


@SETTINGS
@given(runs())
def test_gang_reaches_every_pod_template(case: tuple[WorkloadRun, str, str, bool]) -> None:
    run, platform, arch, resolve = case
    gang = run.spec.gang_scheduler
    workflow = render(run, platform, arch, resolve)
    jobs = list(runtime_jobs(workflow))
    assert jobs
    if gang is None:
        assert all("schedulerName" not in job["template"]["spec"]["template"]["spec"] for job in jobs)
        return
    key = gang.queue_label_key or "kai.scheduler/queue"
    queue = gang.queue or "default-queue"
    for job in jobs:
        pod = job["template"]["spec"]["template"]
        assert pod["spec"]["schedulerName"] == gang.scheduler_name
        assert pod["metadata"]["labels"][key] == queue
        assert job["template"]["metadata"]["labels"][key] == queue
    assert workflow["spec"]["jobTemplate"]["spec"]["workloadMetadata"]["labels"][key] == queue
    assert workflow["spec"]["gangScheduler"] == {
        "schedulerName": gang.scheduler_name,
        "queue": queue,
        "queueLabelKey": key,
    }


@SETTINGS
@given(runs())
def test_no_user_label_reaches_a_pod(case: tuple[WorkloadRun, str, str, bool]) -> None:
    run, platform, arch, resolve = case
    user = run.spec.workload_metadata.labels if run.spec.workload_metadata else None
    workflow = render(run, platform, arch, resolve)
    if user:
        assert workflow["spec"]["jobTemplate"]["spec"]["workloadMetadata"]["labels"].items() >= user.items()
    for job in runtime_jobs(workflow):
        for metadata in (
            job["template"].get("metadata", {}),
            job["template"]["spec"]["template"].get("metadata", {}),
        ):
            assert not set(metadata.get("labels", {})) & set(user or {})
