"""The upstream workload chain on the test control plane: TrainJob -> JobSet -> Jobs -> bound Pods.

:class:`WorkloadChain` runs, against a started :class:`~nvcre.testing.controlplane.ControlPlane`:

* ``kube-controller-manager`` with the Job controller, the garbage collector and the namespace
  controller (service-account credentials and leader election off);
* ``kube-scheduler`` with the profiles ``default-scheduler``, ``kai-scheduler`` and
  ``runai-scheduler`` (all three are the default scheduler: gang semantics are not simulated);
* the JobSet controller and Kubeflow Trainer's ``trainer-controller-manager`` with their own
  certificate management off: they serve their admission webhooks on loopback with a certificate
  signed by a CA generated here, and their Validating/MutatingWebhookConfigurations (the ones their
  releases ship, kustomize patches applied) point at ``https://127.0.0.1:<port><path>`` with that
  CA, so defaulting and validation are the real ones.

Components start in dependency order, each a process in its own session with its own log file
(``<workdir>/chain/<name>.log``), and each is ready only when its check passes (``/healthz``,
``/readyz``, then a dry-run request that only the registered webhook can reject). ``stop()``
removes the webhook configurations (so the control plane stays usable) and stops the processes in
reverse order.

:class:`Cluster` is a control plane, kwok and the chain as one unit (``python -m nvcre.testing up
--full``, the ``full_cluster`` fixture). Pods the Job controller creates are bound by
kube-scheduler to kwok nodes, kwok's stages (:mod:`nvcre.testing.kwok`) make them Running and end
them when a test annotates them.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import os
import ssl
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import (
    MutatingWebhookConfiguration,
    ValidatingWebhookConfiguration,
)

from nvcre import resources, yamlio
from nvcre.api.v1alpha1.constants import TRAINER_API_VERSION
from nvcre.render.merge import json_patch
from nvcre.testing import binaries as bins
from nvcre.testing.certs import CertificateAuthority
from nvcre.testing.controlplane import FIELD_MANAGER, ControlPlane
from nvcre.testing.kwok import Kwok, node_monitor_grace_seconds
from nvcre.testing.processes import (
    Process,
    RunsAsProcess,
    Service,
    StartupError,
    free_port,
    http_ok,
    wait_until,
)
from nvcre.workload import trainjob

#: Scheduler names nvcre renders (gang-scheduled workloads name kai-scheduler or runai-scheduler).
SCHEDULER_PROFILES = ("default-scheduler", "kai-scheduler", "runai-scheduler")
#: kube-controller-manager controllers the chain needs: pods from Jobs, cascading deletion,
#: namespace deletion, the node lifecycle (it lifts the ``not-ready`` taint the API server puts on
#: every new Node once kwok reports it Ready), claims bound to the volumes a test provides, and
#: Deployments (nvcre's chart installed by ``nvcrectl setup init``: its manager becomes Available).
CONTROLLERS = (
    "job",
    "garbagecollector",
    "namespace",
    "nodelifecycle",
    "persistentvolume-binder",
    "deployment",
    "replicaset",
)
#: A namespace every control plane has, used for the dry-run webhook probes.
PROBE_NAMESPACE = "default"

JobSet = resources.JobSet
"""Re-exported: the sandbox and its tests read JobSets through this name."""
_WEBHOOK_KINDS: dict[str, type[MutatingWebhookConfiguration] | type[ValidatingWebhookConfiguration]] = {
    "MutatingWebhookConfiguration": MutatingWebhookConfiguration,
    "ValidatingWebhookConfiguration": ValidatingWebhookConfiguration,
}


# ---------------------------------------------------------------------------------------------
# configuration (pure functions of plain data)


def _target_matches(target: Mapping[str, Any], document: Mapping[str, Any]) -> bool:
    kind_ok = target.get("kind") in (None, document.get("kind"))
    name_ok = target.get("name") in (None, (document.get("metadata") or {}).get("name"))
    return kind_ok and name_ok


def kustomized_webhooks(directory: Path) -> list[dict[str, Any]]:
    """The webhook configurations of a kustomization directory, its JSON 6902 patches applied.

    Only what the upstream webhook kustomizations use is understood: ``resources`` files and
    ``patches`` with a ``path`` and a ``target`` (kind and optional name); a patch is applied as
    kustomize applies it, by RFC 6902 (:func:`nvcre.render.merge.json_patch`).
    """
    kustomization = yamlio.load((directory / "kustomization.yaml").read_text()) or {}
    documents = [
        doc
        for resource in kustomization.get("resources") or ()
        for doc in yamlio.load_all((directory / resource).read_text())
        if isinstance(doc, dict) and doc.get("kind") in _WEBHOOK_KINDS
    ]
    for patch in kustomization.get("patches") or ():
        operations = yamlio.load((directory / patch["path"]).read_text())
        target = patch.get("target") or {}
        documents = [json_patch(d, operations) if _target_matches(target, d) else d for d in documents]
    return documents


def loopback_webhooks(
    documents: Iterable[Mapping[str, Any]], *, port: int, ca_bundle: bytes, name_prefix: str
) -> list[dict[str, Any]]:
    """Point every webhook of ``documents`` at ``https://127.0.0.1:<port><service path>``.

    Object names get ``name_prefix`` (JobSet and Trainer both ship one called
    ``mutating-webhook-configuration``); the CA bundle is the one that signed the server's cert.
    """
    out = []
    for document in documents:
        doc = copy.deepcopy(dict(document))
        name = str(doc["metadata"]["name"])
        doc["metadata"] = {"name": name if name.startswith(name_prefix) else name_prefix + name}
        for webhook in doc.get("webhooks") or ():
            path = (webhook.get("clientConfig") or {}).get("service", {}).get("path", "/")
            webhook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port}{path}",
                "caBundle": base64.b64encode(ca_bundle).decode(),
            }
        out.append(doc)
    return out


def scheduler_configuration(kubeconfig: Path, profiles: Sequence[str] = SCHEDULER_PROFILES) -> dict[str, Any]:
    """A KubeSchedulerConfiguration with one default profile per scheduler name."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": name} for name in profiles],
    }


def jobset_configuration(*, webhook_port: int, cert_dir: Path, probe_port: int) -> dict[str, Any]:
    """JobSet's Configuration: internal cert management off, webhook and probes on loopback."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
    }


def trainer_configuration(*, webhook_port: int, probe_port: int) -> dict[str, Any]:
    """Trainer's Configuration: cert management off, webhook and probes on loopback.

    Trainer has no webhook cert directory setting: controller-runtime's default
    ``$TMPDIR/k8s-webhook-server/serving-certs`` is used, so the process gets its own TMPDIR.
    """
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1"},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
    }


# ---------------------------------------------------------------------------------------------
# components


@dataclass
class Component(RunsAsProcess):
    """One process of the chain: how to run it and how to tell it is ready."""

    name: str
    argv: list[str]
    log_path: Path
    ready: Callable[[], bool]
    what: str
    env: dict[str, str] | None = None
    process: Process | None = field(default=None, init=False)

    def start(self, timeout: float) -> None:
        self.process = Process(self.name, self.argv, self.log_path, env=self.env).start()
        wait_until(self.ready, timeout=timeout, what=f"{self.name} {self.what}", process=self.process)


def _rejected_by_webhook(create: Callable[[], object], message: str) -> bool:
    """True once a dry-run create is denied with ``message`` (only the webhook says that)."""
    try:
        create()
    except ApiError as error:
        if message in str(error.status.message or ""):
            return True
        raise
    return False


class WorkloadChain(Service):
    """kube-controller-manager, kube-scheduler, JobSet and Trainer against one control plane."""

    def __init__(self, control_plane: ControlPlane, *, start_timeout: float = 120.0, nodes: int = 0) -> None:
        """``nodes``: the fleet's size (the node lifecycle controller waits as long as kwok's
        leases last for it)."""
        self.control_plane = control_plane
        self.start_timeout = start_timeout
        self.nodes = nodes
        self.components: list[Component] = []
        self.webhooks: list[dict[str, Any]] = []
        self.workdir = Path()
        self.timings: dict[str, float] = {}

    @property
    def binaries(self) -> bins.Binaries:
        return self.control_plane.binaries

    def _start(self) -> None:
        cp = self.control_plane
        assert cp.workdir is not None and cp.certs is not None, "start the control plane first"
        t0 = time.monotonic()
        self.workdir = cp.workdir / "chain"
        self.workdir.mkdir(parents=True, exist_ok=True)
        ca = CertificateAuthority("nvcre-webhook-ca")
        for component in (
            self._controller_manager(),
            self._scheduler(),
            self._jobset(ca),
            self._trainer(ca),
        ):
            self.components.append(component)
            component.start(self.start_timeout)
            self.timings[component.name] = time.monotonic() - t0

    # -- the components, in start order ------------------------------------------------------

    def _kubeconfig(self, name: str) -> Path:
        return self.control_plane.write_kubeconfig(self.workdir / f"{name}.kubeconfig")

    def _secure_probe(self, port: int) -> Callable[[], bool]:
        certs = self.control_plane.certs
        assert certs is not None
        context = ssl.create_default_context(cafile=str(certs.ca_cert))
        return lambda: http_ok(f"https://127.0.0.1:{port}/healthz", context)

    def _kube_component(self, name: str, binary: Path, args: list[str]) -> Component:
        """kube-controller-manager and kube-scheduler serve /healthz with the apiserver's cert."""
        certs = self.control_plane.certs
        assert certs is not None
        port = free_port()
        argv = [
            str(binary),
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            f"--tls-cert-file={certs.serving_cert}",
            f"--tls-private-key-file={certs.serving_key}",
            "--v=1",
            *args,
        ]
        return Component(name, argv, self.workdir / f"{name}.log", self._secure_probe(port), "/healthz")

    def _controller_manager(self) -> Component:
        kubeconfig = self._kubeconfig(bins.KUBE_CONTROLLER_MANAGER)
        return self._kube_component(
            bins.KUBE_CONTROLLER_MANAGER,
            self.binaries.path(bins.KUBE_CONTROLLER_MANAGER),
            [
                f"--kubeconfig={kubeconfig}",
                f"--controllers={','.join(CONTROLLERS)}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                # the garbage collector and the namespace controller react within a second
                "--concurrent-gc-syncs=5",
                f"--node-monitor-grace-period={node_monitor_grace_seconds(self.nodes)}s",
            ],
        )

    def _scheduler(self) -> Component:
        kubeconfig = self._kubeconfig(bins.KUBE_SCHEDULER)
        config = self.workdir / "kube-scheduler.yaml"
        config.write_text(yaml.safe_dump(scheduler_configuration(kubeconfig), sort_keys=False))
        return self._kube_component(
            bins.KUBE_SCHEDULER, self.binaries.path(bins.KUBE_SCHEDULER), [f"--config={config}"]
        )

    @staticmethod
    def _write_serving_cert(ca: CertificateAuthority, directory: Path) -> Path:
        """``tls.crt``/``tls.key`` for 127.0.0.1, as controller-runtime's webhook server reads them."""
        directory.mkdir(parents=True, exist_ok=True)
        pair = ca.serving(dns_names=("localhost",), ips=("127.0.0.1",))
        (directory / "tls.crt").write_bytes(pair.cert_pem)
        (directory / "tls.key").write_bytes(pair.key_pem)
        (directory / "tls.key").chmod(0o600)
        return directory

    def _webhook_component(
        self,
        name: str,
        configuration: Callable[..., dict[str, Any]],
        args: list[str],
        *,
        manifests: Path,
        ca: CertificateAuthority,
        probe: Callable[[Client], bool],
        env: dict[str, str] | None = None,
    ) -> Component:
        """A controller with webhooks, run with a kubeconfig of its own and its Configuration
        (``configuration(webhook_port=..., probe_port=...)``, on two free loopback ports) before
        ``args``: ready when /readyz passes, its webhook configurations are registered and a
        dry-run request is denied by its validating webhook."""
        probe_port, webhook_port = free_port(), free_port()
        config = self.workdir / f"{name}.yaml"
        config.write_text(yaml.safe_dump(configuration(webhook_port=webhook_port, probe_port=probe_port)))
        argv = [
            str(self.binaries.path(name)),
            f"--kubeconfig={self._kubeconfig(name)}",
            f"--config={config}",
            *args,
        ]
        webhooks = loopback_webhooks(
            kustomized_webhooks(manifests),
            port=webhook_port,
            ca_bundle=ca.pair.cert_pem,
            name_prefix=f"{name}-",
        )
        registered = False

        def ready() -> bool:
            nonlocal registered
            if not http_ok(f"http://127.0.0.1:{probe_port}/readyz"):
                return False
            with self.control_plane.client() as client:
                if not registered:
                    self._register(client, webhooks)
                    registered = True
                return probe(client)

        return Component(name, argv, self.workdir / f"{name}.log", ready, "/readyz and webhooks", env=env)

    def _jobset(self, ca: CertificateAuthority) -> Component:
        cert_dir = self._write_serving_cert(ca, self.workdir / bins.JOBSET / "serving-certs")
        return self._webhook_component(
            bins.JOBSET,
            functools.partial(jobset_configuration, cert_dir=cert_dir),
            ["--metrics-bind-address=0", "--leader-elect=false", "--zap-devel=false"],
            manifests=self.binaries.jobset_webhooks,
            ca=ca,
            probe=_jobset_webhook_answers,
        )

    def _trainer(self, ca: CertificateAuthority) -> Component:
        tmpdir = self.workdir / bins.TRAINER
        self._write_serving_cert(ca, tmpdir / "k8s-webhook-server" / "serving-certs")
        return self._webhook_component(
            bins.TRAINER,
            trainer_configuration,
            [],
            manifests=self.binaries.trainer_webhooks,
            ca=ca,
            probe=_trainer_webhook_answers,
            env={**os.environ, "TMPDIR": str(tmpdir)},
        )

    # -- webhooks ----------------------------------------------------------------------------

    def _register(self, client: Client, documents: Sequence[dict[str, Any]]) -> None:
        for document in documents:
            client.apply(from_dict(document), field_manager=FIELD_MANAGER, force=True)
            self.webhooks.append(document)

    def _unregister(self) -> None:
        if not self.webhooks or not self.control_plane.running:
            return
        with self.control_plane.client() as client:
            for document in reversed(self.webhooks):
                with contextlib.suppress(ApiError):
                    client.delete(_WEBHOOK_KINDS[document["kind"]], document["metadata"]["name"])
        self.webhooks.clear()

    def stop(self) -> None:
        """Unregister the webhooks, then stop the components in reverse start order."""
        try:
            self._unregister()
        finally:
            for component in reversed(self.components):
                component.stop()
            self.components.clear()

    @property
    def running(self) -> bool:
        return bool(self.components) and all(c.running for c in self.components)

    def describe(self) -> list[str]:
        """One line per component: name, when it was ready (seconds since the chain's start), pid, log."""
        return [
            f"{c.name} ready at {self.timings.get(c.name, 0.0):.1f}s, "
            f"pid {c.process.pid if c.process else '-'}, log {c.log_path}"
            for c in self.components
        ]


def _jobset_webhook_answers(client: Client) -> bool:
    """JobSet's validating webhook (not the CRD schema) rejects ``dependsOn`` on the first job."""
    job = {"template": {"spec": {"containers": [{"name": "c", "image": "probe"}], "restartPolicy": "Never"}}}
    probe = JobSet(
        metadata=ObjectMeta(name="nvcre-webhook-probe", namespace=PROBE_NAMESPACE),
        spec={
            "replicatedJobs": [
                {"name": "a", "dependsOn": [{"name": "b", "status": "Ready"}], "template": {"spec": job}},
                {"name": "b", "template": {"spec": job}},
            ]
        },
    )
    return _rejected_by_webhook(
        lambda: client.create(probe, dry_run=True), "DependsOn can't be set for the first ReplicatedJob"
    )


def _trainer_webhook_answers(client: Client) -> bool:
    """Trainer's validating webhook rejects a TrainJob whose TrainingRuntime does not exist."""
    probe = {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": "nvcre-webhook-probe", "namespace": PROBE_NAMESPACE},
        "spec": {"runtimeRef": {"name": "nvcre-webhook-probe-missing", "kind": "TrainingRuntime"}},
    }
    return _rejected_by_webhook(
        lambda: client.create(resources.TrainJob.from_dict(probe), dry_run=True),
        trainjob.RUNTIME_NOT_FOUND,
    )


# ---------------------------------------------------------------------------------------------
# the whole cluster


class Cluster(Service):
    """A control plane, kwok and (with ``chain``) the workload chain, started and stopped as one."""

    def __init__(
        self, control_plane: ControlPlane | None = None, *, chain: bool = True, nodes: int = 0
    ) -> None:
        """``nodes``: how many nodes the fleet will have (kwok's leases, and how long the node
        lifecycle controller waits for them, grow with it)."""
        self.control_plane = control_plane or ControlPlane(
            binaries=bins.ensure((*bins.REQUIRED, *bins.CHAIN))
        )
        self.kwok = Kwok(self.control_plane, nodes=nodes)
        self.chain = WorkloadChain(self.control_plane, nodes=nodes) if chain else None
        self.timings: dict[str, float] = {}

    def _start(self) -> None:
        t0 = time.monotonic()
        self.control_plane.start()
        self.timings["control-plane"] = time.monotonic() - t0
        self.kwok.start()
        self.timings["kwok"] = time.monotonic() - t0
        if self.chain is not None:
            self.chain.start()
            self.timings["chain"] = time.monotonic() - t0

    def stop(self) -> None:
        """Stop the chain, kwok, then the control plane (each step even if an earlier one failed)."""
        try:
            if self.chain is not None:
                self.chain.stop()
        finally:
            try:
                self.kwok.stop()
            finally:
                self.control_plane.stop()

    @property
    def running(self) -> bool:
        chain_ok = self.chain is None or self.chain.running
        return self.control_plane.running and self.kwok.running and chain_ok


def describe_timings(timings: Mapping[str, float]) -> str:
    """``name 1.2s, name 3.4s`` (cumulative seconds since start), for logs and benchmarks."""
    return ", ".join(f"{name} {seconds:.1f}s" for name, seconds in timings.items())


@dataclass
class EmptyCluster:
    """A cluster with the workload chain but none of nvcre (an empty cluster as setup meets one),
    and the environment that points nvcrectl at it and at the built helm, with helm's own
    directories under ``work``."""

    cluster: Cluster
    env: dict[str, str]
    work: Path


__all__ = [
    "CONTROLLERS",
    "SCHEDULER_PROFILES",
    "Cluster",
    "Component",
    "EmptyCluster",
    "JobSet",
    "StartupError",
    "WorkloadChain",
    "describe_timings",
    "jobset_configuration",
    "json_patch",
    "kustomized_webhooks",
    "loopback_webhooks",
    "scheduler_configuration",
    "trainer_configuration",
]
