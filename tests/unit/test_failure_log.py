"""A failed pod's log tail is read with a byte cap: 800 lines at most, 1 MiB at most per read,
32 KiB kept; a window the cap cut is read again with fewer lines, for its end."""

from __future__ import annotations

from typing import Any

import pytest

from nvcre.controllers.job import failure_log
from nvcre.controllers.podlogs import LogsError

POD = {
    "metadata": {"name": "mpi-job-workload-launcher-0-0", "namespace": "team"},
    "spec": {"nodeName": "gpu-1"},
    "status": {
        "containerStatuses": [
            {"name": "launcher", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}
        ]
    },
}
END = "mpirun noticed that process rank 3 with PID 0 on node mpi-1 exited on signal 9 (Killed)."


class Reader:
    """A log whose last 800 lines are more than the cap (a progress bar) and whose end is END."""

    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail

    async def __call__(
        self, client: Any, pod: str, namespace: str, container: str | None, **window: int
    ) -> tuple[str, bool]:
        self.calls.append({"pod": pod, "namespace": namespace, "container": container, **window})
        if self.fail:
            raise LogsError("log of pod team/x: container not found")
        if window["lines"] == failure_log.LOG_TAIL_LINES:
            return "Epoch 0: |" + "#" * 100, True
        return f"training...\n{END}\n", False


@pytest.mark.asyncio
async def test_a_window_cut_by_the_cap_is_read_again_for_its_end() -> None:
    reader = Reader()
    record = await failure_log.collect(None, [POD], reader)  # type: ignore[arg-type]
    assert record == {
        "podName": "mpi-job-workload-launcher-0-0",
        "nodeName": "gpu-1",
        "exitCode": 137,
        "reason": "Error",
        "tail": f"training...\n{END}\n",
    }
    window = {"pod": POD["metadata"]["name"], "namespace": "team", "container": "launcher"}
    limits = {"keep": 32 * 1024, "limit": 1024 * 1024}
    assert reader.calls == [{**window, "lines": 800, **limits}, {**window, "lines": 20, **limits}]


@pytest.mark.asyncio
async def test_an_unreadable_log_leaves_the_entry_without_a_tail() -> None:
    record = await failure_log.collect(None, [POD], Reader(fail=True))  # type: ignore[arg-type]
    assert record == {
        "podName": POD["metadata"]["name"],
        "nodeName": "gpu-1",
        "exitCode": 137,
        "reason": "Error",
    }


def _running(name: str, replicated: str, index: int, node: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "labels": {
                "jobset.sigs.k8s.io/replicatedjob-name": replicated,
                "batch.kubernetes.io/job-completion-index": str(index),
            },
        },
        "spec": {"nodeName": node, "containers": [{"name": replicated}]},
        "status": {"phase": "Running", "containerStatuses": [{"name": replicated, "state": {"running": {}}}]},
    }


@pytest.mark.asyncio
async def test_a_timed_out_job_quotes_its_launchers_log() -> None:
    """No container failed: the running launcher (MPI), else node 0 (torch), is read, reason Timeout."""
    reader = Reader()
    nodes = [_running(f"w-node-0-{i}", "node", i, f"gpu-{i}") for i in (1, 0)]
    mpi = [*nodes, _running("w-launcher-0-0", "launcher", 0, "gpu-0")]
    record = await failure_log.collect(None, mpi, reader, unfinished="Timeout")  # type: ignore[arg-type]
    assert {k: record[k] for k in ("podName", "nodeName", "exitCode", "reason")} == {
        "podName": "w-launcher-0-0",
        "nodeName": "gpu-0",
        "exitCode": 0,
        "reason": "Timeout",
    }
    assert reader.calls[0]["container"] == "launcher" and record["tail"].endswith(f"{END}\n")
    torch, _, _ = failure_log.entry(nodes, unfinished="Timeout")
    assert torch["podName"] == "w-node-0-0"
    untimed, pod, _ = failure_log.entry(mpi)
    assert (untimed["reason"], pod) == ("NoTerminatedContainer", None), "only a time-out reads a running pod"
