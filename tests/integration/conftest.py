"""Integration tests run against a real etcd + kube-apiserver (+ kwok); see docs/testing.md."""

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Node, Pod

from nvcre import resources
from nvcre.api.v1alpha1.constants import WORKLOAD_CONTAINER_NAME
from nvcre.sandbox.faults import Fault
from nvcre.sandbox.runner import end_annotations, hostname, node_member
from nvcre.sandbox.simulate import simulate
from nvcre.testing.fixtures import *  # noqa: F403 - re-export the fixtures to pytest
from nvcre.testing.kwok import Kwok
from nvcre.testing.nodeguard import NodeGuard
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import create_trainjob_pods

RunPod = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session", autouse=True)
def _watch_nodes(node_guard: NodeGuard) -> Iterator[None]:
    """Every Node is watched from the first integration test on; test_zz_nodes_untouched checks it."""
    yield


@pytest.fixture(scope="session")
def run_pod(kube: Client, kwok: Kwok) -> RunPod:
    """``run_pod(namespace, trainjob, faults=())``: what a cluster does with a single-pod TrainJob
    (a DCGM diagnostic) up to Trainer's verdict. Its pod runs on its node, prints what the
    sandbox's simulator prints for that program on that node (healthy, or under ``faults``),
    served by kwok as ``kubectl logs``, and ends with the program's exit status. Returns the pod;
    :func:`~nvcre.testing.workloads.finish_trainjob` then plays Trainer."""

    def run(namespace: str, trainjob: str, faults: Sequence[Fault] = ()) -> dict[str, Any]:
        (pod,) = create_trainjob_pods(kube, namespace, trainjob)
        name = pod["metadata"]["name"]
        node = kube.get(Node, pod["spec"]["nodeName"]).to_dict()
        # the trainer's command and args, which Trainer puts into the pod (the stand-in does not)
        trainer = kube.get(resources.TrainJob, trainjob, namespace=namespace).to_dict()["spec"]["trainer"]
        argv = [*trainer.get("command", ()), *trainer.get("args", ())]
        ran = simulate(argv, [node_member(hostname(pod), node)], faults)
        assert ran.lines and ran.exit_code is not None, f"the simulated {argv} prints nothing or never ends"
        wait_for(lambda: _phase(kube, namespace, name) == "Running", 30, what=f"pod {name} running")
        kwok.write_pod_logs(
            kube, namespace, name, [line.text for line in ran.lines], container=WORKLOAD_CONTAINER_NAME
        )
        wait_for(
            lambda: "".join(kube.log(name, namespace=namespace, container=WORKLOAD_CONTAINER_NAME)),
            30,
            what=f"pod {name}'s log served",
            ignore=(ApiError,),
        )
        ended = end_annotations(ran.exit_code or 0)
        kube.patch(Pod, name, {"metadata": {"annotations": ended}}, namespace=namespace)
        return pod

    return run


def _phase(kube: Client, namespace: str, pod: str) -> str | None:
    found = kube.get(Pod, pod, namespace=namespace)
    return found.status.phase if found.status else None
