"""One table classifies API errors: transient ones retry with backoff, invalid ones end the object."""

from __future__ import annotations

import asyncio

import httpx2 as httpx
import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status, StatusDetails

from nvcre.objects import ObjectKey
from nvcre.runtime.controller import THROTTLED_MAX_DELAY, Controller, Result, TerminalError
from nvcre.runtime.errors import (
    Disposition,
    classify,
    is_invalid,
    is_throttled,
    retry_after,
    server_message,
)
from nvcre.runtime.queue import WorkQueue


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


def plain_text_429(retry: str | None = "1") -> httpx.HTTPStatusError:
    """What API Priority and Fairness answers: a 429 in plain text, which lightkube does not
    turn into an ``ApiError``."""
    request = httpx.Request("POST", "https://127.0.0.1/apis/nvcre.nvidia.com/v1alpha1/namespaces/ns/jobs")
    headers = {"Content-Type": "text/plain; charset=utf-8", **({"Retry-After": retry} if retry else {})}
    response = httpx.Response(429, headers=headers, text="Too many requests, please try again later.\n")
    return httpx.HTTPStatusError("429 Too Many Requests", request=request, response=response)


def test_a_plain_text_429_is_throttling_with_its_retry_after() -> None:
    assert classify(plain_text_429()) is Disposition.TRANSIENT
    assert is_throttled(plain_text_429()) and is_throttled(api_error(429))
    assert not is_throttled(api_error(503)) and not is_throttled(ValueError("x"))
    assert retry_after(plain_text_429("2")) == 2.0
    assert retry_after(plain_text_429(None)) is None


async def _run_once(raised: BaseException, base_delay: float | None = None) -> list[float]:
    """Run a controller whose reconcile raises ``raised`` once; the backoffs it asked for.
    ``base_delay``: the queue's first backoff (as if the object had already failed often)."""
    ran = asyncio.Event()
    backoffs: list[float] = []

    async def reconcile(key: ObjectKey) -> Result | None:
        ran.set()
        raise raised

    controller = Controller("t", reconcile)
    if base_delay is not None:
        controller.queue = WorkQueue(base_delay=base_delay)
    rate_limited = controller.queue.add_rate_limited

    def spy(key: ObjectKey, *, at_least: float = 0.0, at_most: float | None = None) -> float:
        backoffs.append(rate_limited(key, at_least=at_least, at_most=at_most))
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


@pytest.mark.asyncio
async def test_throttling_does_not_escalate_an_objects_backoff_past_its_cap() -> None:
    # An object that already failed often enough for a 200 s backoff:
    assert await _run_once(api_error(503, "unavailable"), base_delay=200) == [200.0]
    assert await _run_once(api_error(429, "too many requests"), base_delay=200) == [THROTTLED_MAX_DELAY]
    assert await _run_once(api_error(429, "too many requests", retry=30), base_delay=200) == [30.0]
    assert await _run_once(plain_text_429(), base_delay=200) == [THROTTLED_MAX_DELAY]
