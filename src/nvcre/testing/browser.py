"""Open a page in headless Chromium as a person would, for tests and benchmarks.

Drives Debian's ``chromium`` over the Chrome DevTools Protocol on a pipe
(``--remote-debugging-pipe``: NUL-terminated JSON on file descriptors 3 and 4), so nothing beyond
the standard library is needed. :func:`open_page` loads a file, records every network request
and every console message, exception and log entry, measures the load, and takes a PNG of the
whole page; :func:`png_colours` decodes that PNG to count its colours.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

SHOT: Final = {"format": "png", "optimizeForSpeed": True}
"""A fast PNG: light compression, rows left unfiltered (decoded here in a blink)."""
CANDIDATES: Final = ("chromium", "chromium-browser", "google-chrome", "chrome")


def chromium_path() -> str | None:
    """The browser: ``$NVCRE_CHROMIUM``, else the first of :data:`CANDIDATES` on the PATH."""
    configured = os.environ.get("NVCRE_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else shutil.which(configured)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


@dataclass
class PageLoad:
    """What opening a page showed."""

    url: str
    png: bytes = b""
    requests: list[str] = field(default_factory=list)
    """Every URL the page requested, the page itself included."""
    console: list[str] = field(default_factory=list)
    """Console errors and warnings, uncaught exceptions, and log entries of level error or warning
    (a Content-Security-Policy violation is one)."""
    load_seconds: float = 0.0
    """From the navigation to the load event, measured by this process."""
    render_seconds: float = 0.0
    """From the navigation to the first screenshot's pixels (layout and paint done)."""
    dom_ms: float | None = None
    """The load event's end as the browser timed it (ms from navigation start)."""
    height: int = 0

    @property
    def other_requests(self) -> list[str]:
        """The requests besides the page itself."""
        return [u for u in self.requests if u != self.url]


class _Pipe:
    """A CDP connection over Chromium's debugging pipe."""

    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int) -> None:
        self.process = process
        self.to_browser = to_browser
        self.from_browser = from_browser
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise BrowserError("timed out waiting for the browser")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise BrowserError(f"the browser closed its pipe (exit {self.process.poll()})")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str = "", timeout: float = 60
    ) -> Any:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result") or {}
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        for index, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(index)
        deadline = time.monotonic() + timeout
        while True:
            event = self._read_message(deadline)
            if event.get("method") == method:
                return event
            if "method" in event:
                self.events.append(event)


def _high_pipe() -> tuple[int, int]:
    """A pipe whose ends are above 4, so moving the child's ends to 3 and 4 clobbers neither."""
    ends = []
    for fd in os.pipe():
        ends.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(fd)
    return ends[0], ends[1]


@contextmanager
def _browser(width: int, height: int) -> Iterator[_Pipe]:
    binary = chromium_path()
    if binary is None:
        raise BrowserError("no chromium on the PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="nvcre-chromium-") as profile:
        to_browser_r, to_browser_w = _high_pipe()
        from_browser_r, from_browser_w = _high_pipe()
        args = [
            binary,
            "--headless=new",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--mute-audio",
            "--force-color-profile=srgb",
            "--disable-dev-shm-usage",
        ]
        # Chromium's own sandbox refuses root and needs user namespaces, which CI containers
        # often lack; the pages opened here are the tests' own files.
        args.append("--no-sandbox")
        fds = (to_browser_r, from_browser_w)

        def child_fds() -> None:
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        process = subprocess.Popen(
            [*args, "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4, *fds),
            preexec_fn=child_fds,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        pipe = _Pipe(process, to_browser_w, from_browser_r)
        try:
            yield pipe
        finally:
            with suppress(BrowserError, OSError):
                pipe.send("Browser.close", timeout=10)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            os.close(to_browser_w)
            os.close(from_browser_r)


def _console_text(event: dict[str, Any]) -> str | None:
    method, params = event.get("method"), event.get("params") or {}
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
        args = params.get("args") or ()
        return f"console.{params['type']}: " + " ".join(
            str(a.get("value", a.get("description", ""))) for a in args
        )
    if method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails") or {}
        return f"exception: {details.get('text')} {(details.get('exception') or {}).get('description', '')}"
    if method == "Log.entryAdded":
        entry = params.get("entry") or {}
        if entry.get("level") in ("error", "warning"):
            return f"{entry.get('source')} {entry.get('level')}: {entry.get('text')} {entry.get('url', '')}".strip()
    return None


class Chromium:
    """One headless Chromium; :meth:`open` loads each page in a fresh tab."""

    def __init__(self, pipe: _Pipe, width: int, height: int) -> None:
        self.pipe, self.width, self.height = pipe, width, height

    def _metrics(self, session: str, height: int) -> None:
        self.pipe.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )

    def open(
        self,
        path: Path,
        *,
        screenshot: bool = True,
        full_page: bool = True,
        max_height: int = 16384,
        timeout: float = 60,
        fast: bool = True,
    ) -> PageLoad:
        """Load ``path``: its requests and console, the time to its load event and to its first
        screenshot (layout and paint done), and a PNG of the page (``full_page``: all of it, up to
        ``max_height`` px; ``fast``: light compression, else a small file for keeping)."""
        pipe = self.pipe
        url = path.resolve().as_uri()
        load = PageLoad(url=url)
        target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.send(f"{domain}.enable", session=session)
        self._metrics(session, self.height)
        pipe.events.clear()
        started = time.monotonic()
        pipe.send("Page.navigate", {"url": url}, session=session, timeout=timeout)
        pipe.wait_for("Page.loadEventFired", timeout=timeout)
        load.load_seconds = time.monotonic() - started
        viewport = pipe.send("Page.captureScreenshot", SHOT, session=session, timeout=timeout)
        load.render_seconds = time.monotonic() - started
        timing = pipe.send(
            "Runtime.evaluate",
            {
                "expression": "JSON.stringify({load: performance.getEntriesByType('navigation')[0].loadEventEnd,"
                " height: document.documentElement.scrollHeight})",
                "returnByValue": True,
            },
            session=session,
        )
        measured = json.loads((timing.get("result") or {}).get("value") or "{}")
        load.dom_ms = measured.get("load")
        load.height = int(measured.get("height") or self.height)
        if screenshot:
            data = viewport["data"]
            if (full_page and load.height > self.height) or not fast:
                self._metrics(session, min(load.height, max_height) if full_page else self.height)
                shot = SHOT if fast else {"format": "png"}
                data = pipe.send("Page.captureScreenshot", shot, session=session, timeout=timeout)["data"]
            load.png = base64.b64decode(data)
        # whatever arrived meanwhile (a late request or message) counts too
        with suppress(BrowserError):
            pipe.send("Runtime.evaluate", {"expression": "0"}, session=session, timeout=5)
        for event in pipe.events:
            if event.get("sessionId") not in (None, session):
                continue
            if event.get("method") == "Network.requestWillBeSent":
                load.requests.append(str((event.get("params") or {}).get("request", {}).get("url")))
            text = _console_text(event)
            if text is not None:
                load.console.append(text)
        pipe.events.clear()
        with suppress(BrowserError):
            pipe.send("Target.closeTarget", {"targetId": target})
        return load


@contextmanager
def chromium(width: int = 1200, height: int = 900) -> Iterator[Chromium]:
    """A headless Chromium whose pages are ``width`` x ``height`` px."""
    with _browser(width, height) as pipe:
        yield Chromium(pipe, width, height)


def open_page(path: Path, *, width: int = 1200, height: int = 900, **options: Any) -> PageLoad:
    """Load ``path`` in a fresh headless Chromium (:meth:`Chromium.open`)."""
    with chromium(width, height) as browser:
        return browser.open(path, **options)


# --- PNG ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Png:
    width: int
    height: int
    colours: int
    """Distinct pixel colours (RGBA for an RGBA image) of the rows counted."""


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def png_colours(data: bytes, *, stride: int = 1) -> Png:
    """Decode an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes) and count the
    distinct colours of every ``stride``-th row."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    offset, idat, header = 8, b"", b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        offset += 12 + length
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour_type not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour_type}, interlace {interlace})")
    channels = 3 if colour_type == 2 else 4
    raw = zlib.decompress(idat)
    row_bytes = width * channels
    previous = bytearray(row_bytes)
    low7 = int.from_bytes(b"\x7f" * row_bytes)
    high = int.from_bytes(b"\x80" * row_bytes)
    colours: set[bytes | int] = set()
    position = 0
    for y in range(height):
        row_filter = raw[position]
        line = bytearray(raw[position + 1 : position + 1 + row_bytes])
        position += 1 + row_bytes
        if row_filter == 1:
            for i in range(channels, row_bytes):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif row_filter == 2:  # every byte plus the one above, mod 256, as one big-int addition
            a, b = int.from_bytes(line), int.from_bytes(previous)
            line = bytearray((((a & low7) + (b & low7)) ^ ((a ^ b) & high)).to_bytes(row_bytes))
        elif row_filter == 3:
            for i in range(row_bytes):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif row_filter == 4:
            for i in range(row_bytes):
                left = line[i - channels] if i >= channels else 0
                up_left = previous[i - channels] if i >= channels else 0
                line[i] = (line[i] + _paeth(left, previous[i], up_left)) & 0xFF
        elif row_filter != 0:
            raise ValueError(f"bad PNG filter {row_filter}")
        if y % stride == 0 and channels == 4:
            colours.update(memoryview(line).cast("I"))
        elif y % stride == 0:
            colours.update(bytes(line[i : i + 3]) for i in range(0, row_bytes, channels))
        previous = line
    return Png(width, height, len(colours))
