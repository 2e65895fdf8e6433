"""One table classifies API errors: transient ones retry with backoff, invalid ones end the object."""

from __future__ import annotations

import asyncio

import httpx2 as httpx
import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status, StatusDetails

from nvcre.runtime.controller import Controller, Result, TerminalError
from nvcre.runtime.errors import Disposition, classify, is_invalid, retry_after, server_message
from nvcre.runtime.objects import ObjectKey


def api_error(code: int, message: str = "boom", retry: int | None = None) -> ApiError:
    details = StatusDetails(retryAfterSeconds=retry) if retry is not None else None
    return ApiError(status=Status(code=code, message=message, details=details))


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (400, Disposition.INVALID),
        (401, Disposition.TRANSIENT),
        (403, Disposition.INVALID),
        (404, Disposition.NOT_FOUND),
        (405, Disposition.INVALID),
        (408, Disposition.TRANSIENT),
        (409, Disposition.CONFLICT),
        (410, Disposition.TRANSIENT),
        (413, Disposition.INVALID),
        (422, Disposition.INVALID),
        (429, Disposition.TRANSIENT),
        (451, Disposition.INVALID),
        (500, Disposition.TRANSIENT),
        (502, Disposition.TRANSIENT),
        (503, Disposition.TRANSIENT),
        (504, Disposition.TRANSIENT),
        (599, Disposition.TRANSIENT),
    ],
)
def test_status_codes(code: int, expected: Disposition) -> None:
    assert classify(api_error(code)) is expected
    assert is_invalid(api_error(code)) is (expected is Disposition.INVALID)


@pytest.mark.parametrize(
    "error",
    [
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
        httpx.RemoteProtocolError("reset"),
        ConnectionResetError(),
        TimeoutError(),
        ApiError(status=Status(code=None, message="no status")),
    ],
)
def test_no_answer_is_transient(error: BaseException) -> None:
    assert classify(error) is Disposition.TRANSIENT


def test_server_message_and_retry_after() -> None:
    error = api_error(
        422, 'TrainJob.trainer.kubeflow.org "x" is invalid: spec.trainer.numNodes: ...', retry=None
    )
    assert server_message(error).startswith('TrainJob.trainer.kubeflow.org "x" is invalid')
    assert retry_after(api_error(429, retry=7)) == 7.0
    assert retry_after(api_error(500)) is None
    assert retry_after(ValueError("x")) is None


async def _run_once(raised: BaseException) -> list[float]:
    """Run a controller whose reconcile raises ``raised`` once; the backoffs it asked for."""
    ran = asyncio.Event()
    backoffs: list[float] = []

    async def reconcile(key: ObjectKey) -> Result | None:
        ran.set()
        raise raised

    controller = Controller("t", reconcile)
    rate_limited = controller.queue.add_rate_limited

    def spy(key: ObjectKey, *, at_least: float = 0.0) -> float:
        backoffs.append(rate_limited(key, at_least=at_least))
        return backoffs[-1]

    controller.queue.add_rate_limited = spy  # type: ignore[method-assign]
    task = asyncio.create_task(controller.run())
    controller.queue.add(ObjectKey("ns", "a"))
    await ran.wait()
    while controller.queue.processing:
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return backoffs


@pytest.mark.asyncio
async def test_a_terminal_error_is_not_retried() -> None:
    assert await _run_once(TerminalError("Failed: spec.trainer: Invalid value")) == []


@pytest.mark.asyncio
async def test_a_transient_error_backs_off_no_sooner_than_retry_after() -> None:
    assert await _run_once(api_error(429, "too many requests", retry=30)) == [30.0]
    (backoff,) = await _run_once(api_error(503, "unavailable"))
    assert 0 < backoff < 1
