"""A tiny HTTP server for /healthz, /readyz and /metrics (no framework needed for three paths)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

Exposition = Callable[[], bytes]
"""Families in Prometheus' text format, served on ``/metrics`` after ``prometheus_client``'s."""

_EXPOSITIONS: list[Exposition] = []


def add_exposition(render: Exposition) -> None:
    """Serve ``render()`` on ``/metrics`` too: for families of so many series (one per node) that
    formatting each sample at every scrape, as ``prometheus_client`` does, would hold the event
    loop for seconds; ``render`` returns text it formatted once per change. Its families' names
    must be none of ``prometheus_client``'s registry."""
    if render not in _EXPOSITIONS:
        _EXPOSITIONS.append(render)


def metrics_text() -> bytes:
    """The body of ``/metrics``: ``prometheus_client``'s default registry, then each exposition."""
    return generate_latest() + b"".join(render() for render in _EXPOSITIONS)


def _response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


Authorize = Callable[[str | None], Awaitable[int]]
"""The HTTP status of a scrape with this ``Authorization`` header (200 serves it)."""

_REFUSED = {401: "401 Unauthorized", 403: "403 Forbidden", 503: "503 Service Unavailable"}


async def _headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(100):
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers


async def serve(
    address: str,
    ready: Callable[[], bool],
    *,
    probes: bool = True,
    metrics: bool = True,
    authorize: Authorize | None = None,
    tls: ssl.SSLContext | None = None,
) -> asyncio.Server:
    """Serve probes and/or metrics on ``host:port`` (port 0 picks a free one), over ``tls`` when
    given; each ``/metrics`` request is first put to ``authorize`` when given."""
    host, _, port = address.rpartition(":")

    async def reply_to(path: str, reader: asyncio.StreamReader) -> bytes:
        if probes and path == "/healthz":
            return _response("200 OK", b"ok")
        if probes and path == "/readyz":
            return (
                _response("200 OK", b"ok") if ready() else _response("503 Service Unavailable", b"not ready")
            )
        if metrics and path == "/metrics":
            if authorize is not None:
                status = await authorize((await _headers(reader)).get("authorization"))
                if status != 200:
                    refused = _REFUSED.get(status, f"{status} Refused")
                    return _response(refused, refused.partition(" ")[2].encode())
            return _response("200 OK", metrics_text(), CONTENT_TYPE_LATEST)
        return _response("404 Not Found", b"not found")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=5)
            path = request.split()[1].decode() if len(request.split()) > 1 else "/"
            reply = await asyncio.wait_for(reply_to(path.partition("?")[0], reader), timeout=30)
            writer.write(reply)
            await writer.drain()
        except (TimeoutError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host or "0.0.0.0", int(port), ssl=tls)
