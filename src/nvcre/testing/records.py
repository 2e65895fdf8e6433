"""Reading the NodeRecords the manager writes, and running a Workflow of one name again (its
records stay), for the tests of fleet memory."""

from __future__ import annotations

import contextlib
from typing import Any

from lightkube import ApiError, Client

from nvcre import resources
from nvcre.testing.inspect import jobs_of
from nvcre.testing.waiting import wait_for


def record(kube: Client, node: str) -> dict[str, Any] | None:
    """The node's NodeRecord, None when it has none."""
    try:
        return dict(kube.get(resources.NodeRecord, node).to_dict())
    except ApiError as error:
        if error.status.code == 404:
            return None
        raise


def results_of(kube: Client, node: str) -> list[dict[str, Any]]:
    """Every result of the node's record, every category."""
    status = (record(kube, node) or {}).get("status") or {}
    return [r for h in status.get("categories") or () for r in h["results"]]


def wait_results(kube: Client, nodes: list[str], count: int) -> dict[str, dict[str, Any]]:
    """The nodes' records once each holds ``count`` results."""
    wait_for(
        lambda: all(len(results_of(kube, n)) >= count for n in nodes),
        60,
        what=f"{count} results in the records of {nodes}",
    )
    return {n: record(kube, n) or {} for n in nodes}


def run_again(kube: Client, namespace: str, body: dict[str, Any]) -> None:
    """Create the Workflow ``body`` once the previous one of its name and its Jobs are gone
    (records stay): the new Jobs take the old ones' names, and a test that finishes a Job by name
    must not find a going one."""
    name = body["metadata"]["name"]
    with contextlib.suppress(ApiError):
        kube.delete(resources.Workflow, name, namespace=namespace)
    wait_for(
        lambda: (
            name not in {w.metadata.name for w in kube.list(resources.Workflow, namespace=namespace)}
            and not jobs_of(kube, namespace, name)
        ),
        60,
        what=f"the previous {name} and its Jobs gone",
    )
    kube.create(resources.Workflow.from_dict(body))
