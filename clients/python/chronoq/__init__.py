"""chronoq: the Python client of the chronoq job-queue server.

Standard library only. ``Client`` (sync, thread-safe) and ``AsyncClient``
(asyncio) cover every /v1 job, queue and channel operation of
docs/api.md; ``Worker`` consumes jobs with sync or async handlers.
"""

from ._errors import (
    APIError,
    BadRequest,
    ChronoqError,
    Conflict,
    Forbidden,
    InternalError,
    JobNotFound,
    MethodNotAllowed,
    NamespaceNotFound,
    NotFound,
    PayloadTooLarge,
    QueueFull,
    QueueNotFound,
    RateLimited,
    TooManyRequests,
    TransportError,
    Unauthorized,
    Unavailable,
    WaitTimeout,
)
from ._sse import SSEEvent, SSEParser, SubscriptionEnded
from ._types import (
    AckResult,
    Backoff,
    History,
    Job,
    JobResult,
    Namespace,
    Page,
    Publication,
    PublishResult,
    PutJob,
    PutResult,
    Queue,
    QueueConfig,
    Subscribed,
)
from .aio import AsyncClient, AsyncSubscription
from .client import Client, Subscription
from .worker import ReservationLost, Worker

__all__ = [
    "APIError",
    "AckResult",
    "AsyncClient",
    "AsyncSubscription",
    "Backoff",
    "BadRequest",
    "ChronoqError",
    "Client",
    "Conflict",
    "Forbidden",
    "History",
    "InternalError",
    "Job",
    "JobNotFound",
    "JobResult",
    "MethodNotAllowed",
    "Namespace",
    "NamespaceNotFound",
    "NotFound",
    "Page",
    "PayloadTooLarge",
    "Publication",
    "PublishResult",
    "PutJob",
    "PutResult",
    "Queue",
    "QueueConfig",
    "QueueFull",
    "QueueNotFound",
    "RateLimited",
    "ReservationLost",
    "SSEEvent",
    "SSEParser",
    "Subscribed",
    "Subscription",
    "SubscriptionEnded",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "WaitTimeout",
    "Worker",
]

__version__ = "0.1.0"
