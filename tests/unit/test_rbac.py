"""The manager's RBAC: generated from the controllers' rules, and compared with an audit log."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

import pytest

from nvcre.api.v1alpha1 import KIND_MODULES
from nvcre.api.v1alpha1.constants import PLURALS
from nvcre.controllers.rbac import CLUSTER_RULES
from nvcre.manager import rbac
from nvcre.manager.main import LEADER_ELECTION_ID, USER_AGENT, client_for
from nvcre.testing.access import load_manifests
from nvcre.testing.audit import (
    MANAGER_USER_AGENT,
    Access,
    accesses,
    bound_to_manager,
    by_manager,
    compare,
    denied,
    grants,
    policy,
)
from nvcre.testing.binaries import repo_root
from nvcre.testing.certs import MANAGER_USER

ROOT = repo_root()


def copy_of_the_repo_files(tmp_path: Path) -> list[str]:
    shutil.copytree(ROOT / "config" / "rbac", tmp_path / "rbac")
    shutil.copy(ROOT / "docs" / "operations.md", tmp_path / "operations.md")
    return [f"--config={tmp_path / 'rbac'}", f"--docs={tmp_path / 'operations.md'}"]


def test_the_committed_rbac_is_what_the_rules_generate(tmp_path: Path) -> None:
    args = copy_of_the_repo_files(tmp_path)
    assert rbac.main([*args, "--check"]) == 0


def test_check_fails_on_a_hand_edited_role_and_writing_repairs_it(tmp_path: Path) -> None:
    args = copy_of_the_repo_files(tmp_path)
    role = tmp_path / "rbac" / "role.yaml"
    role.write_text(
        role.read_text().replace("verbs: [list, watch]", "verbs: [list, watch, deletecollection]", 1)
    )
    assert rbac.main([*args, "--check"]) == 1
    assert rbac.main(args) == 0
    assert rbac.main([*args, "--check"]) == 0
    assert "deletecollection" not in role.read_text().split("rules:")[1]


def test_the_generated_role_parses_to_the_rules() -> None:
    documents = load_manifests([ROOT / "config" / "rbac" / "role.yaml"])
    parsed = {(g.group, g.resource, g.verb) for g in grants(documents)}
    assert parsed == {(r.group, r.resource, v) for r in CLUSTER_RULES for v in r.verbs}
    assert all(g.names == () for g in grants(documents))


def test_the_lease_is_restricted_by_name_except_create() -> None:
    documents = load_manifests([ROOT / "config" / "rbac" / "leader_election_role.yaml"])
    lease = {(g.verb, g.names) for g in grants(documents)}
    assert lease == {("get", (LEADER_ELECTION_ID,)), ("update", (LEADER_ELECTION_ID,)), ("create", ())}


def test_the_doc_table_lists_every_rule() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text()
    for rule in (*CLUSTER_RULES, *rbac.LEASE_RULES):
        assert f"| `{rule.resource}`" in doc


def test_the_managers_client_names_itself_in_its_user_agent(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    client = client_for(argparse.Namespace(kubeconfig=str(config), context=None))
    request = client._client._client.build_request("GET", "https://127.0.0.1:1/api")
    assert request.headers["User-Agent"] == USER_AGENT
    assert USER_AGENT.startswith(MANAGER_USER_AGENT)


def event(verb: str, resource: str, group: str = "", **extra: Any) -> dict[str, Any]:
    """An audit event of the manager; ``resource`` may be ``plural/subresource``."""
    plural, _, sub = resource.partition("/")
    ref = {"resource": plural, "apiGroup": group, "name": extra.pop("name", "")}
    if sub:
        ref["subresource"] = sub
    return {
        "auditID": f"{verb}-{group}-{resource}-{ref['name']}",
        "verb": verb,
        "user": {"username": MANAGER_USER},
        "userAgent": USER_AGENT,
        "objectRef": ref,
        **extra,
    }


def test_accesses_name_subresources_and_the_owners_finalizers() -> None:
    job = {
        "metadata": {
            "ownerReferences": [
                {
                    "apiVersion": "nvcre.nvidia.com/v1alpha1",
                    "kind": "Workflow",
                    "name": "w",
                    "blockOwnerDeletion": True,
                },
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"},
            ]
        }
    }
    events = [
        event("update", "workflows/status", "nvcre.nvidia.com", name="w"),
        event("create", "jobs", "nvcre.nvidia.com", requestObject=job),
        {"auditID": "x", "verb": "get", "requestURI": "/version", "user": {"username": MANAGER_USER}},
    ]
    found = accesses(events, lambda api_version, kind: {"Workflow": "workflows"}[kind])
    assert found == [
        Access("nvcre.nvidia.com", "workflows/status", "update", "w"),
        Access("nvcre.nvidia.com", "jobs", "create"),
        Access("nvcre.nvidia.com", "workflows/finalizers", "update", "w"),
    ]


def test_only_the_managers_own_requests_count_once_each() -> None:
    mine = event("get", "pods")
    test_client = {**event("get", "nodes"), "auditID": "t", "userAgent": "python-httpx/0.28"}
    stranger = {**event("get", "secrets"), "auditID": "s", "user": {"username": "nvcre-admin"}}
    started, completed = (
        {**event("watch", "pods"), "stage": "ResponseStarted"},
        {
            **event("watch", "pods"),
            "stage": "ResponseComplete",
        },
    )
    assert by_manager([mine, test_client, stranger, started, completed]) == [mine, completed]


def test_a_refusal_is_a_403_unless_the_namespace_is_going_away() -> None:
    forbidden = event("create", "configmaps", responseStatus={"code": 403, "message": "forbidden: cannot"})
    by_rbac = event(
        "get",
        "secrets",
        responseStatus={"code": 403},
        annotations={"authorization.k8s.io/decision": "forbid"},
    )
    terminating = event(
        "create",
        "events",
        "events.k8s.io",
        responseStatus={
            "code": 403,
            "message": "unable to create new content in namespace a because it is being terminated",
        },
    )
    fine = event("get", "pods", responseStatus={"code": 200})
    assert len(denied([forbidden, by_rbac, terminating, fine])) == 2


def test_compare_finds_a_verb_used_not_granted_and_one_granted_never_used() -> None:
    role = [
        {
            "kind": "ClusterRole",
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "get"]},
                {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            ],
        },
        {
            "kind": "Role",
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": ["l"],
                    "verbs": ["get"],
                }
            ],
        },
    ]
    used = [
        Access("", "pods", "list"),
        Access("", "pods/log", "get", "p"),
        Access("", "pods", "delete", "p"),
        Access("coordination.k8s.io", "leases", "get", "l"),
        Access("coordination.k8s.io", "leases", "get", "other"),
    ]
    result = compare(used, grants(role))
    assert result.not_granted == ["delete pods p", "get leases.coordination.k8s.io other"]
    assert result.never_used == ["get pods"]
    assert compare(used[:2] + used[3:4] + [Access("", "pods", "get")], grants(role)) == compare([], [])


def test_the_audit_policy_records_only_the_given_users_without_request_received() -> None:
    written = policy(["b", "a"])
    assert written["omitStages"] == ["RequestReceived"]
    assert all(rule["users"] == ["a", "b"] for rule in written["rules"][:-1])
    assert written["rules"][-1] == {"level": "None"}
    assert {rule["level"] for rule in written["rules"]} == {"Metadata", "Request", "None"}


@pytest.mark.parametrize("rule", CLUSTER_RULES, ids=lambda r: f"{r.group}/{r.resource}")
def test_no_rule_writes_a_node_or_uses_a_wildcard(rule: Any) -> None:
    assert "*" not in (rule.group, rule.resource, *rule.verbs)
    if rule.group == "" and rule.resource.split("/")[0] == "nodes":
        assert set(rule.verbs) <= {"get", "list", "watch"}


def test_the_manager_is_bound_to_its_three_roles_and_not_to_the_users_ones() -> None:
    """Its own, its leader election's, and the reviews --metrics-secure asks for (as
    controller-runtime's metrics-auth role); never the users' roles or the scrapers'."""
    documents = load_manifests(sorted((ROOT / "config" / "rbac").glob("*.yaml")))
    bound = {(d["kind"], d["metadata"]["name"]): d for d in bound_to_manager(documents)}
    assert set(bound) == {
        ("ClusterRole", "nvcre-manager"),
        ("Role", "nvcre-leader-election"),
        ("ClusterRole", "nvcre-metrics-auth"),
    }
    reviews = [
        (g, r, v)
        for rule in bound[("ClusterRole", "nvcre-metrics-auth")]["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    ]
    assert sorted(reviews) == [
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    ]


def test_the_users_roles_read_every_kind_and_write_only_what_people_write() -> None:
    documents = load_manifests([ROOT / "config" / "rbac" / "user_roles.yaml"])
    roles = {d["metadata"]["name"]: d for d in documents}
    assert set(roles) == {"nvcre-view", "nvcre-edit"}
    aggregate = "rbac.authorization.k8s.io/aggregate-to-"
    assert roles["nvcre-view"]["metadata"]["labels"] == {f"{aggregate}view": "true"}
    assert roles["nvcre-edit"]["metadata"]["labels"] == {
        f"{aggregate}edit": "true",
        f"{aggregate}admin": "true",
    }
    kinds = {PLURALS[kind] for kind in KIND_MODULES}
    view = {(g.resource, g.verb) for g in grants([roles["nvcre-view"]])}
    assert view == {(plural, verb) for plural in kinds for verb in ("get", "list", "watch")}
    written = {g.resource for g in grants([roles["nvcre-edit"]]) if g.verb == "create"}
    assert written == {"certifications", "workloadruns", "workflows", "logprofiles"}
    assert all(g.group == "nvcre.nvidia.com" for role in roles.values() for g in grants([role]))
    assert not any(g.resource.endswith("/status") for role in roles.values() for g in grants([role]))
