"""What ``nvcrectl setup`` does, decided from plain data: no cluster, no helm, no click.

The command reads the cluster and helm into the dataclasses here, asks these functions what to
do, does it and prints their lines. Names follow cli.md section 3.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

NAMESPACE = "nvcre"
RELEASE = "nvcre"
TRAINER_RELEASE = "kubeflow-trainer"
TRAINER_NAMESPACE = "kubeflow-system"
FIELD_MANAGER = "nvcrectl-setup"
GROUP = "nvcre.nvidia.com"
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_CRDS = (
    "trainjobs.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
)
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
PULL_SECRET = "nvcrectl-pull-secret"
INIT_PHASES = ("deps", "helm")
RESET_PHASES = ("helm", "deps")
IMAGE_REPOSITORY = "nvcre-manager"
"""The manager image's name, built from the repository's Dockerfile; no registry publishes it."""
NOT_INSTALLED = "not installed"
UNKNOWN = "unknown"
HEALTHY_STATES = ("deployed", "uninstalled", NOT_INSTALLED, UNKNOWN)
"""Release states that do not block readiness (cli.md 3.2); any other (failed, pending-*) does."""
MANUAL_RECOVERY = (
    f"helm uninstall {TRAINER_RELEASE} --namespace {TRAINER_NAMESPACE}\n"
    "kubectl delete crd trainjobs.trainer.kubeflow.org trainingruntimes.trainer.kubeflow.org \\\n"
    f"  clustertrainingruntimes.trainer.kubeflow.org  # retain {JOBSET_CRD}\n"
    f"# Inventory {TRAINER_NAMESPACE} and delete it only after the same safety checks.\n"
    "nvcrectl setup init   # reinstalls the pinned Kubeflow Trainer"
)


Value = str | bool
"""A chart value setup sets: helm gets strings with ``--set-string``, booleans with ``--set``."""


class PlanError(ValueError):
    """A request setup refuses (bad flag value, unsafe state); the message is for the user."""


def parse_phases(text: str, allowed: Sequence[str]) -> frozenset[str]:
    """``--skip-phases``: a comma list of ``allowed`` names; anything else is refused."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise PlanError(
            f"unknown phase(s) {', '.join(unknown)} in --skip-phases; valid: {', '.join(allowed)}"
        )
    return frozenset(names)


# -- the controller image -------------------------------------------------------------------

_IMAGE = re.compile(
    r"^(?P<repository>[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(?P<digest>sha256:[a-f0-9]{64}))?$"
)


def image_values(image: str) -> dict[str, str]:
    """The chart values for ``--image`` (``repo:tag``, ``repo@sha256:...`` or ``repo:tag@sha256:...``)."""
    match = _IMAGE.match(image)
    if match is None:
        raise PlanError(f'invalid --image "{image}": expected REPOSITORY[:TAG][@sha256:DIGEST]')
    values = {"manager.image.repository": match["repository"]}
    if match["tag"]:
        values["manager.image.tag"] = match["tag"]
    if match["digest"]:
        values["manager.image.digest"] = match["digest"]
    return values


# -- helm releases --------------------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """What ``helm status NAME -o json`` said (``state`` ``not installed`` / ``unknown`` otherwise)."""

    name: str
    namespace: str
    state: str
    chart_version: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)


_CHART_VERSION = re.compile(r"-(\d+\.\d+\.\d+(?:[-+].*)?)$")


def release_from_helm(name: str, namespace: str, returncode: int, stdout: str) -> Release:
    """Classify one ``helm list --all --filter ^NAME$ -o json``; ``values`` come from ``helm get values``."""
    if returncode != 0:
        return Release(name, namespace, UNKNOWN)
    try:
        rows = [r for r in json.loads(stdout or "[]") if r.get("name") == name]
    except (ValueError, AttributeError):
        return Release(name, namespace, UNKNOWN)
    if not rows:
        return Release(name, namespace, NOT_INSTALLED)
    version = _CHART_VERSION.search(str(rows[0].get("chart", "")))
    return Release(name, namespace, str(rows[0].get("status") or UNKNOWN), version[1] if version else "")


def blocking(releases: Iterable[Release]) -> list[Release]:
    return [r for r in releases if r.state not in HEALTHY_STATES]


# -- phase deps: Kubeflow Trainer -----------------------------------------------------------

JobSetOwner = Literal["absent", "bundled", "crd-only", "external", "unknown"]


@dataclass(frozen=True)
class JobSetController:
    """A Deployment that runs a JobSet controller (by its labels or name)."""

    namespace: str
    name: str
    labels: Mapping[str, str]


@dataclass(frozen=True)
class JobSetEvidence:
    crd_present: bool
    controllers: Sequence[JobSetController] = ()
    webhook_services: Sequence[str] = ()
    """``namespace/name`` of the Services that JobSet admission webhooks call."""


def is_jobset_chart(labels: Mapping[str, str]) -> bool:
    return labels.get("helm.sh/chart", "").startswith("jobset-")


def jobset_owner(evidence: JobSetEvidence) -> JobSetOwner:
    """Who runs JobSet (user-reports 7): ``external`` means install Trainer with ``jobset.install=false``.

    ``bundled``: the JobSet of our own Trainer release. ``external``: a Helm release of the jobset
    chart or the upstream kustomize install (``jobset-controller-manager`` with its webhook
    Service). Anything else that calls a JobSet webhook is ``unknown``: setup stops rather than guess.
    """
    bundled = [
        c
        for c in evidence.controllers
        if c.namespace == TRAINER_NAMESPACE and c.labels.get("app.kubernetes.io/instance") == TRAINER_RELEASE
    ]
    others = [c for c in evidence.controllers if c not in bundled]
    if others:
        if all(
            is_jobset_chart(c.labels)
            or (
                c.name == "jobset-controller-manager"
                and f"{c.namespace}/jobset-webhook-service" in evidence.webhook_services
            )
            for c in others
        ):
            return "external"
        return "unknown"
    if bundled:
        return "bundled"
    if evidence.webhook_services:
        bundled_services = {f"{TRAINER_NAMESPACE}/jobset-webhook-service"}
        return "unknown" if set(evidence.webhook_services) - bundled_services else "bundled"
    return "crd-only" if evidence.crd_present else "absent"


@dataclass(frozen=True)
class DepsStep:
    action: Literal["skip", "install", "refuse"]
    message: str
    values: Mapping[str, Value] = field(default_factory=dict)


def deps_step(release: Release, version: str, crds_present: bool, owner: JobSetOwner) -> DepsStep:
    """What phase ``deps`` does with the Trainer release (cli.md 3.1's state machine);
    ``crds_present``: the TrainJob and JobSet CRDs both exist."""
    if release.state == "deployed" and release.chart_version == version and crds_present:
        return DepsStep(
            "skip",
            f'[deps] Kubeflow Trainer release "{release.name}" already deployed at chart version {version}; skipping.',
        )
    if owner == "unknown":
        return DepsStep(
            "refuse",
            "[deps] Cannot tell who owns JobSet on this cluster (a JobSet webhook or controller that is "
            "neither Trainer's nor a recognised JobSet install). Install Kubeflow Trainer yourself, then run "
            "'nvcrectl setup init --skip-phases=deps'.",
        )
    values: dict[str, Value] = {"jobset.install": False} if owner == "external" else {}
    if release.state in (NOT_INSTALLED, "uninstalled", UNKNOWN):
        return DepsStep("install", f"[deps] Installing Kubeflow Trainer v{version}...", values)
    return DepsStep(
        "install",
        f'[deps] Kubeflow Trainer release is in state "{release.state}"; attempting install of v{version}...',
        values,
    )


_CONFLICT = re.compile(
    rf"conflict occurred while applying object {TRAINER_NAMESPACE}/\S+\s+/?v1, Kind=Secret:"
    r"\s*Apply failed with \d+ conflicts?:(?:(?!conflict occurred).)*?\.data",
    re.IGNORECASE | re.DOTALL,
)
"""The server-side-apply conflict on a Secret's ``.data`` in the Trainer namespace, as helm
reports it: ``conflict occurred while applying object kubeflow-system/<name> /v1, Kind=Secret:
Apply failed with 1 conflict: conflict with "<manager>" using v1: .data``, or with several
conflicts one field a line (``- .data.ca.crt``)."""


def is_recoverable_failure(helm_output: str, state_after: str) -> bool:
    """Both conditions of cli.md 3.1: the Secret ``.data`` SSA-conflict signature in the Trainer
    namespace (no other conflict: recovery deletes that namespace), and a release left
    ``failed`` or ``pending-*``."""
    return bool(_CONFLICT.search(helm_output)) and (
        state_after == "failed" or state_after.startswith("pending-")
    )


@dataclass(frozen=True)
class TrainerInventory:
    """What recovering Trainer would delete with it (read before any mutation)."""

    trainjobs: Sequence[str] = ()
    jobsets: Sequence[str] = ()
    foreign_runtimes: Sequence[str] = ()
    """TrainingRuntimes / ClusterTrainingRuntimes that no Helm release manages."""
    forbidden: Sequence[str] = ()
    """Lists or discovery calls the user may not make (``list trainjobs``...)."""
    protected: Sequence[str] = ()
    """Objects in kubeflow-system that the Trainer release did not create."""
    namespace_uid: str = ""
    """The UID of the kubeflow-system inspected (empty: none): recovery deletes only that one."""


TRAINER_RELEASE_SECRET_PREFIX: Final = "sh.helm.release.v1."
"""helm's own record of a release, a Secret in the release's namespace."""
CLUSTER_MADE: Final = frozenset({("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")})
"""What Kubernetes itself puts in every namespace."""


def foreign_objects(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """``Kind name`` of each object of the Trainer namespace that neither the Trainer release
    (helm's ``meta.helm.sh/release-name``, or helm's own release Secret), nor a controller (an
    owner reference) nor Kubernetes made: a person's, which deleting the namespace would lose."""
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        name, kind = str(meta.get("name") or ""), str(obj.get("kind") or "")
        annotations = meta.get("annotations") or {}
        if annotations.get("meta.helm.sh/release-name") == TRAINER_RELEASE or meta.get("ownerReferences"):
            continue
        if (kind, name) in CLUSTER_MADE:
            continue
        if kind == "Secret" and name.startswith(f"{TRAINER_RELEASE_SECRET_PREFIX}{TRAINER_RELEASE}."):
            continue
        out.append(f"{kind} {name}")
    return sorted(out)


def recovery_blockers(inventory: TrainerInventory) -> list[str]:
    """Why an automatic Trainer recovery is unsafe; empty means allowed."""
    blockers = [f"TrainJob {n} exists" for n in inventory.trainjobs]
    blockers += [f"JobSet {n} exists" for n in inventory.jobsets]
    blockers += [f"{n} is not managed by Helm" for n in inventory.foreign_runtimes]
    blockers += [f"permission missing: {n}" for n in inventory.forbidden]
    blockers += [
        f"{n} in namespace {TRAINER_NAMESPACE} was not created by the Trainer release"
        for n in inventory.protected
    ]
    return blockers


# -- phase helm: nvcre's chart --------------------------------------------------------------


def helm_values(image: str | None, version: str, pull_secret: bool) -> dict[str, Value]:
    """The values setup passes to nvcre's chart. LogProfiles are server-side applied by setup itself
    (like the CRDs), so the chart's copies are off: helm refuses to adopt objects it did not create."""
    values: dict[str, Value] = {}
    if image:
        values.update(image_values(image))
    else:
        values.update({"manager.image.repository": IMAGE_REPOSITORY, "manager.image.tag": version})
    values["logProfiles.install"] = False
    if pull_secret:
        values["manager.imagePullSecrets[0]"] = PULL_SECRET
    return values


def image_notice(image: str | None, version: str) -> str | None:
    """What a user who passed no ``--image`` must do first: the default image is nowhere to pull."""
    if image:
        return None
    default = f"{IMAGE_REPOSITORY}:{version}"
    return (
        f"[helm] No --image given: the chart runs {default}, which no registry publishes. Build it "
        f"from the Dockerfile at the root of the nvcre source and push it to a registry the nodes pull "
        f"from (docker build -t REGISTRY/{default} . && docker push REGISTRY/{default}), then rerun with "
        f"--image REGISTRY/{default}."
    )


def nested(values: Mapping[str, Value]) -> dict[str, Any]:
    """``a.b=c`` values as helm's ``get values -o json`` prints them (``x[0]`` a list)."""
    tree: dict[str, Any] = {}
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        list_match = re.fullmatch(r"(.+)\[(\d+)\]", leaf)
        if list_match:
            node.setdefault(list_match[1], []).append(value)
        else:
            node[leaf] = value
    return tree


def helm_step(
    release: Release, chart_version: str, values: Mapping[str, Value]
) -> Literal["skip", "install"]:
    """``skip`` when the release is deployed at this chart version with exactly these values."""
    if (
        release.state == "deployed"
        and release.chart_version == chart_version
        and dict(release.values) == nested(values)
    ):
        return "skip"
    return "install"


def apply_verb(
    live: Mapping[str, Any] | None, applied: Mapping[str, Any] | None
) -> Literal["create", "update", "unchanged"]:
    """What a server-side apply changes, from the live object and a dry-run apply's answer:
    unchanged when the server would keep the generation, labels and annotations."""
    if live is None or applied is None:
        return "create"

    def seen(obj: Mapping[str, Any]) -> tuple[Any, ...]:
        meta = obj.get("metadata", {})
        return meta.get("generation"), meta.get("labels") or {}, meta.get("annotations") or {}

    return "unchanged" if seen(live) == seen(applied) else "update"


# -- setup status ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    """What ``setup status`` read from the cluster and helm."""

    nvcre_crds: Sequence[str]
    controller_available: bool
    trainer_crd: bool
    trainer_version: str = ""
    trainer_version_source: str = ""
    """``helm``, ``image`` or ``crd-label``; empty when no version could be read."""
    log_profiles: int = 0
    gpu_nodes: int = 0
    dcgm: Literal["found", "not-found", "forbidden"] = "not-found"
    releases: Sequence[Release] = ()


@dataclass(frozen=True)
class Component:
    key: str
    title: str
    ok: bool
    status: str
    fix: str = ""
    required: bool = True


@dataclass(frozen=True)
class Status:
    installed: bool
    components: Sequence[Component]
    releases: Sequence[Release]
    trainer_version: str
    trainer_version_source: str
    supported_trainer_version: str


def status(observed: Observed, supported_trainer_version: str) -> Status:
    """Every component's verdict and what to do about it (cli.md 3.2)."""
    init = "run 'nvcrectl setup init'"
    trainer_ok = observed.trainer_crd
    trainer_status = "installed" if trainer_ok else "not found"
    trainer_fix = "" if trainer_ok else f"{init} (installs Kubeflow Trainer v{supported_trainer_version})"
    if trainer_ok and observed.trainer_version and observed.trainer_version != supported_trainer_version:
        trainer_ok = False
        trainer_status = f"version {observed.trainer_version}"
        trainer_fix = (
            f"Kubeflow Trainer {observed.trainer_version} (from {observed.trainer_version_source}) is installed; "
            f"nvcre supports {supported_trainer_version}: {init} to install it"
        )
    elif trainer_ok and not observed.trainer_version:
        trainer_fix = "warning: the installed Kubeflow Trainer version could not be determined"
    components = [
        Component(
            "nvcreCRDs",
            "NVCRE CRDs",
            bool(observed.nvcre_crds),
            "installed" if observed.nvcre_crds else "not found",
            "" if observed.nvcre_crds else f"{init} to install them",
        ),
        Component(
            "nvcreController",
            "NVCRE Controller",
            observed.controller_available,
            "installed" if observed.controller_available else "not available",
            ""
            if observed.controller_available
            else f"{init}; if it is installed, see 'kubectl -n {NAMESPACE} describe deployment nvcre-manager'",
        ),
        Component("kubeflowTrainer", "Kubeflow Trainer", trainer_ok, trainer_status, trainer_fix),
        Component(
            "logProfiles",
            "Log Profiles",
            observed.log_profiles > 0,
            "installed" if observed.log_profiles else "not found",
            "" if observed.log_profiles else f"{init} to install the built-in LogProfiles",
        ),
        Component(
            "gpuOperator",
            "GPU Operator",
            observed.gpu_nodes > 0,
            "installed" if observed.gpu_nodes else "not found",
            ""
            if observed.gpu_nodes
            else "no node is labelled nvidia.com/gpu.present=true: GPU Operator must be installed by your cluster administrator",
        ),
        Component(
            "dcgm",
            "DCGM (optional)",
            observed.dcgm == "found",
            {"found": "installed", "not-found": "not found", "forbidden": "not readable"}[observed.dcgm],
            "",
            required=False,
        ),
    ]
    installed = all(c.ok for c in components if c.required) and not blocking(observed.releases)
    return Status(
        installed,
        components,
        observed.releases,
        observed.trainer_version,
        observed.trainer_version_source,
        supported_trainer_version,
    )


DCGM_NOTE = (
    "Note: service gpu-operator/nvidia-dcgm is missing. Only the diagnostics/dcgm-level4\n"
    "      category needs it. Your cluster administrator can add it with:\n"
    "      kubectl patch clusterpolicy cluster-policy --type=merge \\\n"
    """        -p '{"spec":{"dcgm":{"enabled":true}}}'"""
)


def status_table(result: Status, dcgm_not_found: bool) -> str:
    rows = [(c.title, f"{'✓' if c.ok else '✗'} {c.status}") for c in result.components]
    for release in result.releases:
        # ✓ deployed, ✗ blocking (failed, pending-*), - absent or unreadable (blocks nothing)
        mark = "✓" if release.state == "deployed" else "✗" if release.state not in HEALTHY_STATES else "-"
        rows.append((f"Helm release {release.name}", f"{mark} {release.state}"))
    width = max(len("Component"), *(len(r[0]) for r in rows)) + 3
    lines = [f"{'Component':<{width}}Status", f"{'─' * (width - 3):<{width}}{'─' * 10}"]
    lines += [f"{name:<{width}}{state}" for name, state in rows]
    lines.append("")
    unhealthy = blocking(result.releases)
    if result.installed:
        lines.append("Status: ready")
    elif unhealthy and all(c.ok for c in result.components if c.required):
        lines.append("Status: not ready — a managed Helm release is unhealthy")
    else:
        lines.append("Status: not ready — run 'nvcrectl setup init' to install missing components")
    for component in result.components:
        if component.fix and (not component.ok or component.fix.startswith("warning")):
            lines.append(f"  {component.title}: {component.fix}")
    for release in unhealthy:
        lines.append(
            f"  Helm release {release.name} (namespace: {release.namespace}) is {release.state} "
            "— run 'nvcrectl setup init' to repair it"
        )
    if dcgm_not_found:
        lines += ["", DCGM_NOTE]
    return "\n".join(lines) + "\n"


def status_json(result: Status) -> dict[str, Any]:
    return {
        "installed": result.installed,
        "components": {c.key: c.ok for c in result.components},
        "problems": {c.key: c.fix for c in result.components if c.fix and not c.ok},
        "kubeflowTrainerVersion": {
            "version": result.trainer_version,
            "source": result.trainer_version_source,
            "supported": result.supported_trainer_version,
        },
        "helmReleases": [
            {"name": r.name, "namespace": r.namespace, "state": r.state} for r in result.releases
        ],
    }


# -- setup reset ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NvcreObject:
    kind: str
    name: str
    namespace: str = ""
    builtin: bool = False
    """A built-in LogProfile setup installed (removed with its CRD, never a blocker)."""

    def __str__(self) -> str:
        where = f" (namespace: {self.namespace})" if self.namespace else ""
        return f"{self.kind}/{self.name}{where}"


def reset_blockers(
    objects: Iterable[NvcreObject], trainer: TrainerInventory | None, skip: frozenset[str]
) -> list[str]:
    """What removing setup's components would orphan or destroy; reset refuses while any is listed.

    Deleting nvcre's CRDs deletes every object of their kinds without the controller cleaning up
    after them (TrainJobs, pods, node-result ConfigMaps), so any nvcre object but a built-in
    LogProfile blocks phase ``helm``; removing Trainer would do the same to TrainJobs, JobSets and
    runtimes no release of ours made (phase ``deps``).
    """
    blockers: list[str] = []
    if "helm" not in skip:
        blockers += [f"{o} exists" for o in objects if not o.builtin]
    if "deps" not in skip and trainer is not None:
        blockers += recovery_blockers(
            TrainerInventory(trainer.trainjobs, trainer.jobsets, trainer.foreign_runtimes, trainer.forbidden)
        )
    return blockers


def retained_block(pull_secret: bool) -> str:
    lines = [
        "Retained resources:",
        f"  namespaces {NAMESPACE} and {TRAINER_NAMESPACE}: kubectl delete namespace {NAMESPACE} {TRAINER_NAMESPACE}",
    ]
    if pull_secret:
        lines.append(
            f"  secret {NAMESPACE}/{PULL_SECRET}: kubectl delete secret {PULL_SECRET} -n {NAMESPACE}"
        )
    lines.append(f"  warning: the shared CRD {JOBSET_CRD} is retained (other workloads may use JobSet)")
    return "\n".join(lines) + "\n"


# -- nvcrectl version -----------------------------------------------------------------------

MANAGER_LABELS = {"app.kubernetes.io/name": "nvcre", "app.kubernetes.io/component": "manager"}
"""The labels of the manager Deployment, whether the chart or ``config/`` installed it."""


@dataclass(frozen=True)
class ManagerDeployment:
    namespace: str
    name: str
    version_label: str
    """``app.kubernetes.io/version``: the chart's appVersion, set by a Helm install only."""
    image: str
    ready: int
    replicas: int


def manager_version(deployment: ManagerDeployment) -> str:
    """The Helm release's app version, else the image's tag, else ``unknown``."""
    if deployment.version_label:
        return deployment.version_label
    match = _IMAGE.match(deployment.image)
    return match["tag"] if match and match["tag"] else "unknown"


def manager_version_lines(client_version: str, deployments: Sequence[ManagerDeployment]) -> list[str]:
    """``nvcrectl version`` after the client's line: each manager Deployment found, or that none
    is, and a warning when a manager's version is not the client's."""
    if not deployments:
        selector = ",".join(f"{k}={v}" for k, v in MANAGER_LABELS.items())
        return [
            f"Manager: not found (no Deployment labelled {selector} in any namespace; "
            "'nvcrectl setup init' installs it)"
        ]
    lines = []
    for d in deployments:
        lines.append(
            f"Manager: {manager_version(d)} (Deployment {d.namespace}/{d.name}, image {d.image}, "
            f"{d.ready}/{d.replicas} ready)"
        )
    skewed = sorted({manager_version(d) for d in deployments} - {client_version})
    if skewed:
        lines.append(
            f"Warning: the manager runs {', '.join(skewed)}, this client is {client_version}; "
            "install the matching nvcre package, or run 'nvcrectl setup init' to upgrade the manager."
        )
    return lines
