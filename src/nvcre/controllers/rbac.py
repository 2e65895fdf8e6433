"""What the controllers call on the API server, as RBAC rules (``config/rbac/role.yaml``).

One rule per resource, with the code path that needs each verb. ``python -m nvcre.manager.rbac``
writes the ClusterRole from these rules, and the integration suite compares them with the
manager's requests in the API server's audit log (``tests/integration/test_zz_rbac_used.py``):
a verb used and not listed, or listed and never used, fails it. Add or drop a verb here, next
to the change in the code, and regenerate.

``*/finalizers`` ``update`` is never a request: the OwnerReferencesPermissionEnforcement
admission plugin (on in OpenShift, and in the test control plane) asks for it when a child is
created with ``blockOwnerDeletion`` in an ownerReference to an object of that kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from nvcre.api.v1alpha1.constants import GROUP, TRAINER_GROUP
from nvcre.workload.ownership import JOBSET_GROUP


@dataclass(frozen=True)
class Rule:
    group: str
    resource: str
    """A plural, or ``plural/subresource``."""
    verbs: tuple[str, ...]
    why: str
    resource_names: tuple[str, ...] = ()
    """Empty: any name."""


_CACHE = "list/watch: the controllers' cache"
_DEPENDENCY = (
    "a Workflow dependency: create (a Job-scoped copy with its Job owner), get after a name "
    "conflict and before delete, delete when its group ends (a Job-scoped copy) or its Workflow "
    "is deleted"
)
_DEPENDENCY_VERBS = ("get", "create", "delete")

DEPENDENCY_KINDS: tuple[tuple[str, str, str], ...] = (
    (TRAINER_GROUP, "trainingruntimes", f"; {_CACHE} of the Job-scoped copies (the Job controller)"),
    ("", "configmaps", "; update: the node-result ConfigMaps"),
    ("", "persistentvolumeclaims", ""),
    ("resource.nvidia.com", "computedomains", ""),
    ("resource.k8s.io", "resourceclaimtemplates", ""),
)
"""(group, plural, what else uses it) of every kind a Workflow dependency may be: the API
server refuses the manager any other (the Workflow fails with DependencyCreationError)."""
_RESULT_VERBS = ("update",)
"""What the node-result ConfigMaps need besides a dependency's verbs (merging into one)."""
_STATUS = "status writes (StatusWriter)"
_BLOCK_OWNER = "with blockOwnerDeletion in the ownerReference to it (OwnerReferencesPermissionEnforcement)"


def _parent(plural: str, verbs: tuple[str, ...], why: str, children: str) -> tuple[Rule, ...]:
    """The rules of an nvcre kind whose controller writes its status and creates its
    ``children``: its own, its status and its finalizers (see the module doc)."""
    return (
        Rule(GROUP, plural, verbs, why),
        Rule(GROUP, f"{plural}/status", ("update",), _STATUS),
        Rule(GROUP, f"{plural}/finalizers", ("update",), f"creating {children} {_BLOCK_OWNER}"),
    )


CLUSTER_RULES: tuple[Rule, ...] = (
    *_parent(
        "certifications",
        ("get", "list", "watch", "update"),
        f"{_CACHE}; get: the live read a reconcile starts with; update: its finalizer",
        "its Workflows",
    ),
    *_parent(
        "workloadruns",
        ("get", "list", "watch"),
        f"{_CACHE}; get: the live read a reconcile starts with",
        "its Workflow",
    ),
    *_parent(
        "workflows",
        ("get", "list", "watch", "create", "update", "delete"),
        f"{_CACHE}; create: by a WorkloadRun or Certification (get after a name conflict); "
        "update: its finalizer; delete: a Certification's cleanup",
        "its Jobs, measurements and node-result ConfigMaps",
    ),
    *_parent(
        "jobs",
        ("get", "list", "watch", "create", "update", "delete"),
        f"{_CACHE}; create: one per group (get after a name conflict); update: its finalizer; "
        "delete: a failed group's retry and a deleted Workflow's Jobs",
        "its TrainJob (and a standalone Job's measurements)",
    ),
    Rule(
        GROUP,
        "goodputmeasurements",
        ("get", "list", "watch", "create", "delete"),
        f"{_CACHE}; get: a status write whose view is stale or conflicted, the step times an "
        "iteration's outlier verdict reads; create: a Job's goodput measurement; delete: the one an "
        "earlier attempt of a retried group left",
    ),
    Rule(
        GROUP,
        "goodputmeasurements/status",
        ("update",),
        "the goodput read from the logs; a restarted Job resets its measurement",
    ),
    Rule(
        GROUP,
        "bandwidthmeasurements",
        ("get", "list", "watch", "create", "delete"),
        f"{_CACHE}; get: the bandwidths an iteration's outlier verdict reads; "
        "create: a Job's bandwidth measurement (only when the cache lacks it); "
        "delete: the one an earlier attempt of a retried group left",
    ),
    Rule(GROUP, "bandwidthmeasurements/status", ("update",), f"{_STATUS}: samples and the final read"),
    Rule(GROUP, "logprofiles", ("list", "watch"), f"{_CACHE}: how a measurement reads its Job's log"),
    Rule(
        GROUP,
        "noderecords",
        ("get", "list", "watch", "create", "delete"),
        f"{_CACHE}; create: a node's record when an ended Workflow ran it first; get: the live read "
        "its result is folded into; delete: the record of a Node gone longer than "
        "--node-record-retention (controllers/noderecord_retention.py)",
    ),
    Rule(
        GROUP,
        "reportexportpolicies",
        ("list", "watch"),
        f"{_CACHE}: which Certifications' reports to export (controllers/reportexport.py)",
    ),
    *_parent(
        "reportexports",
        ("get", "list", "watch", "create", "delete"),
        f"{_CACHE}; create: one per policy and ended Certification; get: the live read before a "
        "snapshot or a delivery; delete: an ended one whose retention has passed",
        "its snapshot ConfigMap",
    ),
    Rule(
        "",
        "secrets",
        ("get",),
        "a ReportExport's signing key and bearer token, read for each delivery from the Secrets "
        "its policy names (in the policy's namespace); never written, listed or watched",
    ),
    Rule(
        GROUP,
        "noderecords/status",
        ("update",),
        "an ended Workflow's result folded into each of its nodes' records (once per node)",
    ),
    Rule(
        TRAINER_GROUP,
        "trainjobs",
        ("get", "list", "watch", "create", "delete"),
        f"{_CACHE}; create: a Job's workload (get after a name conflict); delete: restart, "
        "retry, a deleted Job and an ended run's release",
    ),
    *(
        Rule(
            group,
            plural,
            (("list", "watch") if plural == "trainingruntimes" else ())
            + _DEPENDENCY_VERBS
            + (_RESULT_VERBS if plural == "configmaps" else ()),
            _DEPENDENCY + also,
        )
        for group, plural, also in DEPENDENCY_KINDS
    ),
    Rule(
        "batch",
        "jobs",
        ("get",),
        "the owner chain of a measured or failed workload pod (Pod -> Job -> JobSet -> TrainJob), "
        "each Job read once",
    ),
    Rule(
        JOBSET_GROUP,
        "jobsets",
        ("get", "list", "watch"),
        "get: the owner chain of a workload pod, each JobSet read once; list/watch: the cache "
        "(metadata only) an ended run's release check reads",
    ),
    Rule("", "nodes", ("list", "watch"), f"{_CACHE} (never written)"),
    Rule(
        "",
        "persistentvolumes",
        ("get", "patch"),
        "the volume bound to a Workflow's claim, before the claim (or the Job owning it) is deleted: "
        "get; patch: marked the Workflow's, reclaim policy Retain -> Delete",
    ),
    Rule(
        "resource.k8s.io",
        "resourceslices",
        ("list",),
        "list: the NVIDIA DRA driver's GPUs when nodes are discovered (a node without GPU labels)",
    ),
    Rule(
        "",
        "pods",
        ("list", "watch"),
        f"{_CACHE}: failure logs, node health, drain barrier; list: GKE's TCPXO installer pods in "
        "kube-system (a GCP category's plugin release)",
    ),
    Rule(
        "",
        "pods/log",
        ("get",),
        "the log tail of a failed workload pod; the logs measurements read (NCCL tables, training steps)",
    ),
    Rule("events.k8s.io", "events", ("create",), "events about nvcre objects, in their namespace"),
    Rule(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        ("list",),
        "resolving a dependency kind not known in advance (fails cleanly when unserved)",
    ),
)
