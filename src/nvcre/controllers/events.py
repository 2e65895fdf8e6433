"""Events (events.k8s.io/v1) about nvcre objects, with ``action`` = reason as the reference does."""

from __future__ import annotations

import logging
import os
import uuid
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.resources.events_v1 import Event

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "nvcre.nvidia.com/manager"


class Recorder:
    def __init__(self, client: AsyncClient, instance: str | None = None) -> None:
        self.client = client
        self.instance = instance or os.environ.get("HOSTNAME", "nvcre-manager")

    async def emit(self, obj: dict[str, Any], type_: str, reason: str, note: str) -> None:
        """Best effort: an event that cannot be written is logged, never fatal."""
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
        try:
            await self.client.create(Event.from_dict(event))  # type: ignore[call-overload]
        except ApiError as error:
            log.warning("could not record event %s on %s: %s", reason, meta.get("name"), error)

    async def normal(self, obj: dict[str, Any], reason: str, note: str) -> None:
        await self.emit(obj, "Normal", reason, note)

    async def warning(self, obj: dict[str, Any], reason: str, note: str) -> None:
        await self.emit(obj, "Warning", reason, note)
