"""``status.failureLog``: the pod that failed, why, and the tail of its log (spec 8.4).

The tail is streamed with a byte cap: the pod's last :data:`LOG_TAIL_LINES` lines are requested
with ``limitBytes`` :data:`LOG_READ_BYTES`, each line cut at
:data:`~nvcre.measure.lines.MAX_LINE_BYTES`, and only the last :data:`LOG_TAIL_BYTES` are kept.
When those lines hold more than the cap, the server sends their first bytes only; the end of the
log, which says why the pod failed, is then read again with :data:`LOG_TAIL_LINES_AFTER_CUT`
lines.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lightkube import AsyncClient

from nvcre.api.v1alpha1.constants import FailureLogReason
from nvcre.controllers import podlogs
from nvcre.health.scheduling import failed_pod
from nvcre.objects import Obj

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 800
LOG_TAIL_LINES_AFTER_CUT = 20
LOG_TAIL_BYTES = 32 * 1024
"""What ``status.failureLog.tail`` keeps."""
LOG_READ_BYTES = 1024 * 1024
"""The most read of a failed pod's log per request (``limitBytes``)."""

TailReader = Callable[..., Awaitable[tuple[str, bool]]]
""":func:`~nvcre.controllers.podlogs.read_tail`, or a test's stand-in."""


def launcher(pods: list[Obj]) -> Obj | None:
    """The pod that prints the group's result, among those still running: the MPI launcher,
    else the first in :func:`~nvcre.controllers.podlogs.pod_order` (torch's node 0)."""
    running = [p for p in pods if podlogs.pod_phase(p) == "Running"]
    running.sort(key=lambda p: (podlogs.replicated_job(p) != "launcher", podlogs.pod_order(p)))
    return running[0] if running else None


def entry(pods: list[Obj], *, unfinished: str | None = None) -> tuple[dict[str, Any], Obj | None, str | None]:
    """(the entry without its tail, the pod whose log to read, its container) (pure).

    ``unfinished``: the Job was ended while its workload ran (``Timeout``, ``Stalled``): with no
    container failed, the running launcher's log, which shows how far it got, is read instead,
    with that reason."""
    found = failed_pod(pods)
    if found is None:
        running = launcher(pods) if unfinished else None
        if running is not None:
            record = {
                "podName": running["metadata"]["name"],
                "nodeName": (running.get("spec") or {}).get("nodeName", ""),
                "exitCode": 0,
                "reason": unfinished,
            }
            return record, dict(running), podlogs.container_of(running)
        reason = FailureLogReason.POD_NOT_FOUND if not pods else FailureLogReason.NO_TERMINATED_CONTAINER
        return {"podName": "", "nodeName": "", "exitCode": 0, "reason": reason}, None, None
    pod, state = found
    record = {
        "podName": pod["metadata"]["name"],
        "nodeName": (pod.get("spec") or {}).get("nodeName", ""),
        "exitCode": int(state.get("exitCode", 0)),
        "reason": state.get("reason") or "Error",
    }
    return record, dict(pod), state.get("container")


async def collect(
    client: AsyncClient,
    pods: list[Obj],
    read: TailReader = podlogs.read_tail,
    *,
    unfinished: str | None = None,
) -> dict[str, Any]:
    record, pod, container = entry(pods, unfinished=unfinished)
    if pod is None:
        return record
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    text = ""
    try:
        for lines in (LOG_TAIL_LINES, LOG_TAIL_LINES_AFTER_CUT):
            text, cut = await read(
                client, name, namespace, container, lines=lines, keep=LOG_TAIL_BYTES, limit=LOG_READ_BYTES
            )
            if not cut:
                break
    except podlogs.LogsError as error:
        log.info("no logs for %s: %s", name, error)
    return {**record, "tail": text} if text else record


REPORT_BYTES = LOG_READ_BYTES
"""The most read of a completed pod's log whose report judges the Job (``dcgmi diag``'s)."""
REPORT_LINES = 100_000


async def completed_log(
    client: AsyncClient, pods: list[Obj], read: TailReader = podlogs.read_tail
) -> tuple[dict[str, Any], str, str]:
    """(the failure-log entry, the log, why it could not be read: '' when it was) of the pod that
    printed the workload's result, once the workload completed: its whole log, up to
    :data:`REPORT_BYTES`, is its report. Read twice before giving up (a broken stream)."""
    done = sorted(pods, key=lambda p: (podlogs.pod_phase(p) != "Succeeded", podlogs.pod_order(p)))
    if not done:
        none = {"podName": "", "nodeName": "", "exitCode": 0, "reason": FailureLogReason.POD_NOT_FOUND}
        return none, "", "no pod of the workload was found"
    pod = done[0]
    record = {
        "podName": pod["metadata"]["name"],
        "nodeName": (pod.get("spec") or {}).get("nodeName", ""),
        "exitCode": 0,
        "reason": "Completed",
    }
    error = ""
    for _ in range(2):
        try:
            text, _cut = await read(
                client,
                pod["metadata"]["name"],
                pod["metadata"]["namespace"],
                podlogs.container_of(pod),
                lines=REPORT_LINES,
                keep=REPORT_BYTES,
                limit=REPORT_BYTES,
            )
        except podlogs.LogsError as failure:
            error = str(failure)
            continue
        return {**record, "tail": text[-LOG_TAIL_BYTES:]} if text else record, text, ""
    return record, "", error
