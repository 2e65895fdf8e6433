"""A local HTTPS webhook for report-export tests: it answers each POST with the next status of
its script (the last one repeats) and keeps every request it received."""

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

from nvcre.testing.certs import CertificateAuthority


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Webhook:
    """Serving on 127.0.0.1 with a certificate of its own CA (:attr:`ca_bundle`)."""

    def __init__(self, statuses: Sequence[int]) -> None:
        self.statuses = list(statuses)
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
            self._server.shutdown()
            self._server.server_close()
            thread.join()
