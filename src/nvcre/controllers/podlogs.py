"""Reading a Job's workload logs through the Kubernetes API, line by line (the measurements' shell).

Two halves. Pure: :func:`workload_pods` picks a Job's pods of one JobSet replicated job in a
stable order (JobSet job index, then completion index, then name), so ``first`` and ``last``
of a LogProfile's worker strategy name the same pod on every read; :func:`container_of` picks
the container to read. Shell: :func:`stream_lines` streams one container's log with
``timestamps=true`` (every line starts with the kubelet's RFC 3339 time) and optional
``sinceTime`` / ``tailLines``, yielding one line at a time from the HTTP stream, cut by
:class:`~nvcre.measure.lines.LineSplitter`: memory is bounded by
:data:`~nvcre.measure.lines.MAX_LINE_BYTES` whatever the log's size. Every failure to read is a
:class:`LogsError`, so a caller tells "no log yet" from a bug.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import httpx2 as httpx
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import PodLog

from nvcre.api.v1alpha1.constants import Label
from nvcre.measure.lines import LineSplitter, Tail
from nvcre.objects import Obj

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"

Which = Literal["first", "last"]


class LogReader(Protocol):
    """What :func:`stream_lines` is, for a controller that takes another (a test's) in its place."""

    def __call__(
        self,
        client: AsyncClient,
        pod: str,
        namespace: str,
        container: str | None,
        *,
        since_time: datetime | None = None,
        tail_lines: int | None = None,
        still_writing: bool = False,
    ) -> AsyncIterator[str]: ...


class LogsError(Exception):
    """The log could not be read (pod gone or not started, API error, connection broken)."""


# --- pure ----------------------------------------------------------------------------------------


def _labels(pod: Obj) -> dict[str, str]:
    return pod.get("metadata", {}).get("labels") or {}


def _index(value: str | None) -> int:
    return int(value) if value and value.isdecimal() else 0


def replicated_job(pod: Obj) -> str | None:
    """The JobSet replicated job the pod belongs to (``launcher``, ``node``), if any."""
    return _labels(pod).get(REPLICATED_JOB_LABEL)


def pod_order(pod: Obj) -> tuple[int, int, str]:
    """Sort key: JobSet job index, completion index, then name (stable across reads)."""
    labels = _labels(pod)
    return (
        _index(labels.get(JOB_INDEX_LABEL)),
        _index(labels.get(COMPLETION_INDEX_LABEL)),
        str(pod.get("metadata", {}).get("name", "")),
    )


def workload_pods(pods: Iterable[Obj], job: str, replicated_job: str | None = None) -> list[Obj]:
    """The pods of nvcre Job ``job`` (label ``nvcre.nvidia.com/job``), of ``replicated_job`` if
    given (JobSet's ``replicatedjob-name`` label), in :func:`pod_order`."""
    chosen = [
        p
        for p in pods
        if _labels(p).get(Label.JOB) == job
        and (replicated_job is None or _labels(p).get(REPLICATED_JOB_LABEL) == replicated_job)
    ]
    return sorted(chosen, key=pod_order)


def pick(pods: list[Obj], which: Which = "first") -> Obj | None:
    """The ``first`` or ``last`` of pods already in :func:`pod_order`; None when there are none."""
    if not pods:
        return None
    return pods[0] if which == "first" else pods[-1]


def container_of(pod: Obj, wanted: str | None = None) -> str | None:
    """The container to read: ``wanted`` when given; else the one named after the pod's
    replicated job (the catalog's ``launcher`` / ``node``); else the first. None: no containers."""
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or () if c.get("name")]
    if wanted:
        return wanted
    own = replicated_job(pod)
    if own in names:
        return own
    return names[0] if names else None


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def rfc3339(moment: datetime) -> str:
    """``sinceTime`` as the API server reads it (RFC 3339, UTC; it keeps whole seconds only)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_KUBELET_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}) ", re.ASCII
)


def line_time(line: str) -> int | None:
    """The kubelet time at the start of a ``timestamps=true`` line, in nanoseconds since the epoch
    (RFC 3339 with ``Z`` or an offset; nanoseconds kept, which ``datetime`` cannot); None if absent.
    """
    match = _KUBELET_TIME.match(line)
    if match is None:
        return None
    whole, fraction, zone = match.groups()
    try:
        moment = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone))
    except ValueError:
        return None
    return int(moment.timestamp()) * 1_000_000_000 + int((fraction or "0").ljust(9, "0"))


def format_line_time(nanos: int) -> str:
    """:func:`line_time`'s value as RFC 3339 in UTC with nine fractional digits."""
    seconds, fraction = divmod(nanos, 1_000_000_000)
    return f"{datetime.fromtimestamp(seconds, UTC).strftime('%Y-%m-%dT%H:%M:%S')}.{fraction:09d}Z"


def line_datetime(nanos: int) -> datetime:
    """:func:`line_time`'s value as a UTC ``datetime`` (microseconds kept)."""
    seconds, fraction = divmod(nanos, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=fraction // 1000)


def since(nanos: int) -> datetime:
    """The ``sinceTime`` that returns every line at or after ``nanos`` (the API keeps whole seconds)."""
    return datetime.fromtimestamp(nanos // 1_000_000_000, UTC)


# --- shell ---------------------------------------------------------------------------------------


async def _chunks(
    client: AsyncClient, pod: str, namespace: str, params: dict[str, Any]
) -> AsyncIterator[bytes]:
    """The bytes of one ``pods/log`` request (``params`` as the API names them), as they arrive."""
    # lightkube's own ``log`` reads a non-following response whole; build the same request, streamed.
    http = client._client
    request = http.build_adapter_request(
        http.prepare_request("get", PodLog, name=pod, namespace=namespace, params=params)
    )
    try:
        response = await http.send(request, stream=True)  # type: ignore[no-untyped-call]
    except httpx.HTTPError as error:
        raise LogsError(f"log of pod {namespace}/{pod}: {error}") from error
    try:
        if response.is_error:
            await response.aread()
            try:
                http.raise_for_status(response)  # type: ignore[no-untyped-call]
            except ApiError as error:
                raise LogsError(f"log of pod {namespace}/{pod}: {error.status.message}") from error
        async for chunk in response.aiter_bytes():
            yield chunk
    except httpx.HTTPError as error:
        raise LogsError(f"log of pod {namespace}/{pod}: {error}") from error
    finally:
        await response.aclose()


async def stream_lines(
    client: AsyncClient,
    pod: str,
    namespace: str,
    container: str | None,
    *,
    since_time: datetime | None = None,
    tail_lines: int | None = None,
    still_writing: bool = False,
) -> AsyncIterator[str]:
    """Yield the lines of one container's log (``timestamps=true``), streamed; see module doc.

    A last line without a newline is yielded too, unless ``still_writing``: the kubelet serves
    the line a running container is writing as far as it got, and a reader that took it (and
    moved its cursor past its time) would never read the whole line; the next read gets it.
    Raises :class:`LogsError` when the log cannot be read or the stream breaks (lines yielded
    before that stay valid).
    """
    params: dict[str, Any] = {
        "timestamps": "true",
        "container": container,
        "sinceTime": rfc3339(since_time) if since_time else None,
        "tailLines": tail_lines,
    }
    splitter = LineSplitter()
    async for chunk in _chunks(client, pod, namespace, params):
        for line in splitter.feed(chunk):
            yield line
    if not still_writing:
        for line in splitter.close():
            yield line


async def read_tail(
    client: AsyncClient, pod: str, namespace: str, container: str | None, *, lines: int, keep: int, limit: int
) -> tuple[str, bool]:
    """The last ``keep`` bytes of the container's last ``lines`` lines (without timestamps), and
    whether the read stopped at ``limit`` bytes (``limitBytes``: the API server sends the window's
    first bytes, so its end is then missing). Memory: ``keep`` plus one cut line."""
    params: dict[str, Any] = {"container": container, "tailLines": lines, "limitBytes": limit}
    tail, splitter, read = Tail(keep), LineSplitter(), 0
    async for chunk in _chunks(client, pod, namespace, params):
        read += len(chunk)
        for line in splitter.feed(chunk):
            tail.add(line)
    for line in splitter.close():
        tail.add(line)
    return tail.text(), read >= limit
