"""nvcre-manager under its own least-privilege RBAC (config/rbac), not as cluster-admin.

The module applies config/rbac/*.yaml to the real API server, mints a token for the
ServiceAccount nvcre/nvcre-manager (TokenRequest) and runs the manager with only that token,
leader-elected with its Lease in ``nvcre`` as deployed. It drives Workflows to success and to
failure, and proves with the API server's own authorizer that nodes are read-only to it. Its
requests are in the session's audit log too, which test_zz_rbac_used compares with the role.
The shared ``manager`` fixture is not used here, so this manager is the only one running.
The roles for people (nvcre-view, nvcre-edit) are proven here too, as users bound to Kubernetes'
view and edit.
With that identity it also proves that no dependency a user writes lands outside the Workflow's
namespace (the confused deputy), and that a dependency's ``when`` is honoured. TrainJobs are
ended by hand: the audit log of this control plane is what is compared.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.authentication_v1 import SelfSubjectReview
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Namespace, PersistentVolume, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import RoleBinding

from nvcre import resources
from nvcre.manager.main import LEADER_ELECTION_ID
from nvcre.testing.access import (
    aggregate_cluster_roles,
    apply_manifests,
    load_manifests,
    service_account_kubeconfig,
)
from nvcre.testing.binaries import repo_root
from nvcre.testing.builders import Certification, WorkloadRun, pool_spec
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.inspect import true_condition, wait_true
from nvcre.testing.kwok import Kwok
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.waiting import wait_for
from nvcre.testing.workloads import finish_trainjob, pool_name, workflow

RBAC_DIR = repo_root() / "config" / "rbac"
SYSTEM_NAMESPACE = "nvcre"
SERVICE_ACCOUNT = "nvcre-manager"
USERNAME = f"system:serviceaccount:{SYSTEM_NAMESPACE}:{SERVICE_ACCOUNT}"
READ = ("get", "list", "watch")
WRITE = ("create", "update", "patch", "delete", "deletecollection")


def rbac_documents() -> list[dict[str, Any]]:
    return load_manifests(sorted(RBAC_DIR.glob("*.yaml")))


@pytest.fixture(scope="module")
def sa_kubeconfig(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    with control_plane.client() as admin:
        if not any(n.metadata.name == SYSTEM_NAMESPACE for n in admin.list(Namespace)):
            admin.create(Namespace(metadata=ObjectMeta(name=SYSTEM_NAMESPACE)))
        apply_manifests(admin, rbac_documents())
    path = tmp_path_factory.mktemp("rbac") / "nvcre-manager.kubeconfig"
    return service_account_kubeconfig(control_plane, SYSTEM_NAMESPACE, SERVICE_ACCOUNT, path)


@pytest.fixture(scope="module")
def sa_client(sa_kubeconfig: Path) -> Iterator[Client]:
    with Client(KubeConfig.from_file(sa_kubeconfig), trust_env=False) as client:
        yield client


@pytest.fixture(scope="module")
def rbac_manager(
    control_plane: ControlPlane, kwok: Kwok, sa_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagerProcess]:
    process = ManagerProcess(
        control_plane,
        tmp_path_factory.mktemp("rbac-manager"),
        name=f"rbac-manager-{secrets.token_hex(2)}",
        kubeconfig=sa_kubeconfig,
        leader_elect=True,
        lease_namespace=SYSTEM_NAMESPACE,
    ).start()
    yield process
    process.stop()


def allowed(
    client: Client, verb: str, resource: str, subresource: str | None = None, group: str = ""
) -> bool:
    review = SelfSubjectAccessReview(
        spec=SelfSubjectAccessReviewSpec(
            resourceAttributes=ResourceAttributes(
                verb=verb, group=group, resource=resource, subresource=subresource, name="any-node"
            )
        )
    )
    reply = client.create(review)
    assert reply.status is not None
    return bool(reply.status.allowed)


def test_the_cluster_role_grants_no_write_on_nodes() -> None:
    """Parsed from the YAML: every rule touching nodes (or a wildcard) is read-only."""
    rules = [
        (doc["kind"], doc["metadata"]["name"], rule)
        for doc in rbac_documents()
        if doc["kind"] in ("ClusterRole", "Role")
        for rule in doc.get("rules") or ()
    ]
    assert any(kind == "ClusterRole" and name == "nvcre-manager" for kind, name, _ in rules)
    for kind, name, rule in rules:
        assert "*" not in rule.get("verbs", ()), f"{kind} {name}: wildcard verbs"
        assert "*" not in rule.get("resources", ()), f"{kind} {name}: wildcard resources"
        assert "*" not in rule.get("apiGroups", ()), f"{kind} {name}: wildcard apiGroups"
        node_resources = [r for r in rule.get("resources", ()) if r == "nodes" or r.startswith("nodes/")]
        if "" in rule.get("apiGroups", ()) and node_resources:
            assert set(rule["verbs"]) <= set(READ), f"{kind} {name} may write {node_resources}: {rule}"


def test_the_api_server_denies_node_writes_to_the_manager(sa_client: Client) -> None:
    review = sa_client.create(SelfSubjectReview())
    assert review.status and review.status.userInfo and review.status.userInfo.username == USERNAME
    for verb in ("list", "watch"):  # the node cache; a node is never read on its own
        assert allowed(sa_client, verb, "nodes"), f"{verb} nodes must be allowed"
    for verb in WRITE:
        assert not allowed(sa_client, verb, "nodes"), f"{verb} nodes must be denied"
    for subresource in ("status", "proxy"):
        for verb in ("update", "patch"):
            assert not allowed(sa_client, verb, "nodes", subresource), f"{verb} nodes/{subresource}"
    assert not allowed(sa_client, "create", "pods", "eviction"), "no evictions (no drain)"
    assert not allowed(sa_client, "escalate", "clusterroles", group="rbac.authorization.k8s.io")


def trio(kube: Client, namespace: str, name: str) -> tuple[str, str, str] | None:
    obj = kube.get(resources.Workflow, name, namespace=namespace).to_dict()
    true = [
        c
        for c in (obj.get("status") or {}).get("conditions") or ()
        if c["type"] in ("InProgress", "Succeeded", "Failed") and c["status"] == "True"
    ]
    return (true[0]["type"], true[0]["reason"], true[0]["message"]) if true else None


def wait_trio(kube: Client, namespace: str, name: str, type_: str) -> tuple[str, str, str]:
    return wait_for(
        lambda: (t := trio(kube, namespace, name)) and t[0] == type_ and t,
        90,
        what=f"Workflow {namespace}/{name} {type_}=True",
    )


def wait_trainjob(kube: Client, namespace: str, name: str) -> None:
    wait_for(
        lambda: kube.get(resources.TrainJob, name, namespace=namespace),
        60,
        what=f"TrainJob {name}",
        ignore=(Exception,),
    )


def test_the_manager_runs_workflows_with_only_its_service_account(
    kube: Client, namespace: str, gpu_nodes: Any, rbac_manager: ManagerProcess
) -> None:
    lease = wait_for(
        lambda: kube.get(Lease, LEADER_ELECTION_ID, namespace=SYSTEM_NAMESPACE), 30, ignore=(Exception,)
    )
    assert lease.spec and lease.spec.holderIdentity == rbac_manager.name

    pool = pool_name()
    gpu_nodes(4, pool_spec(pool))
    kube.create(resources.Workflow.from_dict(workflow("ok", namespace, pool, 2)))
    kube.create(resources.Workflow.from_dict(workflow("fails", namespace, pool, 4)))
    for name in ("ok-group-0-iter-1-workload", "ok-group-1-iter-1-workload"):
        wait_trainjob(kube, namespace, name)
        finish_trainjob(kube, namespace, name, succeeded=True)
    wait_trainjob(kube, namespace, "fails-job-workload")
    finish_trainjob(kube, namespace, "fails-job-workload", succeeded=False, message="NCCL timeout")
    # no group passed: the four suspects are screened in ring pairs, two waves of two disjoint Jobs
    for i in (0, 2, 1, 3):
        name = f"fails-isolate-{i}-iter-1-workload"
        wait_trainjob(kube, namespace, name)
        finish_trainjob(kube, namespace, name, succeeded=False, message="NCCL timeout")

    assert wait_trio(kube, namespace, "ok", "Succeeded")[1] == "JobCompleted"
    assert wait_trio(kube, namespace, "fails", "Failed")[1] == "IterationsFailed"
    fails = kube.get(resources.Workflow, "fails", namespace=namespace).to_dict()
    isolation = fails["status"]["orchestration"]["isolation"]
    assert len(isolation["failedNodes"]) == 4 and not isolation.get("clearedNodes")
    ok = kube.get(resources.Workflow, "ok", namespace=namespace).to_dict()
    assert ok["status"]["succeededNodesRef"]["name"].startswith("succeeded-nodes-")
    assert rbac_manager.running()


def test_an_unknown_dependency_kind_fails_cleanly_under_least_privilege(
    kube: Client, namespace: str, gpu_nodes: Any, rbac_manager: ManagerProcess
) -> None:
    """Resolving a kind reads CRDs; the role allows that (read-only), so this is a clean failure."""
    pool = pool_name()
    gpu_nodes(1, pool_spec(pool))
    widget = {"apiVersion": "widgets.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    kube.create(resources.Workflow.from_dict(workflow("widget", namespace, pool, 0, dependencies=[widget])))
    _, reason, message = wait_trio(kube, namespace, "widget", "Failed")
    assert reason == "DependencyCreationError" and "Widget/w" in message
    assert rbac_manager.running()


def test_dependencies_never_land_outside_the_workflows_namespace(
    kube: Client, namespace: str, gpu_nodes: Any, rbac_manager: ManagerProcess
) -> None:
    """The confused deputy: the ClusterRole may write ConfigMaps in any namespace, so a dependency
    naming ``kube-system`` (directly, merged in by an override, or appended by a WorkloadRun's
    override) must be refused before anything is created; so is a cluster-scoped kind. Each
    refusal is the object's terminal Failed condition naming the field; only after every one has
    been observed is ``kube-system`` (and the cluster scope) checked for what the manager made."""
    pool = pool_name()
    gpu_nodes(1, pool_spec(pool))
    marker = f"deputy-{secrets.token_hex(3)}"

    def foreign(name: str, **metadata: Any) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, **metadata},
            "data": {"x": "y"},
        }

    direct = workflow("direct", namespace, pool, 1, dependencies=[foreign(marker, namespace="kube-system")])
    # an override that only moves the Workflow's own TrainingRuntime (deep merge by apiVersion, kind, name)
    move_runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "merged-rt", "namespace": "kube-system"},
    }
    merged = workflow("merged", namespace, pool, 1, overrides=[{"when": {}, "dependencies": [move_runtime]}])
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": marker},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/"}},
    }
    cluster = workflow("cluster", namespace, pool, 1, dependencies=[volume])
    for body in (direct, merged, cluster):
        kube.create(resources.Workflow.from_dict(body))
    run = (
        WorkloadRun("run")
        .namespace(namespace)
        .image("img")
        .framework({"exec": {"command": ["true"]}})
        .nodes(1)
        .pool(pool)
        .spec(overrides=[{"when": {}, "dependencies": [foreign(f"{marker}-run", namespace="kube-system")]}])
        .obj()
    )
    kube.create(resources.WorkloadRun.from_dict(run))

    def failed(resource: Any, name: str) -> tuple[str, str]:
        found = true_condition(wait_true(kube, resource, name, namespace, "Failed"))
        assert found is not None
        return found[1], found[2]

    outside = "is not the Workflow's namespace"
    assert failed(resources.Workflow, "direct") == (
        "DependencyCreationError",
        f'Failed to create dependency: spec.dependencies[1].metadata.namespace: "kube-system" {outside} '
        f'"{namespace}"; a dependency is always created in its Workflow\'s namespace (leave the field out)',
    )
    reason, message = failed(resources.Workflow, "merged")
    assert reason == "DependencyCreationError"
    assert message.startswith(
        f'Failed to create dependency: spec.overrides[0].dependencies[0].metadata.namespace: "kube-system" {outside}'
    )
    assert failed(resources.Workflow, "cluster") == (
        "DependencyCreationError",
        f'Failed to create dependency: PersistentVolume "{marker}" (v1) is cluster-scoped; a Workflow creates '
        "its dependencies only in its own namespace",
    )
    reason, message = failed(resources.WorkloadRun, "run")
    assert reason == "BuildFailed"
    assert message.startswith(
        f'workloadrun run: spec.overrides[0].dependencies[0].metadata.namespace: "kube-system" {outside}'
    )

    def names(resource: Any, where: str | None = None) -> set[str]:
        # The first list of a custom kind on a fresh API server may answer 429 while its cache fills.
        (listed,) = wait_for(
            lambda: ({o.metadata.name or "" for o in kube.list(resource, namespace=where) if o.metadata},),
            30,
            what=f"a list of {resource.__name__}",
            ignore=(ApiError,),
        )
        return listed

    assert not {n for n in names(ConfigMap, "kube-system") if n.startswith(marker)}
    assert not names(resources.TrainingRuntime, "kube-system")
    assert marker not in names(PersistentVolume)
    assert "run" not in names(resources.Workflow, namespace)
    assert rbac_manager.running()


def test_a_dependency_exists_only_where_its_when_matches(
    kube: Client, namespace: str, gpu_nodes: Any, rbac_manager: ManagerProcess
) -> None:
    """``dependencies[].when`` is matched like an override's: on AWS nodes the gcp-only ConfigMap
    is never created. Workflow-scoped dependencies are all created before the first Job, so once
    the TrainJob exists the absence is final."""
    pool = pool_name()
    gpu_nodes(1, pool_spec(pool, platform="aws"))
    everywhere = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "everywhere"}, "data": {}}
    aws = {**everywhere, "metadata": {"name": "aws-only"}, "when": {"platform": {"equals": "aws"}}}
    gcp = {**everywhere, "metadata": {"name": "gcp-only"}, "when": {"platform": {"equals": "gcp"}}}
    kube.create(
        resources.Workflow.from_dict(
            workflow("when", namespace, pool, 1, dependencies=[everywhere, aws, gcp])
        )
    )
    wait_trainjob(kube, namespace, "when-job-workload")
    refs = kube.get(resources.Workflow, "when", namespace=namespace).to_dict()["status"]["dependencyRefs"]
    assert sorted(r["name"] for r in refs if r["kind"] == "ConfigMap") == ["aws-only", "everywhere"]
    present = {c.metadata.name for c in kube.list(ConfigMap, namespace=namespace) if c.metadata}
    assert {"everywhere", "aws-only"} <= present
    assert "gcp-only" not in present


def _user(
    control_plane: ControlPlane, kube: Client, namespace: str, name: str, role: str, path: Path
) -> Client:
    """ServiceAccount ``name`` of ``namespace``, bound there (a RoleBinding) to ClusterRole ``role``."""
    kube.create(ServiceAccount(metadata=ObjectMeta(name=name, namespace=namespace)))
    kube.create(
        RoleBinding(
            metadata=ObjectMeta(name=name, namespace=namespace),
            roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name=role),
            subjects=[Subject(kind="ServiceAccount", name=name, namespace=namespace)],
        )
    )
    config = service_account_kubeconfig(control_plane, namespace, name, path / f"{name}.kubeconfig")
    return Client(KubeConfig.from_file(config), trust_env=False)


def test_kubernetes_view_and_edit_roles_carry_nvcre_through_aggregation(
    control_plane: ControlPlane, kube: Client, namespace: str, tmp_path: Path
) -> None:
    """config/rbac's nvcre-view and nvcre-edit, aggregated into Kubernetes' own view and edit (by
    their aggregationRules, as kube-controller-manager fills them): a user bound to view reads
    Certifications and may not create one; a user bound to edit creates one, and still may not
    write a Job (the manager's)."""
    apply_manifests(kube, load_manifests([RBAC_DIR / "user_roles.yaml"]))
    aggregate_cluster_roles(kube)
    cert = Certification("by-a-user").namespace(namespace).pool(pool_name()).obj()
    with (
        _user(control_plane, kube, namespace, "viewer", "view", tmp_path) as viewer,
        _user(control_plane, kube, namespace, "editor", "edit", tmp_path) as editor,
    ):
        # A fresh API server answers 429 while its cache of a new CRD starts (a timeout names the error).
        wait_for(
            lambda: certifications(viewer, namespace) == [], 30, what="the viewer's list", ignore=(ApiError,)
        )
        with pytest.raises(ApiError) as refused:
            viewer.create(resources.Certification.from_dict(cert))
        assert refused.value.status.code == 403
        for kind in ("jobs", "workflows", "bandwidthmeasurements", "goodputmeasurements", "workloadruns"):
            assert allowed_in(viewer, namespace, "watch", kind)
            assert not allowed_in(viewer, namespace, "delete", kind)

        editor.create(resources.Certification.from_dict(cert))
        assert certifications(viewer, namespace) == ["by-a-user"]
        assert allowed_in(editor, namespace, "create", "workloadruns")
        assert allowed_in(editor, namespace, "delete", "workflows")
        assert not allowed_in(editor, namespace, "create", "jobs")
        assert not allowed_in(editor, namespace, "update", "certifications", "status")
        assert not allowed_in(editor, namespace, "create", "logprofiles"), (
            "cluster-scoped: not by a RoleBinding"
        )


def certifications(client: Client, namespace: str) -> list[str]:
    return [
        str(c.metadata.name) for c in client.list(resources.Certification, namespace=namespace) if c.metadata
    ]


def allowed_in(
    client: Client, namespace: str, verb: str, resource: str, subresource: str | None = None
) -> bool:
    review = SelfSubjectAccessReview(
        spec=SelfSubjectAccessReviewSpec(
            resourceAttributes=ResourceAttributes(
                verb=verb,
                group="nvcre.nvidia.com",
                resource=resource,
                subresource=subresource,
                namespace=namespace if resource != "logprofiles" else None,
            )
        )
    )
    reply = client.create(review)
    assert reply.status is not None
    return bool(reply.status.allowed)
