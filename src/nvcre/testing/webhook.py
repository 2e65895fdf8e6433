"""A local HTTPS webhook for report-export tests: it answers each POST with the next status of
its script (the last one repeats) and keeps every request it received; a held one answers only
once :meth:`Webhook.release` is called. Also the policy that sends to one, and a Certification
run to its end for it to export."""

from __future__ import annotations

import base64
import http.server
import ssl
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightkube import Client

from nvcre import resources
from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.naming import certification_workflow_name, job_name
from nvcre.testing.builders import Certification, category
from nvcre.testing.certs import CertificateAuthority
from nvcre.testing.inspect import finish_workflow_jobs, wait_true


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Webhook:
    """Serving on 127.0.0.1 with a certificate of its own CA (:attr:`ca_bundle`)."""

    def __init__(self, statuses: Sequence[int], *, held: bool = False) -> None:
        self.statuses = list(statuses)
        self._released = threading.Event()
        if not held:
            self._released.set()
        self.received: list[Received] = []
        self._lock = threading.Lock()
        ca = CertificateAuthority("report-webhook-ca")
        self.ca_bundle = base64.b64encode(ca.pair.cert_pem).decode()
        serving = ca.serving(dns_names=("localhost",), ips=("127.0.0.1",))
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            cert.write_bytes(serving.cert_pem)
            key.write_bytes(serving.key_pem)
            self._context.load_cert_chain(cert, key)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.socket = self._context.wrap_socket(self._server.socket, server_side=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._server.server_address[1]}/reports"

    def requests(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def release(self) -> None:
        """Let a held webhook answer (the requests waiting, and every later one)."""
        self._released.set()

    def _answer(self, received: Received) -> int:
        with self._lock:
            self.received.append(received)
            return self.statuses[min(len(self.received), len(self.statuses)) - 1]

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        webhook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = webhook._answer(Received(self.path, dict(self.headers.items()), body))
                webhook._released.wait()
                answer = f"answered {status}".encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler

    @contextmanager
    def serving(self) -> Iterator[Webhook]:
        thread = threading.Thread(target=self._server.serve_forever, name="webhook", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.release()
            self._server.shutdown()
            self._server.server_close()
            thread.join()


def policy(name: str, namespace: str, webhook: Webhook, **webhook_fields: Any) -> dict[str, Any]:
    """A ReportExportPolicy sending the Certifications of ``namespace`` labelled ``export=<name>``
    to ``webhook`` (trusting its CA), retrying after 1 s, 2 s, 2 s..."""
    return {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "ReportExportPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "source": {"namespaces": [namespace], "selector": {"matchLabels": {"export": name}}},
            "webhook": {"url": webhook.url, "caBundle": webhook.ca_bundle, **webhook_fields},
            "retry": {"initialBackoff": "1s", "maxBackoff": "2s"},
        },
    }


def run_certification(
    kube: Client, namespace: str, pool: str, name: str, export: str, *, failing: bool = False
) -> dict[str, Any]:
    """A one-category Certification labelled ``export=<export>`` on the nodes of ``pool``
    (:func:`~nvcre.testing.builders.new_pool`), run to its end (its TrainJob ended by hand, as
    Trainer would, failed when ``failing``); the ended Certification."""
    cert = (
        Certification(name)
        .namespace(namespace)
        .labels(export=export)
        .pool(pool, **{NodeLabel.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"})
        .allow_missing_data()  # no launcher log here
        .categories(category("communication", "nccl-all-reduce"))
        .obj()
    )
    kube.create(resources.Certification.from_dict(cert))
    workflow = certification_workflow_name(name, "communication", "nccl-all-reduce")
    failed = frozenset({job_name(workflow, "", 1, single=True)} if failing else ())
    finish_workflow_jobs(kube, namespace, workflow, 1, failing=failed)
    ending = "Failed" if failing else "Succeeded"
    return wait_true(kube, resources.Certification, name, namespace, ending, timeout=90)
