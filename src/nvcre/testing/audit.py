"""What nvcre-manager asked of the API server, from its audit log, next to what RBAC grants it.

The test control plane records the manager's requests (its users only, see
:data:`MANAGER_USERS`) at level Metadata — creates at level Request, whose body shows the
``blockOwnerDeletion`` owner references that OwnerReferencesPermissionEnforcement authorises as
``update`` on the owner's ``finalizers``. :func:`accesses` turns those events into
(apiGroup, resource[/subresource], verb) triples; :func:`compare` puts them next to the rules of
``config/rbac`` (``tests/integration/test_zz_rbac_used.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvcre.testing.certs import MANAGER_USER

SERVICE_ACCOUNT_USER = "system:serviceaccount:nvcre:nvcre-manager"
"""nvcre-manager deployed (config/rbac), as tests/integration/test_rbac.py runs it."""
MANAGER_USERS = (MANAGER_USER, SERVICE_ACCOUNT_USER)
MANAGER_USER_AGENT = "nvcre-manager/"
"""The prefix of the user agent of nvcre-manager's client (``nvcre.manager.main.client_for``);
it tells the manager's requests from a test's own under the same user."""

Event = dict[str, Any]


def policy(users: Iterable[str]) -> dict[str, Any]:
    """An audit policy: nothing but ``users``' requests; Metadata level, creates with their body
    (events excepted: there are many and they own nothing); no RequestReceived stage."""
    who = sorted(users)
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "omitManagedFields": True,
        "rules": [
            {
                "level": "Metadata",
                "users": who,
                "resources": [{"group": "events.k8s.io", "resources": ["events"]}],
            },
            {"level": "Request", "users": who, "verbs": ["create"]},
            {"level": "Metadata", "users": who},
            {"level": "None"},
        ],
    }


def read_events(path: Path) -> list[Event]:
    """The events of a JSON-lines audit log (a line still being written is skipped)."""
    events = []
    with path.open() as log:
        for line in log:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def by_manager(events: Iterable[Event]) -> list[Event]:
    """One event per request of nvcre-manager (by user and user agent), its last stage."""
    requests: dict[str, Event] = {}
    for event in events:
        if (event.get("user") or {}).get("username") not in MANAGER_USERS:
            continue
        if not str(event.get("userAgent", "")).startswith(MANAGER_USER_AGENT):
            continue
        requests[str(event.get("auditID"))] = event
    return list(requests.values())


@dataclass(frozen=True, order=True)
class Access:
    group: str
    resource: str
    """A plural, or ``plural/subresource``."""
    verb: str
    name: str = ""

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}" + (f".{self.group}" if self.group else "")


def _resource(ref: Mapping[str, Any]) -> str:
    return str(ref["resource"]) + (f"/{ref['subresource']}" if ref.get("subresource") else "")


def accesses(events: Iterable[Event], plural: Callable[[str, str], str]) -> list[Access]:
    """What each request needed: its own (group, resource, verb), and for a create whose body
    sets ``blockOwnerDeletion`` on an owner reference, ``update`` on that owner's ``finalizers``.
    ``plural(apiVersion, kind)`` names the owner's resource. Non-resource requests are skipped."""
    found = []
    for event in events:
        ref = event.get("objectRef")
        if not ref or not ref.get("resource"):
            continue
        group = str(ref.get("apiGroup") or "")
        found.append(Access(group, _resource(ref), str(event["verb"]), str(ref.get("name") or "")))
        body = event.get("requestObject") or {}
        for owner in (body.get("metadata") or {}).get("ownerReferences") or ():
            if owner.get("blockOwnerDeletion"):
                api_version = str(owner["apiVersion"])
                owner_group = api_version.rpartition("/")[0]
                resource = f"{plural(api_version, str(owner['kind']))}/finalizers"
                found.append(Access(owner_group, resource, "update", str(owner.get("name") or "")))
    return found


def denied(events: Iterable[Event]) -> list[str]:
    """Requests the authorizer (RBAC) or an authorising admission plugin refused.

    A 403 because the namespace is being deleted is the namespace's lifecycle, not a permission:
    the tests' namespaces stay Terminating (no namespace controller runs) while the manager
    still writes events about the objects in them.
    """
    refused = []
    for event in events:
        status = event.get("responseStatus") or {}
        annotations = event.get("annotations") or {}
        message = str(status.get("message") or "")
        if annotations.get("authorization.k8s.io/decision") == "forbid" or (
            status.get("code") == 403 and "because it is being terminated" not in message
        ):
            refused.append(f"{event.get('verb')} {event.get('requestURI')}: {message}")
    return refused


@dataclass(frozen=True)
class Grant:
    group: str
    resource: str
    verb: str
    names: tuple[str, ...] = ()
    """resourceNames: empty means any name."""

    def allows(self, access: Access) -> bool:
        return (self.group, self.resource, self.verb) == (access.group, access.resource, access.verb) and (
            not self.names or access.name in self.names
        )

    def __str__(self) -> str:
        names = f" {list(self.names)}" if self.names else ""
        return f"{self.verb} {self.resource}" + (f".{self.group}" if self.group else "") + names


def bound_to_manager(documents: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Roles and ClusterRoles among ``documents`` that a binding among them gives the manager's
    ServiceAccount (``config/rbac`` also holds the roles for people, which it is not bound to)."""
    documents = list(documents)
    bound = {
        (doc["roleRef"]["kind"], doc["roleRef"]["name"])
        for doc in documents
        if doc.get("kind") in ("ClusterRoleBinding", "RoleBinding")
        and any(
            f"system:serviceaccount:{s.get('namespace')}:{s.get('name')}" == SERVICE_ACCOUNT_USER
            for s in doc.get("subjects") or ()
            if s.get("kind") == "ServiceAccount"
        )
    }
    return [doc for doc in documents if (doc.get("kind"), doc.get("metadata", {}).get("name")) in bound]


def grants(documents: Iterable[Mapping[str, Any]]) -> list[Grant]:
    """Every (group, resource, verb) of the ClusterRoles and Roles among ``documents``.

    A Role's namespace is not compared: it is where nvcre is deployed, and tests put the Lease
    of a leader-elected replica in a namespace of their own.
    """
    found = []
    for doc in documents:
        if doc.get("kind") not in ("ClusterRole", "Role"):
            continue
        for rule in doc.get("rules") or ():
            names = tuple(rule.get("resourceNames") or ())
            for group in rule.get("apiGroups") or ():
                for resource in rule.get("resources") or ():
                    for verb in rule.get("verbs") or ():
                        found.append(Grant(group, resource, verb, names))
    return found


@dataclass(frozen=True)
class Comparison:
    not_granted: list[str]
    """Used, and no rule allows it."""
    never_used: list[str]
    """Granted, and no request used it."""


def compare(used: Iterable[Access], granted: Iterable[Grant]) -> Comparison:
    used, granted = set(used), list(granted)
    not_granted = {f"{a} {a.name}".strip() for a in used if not any(g.allows(a) for g in granted)}
    never_used = {str(g) for g in granted if not any(g.allows(a) for a in used)}
    return Comparison(sorted(not_granted), sorted(never_used))
