"""Reading what the controllers wrote, for integration tests: conditions, children, events, node results."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap
from lightkube.resources.events_v1 import Event

from nvcre import resources
from nvcre.api.v1alpha1.constants import FAILED_NODES_KEY
from nvcre.testing.nodes import HOSTNAME
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import finish_trainjob

TRIO = ("InProgress", "Succeeded", "Failed")


def get(kube: Client, resource: Any, name: str, namespace: str) -> dict[str, Any]:
    return dict(kube.get(resource, name, namespace=namespace).to_dict())


def true_condition(obj: dict[str, Any]) -> tuple[str, str, str] | None:
    """(type, reason, message) of the True trio member; asserts at most one is True."""
    trio = [c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] in TRIO]
    true = [c for c in trio if c["status"] == "True"]
    assert len(true) <= 1, f"more than one of the trio is True: {trio}"
    return (true[0]["type"], true[0]["reason"], true[0]["message"]) if true else None


def wait_true(
    kube: Client, resource: Any, name: str, namespace: str, type_: str, timeout: float = 60
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = get(kube, resource, name, namespace)
        found = true_condition(obj)
        return obj if found and found[0] == type_ else None

    return wait_for(check, timeout, what=f"{resource.__name__} {namespace}/{name} {type_}=True")


def wait_ended(kube: Client, resource: Any, name: str, namespace: str, timeout: float = 60) -> dict[str, Any]:
    """The object once Succeeded or Failed is True: a test that expects one of them asserts on
    what it got, so a wrong ending fails at once and with its status, not after the timeout."""

    def check() -> dict[str, Any] | None:
        obj = get(kube, resource, name, namespace)
        found = true_condition(obj)
        return obj if found and found[0] in TRIO[1:] else None

    return wait_for(check, timeout, what=f"{resource.__name__} {namespace}/{name} to end")


def recorded_workflows(kube: Client, node: str) -> set[str]:
    """The Workflow UIDs of every result the node's NodeRecord holds (none without a record)."""
    try:
        record = kube.get(resources.NodeRecord, node).to_dict()
    except ApiError as error:
        if error.status.code == 404:
            return set()
        raise
    categories = (record.get("status") or {}).get("categories") or ()
    return {str(r["workflow"].get("uid")) for h in categories for r in h["results"]}


def workflow_status(kube: Client, namespace: str, name: str) -> dict[str, Any]:
    """The Workflow's status as stored now (empty before its controller wrote one)."""
    return dict(get(kube, resources.Workflow, name, namespace).get("status") or {})


def isolation_retests(
    kube: Client, namespace: str, workflow: str, timeout: float = 60
) -> dict[str, dict[str, Any]]:
    """The Workflow's isolation round once it runs: each re-test group by the suspect it re-tests."""

    def round_() -> list[dict[str, Any]] | None:
        orchestration = workflow_status(kube, namespace, workflow).get("orchestration") or {}
        running = (orchestration.get("isolation") or {}).get("stage") == "Running"
        return orchestration["groups"] if running else None

    return {g["suspect"]: g for g in wait_for(round_, timeout, what=f"the isolation round of {workflow}")}


def group_phases(workflow: dict[str, Any]) -> dict[str, str]:
    """Group name -> phase, as one version of the Workflow's status records them."""
    found = ((workflow.get("status") or {}).get("orchestration") or {}).get("groups") or ()
    return {str(g["name"]): str(g.get("phase", "Pending")) for g in found}


def controller_owner(obj: dict[str, Any]) -> tuple[str, str, str, bool]:
    """(kind, name, uid, controller) of the object's one owner reference."""
    (owner,) = obj["metadata"]["ownerReferences"]
    return (owner["kind"], owner["name"], owner["uid"], owner["controller"])


def pinned_hosts(pod: dict[str, Any]) -> set[str]:
    """The hostnames a pod's required node affinity pins it to (nvcre's ``Pinned`` placement)."""
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return {
        value
        for term in terms["nodeSelectorTerms"]
        for expression in term.get("matchExpressions") or ()
        if expression["key"] == HOSTNAME
        for value in expression["values"]
    }


def jobs_of(kube: Client, namespace: str, workflow: str) -> dict[str, dict[str, Any]]:
    jobs = kube.list(resources.Job, namespace=namespace, labels={"nvcre.nvidia.com/workflow": workflow})
    return {str(j.metadata.name if j.metadata else ""): dict(j.to_dict()) for j in jobs}


def trainjob_of(kube: Client, namespace: str, job: str, timeout: float = 30) -> dict[str, Any]:
    return wait_for(
        lambda: get(kube, resources.TrainJob, f"{job}-workload", namespace),
        timeout,
        what=f"TrainJob {job}-workload",
        ignore=(Exception,),
    )


def own_patch(trainjob: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod templates of the Job controller's runtime patch, by replicated job name."""
    patch = next(
        p for p in trainjob["spec"]["runtimePatches"] if p["manager"] == "nvcre.nvidia.com/controller"
    )
    return {
        j["name"]: j["template"]["spec"]["template"]
        for j in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    }


def events_for(
    kube: Client, namespace: str, name: str, kind: str | None = None
) -> list[tuple[str, str, str]]:
    return [
        (e.type or "", e.reason or "", e.note or "")
        for e in kube.list(Event, namespace=namespace)
        if e.regarding and e.regarding.name == name and (kind is None or e.regarding.kind == kind)
    ]


def config_map_payload(kube: Client, namespace: str, name: str, key: str) -> bytes:
    cm = kube.get(ConfigMap, name, namespace=namespace)
    return gzip.decompress(base64.b64decode((cm.binaryData or {})[key]))


CONSUMER_REASONS = ("HardwareFailureDetected", "ThresholdViolation", "WorkloadFailed")
"""The failed-node reasons a consumer of the record matches on (the reference's enum)."""


def failed_nodes_record(kube: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    """The failed-nodes ConfigMap ``name`` decoded as its consumers decode it (NVIDIA NVSentinel's
    certification monitor: gunzip ``failed-nodes.json.gz``, a JSON list of objects, each acted on
    by ``name``, ``reason`` and ``message``), asserting that contract for every entry."""
    entries = json.loads(config_map_payload(kube, namespace, name, FAILED_NODES_KEY))
    assert isinstance(entries, list), f"{name}: not a JSON list: {entries!r}"
    for entry in entries:
        assert isinstance(entry, dict), f"{name}: an entry is not an object: {entry!r}"
        assert isinstance(entry.get("name"), str) and entry["name"], f"{name}: entry without a name: {entry}"
        assert isinstance(entry.get("message"), str), f"{name}: entry without a message: {entry}"
        assert entry.get("reason") in CONSUMER_REASONS, f"{name}: reason outside {CONSUMER_REASONS}: {entry}"
    return entries


def finish_job(
    kube: Client,
    namespace: str,
    job: str,
    *,
    succeeded: bool = True,
    message: str = "",
    measurements: bool = True,
) -> None:
    """End the TrainJob of the Job ``job`` (:func:`~nvcre.testing.workloads.finish_trainjob`)."""
    trainjob = trainjob_of(kube, namespace, job)["metadata"]["name"]
    finish_trainjob(
        kube, namespace, trainjob, succeeded=succeeded, message=message, measurements=measurements
    )


def finish_workflow_jobs(
    kube: Client,
    namespace: str,
    workflow: str,
    count: int,
    *,
    failing: frozenset[str] = frozenset(),
    timeout: float = 60,
) -> list[str]:
    """Wait for ``count`` Jobs of ``workflow`` and end their TrainJobs (the ``failing`` Jobs fail)."""

    def enough() -> dict[str, dict[str, Any]] | None:
        found = jobs_of(kube, namespace, workflow)
        return found if len(found) >= count else None

    jobs = wait_for(enough, timeout, what=f"{count} Jobs of Workflow {workflow}")
    names = sorted(jobs)
    for name in names:
        finish_job(kube, namespace, name, succeeded=name not in failing)
    return names


def wait_event(
    kube: Client, namespace: str, name: str, kind: str, event: tuple[str, str, str], timeout: float = 10
) -> list[tuple[str, str, str]]:
    """Wait until ``event`` (type, reason, note) is recorded on the object; return all its events.

    Events are written right after the status write they describe, so a test that has just seen
    the status must wait for the event rather than expect it already.
    """

    def recorded() -> list[tuple[str, str, str]] | None:
        found = events_for(kube, namespace, name, kind)
        return found if event in found else None

    return wait_for(recorded, timeout, what=f"event {event} on {kind} {namespace}/{name}")


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
"""What ``kubectl get`` asks for: the API server renders the CRD's printer columns itself."""


def kubectl_get(
    kube: Client, resource: Any, namespace: str | None = None, *, wide: bool = False
) -> dict[str, dict[str, Any]]:
    """What ``kubectl get <plural>`` (``-o wide`` with ``wide``) shows: object name -> column -> cell.

    Columns are keyed by their names as kubectl prints them (upper case); ``-o wide`` adds the
    priority 1 columns, as kubectl does. An empty cell is ``None`` (kubectl prints ``<none>``).
    """
    http = kube._client
    request = http.prepare_request("list", resource, namespace=namespace, headers={"Accept": TABLE})
    response = http._client.send(http.build_adapter_request(request))
    response.raise_for_status()
    table = response.json()
    assert table["kind"] == "Table", table
    columns = table["columnDefinitions"]
    shown = [i for i, column in enumerate(columns) if wide or not column.get("priority")]
    return {
        row["object"]["metadata"]["name"]: {
            columns[i]["name"].upper(): (row["cells"][i] if row["cells"][i] != "" else None) for i in shown
        }
        for row in table["rows"]
    }
