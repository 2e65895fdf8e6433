"""``--metrics-secure`` on the real manager and API server: /metrics over HTTPS, refused (401)
without a bearer token the API server accepts, refused (403) to a ServiceAccount that may not get
/metrics, and served to one bound to the chart's metrics-reader ClusterRole; the probe port no
longer serves /metrics. The chart turns it on by default."""

from __future__ import annotations

import json
import secrets
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.core_v1 import ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding
from prometheus_client.parser import text_string_to_metric_families

from nvcre.runtime.secure_metrics import self_signed
from nvcre.setup import chart
from nvcre.setup.helm import Helm
from nvcre.testing import binaries
from nvcre.testing.access import apply_manifests, load_manifests, service_account_token
from nvcre.testing.audit import by_manager
from nvcre.testing.binaries import repo_root
from nvcre.testing.controlplane import ControlPlane
from nvcre.testing.manager import ManagerProcess
from nvcre.testing.processes import free_port
from nvcre.testing.waiting import wait_for

READER_ROLE = repo_root() / "config" / "rbac" / "metrics_reader_role.yaml"


class Scraper:
    """Scrapes the secure metrics port as Prometheus would (the certificate is self-signed)."""

    def __init__(self, port: int) -> None:
        self.url = f"https://127.0.0.1:{port}/metrics"
        self.context = ssl.create_default_context()
        self.context.check_hostname = False
        self.context.verify_mode = ssl.CERT_NONE

    def get(self, token: str | None) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        request = urllib.request.Request(self.url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10, context=self.context) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()


@pytest.fixture(scope="module")
def secure_manager(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ManagerProcess, Scraper]]:
    port = free_port()
    process = ManagerProcess(
        control_plane,
        tmp_path_factory.mktemp("secure-metrics"),
        name="secure-metrics-manager",
        extra_args=("--metrics-secure", f"--metrics-bind-address=127.0.0.1:{port}"),
    ).start()
    yield process, Scraper(port)
    process.stop()


def _service_account(kube: Client, namespace: str, name: str) -> str:
    kube.create(ServiceAccount(metadata=ObjectMeta(name=name, namespace=namespace)))
    return service_account_token(kube, namespace, name, seconds=600)


@pytest.fixture
def reader_binding(kube: Client, namespace: str) -> Iterator[str]:
    """A ServiceAccount ``scraper`` bound (as an operator binds Prometheus') to the chart's
    metrics-reader ClusterRole; the binding's name."""
    (role,) = apply_manifests(kube, load_manifests([READER_ROLE]))
    name = f"metrics-scraper-{secrets.token_hex(3)}"
    kube.create(
        ClusterRoleBinding(
            metadata=ObjectMeta(name=name),
            roleRef=RoleRef(
                apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name=role.split("/")[-1]
            ),
            subjects=[Subject(kind="ServiceAccount", name="scraper", namespace=namespace)],
        )
    )
    yield name
    kube.delete(ClusterRoleBinding, name)


def reviewed(control_plane: ControlPlane, token: str) -> int:
    """How many TokenReviews of ``token`` the manager asked for (the audit log keeps create bodies)."""
    return sum(
        1
        for event in by_manager(control_plane.audit_events())
        if (event.get("objectRef") or {}).get("resource") == "tokenreviews"
        and ((event.get("requestObject") or {}).get("spec") or {}).get("token") == token
    )


def test_scrapes_are_authenticated_and_authorised(
    secure_manager: tuple[ManagerProcess, Scraper],
    control_plane: ControlPlane,
    kube: Client,
    namespace: str,
    reader_binding: str,
) -> None:
    manager, scraper = secure_manager
    stranger = _service_account(kube, namespace, "stranger")
    reader = _service_account(kube, namespace, "scraper")

    assert scraper.get(None) == (401, "Unauthorized")
    assert scraper.get("not-a-token") == (401, "Unauthorized")
    assert scraper.get(stranger) == (403, "Forbidden")
    status, body = scraper.get(reader)
    assert status == 200
    families = {f.name for f in text_string_to_metric_families(body)}
    assert {"controller_runtime_reconcile_time_seconds", "nvcre_event_loop_lag_seconds"} <= families
    # The stranger stays refused on a scrape the cache answers: once a new token's review is in
    # the audit log, the stranger's token was reviewed once only. No token reaches the log.
    assert scraper.get(stranger) == (403, "Forbidden")
    fresh = service_account_token(kube, namespace, "scraper", seconds=600)
    assert scraper.get(fresh)[0] == 200
    wait_for(
        lambda: reviewed(control_plane, fresh) == 1, 30, what="the review of a new token in the audit log"
    )
    assert reviewed(control_plane, stranger) == 1
    assert manager.log_lines(reader) == [] and manager.log_lines(stranger) == []


def test_the_probe_port_serves_no_metrics(secure_manager: tuple[ManagerProcess, Scraper]) -> None:
    manager, _ = secure_manager
    with pytest.raises(urllib.error.HTTPError) as refused:
        manager.metrics()
    assert refused.value.code == 404
    assert manager._get("/readyz") == "ok"


def test_the_chart_defaults_to_secure_metrics() -> None:
    by_kind_name = _render(["metrics.serviceMonitor.enabled=true"])
    args = by_kind_name[("Deployment", "nvcre-manager")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--metrics-secure" in args and "--metrics-bind-address=:8443" in args
    (endpoint,) = by_kind_name[("ServiceMonitor", "nvcre-manager")]["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    reader = by_kind_name[("ClusterRole", "nvcre-metrics-reader")]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    auth = by_kind_name[("ClusterRoleBinding", "nvcre-metrics-auth")]
    assert auth["subjects"] == [{"kind": "ServiceAccount", "name": "nvcre-manager", "namespace": "nvcre"}]


def _install(certs: Path, cert: bytes, key: bytes) -> None:
    """Replace the certificate files as a Secret's update does (new files, then a rename)."""
    for name, data in (("serving.crt", cert), ("serving.key", key)):
        (certs / f".{name}.new").write_bytes(data)
        (certs / f".{name}.new").rename(certs / name)


def served(port: int, context: ssl.SSLContext) -> bytes:
    """The certificate (DER) the metrics port presents."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def test_a_mounted_certificate_is_served_and_reloaded(control_plane: ControlPlane, tmp_path: Path) -> None:
    """With --metrics-cert-path the manager serves that certificate (a client that trusts only its
    CA completes the handshake and, with no token, is refused), and serves a new one written over
    it without a restart."""
    certs = tmp_path / "certs"
    certs.mkdir()
    _install(
        certs, control_plane.certs.serving_cert.read_bytes(), control_plane.certs.serving_key.read_bytes()
    )
    port = free_port()
    process = ManagerProcess(
        control_plane,
        tmp_path,
        name="mounted-cert-manager",
        extra_args=(
            "--metrics-secure",
            f"--metrics-bind-address=127.0.0.1:{port}",
            f"--metrics-cert-path={certs}",
            "--metrics-cert-name=serving.crt",
            "--metrics-cert-key=serving.key",
        ),
    ).start(wait_ready=False)
    try:
        scraper = Scraper(port)
        scraper.context = control_plane.ssl_context()
        assert scraper.get(None) == (401, "Unauthorized")
        renewed, key = self_signed()
        _install(certs, renewed, key)
        want = x509.load_pem_x509_certificate(renewed).public_bytes(serialization.Encoding.DER)
        anyone = Scraper(port).context
        wait_for(lambda: served(port, anyone) == want, 60, what="the renewed certificate on the metrics port")
        assert process.log_lines("metrics certificate reloaded") != []
    finally:
        process.stop()


def test_a_scrape_the_api_server_cannot_review_is_unavailable(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A manager whose API server does not answer refuses a scrape with 503, not a dropped connection."""
    nowhere = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    kubeconfig = tmp_path / "nowhere.kubeconfig"
    kubeconfig.write_text(json.dumps(nowhere))
    port = free_port()
    process = ManagerProcess(
        control_plane,
        tmp_path,
        name="unreachable-manager",
        kubeconfig=kubeconfig,
        extra_args=("--metrics-secure", f"--metrics-bind-address=127.0.0.1:{port}"),
    ).start(wait_ready=False)
    try:
        assert Scraper(port).get("some-token") == (503, "Service Unavailable")
    finally:
        process.stop()


def _render(values: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    helm = Helm(str(binaries.ensure([binaries.HELM]).path(binaries.HELM)))
    rendered = chart.render_chart(helm, repo_root() / "charts" / "nvcre", values)
    return {(d["kind"], d["metadata"]["name"]): d for d in rendered}


def test_the_chart_mounts_a_certificate_secret_or_serves_plain_metrics() -> None:
    mounted = _render(["metrics.certSecret=nvcre-metrics-tls"])
    pod = mounted[("Deployment", "nvcre-manager")]["spec"]["template"]["spec"]
    assert "--metrics-cert-path=/etc/nvcre/metrics-certs" in pod["containers"][0]["args"]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "metrics-certs", "mountPath": "/etc/nvcre/metrics-certs", "readOnly": True}
    ]
    assert pod["volumes"] == [{"name": "metrics-certs", "secret": {"secretName": "nvcre-metrics-tls"}}]

    plain = _render(["metrics.secure=false", "metrics.port=8080", "metrics.serviceMonitor.enabled=true"])
    args = plain[("Deployment", "nvcre-manager")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--metrics-bind-address=:8080" in args
    assert not [a for a in args if a.startswith("--metrics-secure") or a.startswith("--metrics-cert")]
    (endpoint,) = plain[("ServiceMonitor", "nvcre-manager")]["spec"]["endpoints"]
    assert "scheme" not in endpoint and "bearerTokenFile" not in endpoint
