"""What an API error means for the object being reconciled: one table, used by every controller.

A request the server could not serve now (throttled, overloaded, restarting, unreachable) is
*transient*: the reconcile fails and is retried with backoff, and the object is never failed for
it. A request the server refused as wrong (a body the schema or an admission rule rejects, a
permission that is not granted) is *invalid*: the same request can never succeed, so the caller
ends the object as ``Failed`` with the server's message. 404 and 409 are answers a caller acts on
(gone, already exists or changed); they are classified so that a caller that does not expect
them still gets a decision.

Why 403 is invalid (kopf retries it): nvcre's own grants are fixed at install time, so a 403 is
a request the ClusterRole does not allow (a dependency of a kind nvcre may not create, a quota the
object exceeds) and waiting does not change it; the user sees the server's message on the object
instead of an endless retry. 401 (expired credentials are refreshed) and 408 are transient.
"""

from __future__ import annotations

import enum

import httpx2
from lightkube import ApiError


class Disposition(enum.Enum):
    TRANSIENT = "transient"
    """Retry the reconcile with backoff (after ``Retry-After`` when the server gives one)."""
    INVALID = "invalid"
    """The request can never succeed: fail the object with the server's message."""
    NOT_FOUND = "not-found"
    CONFLICT = "conflict"


_BY_CODE: dict[int, Disposition] = {
    400: Disposition.INVALID,
    401: Disposition.TRANSIENT,
    403: Disposition.INVALID,
    404: Disposition.NOT_FOUND,
    405: Disposition.INVALID,
    408: Disposition.TRANSIENT,
    409: Disposition.CONFLICT,
    410: Disposition.TRANSIENT,
    413: Disposition.INVALID,
    415: Disposition.INVALID,
    422: Disposition.INVALID,
    429: Disposition.TRANSIENT,
}
"""Codes with their own meaning; any other 4xx is invalid and any 5xx transient."""


def disposition_of_code(code: int | None) -> Disposition:
    if code is None:
        return Disposition.TRANSIENT  # no status at all: the answer never arrived intact
    if code in _BY_CODE:
        return _BY_CODE[code]
    if 400 <= code < 500:
        return Disposition.INVALID
    return Disposition.TRANSIENT


def _code(error: BaseException) -> int | None:
    """The HTTP status of a server's answer: lightkube raises ``ApiError`` for a JSON Status and
    httpx's ``HTTPStatusError`` for any other body (API Priority and Fairness answers its 429s in
    plain text)."""
    if isinstance(error, ApiError) and error.status.code:
        return int(error.status.code)
    response = getattr(error, "response", None) if isinstance(error, httpx2.HTTPStatusError) else None
    return response.status_code if response is not None else None


def classify(error: BaseException) -> Disposition:
    """The disposition of an error raised by an API call.

    Connection failures and timeouts (``httpx.TransportError``, ``OSError``) are transient. Any
    other exception is not an answer from the server (a bug, a bad local value) and is
    classified transient too, so that it keeps the controller's retry-with-backoff rather than
    failing the object for nvcre's own fault.
    """
    if isinstance(error, httpx2.HTTPStatusError):
        return disposition_of_code(_code(error))
    return Disposition.TRANSIENT


def is_invalid(error: BaseException) -> bool:
    """True when the server refused the request as wrong: retrying the same request cannot help."""
    return classify(error) is Disposition.INVALID


def is_transient(error: BaseException) -> bool:
    return classify(error) is Disposition.TRANSIENT


def is_throttled(error: BaseException) -> bool:
    """True for a 429: the server (its API Priority and Fairness) pacing its clients."""
    return _code(error) == 429


def server_message(error: BaseException) -> str:
    """The server's own words for an error (its Status message), else the exception's text."""
    if isinstance(error, ApiError) and error.status.message:
        return str(error.status.message)
    return str(error) or type(error).__name__


def retry_after(error: BaseException) -> float | None:
    """Seconds the server asked us to wait (429/503 ``Retry-After``), or None."""
    if not isinstance(error, httpx2.HTTPStatusError):
        return None
    details = error.status.details if isinstance(error, ApiError) else None
    if details is not None and details.retryAfterSeconds:
        return float(details.retryAfterSeconds)
    response = getattr(error, "response", None)
    header = response.headers.get("Retry-After") if response is not None else None
    try:
        return float(header) if header else None
    except ValueError:
        return None  # an HTTP date: fall back to the controller's backoff
