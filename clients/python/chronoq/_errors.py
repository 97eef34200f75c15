"""Typed exceptions for the error answers of docs/api.md ("Errors")."""

from __future__ import annotations

import json
import time
from email.utils import parsedate_to_datetime
from typing import Dict, Optional, Type


class ChronoqError(Exception):
    """Base of every error this package raises."""


class TransportError(ChronoqError):
    """The server could not be reached, or the connection broke before an
    answer arrived. ``sent`` is False when the request surely never reached
    the server (connection refused), so repeating it is always safe."""

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class APIError(ChronoqError):
    """An answer the server refused: HTTP status plus docs/api.md's
    ``code`` and ``message`` (for ``bad_request`` the message starts with
    the field path)."""

    status: int
    code: str
    message: str
    #: seconds from the server's Retry-After header (503, 429), else None
    retry_after: Optional[float]

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[float] = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        super().__init__(f"{code}: {message}" if message else code)


class BadRequest(APIError):
    """400 ``bad_request``."""


class Unauthorized(APIError):
    """401 ``unauthorized``: missing or unknown token."""


class Forbidden(APIError):
    """403 ``forbidden``."""


class NotFound(APIError):
    """404: any missing resource (the subclasses name which)."""


class NamespaceNotFound(NotFound):
    """404 ``namespace_not_found``."""


class QueueNotFound(NotFound):
    """404 ``queue_not_found``."""


class JobNotFound(NotFound):
    """404 ``job_not_found``."""


class MethodNotAllowed(APIError):
    """405 ``method_not_allowed``."""


class Conflict(APIError):
    """409 ``conflict``: wrong or stale receipt, job reserved by another
    worker, completed job patched."""


class PayloadTooLarge(APIError):
    """413 ``payload_too_large``."""


class TooManyRequests(APIError):
    """429: the subclasses say why."""


class QueueFull(TooManyRequests):
    """429 ``queue_full``: the queue holds ``max_jobs`` jobs."""


class RateLimited(TooManyRequests):
    """429 ``rate_limited``: too many failed authentications."""


class Unavailable(APIError):
    """503 ``unavailable``: not durable right now or shutting down."""


class InternalError(APIError):
    """500 ``internal``: a server bug."""


class WaitTimeout(ChronoqError):
    """``call`` ended its wait before the job completed. ``job_id`` and
    ``state`` say where the job is; fetch the result later with
    ``result(queue, job_id, wait=...)`` (it is kept a minute)."""

    def __init__(self, job_id: str, state: str) -> None:
        super().__init__(f"the wait ended before job {job_id} completed (state {state})")
        self.job_id = job_id
        self.state = state


_BY_CODE: Dict[str, Type[APIError]] = {
    "bad_request": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "namespace_not_found": NamespaceNotFound,
    "queue_not_found": QueueNotFound,
    "job_not_found": JobNotFound,
    "method_not_allowed": MethodNotAllowed,
    "conflict": Conflict,
    "payload_too_large": PayloadTooLarge,
    "queue_full": QueueFull,
    "rate_limited": RateLimited,
    "unavailable": Unavailable,
    "internal": InternalError,
}

_BY_STATUS: Dict[int, Type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    429: TooManyRequests,
    500: InternalError,
    503: Unavailable,
}

_CODE_OF_STATUS: Dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    500: "internal",
    503: "unavailable",
}


def _retry_after(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def error_from_answer(status: int, body: bytes, retry_after: Optional[str]) -> APIError:
    """Builds the exception for an error answer. A body that is not
    chronoq's error object (a proxy's page) keeps its first 512 bytes as
    the message and gets the status's code."""
    code = ""
    message = ""
    try:
        doc = json.loads(body.decode("utf-8"))
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            code = str(err.get("code") or "")
            message = str(err.get("message") or "")
    except (UnicodeDecodeError, ValueError):
        pass
    if not code:
        code = _CODE_OF_STATUS.get(status, f"http_{status}")
        if not message:
            message = body[:512].decode("utf-8", "replace").strip() or f"HTTP {status}"
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or APIError
    return cls(status, code, message, _retry_after(retry_after))
