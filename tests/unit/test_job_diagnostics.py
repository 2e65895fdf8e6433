"""A Job running ``dcgmi diag`` ends by its report: the catalog's diagnostics are recognised with
their run level, a whole report that passed succeeds with its summary, and a failed test, a log
without a report or an unreadable log fail, naming what failed (real dcgmi outputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nvcre import resources
from nvcre.api.v1alpha1 import Certification
from nvcre.api.v1alpha1.constants import Annotation, Finalizer
from nvcre.catalog import CategoryRender, render_category
from nvcre.controllers.job import JobController
from nvcre.decide.job import diagnostics
from nvcre.decide.job.next_step import Fail, Succeed
from nvcre.objects import ObjectKey
from nvcre.orchestration.placement import node_affinity
from nvcre.platform.synthetic import synthetic_nodes
from nvcre.testing import builders
from nvcre.testing.fakeclient import FakeClient, FakeManager, context
from nvcre.testing.workloads import create_chain
from nvcre.workload.trainjob import build, place

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "dcgm"
COLLECTED = ROOT / "tests" / "data" / "dcgm"
COMPLETED = Succeed("Workload TrainJob/dcgm-job-workload completed: jobset completed")


def _render(variant: str) -> CategoryRender:
    cert = Certification.model_validate(
        builders.Certification("diag")
        .namespace("nvcre")
        .target({"nodeSelector": {"nvidia.com/gpu.present": "true"}})
        .spec(categories=[{"domain": "diagnostics", "variant": variant}])
        .obj()
    )
    return render_category(cert, 0, synthetic_nodes("onprem", "h100"), platform="onprem", offline=True)


def _job_spec(variant: str) -> dict[str, Any]:
    spec: dict[str, Any] = _render(variant).workflow["spec"]["jobTemplate"]["spec"]
    return spec


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_the_catalogs_diagnostics_are_recognised_with_their_run_level(level: int) -> None:
    assert diagnostics.diag_level(_job_spec(f"dcgm-level{level}")) == level


def test_other_workloads_and_a_diag_without_run_level() -> None:
    def spec(command: list[str], args: list[str]) -> dict[str, object]:
        return {"workload": {"trainJob": {"trainer": {"command": command, "args": args}}}}

    assert diagnostics.diag_level(spec(["/usr/bin/dcgmi"], ["diag"])) == 1
    assert diagnostics.diag_level(spec(["dcgmi"], ["diag", "-r", "long", "--json"])) == 3  # a suite name
    assert diagnostics.diag_level(spec(["dcgmi"], ["discovery", "-l"])) is None
    assert diagnostics.diag_level(spec(["bash", "-c"], ["dcgmi diag -r 3"])) is None
    assert diagnostics.diag_level({"workload": {"trainJob": {}}}) is None


@pytest.mark.skipif(not CORPUS.exists(), reason="the log corpus (../shared/corpus) is not here")
def test_a_whole_report_that_passed_succeeds_with_its_summary() -> None:
    log = (CORPUS / "gcm-dcgmi-diag-r4-all-pass.log").read_text()
    assert diagnostics.succeeded(COMPLETED, log, 4) == Succeed(
        f"{COMPLETED.message}; dcgmi diag level 4: all 18 tests passed"
    )


def test_a_failed_test_fails_the_job_although_dcgmi_exited_0() -> None:
    """DCGM 4.2.3 on a GB10, a software test failed (that run exited 226; a test without an
    error entry exits 0, and the report still says Fail)."""
    log = (COLLECTED / "gb10-dcgm423-r1-json-software-fail-persistence.json").read_text()
    decided = diagnostics.succeeded(COMPLETED, log, 1)
    assert isinstance(decided, Fail)
    assert decided.message.startswith("dcgmi diag level 1: 1 of 1 tests failed: software on GPU 0 (")
    assert "Persistence mode for GPU 0 is disabled" in decided.message
    assert decided.message.endswith("(dcgmi diag exited 0)")


def test_no_report_a_cut_report_or_an_unreadable_log_never_succeeds() -> None:
    empty = diagnostics.succeeded(COMPLETED, "Connecting to nvidia-dcgm.gpu-operator.svc:5555\n", 3)
    assert empty == Fail(
        f"{COMPLETED.message}, but {diagnostics.NO_REPORT}: nothing shows that its GPUs passed",
        cause="MeasurementUnavailable",
    )
    unread = diagnostics.succeeded(COMPLETED, "", 3, unreadable="log of pod nvcre/p: connection reset")
    assert unread == Fail(
        f"{COMPLETED.message}, but its pod's log could not be read (log of pod nvcre/p: connection "
        "reset): nothing shows that its GPUs passed"
    )
    fragment = (COLLECTED / "issue215-dcgm4-r4-json-fragment-diagnostic-8gpu.json").read_text()
    cut = diagnostics.succeeded(COMPLETED, fragment, 4)
    assert cut == Fail(
        f"{COMPLETED.message}, but dcgmi diag level 4: report cut short; none of the 1 tests read "
        "failed: nothing shows that its GPUs passed",
        cause="MeasurementUnavailable",
    )
    skipped = (COLLECTED / "gb10-microk8s-pod-dcgm442-r3-text-all-skipped-but-software.log").read_text()
    assert diagnostics.succeeded(COMPLETED, skipped, 3) == Fail(
        f"{COMPLETED.message}, but dcgmi diag level 3: no test failed: 1 of 8 passed, 7 skipped: no test "
        "beyond the software checks ran: nothing shows that its GPUs passed",
        cause="MeasurementUnavailable",
    ), "a level that skipped every test it stands for verified nothing (DCGM 4.4.2 on a GB10)"


def test_a_failed_workloads_message_names_the_failed_tests_its_tail_shows() -> None:
    log = (COLLECTED / "a10g-dcgm339-r3-text-targeted-power-fail-gpu1.log").read_text()
    failed = Fail("Workload TrainJob/dcgm-job-workload failed: jobset failed")
    named = diagnostics.failed(failed, log, 3)
    assert named.reason == failed.reason
    assert named.message.startswith(
        f"{failed.message}: dcgmi diag level 3: 1 of 16 tests failed: Targeted Power on GPU 1 ("
    )
    assert "Max power of 224.1 did not reach desired power minimum" in named.message
    assert diagnostics.failed(failed, "Error: unable to connect\n", 3) == failed


# -- the Job controller: what a user reads on the Job ----------------------------------------------

NS = "nvcre"


async def _complete_diag_job(log: str) -> tuple[dict[str, Any], list[tuple[str, str | None]]]:
    """A dcgm-level1 Job (as the catalog renders it) whose TrainJob completed, its pod Succeeded
    on n0 with ``log``: the Job after one reconcile, and the (pod, container) logs read."""
    read: list[tuple[str, str | None]] = []

    async def tail(
        client: Any, pod: str, namespace: str, container: str | None, **_: int
    ) -> tuple[str, bool]:
        read.append((pod, container))
        return log, False

    client = FakeClient()
    ctx = context(client)
    controller = JobController(ctx, tail_reader=tail)
    assert isinstance(ctx.manager, FakeManager)
    render = _render("dcgm-level1")
    job: dict[str, Any] = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": "dcgm",
            "namespace": NS,
            "uid": "job-uid",
            "finalizers": [Finalizer.JOB],
            "annotations": {Annotation.GROUP_NODES: "n0"},
        },
        "spec": render.workflow["spec"]["jobTemplate"]["spec"],
    }
    # placed on its group as the Workflow places it
    job["spec"]["workload"]["trainJob"] = place(
        job["spec"]["workload"]["trainJob"],
        affinity=node_affinity(None, group_nodes=["n0"], products=()),
        tolerations=[],
        num_nodes=1,
    )
    trainjob = build(job)
    trainjob["status"] = {
        "conditions": [{"type": "Complete", "status": "True", "message": "jobset completed"}]
    }
    trainjob = client.put(trainjob)
    job["status"] = {
        "workloadRef": {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": trainjob["metadata"]["name"],
            "namespace": NS,
            "uid": trainjob["metadata"]["uid"],
        }
    }
    ctx.manager.cache(trainjob)
    ctx.manager.cache(client.put(job))
    (runtime,) = render.workflow["spec"]["dependencies"]
    (pod,) = create_chain(client.put, trainjob, runtime)
    terminated = {"exitCode": 0, "reason": "Completed"}
    done = {
        "phase": "Succeeded",
        "containerStatuses": [{"name": "node", "state": {"terminated": terminated}}],
    }
    ctx.manager.cache(client.put({**pod, "status": done}))
    await controller.reconcile(ObjectKey(NS, "dcgm"))
    stored = client.stored(resources.Job, "dcgm", NS)
    assert stored is not None
    return stored, read


def _ended(job: dict[str, Any]) -> tuple[str, str, str]:
    (ended,) = [
        c
        for c in job["status"]["conditions"]
        if c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
    ]
    return ended["type"], ended["reason"], ended["message"]


@pytest.mark.asyncio
async def test_a_diag_job_whose_report_shows_a_failed_test_fails_naming_it() -> None:
    log = (COLLECTED / "gb10-dcgm423-r1-json-software-fail-persistence.json").read_text()
    job, read = await _complete_diag_job(log)
    kind, reason, message = _ended(job)
    assert (kind, reason) == ("Failed", "WorkloadFailed")
    assert message.startswith(
        "dcgmi diag level 1: 1 of 1 tests failed: software on GPU 0 (Persistence Mode: "
    )
    assert [(e["name"], e["reason"], e["message"]) for e in job["status"]["failedNodes"]] == [
        ("n0", "WorkloadFailed", message)
    ]
    failure_log = job["status"]["failureLog"]
    assert (failure_log["nodeName"], failure_log["exitCode"], failure_log["reason"]) == ("n0", 0, "Completed")
    assert failure_log["tail"] == log
    assert read == [(failure_log["podName"], "node")]


@pytest.mark.asyncio
@pytest.mark.skipif(not CORPUS.exists(), reason="the log corpus (../shared/corpus) is not here")
async def test_a_diag_job_whose_whole_report_passed_succeeds_with_its_summary() -> None:
    job, _ = await _complete_diag_job((CORPUS / "gcm-dcgmi-diag-r4-all-pass.log").read_text())
    assert _ended(job) == (
        "Succeeded",
        "WorkloadCompleted",
        "Workload TrainJob/dcgm-workload completed: jobset completed; dcgmi diag level 1: all 18 tests passed",
    )
    assert "failedNodes" not in job["status"]


@pytest.mark.asyncio
async def test_a_diag_job_whose_log_holds_no_report_fails() -> None:
    job, _ = await _complete_diag_job("")
    assert _ended(job) == (
        "Failed",
        "WorkloadFailed",
        f"Workload TrainJob/dcgm-workload completed: jobset completed, but {diagnostics.NO_REPORT}: "
        "nothing shows that its GPUs passed",
    )
    assert [(e["name"], e["reason"], e["cause"]) for e in job["status"]["failedNodes"]] == [
        ("n0", "WorkloadFailed", "MeasurementUnavailable")
    ]
