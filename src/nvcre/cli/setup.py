"""``nvcrectl setup init|status|reset``: install, inspect and remove nvcre with Helm (cli.md 3).

The shell only: it reads the cluster and helm into :mod:`nvcre.setup.plan`'s dataclasses, runs
what the plan decides (helm as an argv list, CRDs and LogProfiles by server-side apply with field
manager ``nvcrectl-setup``) and prints. Progress goes to stderr, tables and dry-run plans to stdout.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nvcre import __version__, yamlio
from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.cli import connection
from nvcre.cli.common import UserError, output_option, user_errors
from nvcre.cli.connection import api_error, get_or_none
from nvcre.setup import plan
from nvcre.setup.helm import HELM_ENV, Helm, HelmNotFound, find_helm

if TYPE_CHECKING:
    from lightkube import Client

CHARTS = Path(__file__).resolve().parents[1] / "setup" / "charts"
TRAINER_CHART = CHARTS / "kubeflow-trainer"
NVCRE_CHART = CHARTS / "nvcre"
"""nvcre's chart as the package ships it: in a source checkout a link to ``charts/nvcre``, in a
wheel a copy of it."""
PROMPT = "Do you want to proceed? Only 'yes' will be accepted to confirm."
WAIT_TIMEOUT = "5m"


def _echo(message: str = "") -> None:
    click.echo(message, err=True)


def helm_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--helm",
        "helm_binary",
        default=None,
        help=f"The helm binary to run (default: ${HELM_ENV}, then helm on PATH).",
    )(func)


def confirm(auto_approve: bool) -> bool:
    """cli.md 1.2: only the exact (trimmed) ``yes`` confirms; empty input or EOF cancels."""
    if auto_approve:
        return True
    _echo(PROMPT)
    click.echo("  Enter a value: ", err=True, nl=False)
    line = sys.stdin.readline()
    _echo()
    return line.strip() == "yes"


# -- connection -----------------------------------------------------------------------------


@dataclass
class Target:
    client: Client
    context: str
    server: str
    helm: Helm | None


def connect(kubeconfig: str | None, context: str | None, helm_binary: str | None, need_helm: bool) -> Target:
    """The cluster of the kubeconfig and the connection flags, for lightkube and helm alike."""
    env = connection.helm_env(connection.overrides())
    try:
        client = connection.client(kubeconfig, context, field_manager=plan.FIELD_MANAGER)
    except UserError as error:
        raise UserError(f"[preflight] {error.message}") from error
    helm = new_helm(helm_binary, kubeconfig, context, env) if need_helm else None
    single = client.config
    return Target(client, single.context_name or "", single.cluster.server or "", helm)


def new_helm(
    helm_binary: str | None, kubeconfig: str | None, context: str | None, env: Mapping[str, str]
) -> Helm:
    """helm bound to the cluster :func:`connect` reaches; no helm binary is a ``UserError``."""
    try:
        path = kubeconfig or os.environ.get("KUBECONFIG")
        return Helm(find_helm(helm_binary), kubeconfig=path, context=context, env=env)
    except HelmNotFound as error:
        raise UserError(f"[helm] {error}") from error


# -- reading state --------------------------------------------------------------------------


def _crds(client: Client) -> list[Any]:
    from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

    return list(client.list(CustomResourceDefinition))


def _crd_names(client: Client, group: str) -> list[str]:
    return sorted(c.metadata.name for c in _crds(client) if c.spec.group == group)


def _has_crd(client: Client, name: str) -> bool:
    return name in {c.metadata.name for c in _crds(client)}


def release(helm: Helm, name: str, namespace: str, *, with_values: bool = False) -> plan.Release:
    done = helm.run(["list", "--namespace", namespace, "--all", "--filter", f"^{name}$", "-o", "json"])
    found = plan.release_from_helm(name, namespace, done.returncode, done.stdout)
    if not with_values or found.state in (plan.NOT_INSTALLED, plan.UNKNOWN):
        return found
    values = helm.run(["get", "values", name, "--namespace", namespace, "-o", "json"])
    parsed = json.loads(values.stdout) if values.returncode == 0 and values.stdout.strip() else {}
    return plan.Release(found.name, found.namespace, found.state, found.chart_version, parsed or {})


def _resource_for(crd: Any) -> Any:
    from lightkube.generic_resource import create_global_resource, create_namespaced_resource

    version = next(v.name for v in crd.spec.versions if v.storage)
    names = crd.spec.names
    make = create_namespaced_resource if crd.spec.scope == "Namespaced" else create_global_resource
    return make(crd.spec.group, version, names.kind, names.plural)


def _objects(client: Client, crd: Any, patience: float = 30) -> list[Any]:
    """Every object of a CRD's kind. A 429 (the API server still initialising a new CRD's
    storage) is retried for up to ``patience`` seconds."""
    from lightkube.core.exceptions import ApiError

    resource = _resource_for(crd)
    deadline = time.monotonic() + patience
    while True:
        try:
            if crd.spec.scope == "Namespaced":
                return list(client.list(resource, namespace="*"))
            return list(client.list(resource))
        except ApiError as error:
            if error.status.code != 429 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _images(deployment: Any) -> list[str]:
    return [c.get("image", "") for c in deployment.to_dict()["spec"]["template"]["spec"]["containers"]]


def nvcre_objects(client: Client) -> list[plan.NvcreObject]:
    from nvcre.measure.builtin import builtin_profiles

    builtin = {p["metadata"]["name"] for p in builtin_profiles()}
    found = []
    for crd in _crds(client):
        if crd.spec.group != plan.GROUP:
            continue
        for obj in _objects(client, crd):
            meta = obj.metadata
            is_builtin = crd.spec.names.kind == "LogProfile" and meta.name in builtin
            found.append(plan.NvcreObject(crd.spec.names.kind, meta.name, meta.namespace or "", is_builtin))
    return found


def trainer_inventory(client: Client) -> plan.TrainerInventory:
    from lightkube.core.exceptions import ApiError

    by_name = {c.metadata.name: c for c in _crds(client)}
    trainjobs: list[str] = []
    jobsets: list[str] = []
    runtimes: list[str] = []
    forbidden: list[str] = []
    wanted = [
        ("trainjobs.trainer.kubeflow.org", trainjobs, False),
        (plan.JOBSET_CRD, jobsets, False),
        ("trainingruntimes.trainer.kubeflow.org", runtimes, True),
        ("clustertrainingruntimes.trainer.kubeflow.org", runtimes, True),
    ]
    for name, into, only_foreign in wanted:
        crd = by_name.get(name)
        if crd is None:
            continue
        try:
            for obj in _objects(client, crd):
                labels = obj.metadata.labels or {}
                if only_foreign and labels.get("app.kubernetes.io/managed-by") == "Helm":
                    continue
                where = f"{obj.metadata.namespace}/" if obj.metadata.namespace else ""
                into.append(f"{crd.spec.names.kind} {where}{obj.metadata.name}")
        except ApiError as error:
            if error.status.code != 403:
                raise
            forbidden.append(f"list {crd.spec.names.plural}")
    protected, namespace_uid = _trainer_namespace(client, forbidden)
    return plan.TrainerInventory(
        [t.split(" ", 1)[1] for t in trainjobs],
        [j.split(" ", 1)[1] for j in jobsets],
        runtimes,
        forbidden,
        protected,
        namespace_uid,
    )


def _trainer_namespace(client: Client, forbidden: list[str]) -> tuple[list[str], str]:
    """What of kubeflow-system deleting it would lose that the Trainer release did not make
    (:func:`plan.foreign_objects`), and its UID; a kind the user may not list goes into
    ``forbidden``."""
    from lightkube.core.exceptions import ApiError
    from lightkube.resources.apps_v1 import DaemonSet, Deployment, StatefulSet
    from lightkube.resources.batch_v1 import Job as BatchJob
    from lightkube.resources.core_v1 import (
        ConfigMap,
        Namespace,
        PersistentVolumeClaim,
        Pod,
        Secret,
        Service,
        ServiceAccount,
    )
    from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

    namespace = _live(client, Namespace, plan.TRAINER_NAMESPACE)
    if namespace is None:
        return [], ""
    objects: list[dict[str, Any]] = []
    kinds: tuple[Any, ...] = (
        ConfigMap,
        Secret,
        Service,
        ServiceAccount,
        PersistentVolumeClaim,
        Pod,
        Deployment,
        StatefulSet,
        DaemonSet,
        BatchJob,
        Role,
        RoleBinding,
    )
    for resource in kinds:
        kind = "Job" if resource is BatchJob else resource.__name__
        try:
            objects.extend(
                {**obj.to_dict(), "kind": kind}
                for obj in client.list(resource, namespace=plan.TRAINER_NAMESPACE)
            )
        except ApiError as error:
            if error.status.code != 403:
                raise
            forbidden.append(f"list {resource.__name__.lower()}s in {plan.TRAINER_NAMESPACE}")
    return plan.foreign_objects(objects), str(namespace["metadata"]["uid"])


def jobset_evidence(client: Client) -> plan.JobSetEvidence:
    from lightkube.resources.admissionregistration_v1 import (
        MutatingWebhookConfiguration,
        ValidatingWebhookConfiguration,
    )
    from lightkube.resources.apps_v1 import Deployment

    controllers = []
    for deployment in client.list(Deployment, namespace="*"):
        meta = deployment.to_dict()["metadata"]
        labels = dict(meta.get("labels") or {})
        name = str(meta["name"])
        if "jobset" in name or "jobset" in " ".join(_images(deployment)) or plan.is_jobset_chart(labels):
            controllers.append(plan.JobSetController(str(meta.get("namespace", "")), name, labels))
    services = set()
    kinds: tuple[Any, ...] = (ValidatingWebhookConfiguration, MutatingWebhookConfiguration)
    for kind in kinds:
        for config in client.list(kind):
            for webhook in config.to_dict().get("webhooks") or []:
                service = webhook.get("clientConfig", {}).get("service")
                if "jobset" in webhook["name"] and service:
                    services.add(f"{service['namespace']}/{service['name']}")
    return plan.JobSetEvidence(_has_crd(client, plan.JOBSET_CRD), controllers, sorted(services))


def observe(client: Client, helm: Helm | None) -> plan.Observed:
    from lightkube.core.exceptions import ApiError
    from lightkube.resources.apps_v1 import Deployment
    from lightkube.resources.core_v1 import Node, Service

    crds = {c.metadata.name: c for c in _crds(client)}
    nvcre_crds = sorted(n for n, c in crds.items() if c.spec.group == plan.GROUP)
    available = any(
        (d.status.availableReplicas or 0) > 0 if d.status else False
        for d in client.list(Deployment, namespace=plan.NAMESPACE)
    )
    trainjob = crds.get("trainjobs.trainer.kubeflow.org")
    releases = (
        [
            release(helm, plan.RELEASE, plan.NAMESPACE),
            release(helm, plan.TRAINER_RELEASE, plan.TRAINER_NAMESPACE),
        ]
        if helm
        else [
            plan.Release(plan.RELEASE, plan.NAMESPACE, plan.UNKNOWN),
            plan.Release(plan.TRAINER_RELEASE, plan.TRAINER_NAMESPACE, plan.UNKNOWN),
        ]
    )
    version, source = "", ""
    if releases[1].chart_version:
        version, source = releases[1].chart_version, "helm"
    elif trainjob is not None:
        for deployment in client.list(Deployment, namespace="*"):
            for image in _images(deployment):
                if "trainer-controller-manager" in image and ":" in image.rsplit("/", 1)[-1]:
                    version, source = image.rsplit(":", 1)[1].lstrip("v"), "image"
        label = (trainjob.metadata.labels or {}).get("app.kubernetes.io/version", "")
        if not version and label:
            version, source = label.lstrip("v"), "crd-label"
    profiles = 0
    if "logprofiles.nvcre.nvidia.com" in crds:
        profiles = sum(1 for _ in _objects(client, crds["logprofiles.nvcre.nvidia.com"]))
    gpu_nodes = sum(1 for _ in client.list(Node, labels={NodeLabel.GPU_PRESENT: "true"}))
    try:
        service = get_or_none(client, Service, "nvidia-dcgm", "gpu-operator")
        dcgm = "found" if service is not None else "not-found"
    except ApiError:
        dcgm = "forbidden"
    return plan.Observed(
        nvcre_crds=nvcre_crds,
        controller_available=available,
        trainer_crd=trainjob is not None,
        trainer_version=version,
        trainer_version_source=source,
        log_profiles=profiles,
        gpu_nodes=gpu_nodes,
        dcgm=dcgm,  # type: ignore[arg-type]
        releases=releases,
    )


def supported_trainer_version() -> str:
    return str(yamlio.load((TRAINER_CHART / "Chart.yaml").read_text())["version"])


# -- writing --------------------------------------------------------------------------------


def _run_helm(helm: Helm, args: Sequence[str], phase: str) -> None:
    done = helm.run(args)
    if done.returncode != 0:
        raise UserError(f"[{phase}] helm {args[0]} failed: {done.output}")


def _live(client: Client, resource: Any, name: str) -> dict[str, Any] | None:
    """The object, or None when it (or its whole API, a CRD not yet installed) is missing."""
    obj = get_or_none(client, resource, name)
    return None if obj is None else obj.to_dict()


def chart_crds(helm: Helm, chart: str, version: str | None) -> list[dict[str, Any]]:
    """``helm show crds``; an empty or invalid set is an error (cli.md 3.1 phase helm, step 2)."""
    args = ["show", "crds", chart] + (["--version", version] if version else [])
    done = helm.run(args)
    if done.returncode != 0:
        raise UserError(f"[helm] helm show crds {chart} failed: {done.output}")
    docs = [d for d in yamlio.load_all(done.stdout) if d]
    if not docs or any(d.get("kind") != "CustomResourceDefinition" for d in docs):
        raise UserError(f"[helm] chart {chart} has no valid CRD documents")
    return docs


def apply_all(client: Client, documents: Sequence[dict[str, Any]], dry_run: bool) -> list[str]:
    """Server-side apply (force) or, with ``dry_run``, say what each apply would change."""
    from lightkube.codecs import from_dict
    from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

    from nvcre.resources import LogProfile

    lines = []
    for doc in documents:
        resource = CustomResourceDefinition if doc["kind"] == "CustomResourceDefinition" else LogProfile
        name = doc["metadata"]["name"]
        obj = from_dict(doc) if resource is CustomResourceDefinition else LogProfile.from_dict(doc)
        live = _live(client, resource, name)
        after = (
            None
            if live is None
            else client.apply(obj, field_manager=plan.FIELD_MANAGER, force=True, dry_run=True).to_dict()
        )
        verb = plan.apply_verb(live, after)
        lines.append(f"{doc['kind']} {name}: {verb}")
        if not dry_run and verb != "unchanged":
            client.apply(obj, field_manager=plan.FIELD_MANAGER, force=True)
    return lines


def wait_established(client: Client, names: Sequence[str], timeout: float = 60) -> None:
    from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        crd = client.get(CustomResourceDefinition, pending[0])
        conditions = crd.status.conditions if crd.status and crd.status.conditions else []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            pending.pop(0)
            continue
        if time.monotonic() > deadline:
            raise UserError(f"[helm] CRD {pending[0]} not Established within {timeout:.0f}s")
        time.sleep(0.5)


def delete_crds(client: Client, names: Sequence[str], phase: str, timeout: float = 120) -> None:
    from lightkube.core.exceptions import ApiError
    from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

    for name in names:
        try:
            client.delete(CustomResourceDefinition, name)
        except ApiError as error:
            if error.status.code != 404:
                raise
    _echo("  Waiting for CRDs to be fully removed...")
    deadline = time.monotonic() + timeout
    while left := [n for n in names if _live(client, CustomResourceDefinition, n) is not None]:
        if time.monotonic() > deadline:
            _echo(f"[{phase}] warning: CRDs still present after {timeout:.0f}s: {', '.join(left)}")
            return
        time.sleep(0.5)
    _echo("  All NVCRE CRDs removed." if phase == "helm" else "  Trainer CRDs removed.")


def create_pull_secret(client: Client, token: str) -> None:
    """``nvcrectl-pull-secret`` for ghcr.io; the token goes to the API server only, never to argv or output."""
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Namespace, Secret

    auth = base64.b64encode(f"token:{token}".encode()).decode()
    config = json.dumps({"auths": {"ghcr.io": {"auth": auth}}})
    client.apply(Namespace(metadata=ObjectMeta(name=plan.NAMESPACE)), field_manager=plan.FIELD_MANAGER)
    client.apply(
        Secret(
            metadata=ObjectMeta(name=plan.PULL_SECRET, namespace=plan.NAMESPACE),
            type="kubernetes.io/dockerconfigjson",
            stringData={".dockerconfigjson": config},
        ),
        field_manager=plan.FIELD_MANAGER,
        force=True,
    )


def _wait_args(wait: bool) -> list[str]:
    return ["--wait", "--timeout", WAIT_TIMEOUT] if wait else []


def _set_args(values: Mapping[str, plan.Value]) -> list[str]:
    args: list[str] = []
    for key, value in values.items():
        if isinstance(value, bool):
            args += ["--set", f"{key}={str(value).lower()}"]
        else:
            args += ["--set-string", f"{key}={value}"]
    return args


# -- commands -------------------------------------------------------------------------------


@click.group("setup")
def setup_group() -> None:
    """Install, inspect and remove nvcre (Kubeflow Trainer, then nvcre's Helm chart)."""


@setup_group.command("init")
@connection.connection_options
@helm_option
@click.option("--skip-phases", default="", help="Comma list of phases to skip: deps, helm.")
@click.option("--image", default=None, help="Controller image: REPOSITORY[:TAG][@sha256:DIGEST].")
@click.option(
    "--image-pull-secret",
    default=None,
    envvar="NVCRE_IMAGE_PULL_SECRET",
    help="GitHub token for a private ghcr.io image (never printed); $NVCRE_IMAGE_PULL_SECRET keeps it out of argv.",
)
@click.option(
    "--chart-ref",
    default=None,
    help="nvcre chart: a path or oci:// reference (default: the one shipped with nvcre).",
)
@click.option(
    "--trainer-chart-ref", default=None, help="Kubeflow Trainer chart (default: the one shipped with nvcre)."
)
@click.option(
    "--version", "chart_version", default=None, help="nvcre chart version (for a remote --chart-ref)."
)
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the rollouts (5m).")
@click.option("--dry-run", is_flag=True, help="Print what would change and change nothing.")
@click.option("--auto-approve", is_flag=True, help="Skip the confirmation prompt.")
@user_errors
def init_command(
    kubeconfig: str | None,
    context: str | None,
    helm_binary: str | None,
    skip_phases: str,
    image: str | None,
    image_pull_secret: str | None,
    chart_ref: str | None,
    trainer_chart_ref: str | None,
    chart_version: str | None,
    wait: bool,
    dry_run: bool,
    auto_approve: bool,
) -> None:
    """Install Kubeflow Trainer and nvcre's chart, CRDs and built-in LogProfiles."""
    try:
        skip = plan.parse_phases(skip_phases, plan.INIT_PHASES)
        values = plan.helm_values(image, __version__, bool(image_pull_secret))
    except plan.PlanError as error:
        raise UserError(str(error)) from error
    chart = chart_ref or str(NVCRE_CHART)
    trainer_chart = trainer_chart_ref or str(TRAINER_CHART)
    trainer_version = supported_trainer_version()
    _echo("[preflight] Checking prerequisites...")
    target = connect(kubeconfig, context, helm_binary, need_helm=skip != set(plan.INIT_PHASES))
    shown_image = image or f"{values['manager.image.repository']}:{values.get('manager.image.tag', '')}"
    _echo()
    _echo("  Target cluster")
    _echo(f"  Context:  {target.context}")
    _echo(f"  Server:   {target.server}")
    _echo()
    _echo("  Phases:")
    _echo(f"    [deps]  Kubeflow Trainer v{trainer_version}" + (" (skipped)" if "deps" in skip else ""))
    _echo(f"    [helm]  NVCRE Helm chart ({shown_image})" + (" (skipped)" if "helm" in skip else ""))
    _echo()
    notice = plan.image_notice(image, __version__)
    if notice and "helm" not in skip:
        _echo(notice)
        _echo()
    if not dry_run and not confirm(auto_approve):
        _echo("Init cancelled.")
        return
    try:
        if dry_run:
            for line in init_plan(target, skip, chart, trainer_version, values, chart_version):
                click.echo(line)
            return
        if "deps" in skip:
            _echo("[deps] Skipped.")
        else:
            install_trainer(target, trainer_chart, trainer_version, wait, auto_approve)
        if "helm" in skip:
            _echo("[helm] Skipped.")
        else:
            install_nvcre(target, chart, chart_version, values, image_pull_secret, wait)
    except Exception as error:
        if isinstance(error, UserError):
            raise
        raise UserError(api_error(error)) from error
    _echo(f"NVCRE v{chart_version or __version__} initialized successfully.")


def init_plan(
    target: Target,
    skip: frozenset[str],
    chart: str,
    trainer_version: str,
    values: Mapping[str, plan.Value],
    chart_version: str | None,
) -> list[str]:
    """``--dry-run``: one line per change init would make (stdout)."""
    from nvcre.measure.builtin import builtin_profiles

    assert target.helm is not None or skip == set(plan.INIT_PHASES)
    lines = []
    if "deps" not in skip and target.helm is not None:
        step = plan.deps_step(
            release(target.helm, plan.TRAINER_RELEASE, plan.TRAINER_NAMESPACE),
            trainer_version,
            _trainer_crds_present(target.client),
            plan.jobset_owner(jobset_evidence(target.client)),
        )
        extra = "".join(f" {arg}" for arg in _set_args(step.values))
        lines.append(
            step.message
            if step.action != "install"
            else f"[deps] would install Kubeflow Trainer v{trainer_version} "
            f"(release {plan.TRAINER_RELEASE} in {plan.TRAINER_NAMESPACE}){extra}"
        )
    if "helm" not in skip and target.helm is not None:
        documents = chart_crds(target.helm, chart, chart_version) + builtin_profiles()
        lines += [f"[helm] {line}" for line in apply_all(target.client, documents, dry_run=True)]
        current = release(target.helm, plan.RELEASE, plan.NAMESPACE, with_values=True)
        meta = _chart_version(target.helm, chart, chart_version)
        if plan.helm_step(current, meta, values) == "skip":
            lines.append(f'[helm] release "{plan.RELEASE}" unchanged (chart {meta}, same values)')
        else:
            verb = "install" if current.state in (plan.NOT_INSTALLED, "uninstalled") else "upgrade"
            lines.append(f'[helm] would {verb} release "{plan.RELEASE}" in {plan.NAMESPACE} (chart {meta})')
    return lines


def _chart_version(helm: Helm, chart: str, version: str | None) -> str:
    done = helm.run(["show", "chart", chart] + (["--version", version] if version else []))
    if done.returncode != 0:
        raise UserError(f"[helm] helm show chart {chart} failed: {done.output}")
    return str(yamlio.load(done.stdout)["version"])


def _trainer_crds_present(client: Client) -> bool:
    """Whether the CRDs a deployed Trainer release needs are there: its TrainJobs and the JobSets
    they run as (deleted by hand, a release helm calls deployed is installed again)."""
    return _has_crd(client, "trainjobs.trainer.kubeflow.org") and _has_crd(client, plan.JOBSET_CRD)


def install_trainer(target: Target, chart: str, version: str, wait: bool, auto_approve: bool) -> None:
    assert target.helm is not None
    helm = target.helm
    current = release(helm, plan.TRAINER_RELEASE, plan.TRAINER_NAMESPACE)
    owner = plan.jobset_owner(jobset_evidence(target.client))
    step = plan.deps_step(current, version, _trainer_crds_present(target.client), owner)
    _echo(step.message)
    if step.action == "skip":
        return
    if step.action == "refuse":
        raise UserError("[deps] stopped before changing anything")
    args = [
        "upgrade",
        "--install",
        plan.TRAINER_RELEASE,
        chart,
        "--namespace",
        plan.TRAINER_NAMESPACE,
        "--create-namespace",
        *_set_args(step.values),
        *_wait_args(wait),
    ]
    done = helm.run(args)
    if done.returncode == 0:
        return
    after = release(helm, plan.TRAINER_RELEASE, plan.TRAINER_NAMESPACE).state
    if not plan.is_recoverable_failure(done.output, after):
        raise UserError(f"[deps] {done.output}")
    inventory = trainer_inventory(target.client)
    blockers = plan.recovery_blockers(inventory)
    if blockers:
        _echo("[deps] Automatic recovery refused:")
        for blocker in blockers:
            _echo(f"  - {blocker}")
        _echo(plan.MANUAL_RECOVERY)
        raise UserError("[deps] automatic recovery refused")
    _echo(
        "[deps][recover] Plan: uninstall the release, delete the Trainer CRDs and kubeflow-system, reinstall."
    )
    if not confirm(auto_approve):
        _echo("[deps] Recovery declined.")
        _echo(plan.MANUAL_RECOVERY)
        raise UserError("[deps] recovery declined")
    recover_trainer(target, args, inventory.namespace_uid)


def recover_trainer(target: Target, install_args: Sequence[str], namespace_uid: str) -> None:
    """Uninstall, delete the Trainer CRDs and the kubeflow-system inspected (``namespace_uid``:
    a namespace made since under its name is not deleted), reinstall; stop at the first step
    that fails."""
    from lightkube.core.exceptions import ApiError
    from lightkube.resources.core_v1 import Namespace

    assert target.helm is not None
    _echo(f"[deps][recover] helm uninstall {plan.TRAINER_RELEASE}")
    done = target.helm.run(
        ["uninstall", plan.TRAINER_RELEASE, "--namespace", plan.TRAINER_NAMESPACE, "--wait"]
    )
    if done.returncode != 0:
        raise _recovery_failed(done.output)
    _echo(f"[deps][recover] deleting CRDs {', '.join(plan.TRAINER_CRDS)}")
    delete_crds(target.client, plan.TRAINER_CRDS, "deps")
    if namespace_uid:
        _echo(f"[deps][recover] deleting namespace {plan.TRAINER_NAMESPACE}")
        try:
            _delete_uid(target.client, Namespace, plan.TRAINER_NAMESPACE, namespace_uid)
        except ApiError as error:
            if error.status.code == 409:  # another namespace holds the name now: not the one inspected
                raise _recovery_failed(
                    f"namespace {plan.TRAINER_NAMESPACE} was replaced since it was inspected; it is left alone"
                ) from error
            if error.status.code != 404:
                raise
        deadline = time.monotonic() + 300
        while _live(target.client, Namespace, plan.TRAINER_NAMESPACE) is not None:
            if time.monotonic() > deadline:
                raise _recovery_failed(f"namespace {plan.TRAINER_NAMESPACE} not deleted")
            time.sleep(1)
    _echo("[deps][recover] reinstalling")
    done = target.helm.run(install_args)
    if done.returncode != 0:
        raise _recovery_failed(done.output)


def _recovery_failed(why: str) -> UserError:
    """The error that ends a recovery stopped halfway: the manual procedure is printed first,
    line by line, since the error itself is printed as one line."""
    _echo(plan.MANUAL_RECOVERY)
    return UserError(f"[deps] automatic recovery failed: {why}")


def _delete_uid(client: Client, resource: Any, name: str, uid: str) -> None:
    """DELETE with a precondition on ``uid`` (lightkube's ``delete`` sends no DeleteOptions)."""
    http = client._client
    request = http.prepare_request("delete", resource, name=name)
    request.data = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
    http.raise_for_status(http.send(http.build_adapter_request(request)))  # type: ignore[no-untyped-call]


def install_nvcre(
    target: Target,
    chart: str,
    chart_version: str | None,
    values: Mapping[str, plan.Value],
    pull_secret: str | None,
    wait: bool,
) -> None:
    from nvcre.measure.builtin import builtin_profiles

    assert target.helm is not None
    helm = target.helm
    if pull_secret:
        _echo(f"[helm] Creating image pull secret {plan.NAMESPACE}/{plan.PULL_SECRET}")
        create_pull_secret(target.client, pull_secret)
    crds = chart_crds(helm, chart, chart_version)
    _echo(f"[helm] Applying {len(crds)} CRDs (server-side, field manager {plan.FIELD_MANAGER})...")
    for line in apply_all(target.client, crds, dry_run=False):
        _echo(f"  {line}")
    wait_established(target.client, [d["metadata"]["name"] for d in crds])
    _echo("[helm] Applying the built-in LogProfiles...")
    for line in apply_all(target.client, builtin_profiles(), dry_run=False):
        _echo(f"  {line}")
    current = release(helm, plan.RELEASE, plan.NAMESPACE, with_values=True)
    version = _chart_version(helm, chart, chart_version)
    if plan.helm_step(current, version, values) == "skip":
        _echo(
            f'[helm] Release "{plan.RELEASE}" already deployed at chart version {version} with the same values; skipping.'
        )
        return
    _echo(f'[helm] Installing release "{plan.RELEASE}" (chart {version}) in namespace {plan.NAMESPACE}...')
    args = [
        "upgrade",
        "--install",
        plan.RELEASE,
        chart,
        "--namespace",
        plan.NAMESPACE,
        "--create-namespace",
        *(["--version", chart_version] if chart_version else []),
        *_set_args(values),
        *_wait_args(wait),
    ]
    done = helm.run(args)
    if done.returncode != 0:
        hint = ""
        if plan.is_recoverable_failure(done.output, "failed"):
            hint = f" (run 'helm status {plan.RELEASE} --namespace {plan.NAMESPACE}')"
        raise UserError(f"[helm] {done.output}{hint}")


@setup_group.command("status")
@connection.connection_options
@helm_option
@output_option(default="table", formats=("table", "json"))
@user_errors
def status_command(kubeconfig: str | None, context: str | None, helm_binary: str | None, output: str) -> None:
    """Check every component setup installs and say what to do about each problem."""
    target = connect(kubeconfig, context, None, need_helm=False)
    env = connection.helm_env(connection.overrides())
    try:
        helm: Helm | None = new_helm(helm_binary, kubeconfig, context, env)
    except UserError:
        helm = None  # no helm binary: releases are reported "unknown"
    try:
        observed = observe(target.client, helm)
    except Exception as error:
        raise UserError(f"connect to cluster: {api_error(error)}") from error
    result = plan.status(observed, supported_trainer_version())
    if output == "json":
        click.echo(json.dumps(plan.status_json(result), indent=2))
    else:
        click.echo(plan.status_table(result, observed.dcgm == "not-found"), nl=False)


@setup_group.command("reset")
@connection.connection_options
@helm_option
@click.option("--skip-phases", default="", help="Comma list of phases to skip: helm, deps.")
@click.option("--auto-approve", is_flag=True, help="Skip the confirmation prompt.")
@user_errors
def reset_command(
    kubeconfig: str | None, context: str | None, helm_binary: str | None, skip_phases: str, auto_approve: bool
) -> None:
    """Remove what setup installed; refuses while that would orphan or delete anyone's objects."""
    try:
        skip = plan.parse_phases(skip_phases, plan.RESET_PHASES)
    except plan.PlanError as error:
        raise UserError(str(error)) from error
    _echo("[preflight] Checking prerequisites...")
    target = connect(kubeconfig, context, helm_binary, need_helm=True)
    assert target.helm is not None
    try:
        objects = nvcre_objects(target.client)
        trainer = release(target.helm, plan.TRAINER_RELEASE, plan.TRAINER_NAMESPACE)
        ours = trainer.state not in (plan.NOT_INSTALLED, plan.UNKNOWN)
        blockers = plan.reset_blockers(objects, trainer_inventory(target.client) if ours else None, skip)
    except Exception as error:
        raise UserError(f"connect to cluster: {api_error(error)}") from error
    if blockers:
        _echo("[preflight] Reset refused: removing nvcre now would delete or orphan:")
        for blocker in blockers:
            _echo(f"  - {blocker}")
        _echo("Delete them (their controllers clean up after them), e.g.")
        _echo("  kubectl delete certifications,workloadruns --all --all-namespaces")
        if any(o.kind == "NodeRecord" for o in objects):
            _echo(
                "  kubectl delete noderecords --all   # forgets every node's history (docs/fleet-memory.md)"
            )
        _echo("then rerun 'nvcrectl setup reset'.")
        raise UserError("reset refused")
    _echo()
    _echo(f"  Target cluster\n  Context:  {target.context}\n  Server:   {target.server}\n")
    _echo("  Phases:")
    _echo(
        f"    [helm]  uninstall release {plan.RELEASE} and delete the NVCRE CRDs"
        + (" (skipped)" if "helm" in skip else "")
    )
    deps = (
        f"uninstall release {plan.TRAINER_RELEASE} and delete the Trainer CRDs"
        if ours
        else "Kubeflow Trainer not installed by setup: nothing"
    )
    _echo(f"    [deps]  {deps}" + (" (skipped)" if "deps" in skip else ""))
    _echo()
    if not confirm(auto_approve):
        _echo("Reset cancelled.")
        return
    try:
        if "helm" in skip:
            _echo("[helm] Skipped.")
        else:
            _echo(f'[helm] Uninstalling release "{plan.RELEASE}"...')
            if release(target.helm, plan.RELEASE, plan.NAMESPACE).state != plan.NOT_INSTALLED:
                _run_helm(
                    target.helm, ["uninstall", plan.RELEASE, "--namespace", plan.NAMESPACE, "--wait"], "helm"
                )
            _echo("[helm] Removing NVCRE CRDs...")
            delete_crds(target.client, _crd_names(target.client, plan.GROUP), "helm")
        if "deps" in skip:
            _echo("[deps] Skipped.")
        elif not ours:
            _echo(
                f'[deps] Release "{plan.TRAINER_RELEASE}" is not installed; Kubeflow Trainer left as it is.'
            )
        else:
            _echo(f'[deps] Uninstalling release "{plan.TRAINER_RELEASE}"...')
            _run_helm(
                target.helm,
                ["uninstall", plan.TRAINER_RELEASE, "--namespace", plan.TRAINER_NAMESPACE, "--wait"],
                "deps",
            )
            delete_crds(target.client, plan.TRAINER_CRDS, "deps")
    except Exception as error:
        if isinstance(error, UserError):
            raise
        raise UserError(api_error(error)) from error
    _echo(plan.retained_block(_pull_secret_exists(target.client)))


def _pull_secret_exists(client: Client) -> bool:
    from lightkube.core.exceptions import ApiError
    from lightkube.resources.core_v1 import Secret

    try:
        client.get(Secret, plan.PULL_SECRET, namespace=plan.NAMESPACE)
    except ApiError:
        return False
    return True
