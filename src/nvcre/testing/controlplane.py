"""A real etcd + kube-apiserver on loopback ports, for tests and local experiments.

Usage::

    with ControlPlane() as cp:
        client = cp.client()          # lightkube.Client with cluster-admin rights
        print(cp.kubeconfig_path)     # for kubectl, nvcrectl, kwok ...

``start()`` generates certificates, starts etcd (``--unsafe-no-fsync``) and kube-apiserver with
the flags envtest uses (RBAC authorisation, admin client certificate in ``system:masters``),
writes a kubeconfig, waits for ``/readyz``, then installs CRDs (``config/crd/*.yaml``, the Kubeflow
Trainer and JobSet CRDs and kwok's Logs CRDs), waits until each one is Established and applies nvcre's built-in
LogProfiles (:mod:`nvcre.measure.builtin`), as a cluster nvcre is set up on has them. ``stop()`` stops
every process and removes the temporary directory, also when ``start()`` failed half-way.
``restart_apiserver()`` / ``restart_etcd()`` stop one process and start it again with the same
flags, data directory, ports and certificates (a crash-and-recover, for the reliability suite).

There is no scheduler, controller-manager or kubelet: pods stay Pending and nothing is garbage
collected unless kwok (:mod:`nvcre.testing.kwok`) or the test drives them.

OwnerReferencesPermissionEnforcement is on (as in OpenShift): setting ``blockOwnerDeletion`` on
an owner reference takes ``update`` on the owner's ``finalizers``. With ``audit_users`` the
API server writes an audit log of those users' requests (:mod:`nvcre.testing.audit`), read by
:meth:`ControlPlane.audit_events`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import ssl
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from lightkube import AsyncClient, Client, KubeConfig
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from nvcre import resources, yamlio
from nvcre.measure.builtin import builtin_profiles
from nvcre.testing import audit
from nvcre.testing import binaries as bins
from nvcre.testing.certs import ADMIN_USER, MANAGER_USER, CertFiles, KeyPair, write_cert_dir
from nvcre.testing.processes import Process, Service, StartupError, free_port, wait_until

FIELD_MANAGER = "nvcre-testing"
LOG_PROFILE_CRD = "logprofiles.nvcre.nvidia.com"
CONTEXT = "nvcre-test"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def default_crd_dir() -> Path:
    """The repository's generated CRDs (``config/crd``); may not exist yet."""
    try:
        return bins.repo_root() / "config" / "crd"
    except bins.BinaryError:
        return Path("config") / "crd"


def crd_files(paths: Iterable[Path]) -> list[Path]:
    """Every ``*.yaml``/``*.yml`` under the given files/directories, sorted; missing ones ignored."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        elif path.is_file():
            found.append(path)
    return [p for p in found if p.name != "kustomization.yaml"]


def _parse_yaml_cached(file: Path) -> list[Any]:
    """Parse a (multi-document) YAML file, memoised as JSON by content digest.

    The Trainer CRDs are ~2.4 MB of YAML: PyYAML needs seconds for them, JSON milliseconds.
    """
    data = file.read_bytes()
    memo = bins.cache_root() / "yaml-json" / f"{hashlib.sha256(data).hexdigest()}.json"
    try:
        cached: list[Any] = json.loads(memo.read_text())
        return cached
    except (OSError, ValueError):
        pass
    docs = yamlio.load_all(data)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(docs))
        tmp.replace(memo)
    except (OSError, TypeError, ValueError):
        pass  # not JSON-representable or read-only cache: just don't memoise
    return docs


def load_crds(files: Iterable[Path]) -> list[dict[str, Any]]:
    """The CustomResourceDefinition documents in ``files`` (other kinds are skipped)."""
    crds = []
    for file in files:
        for doc in _parse_yaml_cached(file):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                crds.append(doc)
    return crds


class ControlPlane(Service):
    """etcd + kube-apiserver with generated certificates and a kubeconfig. See module docs."""

    def __init__(
        self,
        *,
        binaries: bins.Binaries | None = None,
        crd_paths: Sequence[Path] | None = None,
        install_trainer_crds: bool = True,
        workdir: Path | None = None,
        keep_workdir: bool = False,
        start_timeout: float = 90.0,
        extra_apiserver_args: Sequence[str] = (),
        audit_users: Sequence[str] = (),
    ) -> None:
        self._binaries = binaries
        self.crd_paths = list(crd_paths) if crd_paths is not None else [default_crd_dir()]
        self.install_trainer_crds = install_trainer_crds
        self._requested_workdir = workdir
        self.keep_workdir = keep_workdir
        self.start_timeout = start_timeout
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.audit_users = list(audit_users)
        self.audit_log: Path | None = None
        self.workdir: Path | None = None
        self.certs: CertFiles | None = None
        self.etcd: Process | None = None
        self.apiserver: Process | None = None
        self.etcd_url = ""
        self.server = ""
        self.kubeconfig_path = Path()
        self.installed_crds: list[str] = []
        self.timings: dict[str, float] = {}

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def binaries(self) -> bins.Binaries:
        if self._binaries is None:
            self._binaries = bins.ensure(bins.REQUIRED)
        return self._binaries

    def _start(self) -> None:
        t0 = time.monotonic()
        binaries = self.binaries
        if self._requested_workdir is not None:
            self._requested_workdir.mkdir(parents=True, exist_ok=True)
            self.workdir = self._requested_workdir
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="nvcre-controlplane-"))
        self.certs = write_cert_dir(self.workdir / "pki")
        self.timings["certs"] = time.monotonic() - t0

        self._start_etcd(binaries.path(bins.ETCD))
        self.timings["etcd"] = time.monotonic() - t0
        self._start_apiserver(binaries.path(bins.KUBE_APISERVER))
        self.timings["apiserver"] = time.monotonic() - t0

        files = crd_files(self.crd_paths)
        if self.install_trainer_crds:  # and JobSet's, which Trainer runs a TrainJob as
            files += crd_files([binaries.trainer_crds, binaries.jobset_crds])
        files += crd_files([binaries.kwok_crds])
        self.install_crds(load_crds(files))
        self.timings["crds"] = time.monotonic() - t0
        if LOG_PROFILE_CRD in self.installed_crds:
            self.install_builtin_profiles()

    def _start_etcd(self, etcd: Path) -> None:
        assert self.workdir is not None
        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        self.etcd = Process(
            "etcd",
            [
                str(etcd),
                "--name=nvcre-test",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=nvcre-test=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
                "--quota-backend-bytes=8589934592",
            ],
            self.workdir / "etcd.log",
        ).start()
        wait_until(self._etcd_healthy, timeout=self.start_timeout, what="etcd /health", process=self.etcd)

    def _etcd_healthy(self) -> bool:
        with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as response:
            return bool(json.loads(response.read()).get("health") == "true")

    def _start_apiserver(self, apiserver: Path) -> None:
        assert self.workdir is not None and self.certs is not None
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        certs = self.certs
        self.apiserver = Process(
            "kube-apiserver",
            [
                str(apiserver),
                f"--etcd-servers={self.etcd_url}",
                f"--cert-dir={certs.ca_cert.parent}",
                f"--tls-cert-file={certs.serving_cert}",
                f"--tls-private-key-file={certs.serving_key}",
                f"--secure-port={port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--allow-privileged=true",
                "--disable-admission-plugins=ServiceAccount",
                "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={certs.sa_public_key}",
                f"--service-account-signing-key-file={certs.sa_private_key}",
                f"--client-ca-file={certs.ca_cert}",
                "--endpoint-reconciler-type=none",
                # reach kwok's kubelet endpoint by IP (127.0.0.1), never through a DNS lookup
                "--kubelet-preferred-address-types=InternalIP",
                "--v=1",
                *self._audit_args(),
                *self.extra_apiserver_args,
            ],
            self.workdir / "kube-apiserver.log",
        ).start()
        self.kubeconfig_path = self.write_kubeconfig(self.workdir / "kubeconfig")
        self._wait_apiserver_ready()

    def _wait_apiserver_ready(self) -> None:
        context = self.ssl_context()
        wait_until(
            lambda: self._get("/readyz", context) == "ok",
            timeout=self.start_timeout,
            what=f"kube-apiserver {self.server}/readyz",
            process=self.apiserver,
        )

    def _audit_args(self) -> list[str]:
        if not self.audit_users:
            return []
        assert self.workdir is not None
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(audit.policy(self.audit_users)))
        self.audit_log = self.workdir / "audit.log"
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
        ]

    def audit_events(self) -> list[dict[str, Any]]:
        """Every event of the audit log so far (empty without ``audit_users``)."""
        if self.audit_log is None or not self.audit_log.exists():
            return []
        return audit.read_events(self.audit_log)

    def restart_apiserver(self, *, kill: bool = False) -> None:
        """Stop kube-apiserver (SIGTERM, or SIGKILL with ``kill``) and start the same command
        again; wait for ``/readyz``."""
        assert self.apiserver is not None
        self.apiserver.restart(kill=kill)
        self._wait_apiserver_ready()

    def restart_etcd(self, *, kill: bool = False) -> None:
        """Stop etcd (SIGTERM, or SIGKILL with ``kill``) and start it again on the same data
        directory and ports; wait until kube-apiserver, which reconnects by itself, is ready."""
        assert self.etcd is not None
        self.etcd.restart(kill=kill)
        wait_until(self._etcd_healthy, timeout=self.start_timeout, what="etcd /health", process=self.etcd)
        self._wait_apiserver_ready()

    def stop(self) -> None:
        """Stop kube-apiserver then etcd, and remove the working directory (unless kept)."""
        for process in (self.apiserver, self.etcd):
            if process is not None:
                process.stop()
        if self.workdir is not None and not self.keep_workdir and self._requested_workdir is None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def running(self) -> bool:
        return bool(self.apiserver and self.apiserver.running() and self.etcd and self.etcd.running())

    # -- access ----------------------------------------------------------------------------

    def kubeconfig(self, user: str = ADMIN_USER) -> dict[str, Any]:
        """A kubeconfig for ``user``: the admin, or the manager's own identity
        (:data:`~nvcre.testing.certs.MANAGER_USER`); both are in ``system:masters``."""
        assert self.certs is not None
        pair: KeyPair = {ADMIN_USER: self.certs.admin, MANAGER_USER: self.certs.manager}[user]
        credentials = {"client-certificate-data": _b64(pair.cert_pem), "client-key-data": _b64(pair.key_pem)}
        return self.kubeconfig_as(user, credentials)

    def kubeconfig_as(self, user: str, credentials: dict[str, str]) -> dict[str, Any]:
        """A kubeconfig for this control plane (its CA embedded) in which ``user`` authenticates
        with ``credentials``: a kubeconfig ``user`` entry (client certificate and key, a token)."""
        assert self.certs is not None
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": CONTEXT,
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": _b64(self.certs.ca.cert_pem),
                    },
                }
            ],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": user}}],
            "current-context": CONTEXT,
        }

    def write_kubeconfig(self, path: Path, user: str = ADMIN_USER) -> Path:
        """Write a self-contained kubeconfig (certificates embedded) for cluster-admin access."""
        path.write_text(yaml.safe_dump(self.kubeconfig(user), sort_keys=False))
        path.chmod(0o600)
        return path

    def client(self, *, namespace: str | None = None, field_manager: str = FIELD_MANAGER) -> Client:
        """A synchronous lightkube client authenticated as cluster-admin."""
        config = KubeConfig.from_dict(self.kubeconfig(), fname=self.kubeconfig_path)
        return Client(config, namespace=namespace, field_manager=field_manager, trust_env=False)

    def async_client(
        self, *, namespace: str | None = None, field_manager: str = FIELD_MANAGER
    ) -> AsyncClient:
        """An asynchronous lightkube client authenticated as cluster-admin."""
        config = KubeConfig.from_dict(self.kubeconfig(), fname=self.kubeconfig_path)
        return AsyncClient(config, namespace=namespace, field_manager=field_manager, trust_env=False)

    def ssl_context(self) -> ssl.SSLContext:
        assert self.certs is not None
        context = ssl.create_default_context(cafile=str(self.certs.ca_cert))
        context.load_cert_chain(str(self.certs.admin_cert), str(self.certs.admin_key))
        return context

    def _get(self, path: str, context: ssl.SSLContext) -> str:
        with urllib.request.urlopen(f"{self.server}{path}", timeout=5, context=context) as response:
            return str(response.read().decode())

    def metrics(self) -> str:
        """kube-apiserver's ``/metrics`` (Prometheus text)."""
        return self._get("/metrics", self.ssl_context())

    def version(self) -> str:
        """``gitVersion`` reported by the running kube-apiserver."""
        return str(json.loads(self._get("/version", self.ssl_context()))["gitVersion"])

    # -- CRDs ------------------------------------------------------------------------------

    def install_crds(self, documents: Sequence[dict[str, Any]], timeout: float = 60.0) -> list[str]:
        """Server-side apply CRD documents, then wait until each is Established."""
        if not documents:
            return []
        names = [str(doc["metadata"]["name"]) for doc in documents]
        with self.client() as client:
            for doc in documents:
                crd = from_dict(doc)
                assert isinstance(crd, CustomResourceDefinition)
                client.apply(crd, field_manager=FIELD_MANAGER, force=True)
            wait_until(
                lambda: all(self._established(client, name) for name in names),
                timeout=timeout,
                what=f"CRDs to be Established: {', '.join(names)}",
                process=self.apiserver,
            )
        self.installed_crds += names
        return names

    def install_builtin_profiles(self) -> list[str]:
        """Server-side apply nvcre's built-in LogProfiles (``nccl-bandwidth``, ...), as every
        cluster nvcre is set up on has them."""
        profiles = builtin_profiles()
        with self.client() as client:
            for profile in profiles:
                client.apply(resources.LogProfile.from_dict(profile), field_manager=FIELD_MANAGER, force=True)
        return [str(p["metadata"]["name"]) for p in profiles]

    @staticmethod
    def _established(client: Client, name: str) -> bool:
        try:
            crd = client.get(CustomResourceDefinition, name)
        except ApiError:
            return False
        conditions = crd.status.conditions if crd.status and crd.status.conditions else []
        return any(c.type == "Established" and c.status == "True" for c in conditions)


__all__ = ["ControlPlane", "StartupError", "crd_files", "default_crd_dir", "load_crds"]
