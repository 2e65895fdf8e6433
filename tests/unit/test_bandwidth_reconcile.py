"""The BandwidthMeasurement controller's reconcile on a fake client that can fail any call or
stop before any write: conflicts, kills, garbage and broken log streams, the job-gone rule and
the final read's grace. The real API server tests are tests/integration/test_bandwidth_measurement.py.

The Job, its BandwidthMeasurement and the launcher pod are what nvcre renders: the Job spec of a
test Workflow, ``measurements.wanted`` and the pods of ``trainjob.build`` on an MPI runtime.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod

from nvcre import resources
from nvcre.controllers.measurement.bandwidth import Bandwidth
from nvcre.controllers.measurement.shell import MeasurementController
from nvcre.controllers.podlogs import LogsError
from nvcre.decide.job.measurements import wanted
from nvcre.measure.builtin import builtin_profiles
from nvcre.objects import ObjectKey
from nvcre.runtime.writes import Conflict
from nvcre.testing.clock import FakeClock
from nvcre.testing.fakeclient import FakeClient, Stopped, api_error, context
from nvcre.testing.nccl_cases import status_row
from nvcre.testing.workloads import create_chain, training_runtime, workflow
from nvcre.workload import trainjob

pytestmark = pytest.mark.asyncio

NS = "team"
JOB = "wf-job"
KEY = ObjectKey(NS, f"{JOB}-bandwidth")
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nccl"
T0 = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)


def stamped(lines: list[str], start: datetime = T0) -> list[str]:
    return [
        f"{(start + timedelta(milliseconds=i)).strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {line}"
        for i, line in enumerate(lines)
    ]


class Harness:
    def __init__(self, clock: FakeClock | None = None) -> None:
        """``clock``: the controller's time, when the test sets it (else the machine's)."""
        self.clock = clock
        self.client = FakeClient()
        self.logs: dict[str, list[str]] = {}
        self.break_after: int | None = None
        self.controller = MeasurementController(
            context(self.client, follow=True, clock=self.clock), Bandwidth(), logs=self.read
        )
        doc = workflow(
            "wf",
            NS,
            "pool",
            2,
            mpi=True,
            job_spec={
                "bandwidthMeasurement": {
                    "logProfileRef": "nccl-bandwidth",
                    "sampleInterval": "30s",
                    "testType": "all_reduce",
                }
            },
        )
        job = {
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "Job",
            "metadata": {
                "name": JOB,
                "namespace": NS,
                "labels": {"nvcre.nvidia.com/workflow": "wf", "nvcre.nvidia.com/group": "group-0"},
            },
            "spec": doc["spec"]["jobTemplate"]["spec"],
        }
        self.job = self.client.put(job)
        (measurement,) = wanted(self.job)
        self.client.put(measurement.body)
        self.client.put(next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth"))
        workload = self.client.put(trainjob.build(self.job))
        ref = {"name": workload["metadata"]["name"], "uid": workload["metadata"]["uid"]}
        self.job = self.client.put({**self.job, "status": {"workloadRef": ref}})
        pods = create_chain(self.client.put, workload, training_runtime("rt", launcher=True))
        self.launcher = next(
            p for p in pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "launcher"
        )
        for pod in pods:
            self.client.put({**pod, "status": {"phase": "Running"}})

    async def read(
        self,
        client: Any,
        pod: str,
        namespace: str,
        container: str | None,
        *,
        since_time: datetime | None = None,
        tail_lines: int | None = None,
        still_writing: bool = False,
    ) -> AsyncIterator[str]:
        for index, line in enumerate(self.logs.get(pod, [])):
            if self.break_after is not None and index >= self.break_after:
                raise LogsError(f"log of pod {namespace}/{pod}: connection reset")
            yield line

    def write_log(self, lines: list[str]) -> None:
        self.logs.setdefault(self.launcher["metadata"]["name"], []).extend(lines)

    def set_pod_phase(self, phase: str) -> None:
        pod = self.client.stored(Pod, self.launcher["metadata"]["name"], NS)
        assert pod is not None
        self.client.put({**pod, "status": {"phase": phase}})

    def finish_job(self, kind: str = "Succeeded") -> None:
        job = self.client.stored(resources.Job, JOB, NS)
        assert job is not None
        condition = {
            "type": kind,
            "status": "True",
            "reason": "x",
            "message": "x",
            "lastTransitionTime": "2026-03-10T15:00:00Z",
        }
        self.client.put({**job, "status": {**job["status"], "conditions": [condition]}})

    def bm(self) -> dict[str, Any]:
        found = self.client.stored(resources.BandwidthMeasurement, KEY.name, NS)
        assert found is not None
        return found

    def complete(self) -> tuple[str, str] | None:
        for c in (self.bm().get("status") or {}).get("conditions") or ():
            if c["type"] == "Complete" and c["status"] == "True":
                return c["reason"], c["message"]
        return None

    async def reconcile(self) -> Any:
        return await self.controller.reconcile(KEY)


ROWS = (CORPUS / "cre-fixture-mixed-k8s-timestamps-and-raw-lines.log").read_text().splitlines()
HEADER = (
    (CORPUS / "awsbatch-p5-mpi-tagged.log").read_text().splitlines()[1]
)  # [1,0]<stdout>:#  size count ...


async def test_samples_count_every_line_once_even_when_a_write_conflicts() -> None:
    h = Harness()
    h.write_log(stamped([line.split(" ", 1)[1] for line in ROWS[:5]]))  # the 8 B and 65536 B rows
    await h.reconcile()
    assert [r["sizeBytes"] for r in h.bm()["status"]["results"]] == [8, 65536]
    h.write_log(stamped([ROWS[5].split(" ", 1)[1], ROWS[6]], T0 + timedelta(seconds=5)))
    h.client.fail("replace", "BandwidthMeasurement", api_error(409), subresource="status")
    with pytest.raises(Conflict):  # merged into an outdated view: decided again, not re-applied
        await h.reconcile()
    await h.reconcile()
    await h.reconcile()  # nothing new since the last sample
    results = h.bm()["status"]["results"]
    assert [(r["sizeBytes"], r["samples"]) for r in results] == [
        (8, 1),
        (65536, 1),
        (8589934592, 1),
        (17179869184, 1),
    ]
    assert h.bm()["status"]["lastSampleTime"] == "2026-03-10T14:00:05.001000000Z"


async def test_a_kill_before_the_terminal_write_converges_to_one_write_and_one_event() -> None:
    h = Harness()
    h.write_log(stamped([line.split(" ", 1)[-1] if line[:4] == "2026" else line for line in ROWS]))
    h.set_pod_phase("Succeeded")
    h.finish_job()
    h.client.stop_at = 1
    with pytest.raises(Stopped):  # killed with the final read done, before its write
        await h.reconcile()
    h.client.stop_at = None
    writes = h.client.writes
    await h.reconcile()
    await h.reconcile()  # frozen: nothing more is written
    assert h.client.writes == writes + 1
    reason, _ = h.complete() or ("", "")
    assert reason == "JobSucceeded"
    assert h.bm()["status"]["results"][-1] == {
        "sizeBytes": 17179869184,
        "algBW": "476.36",
        "busBW": "922.94",
        "samples": 1,
        "wrong": 0,
    }  # L7, the raw row (its header, L2, names 9 columns: the out-of-place half)
    assert h.bm()["status"]["completionTime"] == "2026-03-10T15:00:00Z"
    assert [e["reason"] for e in h.client.events].count("JobSucceeded") == 1


async def test_a_conflicting_terminal_write_is_decided_again_on_the_fresh_object() -> None:
    h = Harness()
    row = "     1048576        262144     float     sum      -1    95.40   10.99   20.61      2    95.12   11.02   20.67    N/A"
    h.write_log(stamped([HEADER, row]))
    h.set_pod_phase("Succeeded")
    h.finish_job()
    h.client.fail("replace", "BandwidthMeasurement", api_error(409), subresource="status")
    with pytest.raises(Conflict):
        await h.reconcile()
    assert h.complete() is None
    await h.reconcile()
    assert h.complete() is not None and h.bm()["status"]["wrongValues"] == 2
    assert h.client.count("get", "BandwidthMeasurement") == 0, "the cache, never a live read"


async def test_garbage_and_a_broken_stream_never_raise() -> None:
    h = Harness()
    h.write_log(["\x00\xff garbage", "2026-13-45T99:99:99Z 8 2 float sum -1 1e999 nan inf 0", "", "9" * 400])
    await h.reconcile()
    h.set_pod_phase("Succeeded")
    h.finish_job()
    await h.reconcile()
    assert h.complete() == (
        "NoDataCollected",
        "Job succeeded but no bandwidth data was parsed; check spec.logProfileRef",
    )


async def test_an_unreadable_final_log_waits_then_completes_as_logs_unavailable() -> None:
    clock = FakeClock(T0)
    h = Harness(clock)
    h.write_log(
        stamped(
            [
                "     1048576        262144     float     sum      -1    95.40   10.99   20.61      0    95.12   11.02   20.67      0"
            ]
            * 3
        )
    )
    h.break_after = 1  # every read breaks after one line
    h.set_pod_phase("Succeeded")
    h.finish_job()
    await h.reconcile()
    measuring = next(c for c in h.bm()["status"]["conditions"] if c["type"] == "Measuring")
    assert (measuring["reason"], measuring["message"]) == (
        "FinalReadPending",
        "Job succeeded; waiting to read its complete log",
    )
    clock.step(5 * 60)
    await h.reconcile()
    assert h.complete() is None, "within max(measurementTimeout 5m, 2m)"
    clock.step(1)
    await h.reconcile()
    reason, message = h.complete() or ("", "")
    assert reason == "LogsUnavailable"
    assert message.startswith("Job succeeded but its complete log could not be read within 300s: ")


async def test_a_job_gone_completes_only_if_the_measurement_had_seen_it() -> None:
    h = Harness()
    h.client.objects = {k: v for k, v in h.client.objects.items() if k[1] != "Job"}
    bm = h.bm()
    bm["metadata"]["labels"].pop("nvcre.nvidia.com/job-uid")
    h.client.put(bm)
    assert await h.reconcile() is not None and h.complete() is None  # never saw it: wait
    bm = h.bm()
    bm["status"] = {
        "startTime": "2026-03-10T14:00:00Z",
        "results": [{"sizeBytes": 8, "algBW": "0.00", "busBW": "0.00", "samples": 1}],
    }
    h.client.put(bm)
    await h.reconcile()
    assert h.complete() == (
        "LogsUnavailable",
        "Referenced Job no longer exists; results are provisional and are not used for threshold evaluation",
    )


async def test_a_failed_job_completes_as_job_failed_with_a_best_effort_read() -> None:
    h = Harness()
    h.write_log(stamped([line.split(" ", 1)[1] for line in (ROWS[1], ROWS[5])]))  # header, 8 GiB row
    h.set_pod_phase("Failed")
    h.finish_job("Failed")
    await h.reconcile()
    assert h.complete() == (
        "JobFailed",
        "Referenced Job failed; results are not used for threshold evaluation",
    )
    status = h.bm()["status"]
    assert [r["sizeBytes"] for r in status["results"]] == [8589934592]
    assert (status["complete"], status["incompleteReason"]) == (
        False,
        "no footer (# Out of bounds / # Avg bus bandwidth) after the table",
    )


async def test_a_later_sample_reads_rows_under_an_earlier_header_and_the_final_write_says_everything() -> (
    None
):
    h = Harness()
    lines = (CORPUS / "gcm-a100-2node-16gpu-pairwise.log").read_text().splitlines()
    h.write_log(stamped(lines[:25]))  # device list, header (L22-L24) and the 32 MiB row (L25)
    await h.reconcile()
    status = h.bm()["status"]
    assert [r["sizeBytes"] for r in status["results"]] == [33554432]
    assert status["tableLayout"] == {
        "columns": "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
        "halves": "out-of-place in-place",
    }
    h.write_log(stamped(lines[25:], T0 + timedelta(seconds=5)))  # rows only: read with that header
    await h.reconcile()
    assert [r["sizeBytes"] for r in h.bm()["status"]["results"]][-1] == 1073741824  # L30
    h.set_pod_phase("Succeeded")
    h.finish_job()
    await h.reconcile()
    status = h.bm()["status"]
    assert "tableLayout" not in status
    assert status["results"][-1] == status_row(1073741824, "97.50", "182.80", "96.74", "181.39")  # L30
    assert {k: status[k] for k in ("ranks", "hosts", "avgBusBandwidthGBps", "outOfBounds", "complete")} == {
        "ranks": 16,
        "hosts": ["{host1}", "{host2}"],
        "avgBusBandwidthGBps": "150.209",
        "outOfBounds": {"count": 0, "status": "OK"},
        "complete": True,
    }
    assert (status["failureLines"], status["sizesDropped"], "incompleteReason" in status) == (
        {"count": 0, "lines": []},
        0,
        False,
    )


async def test_a_pod_with_the_launchers_labels_outside_its_chain_is_never_read() -> None:
    """A pod anyone created with the launcher's labels (sorting first) is not the launcher: the
    final read is the real one's log (fails on main, where pods were chosen by label alone)."""
    h = Harness()
    forged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "a-forged-launcher",
            "namespace": NS,
            "labels": h.launcher["metadata"]["labels"],
        },
        "spec": h.launcher["spec"],
        "status": {"phase": "Succeeded"},
    }
    h.client.put(forged)
    row = "     1048576        262144     float     sum      -1    95.40   10.99   20.61      0    95.12   11.02   20.67      0"
    h.logs["a-forged-launcher"] = stamped([HEADER, row.replace("20.61", "9999.99")])
    h.write_log(stamped([HEADER, row]))
    h.set_pod_phase("Succeeded")
    h.finish_job()
    await h.reconcile()
    assert h.bm()["status"]["results"] == [status_row(1048576, "10.99", "20.61", "11.02", "20.67")]
    reason, message = h.complete() or ("", "")
    assert reason == "JobSucceeded" and h.launcher["metadata"]["name"] in message
