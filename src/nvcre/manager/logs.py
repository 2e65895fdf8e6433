"""Structured logging: one JSON object per line (or plain text for people at a terminal), each
line inside a reconcile saying which controller, object and pass wrote it
(:mod:`nvcre.runtime.logcontext`)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from nvcre.runtime.logcontext import ContextFilter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(context)s%(message)s"


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if getattr(record, "controller", None) is not None:
            entry["controller"] = record.__dict__["controller"]
            entry["key"] = record.__dict__["key"]
            entry["reconcileID"] = record.__dict__["reconcile_id"]
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(fmt: str, level: str) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)
