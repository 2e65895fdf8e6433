"""The pure half of ``controllers.podlogs``: which pod, which container, kubelet times."""

from __future__ import annotations

from typing import Any

from nvcre.controllers.podlogs import (
    container_of,
    format_line_time,
    line_time,
    pick,
    workload_pods,
)
from nvcre.testing.workloads import pods_of, training_runtime


def _trainjob(name: str, nodes: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "trainer": {"numNodes": nodes},
            "runtimePatches": [
                {
                    "trainingRuntimeSpec": {
                        "template": {
                            "spec": {
                                "replicatedJobs": [
                                    {
                                        "name": job,
                                        "template": {
                                            "spec": {
                                                "template": {
                                                    "metadata": {"labels": {"nvcre.nvidia.com/job": "j"}}
                                                }
                                            }
                                        },
                                    }
                                    for job in ("node", "launcher")
                                ]
                            }
                        }
                    }
                }
            ],
        },
    }


def test_workload_pods_of_one_replicated_job_in_stable_order() -> None:
    pods = pods_of(_trainjob("tj", 11), training_runtime("rt", launcher=True), bind=False)
    for pod in pods:  # JobSet's completion index, as the real chain labels them (the name's suffix)
        index = pod["metadata"]["name"].rsplit("-", 1)[1]
        pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = index
    shuffled = list(reversed(pods))
    nodes = workload_pods(shuffled, "j", "node")
    # by index, not by name: "tj-node-0-10" sorts before "tj-node-0-2" as a string
    assert [p["metadata"]["name"] for p in nodes] == [f"tj-node-0-{i}" for i in range(11)]
    assert pick(nodes, "first") is nodes[0] and pick(nodes, "last") is nodes[-1]
    launchers = workload_pods(shuffled, "j", "launcher")
    assert [p["metadata"]["name"] for p in launchers] == ["tj-launcher-0-0"]
    assert container_of(launchers[0]) == "launcher"  # named after its replicated job
    assert len(workload_pods(shuffled, "j")) == 12
    assert workload_pods(shuffled, "other-job") == [] and pick([], "last") is None


def test_container_of_prefers_the_profile_then_the_first() -> None:
    pod = {"metadata": {"labels": {}}, "spec": {"containers": [{"name": "main"}, {"name": "side"}]}}
    assert container_of(pod) == "main"
    assert container_of(pod, "side") == "side"
    assert container_of({"metadata": {}, "spec": {}}) is None


def test_line_time_keeps_nanoseconds_and_zones() -> None:
    utc = line_time("2026-02-16T10:00:02.000000001Z x")
    offset = line_time("2026-02-16T02:00:02.5-08:00 x")
    assert utc is not None and offset is not None
    assert offset - utc == 499_999_999
    assert format_line_time(utc) == "2026-02-16T10:00:02.000000001Z"
    assert line_time("2026-02-16T10:00:02Z x") == utc - 1
    assert line_time("     8   2  float") is None and line_time("2026-13-99T10:00:02Z x") is None
