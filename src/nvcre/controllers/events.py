"""Events (events.k8s.io/v1) about nvcre objects, with ``action`` = reason as the reference does."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.events_v1 import Event

from nvcre.runtime.errors import is_transient

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "nvcre.nvidia.com/manager"
ATTEMPTS = 6
"""Writes of one event: a throttled or restarting API server (429, 5xx, a reset connection)
must not lose it; the waits between them add up to about 3 s."""


class Recorder:
    def __init__(self, client: AsyncClient, instance: str | None = None) -> None:
        self.client = client
        self.instance = instance or os.environ.get("HOSTNAME", "nvcre-manager")

    async def emit(self, obj: dict[str, Any], type_: str, reason: str, note: str) -> None:
        """Write an event, retrying transient errors; one the server refuses (or that keeps
        failing) is logged, never fatal: the status it describes is already written."""
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
            "eventTime": now,
            "type": type_,
            "reason": reason,
            "action": reason,
            "note": note[:1024],
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.instance,
            "regarding": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
        }
        for attempt in range(ATTEMPTS):
            try:
                await self.client.create(Event.from_dict(event))  # type: ignore[call-overload]
                return
            except Exception as error:  # classified: only transient answers are tried again
                if not is_transient(error) or attempt == ATTEMPTS - 1:
                    log.warning("could not record event %s on %s: %s", reason, meta.get("name"), error)
                    return
            await asyncio.sleep(0.1 * 2**attempt)

    async def normal(self, obj: dict[str, Any], reason: str, note: str) -> None:
        await self.emit(obj, "Normal", reason, note)

    async def warning(self, obj: dict[str, Any], reason: str, note: str) -> None:
        await self.emit(obj, "Warning", reason, note)
