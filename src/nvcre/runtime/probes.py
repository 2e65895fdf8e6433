"""A tiny HTTP server for /healthz, /readyz and /metrics (no framework needed for three paths)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest


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
                reply = _response("200 OK", generate_latest(), CONTENT_TYPE_LATEST)
            else:
                reply = _response("404 Not Found", b"not found")
            writer.write(reply)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host or "0.0.0.0", int(port))
