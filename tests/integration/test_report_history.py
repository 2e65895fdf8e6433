"""The report's node history on the real API server: the records the real manager wrote after two
runs that failed the same nodes make the second run's report say ``2nd failure in 30 days``; the
first run's report, read after the second, counts no later failure as an earlier one.

The test plays Kubeflow Trainer (it ends the TrainJobs, failing them); the WorkloadRun, Workflow,
Job and NodeRecord writers are real. No test writes a NodeRecord.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.core_v1 import ServiceAccount
from lightkube.resources.rbac_authorization_v1 import RoleBinding

from nvcre import resources
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.cli.main import cli
from nvcre.conditions import condition_true
from nvcre.testing.access import (
    aggregate_cluster_roles,
    apply_manifests,
    load_manifests,
    service_account_kubeconfig,
)
from nvcre.testing.binaries import repo_root
from nvcre.testing.builders import WorkloadRun, pool_spec
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import finish_workflow_jobs, get, kubectl_get, recorded_workflows, wait_true
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import pool_name

MPI = {"mpi": {"binary": "/usr/local/bin/all_reduce_perf_mpi", "mpirunPath": "/usr/local/mpi/bin/mpirun"}}


def _failing_run(kube: Client, namespace: str, pool: str, name: str, nodes: list[str]) -> None:
    """A 2-node WorkloadRun whose one Job fails (WorkloadFailed for both nodes), once the manager
    has written its result into both nodes' records and released its workload."""
    run = WorkloadRun(name).namespace(namespace).image("nvcr.io/nvidia/pytorch:26.01-py3")
    kube.create(resources.WorkloadRun.from_dict(run.framework(MPI).nodes(2).pool(pool).obj()))
    finish_workflow_jobs(kube, namespace, name, 1, failing=frozenset({f"{name}-job"}))
    wait_true(kube, resources.WorkloadRun, name, namespace, "Failed", timeout=90)
    assert kubectl_get(kube, resources.WorkloadRun, namespace)[name]["FAILED-NODES"] == len(nodes)
    uid = str(get(kube, resources.Workflow, name, namespace)["metadata"]["uid"])
    wait_for(
        lambda: all(uid in recorded_workflows(kube, n) for n in nodes),
        60,
        what=f"the results of {name} in the records of {nodes}",
    )
    # Its last change (the report prints "Released: yes" from then on): reports read before and
    # after it compare equal.
    wait_for(
        lambda: condition_true(get(kube, resources.WorkloadRun, name, namespace), "ResourcesReleased"),
        60,
        what=f"{name} ResourcesReleased",
    )


def _card(report: str) -> str:
    """The Node History card's lines, borders taken off, joined by spaces."""
    lines = report.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("│  Node History ")))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
    return " ".join(line.strip("│ ") for line in lines[start:end])


def _report(control_plane: ControlPlane, name: str, namespace: str, *args: str) -> Result:
    return _report_as(control_plane.kubeconfig_path, name, namespace, *args)


def _report_as(kubeconfig: Path, name: str, namespace: str, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["workloadrun", "report", name, "-n", namespace, *args, "--kubeconfig", str(kubeconfig)]
    )


def _without_card(report: str) -> str:
    """The report with its Node History card (and the blank line before it) taken out."""
    lines = report.splitlines(keepends=True)
    title = next(i for i, line in enumerate(lines) if line.startswith("│  Node History "))
    end = next(i for i in range(title, len(lines)) if lines[i].startswith("└"))
    return "".join(lines[: title - 2] + lines[end + 1 :])


def _namespace_viewer(control_plane: ControlPlane, kube: Client, namespace: str, path: Path) -> Path:
    """A kubeconfig of ServiceAccount ``viewer``, bound in ``namespace`` (a RoleBinding) to
    Kubernetes' ``view``, nvcre-view aggregated into it: it reads the namespace's objects, not
    the cluster-scoped records."""
    apply_manifests(kube, load_manifests([repo_root() / "config" / "rbac" / "user_roles.yaml"]))
    aggregate_cluster_roles(kube)
    kube.create(ServiceAccount(metadata=ObjectMeta(name="viewer", namespace=namespace)))
    kube.create(
        RoleBinding(
            metadata=ObjectMeta(name="viewer", namespace=namespace),
            roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name="view"),
            subjects=[Subject(kind="ServiceAccount", name="viewer", namespace=namespace)],
        )
    )
    return service_account_kubeconfig(control_plane, namespace, "viewer", path / "viewer.kubeconfig")


def test_a_node_that_failed_two_runs_is_reported_as_its_second_failure(
    kube: Client, namespace: str, gpu_nodes: Any, manager: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    pool = pool_name()
    nodes = sorted(str(n.metadata.name) for n in gpu_nodes(2, pool_spec(pool)) if n.metadata)
    _failing_run(kube, namespace, pool, "fails-first", nodes)
    # A result's time is whole seconds: the second run must end in a later second than the first,
    # or the first run's report cannot tell the second's failure from one at the same moment.
    conditions = get(kube, resources.Workflow, "fails-first", namespace)["status"]["conditions"]
    ended = parse_time(next(c for c in conditions if c["type"] == "Failed")["lastTransitionTime"])
    wait_for(
        lambda: datetime.now(UTC).replace(microsecond=0) > ended, 5, what="a second after the first run's end"
    )
    _failing_run(kube, namespace, pool, "fails-again", nodes)

    second = _report(control_plane, "fails-again", namespace)
    assert second.exit_code == 1, second.output
    card = _card(second.stdout)
    for node in nodes:  # the text beside the node, or under it for a long name
        assert re.search(rf"\b{node} +2nd failure in 30 days\b", card), card
        assert re.search(rf"\b{node} +never certified\b", card), card
    assert "cannot read noderecords" not in second.stderr
    data = json.loads(_report(control_plane, "fails-again", namespace, "-o", "json").stdout)
    assert data["nodeHistory"] == {
        "repeatFailures": [{"name": n, "failures": 2, "windowDays": 30} for n in nodes],
        "notCertified": [{"name": n} for n in nodes],
        "staleAfterDays": 30,
    }

    # The first run's report, read now: the second run's failure came after it.
    first = _report(control_plane, "fails-first", namespace)
    assert first.exit_code == 1, first.output
    assert "failure in 30 days" not in first.stdout
    assert re.search(rf"\b{nodes[0]} +never certified\b", _card(first.stdout))

    # A namespace viewer may not read the records: the same report without the card, a warning.
    viewer = _namespace_viewer(control_plane, kube, namespace, tmp_path)
    viewed = wait_for(
        lambda: (r := _report_as(viewer, "fails-again", namespace)).stdout and r,
        30,
        what="the viewer's report (its RoleBinding in force)",
    )
    assert viewed.exit_code == 1, viewed.output
    assert viewed.stdout == _without_card(second.stdout)
    assert viewed.stderr == (
        "Warning: cannot read noderecords: Forbidden: noderecords.nvcre.nvidia.com "
        f'"{nodes[0]}" is forbidden: User "system:serviceaccount:{namespace}:viewer" cannot get '
        'resource "noderecords" in API group "nvcre.nvidia.com" at the cluster scope; the report '
        "leaves out the nodes' history\n"
        'Error: workloadrun "fails-again" failed\n'
    )
