"""A tiny HTTP server for /healthz, /readyz and /metrics (no framework needed for three paths)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

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


async def serve(address: str, ready: Callable[[], bool]) -> asyncio.Server:
    """Serve probes and metrics on ``host:port`` (port 0 picks a free one)."""
    host, _, port = address.rpartition(":")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), timeout=5)
            path = request.split()[1].decode() if len(request.split()) > 1 else "/"
            if path == "/healthz":
                reply = _response("200 OK", b"ok")
            elif path == "/readyz":
                reply = (
                    _response("200 OK", b"ok")
                    if ready()
                    else _response("503 Service Unavailable", b"not ready")
                )
            elif path == "/metrics":
                reply = _response("200 OK", metrics_text(), CONTENT_TYPE_LATEST)
            else:
                reply = _response("404 Not Found", b"not found")
            writer.write(reply)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host or "0.0.0.0", int(port))
