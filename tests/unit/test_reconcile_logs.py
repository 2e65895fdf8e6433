"""Every line logged inside a reconcile says which controller, object and pass wrote it, in the
manager's JSON and text formats; lines outside a reconcile carry none of it."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import AsyncIterator, Iterator

import pytest

from nvcre.manager.logs import TEXT_FORMAT, JSONFormatter
from nvcre.objects import ObjectKey
from nvcre.runtime import offload
from nvcre.runtime.controller import Controller, Result
from nvcre.runtime.logcontext import ContextFilter

log = logging.getLogger("nvcre.test.reconcile")


@pytest.fixture
def lines() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """What the manager's JSON and text handlers write, at debug level."""
    json_out, text_out = io.StringIO(), io.StringIO()
    handlers = [logging.StreamHandler(json_out), logging.StreamHandler(text_out)]
    handlers[0].setFormatter(JSONFormatter())
    handlers[1].setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    level = root.level
    for handler in handlers:
        handler.addFilter(ContextFilter())
        root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield json_out, text_out
    finally:
        root.setLevel(level)
        for handler in handlers:
            root.removeHandler(handler)


async def _run(controller: Controller, keys: list[ObjectKey], done: asyncio.Event) -> None:
    task = asyncio.create_task(controller.run())
    for key in keys:
        controller.queue.add(key)
    await asyncio.wait_for(done.wait(), timeout=30)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.asyncio
async def test_each_reconcile_line_names_its_controller_object_and_pass(
    lines: tuple[io.StringIO, io.StringIO],
) -> None:
    seen: list[ObjectKey] = []
    done = asyncio.Event()

    async def reconcile(key: ObjectKey) -> Result | None:
        async def lines() -> AsyncIterator[str]:
            yield key.name

        # the line is logged from an offload worker thread, as a log's parsing is
        await offload.in_batches(lines(), lambda batch: log.info("measured %s", batch[0]))
        seen.append(key)
        if len(seen) == 2:
            done.set()
        return None

    log.info("before any reconcile")
    keys = [ObjectKey("team-a", "bw-1"), ObjectKey("", "gpu-node-007")]
    await _run(Controller("bandwidthmeasurement", reconcile), keys, done)

    entries = [json.loads(line) for line in lines[0].getvalue().splitlines()]
    ours = [e for e in entries if e["logger"] in ("nvcre.test.reconcile", "nvcre.runtime.controller")]
    assert [(e["msg"], e.get("controller"), e.get("key")) for e in ours] == [
        ("before any reconcile", None, None),
        ("Reconciling", "bandwidthmeasurement", "team-a/bw-1"),
        ("measured bw-1", "bandwidthmeasurement", "team-a/bw-1"),
        ("Reconciling", "bandwidthmeasurement", "gpu-node-007"),
        ("measured gpu-node-007", "bandwidthmeasurement", "gpu-node-007"),
    ]
    first, second = ours[1]["reconcileID"], ours[3]["reconcileID"]
    assert ours[2]["reconcileID"] == first and ours[4]["reconcileID"] == second and first != second

    text = [
        line.split(" ", 3)[3]
        for line in lines[1].getvalue().splitlines()
        if " nvcre.test." in line or " nvcre.runtime.controller:" in line
    ]
    assert text[:3] == [
        "nvcre.test.reconcile: before any reconcile",
        f"nvcre.runtime.controller: [bandwidthmeasurement team-a/bw-1 #{first}] Reconciling",
        f"nvcre.test.reconcile: [bandwidthmeasurement team-a/bw-1 #{first}] measured bw-1",
    ]
