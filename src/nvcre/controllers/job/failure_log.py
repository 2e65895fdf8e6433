"""``status.failureLog``: the pod that failed, why, and the tail of its log (spec 8.4)."""

from __future__ import annotations

import logging
from typing import Any

from lightkube import ApiError, AsyncClient

from nvcre.api.v1alpha1.constants import FailureLogReason
from nvcre.health.scheduling import failed_pod
from nvcre.runtime.objects import Obj

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 800
LOG_TAIL_BYTES = 32 * 1024


def entry(pods: list[Obj]) -> tuple[dict[str, Any], Obj | None, str | None]:
    """(the entry without its tail, the pod whose log to read, its container) (pure)."""
    found = failed_pod(pods)
    if found is None:
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


def tail(lines: list[str]) -> str:
    """The last 32 KiB of the log (cut on a character boundary)."""
    return "".join(lines).encode()[-LOG_TAIL_BYTES:].decode(errors="ignore")


async def collect(client: AsyncClient, pods: list[Obj]) -> dict[str, Any]:
    record, pod, container = entry(pods)
    if pod is None:
        return record
    try:
        lines = [
            line
            async for line in client.log(
                pod["metadata"]["name"],
                namespace=pod["metadata"]["namespace"],
                container=container,
                tail_lines=LOG_TAIL_LINES,
            )
        ]
    except ApiError as error:
        log.info("no logs for %s: %s", pod["metadata"]["name"], error)
        return record
    text = tail(lines)
    return {**record, "tail": text} if text else record
