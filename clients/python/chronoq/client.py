"""The synchronous client: every /v1 job, queue and channel operation over
keep-alive http.client connections. Safe to share between threads."""

from __future__ import annotations

import datetime as _dt
import json
import random
import socket
import ssl
import threading
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from ._errors import APIError, TransportError, error_from_answer
from ._ops import DEFAULT_NAMESPACE, Config, Ops, Req
from ._sse import Item, Positions, SSEParser, SubscriptionEnded, _Reconnect
from ._transport import SyncPool, tls_context
from ._types import (
    AckResult,
    Duration,
    History,
    Job,
    JobResult,
    Namespace,
    Page,
    PublishResult,
    PutJob,
    PutResult,
    Queue,
    QueueConfig,
)

T = TypeVar("T")

#: A reserved job to settle: the Job a take answered, or (queue, id, receipt).
JobRef = Union[Job, Tuple[str, str, str]]

_UNSET: Any = Ops._UNSET


def ref(job: JobRef) -> Tuple[str, str, str]:
    if isinstance(job, Job):
        if not job.receipt:
            raise ValueError(f"job {job.id} has no receipt: only a job from take can be settled")
        return job.queue, job.id, job.receipt
    return job


def as_put_job(j: Any) -> PutJob:
    """A batch item: a PutJob, or any other value as its payload."""
    return j if isinstance(j, PutJob) else PutJob(payload=j)


def decode(status: int, raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise TransportError(f"decoding the answer (HTTP {status}): {e}") from e


def retryable(req: Req[Any], err: Exception) -> bool:
    if isinstance(err, APIError):
        return req.retry and err.status in (429, 503)
    if isinstance(err, TransportError):
        return req.retry or not err.sent
    return False


class Client:
    """A chronoq client. ``base_url`` defaults to ``$CHRONOQ_URL`` (else
    http://127.0.0.1:7777) and ``token`` to ``$CHRONOQ_TOKEN``.

    ``timeout`` bounds each HTTP attempt; long-polls (take, result, call,
    history) get their wait added. ``retries`` and ``backoff`` govern
    automatic retries, made only where a repeat is harmless: GET, PUT,
    DELETE, pause/resume, puts carrying an idempotency key (one is
    generated unless ``idempotency_keys=False``), and any request that
    never reached the server."""

    def __init__(
        self,
        base_url: Optional[str] = None,
        *,
        token: Optional[str] = None,
        namespace: str = DEFAULT_NAMESPACE,
        admin_url: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.2,
        idempotency_keys: bool = True,
        ssl_context: Optional[ssl.SSLContext] = None,
        ca_file: Optional[str] = None,
        max_idle: int = 32,
    ) -> None:
        self.config = Config.make(base_url, token, namespace, admin_url, timeout, retries, backoff, idempotency_keys)
        self._ops = Ops(self.config)
        self._ssl = tls_context(ssl_context, ca_file)
        self._pool = SyncPool(self.config.base_url, max_idle, self._ssl)
        self._admin = SyncPool(self.config.admin_url, 2, self._ssl)

    @property
    def namespace(self) -> str:
        return self.config.namespace

    def close(self) -> None:
        self._pool.close()
        self._admin.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _do(self, req: Req[T]) -> T:
        pool = self._admin if req.admin else self._pool
        target = req.target(pool.ep.prefix)
        headers = self._ops.headers(req.body is not None)
        attempt = 0
        while True:
            try:
                status, hdrs, raw = pool.request(req.method, target, req.body, headers, self.config.timeout + req.extra_time)
                if 200 <= status < 300 or status in req.ok:
                    return req.parse(status, decode(status, raw))
                err: Exception = error_from_answer(status, raw, hdrs.get("retry-after"))
            except TransportError as e:
                err = e
            if attempt >= self.config.retries or not retryable(req, err):
                raise err
            time.sleep(self.config.retry_delay(attempt, getattr(err, "retry_after", None)))
            attempt += 1

    # ----------------------------------------------------------------- jobs
    def put(
        self,
        queue: str,
        payload: Any = None,
        *,
        payload_bytes: Optional[bytes] = None,
        id: Optional[str] = None,
        delay: Optional[Duration] = None,
        at: Optional[_dt.datetime] = None,
        priority: Optional[int] = None,
        ttl: Optional[Duration] = None,
        ttr: Optional[Duration] = None,
        tries: Optional[int] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
        reply_to: Optional[str] = None,
        cron: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        notify: Optional[str] = None,
    ) -> PutResult:
        """Puts one job. ``payload`` is any JSON value; ``payload_bytes``
        an opaque payload instead."""
        j = PutJob(payload, payload_bytes, id, delay, at, priority, ttl, ttr, tries, key, tags, reply_to, cron, idempotency_key, notify)
        return self._do(self._ops.put(queue, j))

    def put_batch(self, queue: str, jobs: Sequence[Any]) -> List[PutResult]:
        """Puts up to 1000 jobs, all or nothing; answers in order. Items are
        PutJob, or plain payloads."""
        return self._do(self._ops.put_batch(queue, [as_put_job(j) for j in jobs]))

    def take(
        self,
        queues: Union[str, Sequence[str]],
        max: int = 1,
        *,
        wait: Optional[Duration] = None,
        ttr: Optional[Duration] = None,
    ) -> List[Job]:
        """Reserves up to ``max`` jobs from one queue or several (tried in
        order), long-polling up to ``wait`` (≤ 60s). Never retried."""
        return self._do(self._ops.take(queues, max, wait, ttr))

    def ack(
        self,
        job: JobRef,
        result: Any = None,
        *,
        next: Optional[Any] = None,
        next_queue: Optional[str] = None,
        reschedule_delay: Optional[Duration] = None,
        reschedule_at: Optional[_dt.datetime] = None,
    ) -> AckResult:
        """Finishes a reserved job, optionally with a ``result`` and a
        ``next`` job (PutJob or payload) put atomically with the ack."""
        q, i, r = ref(job)
        n = as_put_job(next) if next is not None else None
        return self._do(self._ops.ack(q, i, r, result, n, next_queue, reschedule_delay, reschedule_at))

    def nack(self, job: JobRef, error: Optional[str] = None, *, delay: Optional[Duration] = None) -> str:
        """Gives a job back; ``delay`` None lets the queue's backoff decide.
        Answers the new state (delayed, ready or dead)."""
        q, i, r = ref(job)
        return self._do(self._ops.nack(q, i, r, error, delay))

    def touch(self, job: JobRef, ttr: Optional[Duration] = None) -> Optional[_dt.datetime]:
        """Extends a reservation; answers its new end."""
        q, i, r = ref(job)
        return self._do(self._ops.touch(q, i, r, ttr))

    def bury(self, job: JobRef, reason: Optional[str] = None) -> str:
        q, i, r = ref(job)
        return self._do(self._ops.bury(q, i, r, reason))

    def peek(self, queue: str, job_id: str) -> Job:
        return self._do(self._ops.peek(queue, job_id))

    def update(
        self,
        queue: str,
        job_id: str,
        *,
        payload: Any = _UNSET,
        payload_bytes: Optional[bytes] = None,
        delay: Optional[Duration] = None,
        at: Optional[_dt.datetime] = None,
        priority: Optional[int] = None,
        tags: Optional[Mapping[str, str]] = None,
        receipt: Optional[str] = None,
    ) -> Job:
        """Changes a job in place (``payload=None`` sets JSON null; leave it
        out to keep the payload)."""
        return self._do(self._ops.update(queue, job_id, payload, payload_bytes, delay, at, priority, tags, receipt))

    def cancel(self, queue: str, job_id: str, receipt: Optional[str] = None) -> None:
        self._do(self._ops.cancel(queue, job_id, receipt))

    def cancel_by_filter(
        self,
        queue: Optional[str] = None,
        *,
        states: Optional[List[str]] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
    ) -> int:
        """Deletes matching jobs of ``queue`` (every queue when None);
        at least one filter is required. Answers how many."""
        return self._do(self._ops.cancel_by_filter(queue, states, key, tags))

    def cancel_by_tag(self, tags: Mapping[str, str], queue: Optional[str] = None) -> int:
        return self.cancel_by_filter(queue, tags=tags)

    def list_page(
        self,
        queue: str,
        *,
        states: Optional[List[str]] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Page:
        return self._do(self._ops.list_page(queue, states, key, tags, limit, cursor))

    def list(
        self,
        queue: str,
        *,
        states: Optional[List[str]] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
        page_size: Optional[int] = None,
    ) -> Iterator[Job]:
        """Every matching job, fetched page by page as the iteration goes."""
        cursor: Optional[str] = None
        while True:
            page = self.list_page(queue, states=states, key=key, tags=tags, limit=page_size, cursor=cursor)
            yield from page.jobs
            # An empty page with a cursor would loop forever: it ends too.
            if not page.next_cursor or not page.jobs:
                return
            cursor = page.next_cursor

    def respawn(self, queue: str, *, limit: Optional[int] = None, ids: Optional[Sequence[str]] = None) -> int:
        return self._do(self._ops.respawn(queue, limit, ids))

    def purge_dead(self, queue: str) -> int:
        return self._do(self._ops.purge_dead(queue))

    def result(self, queue: str, job_id: str, wait: Optional[Duration] = None) -> JobResult:
        """A job's result; ``done`` False when ``wait`` ended first."""
        return self._do(self._ops.result(queue, job_id, wait))

    def call(
        self,
        queue: str,
        payload: Any = None,
        *,
        wait: Duration = 30.0,
        payload_bytes: Optional[bytes] = None,
        id: Optional[str] = None,
        priority: Optional[int] = None,
        ttl: Optional[Duration] = None,
        ttr: Optional[Duration] = None,
        tries: Optional[int] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
    ) -> JobResult:
        """RPC: puts a job and waits up to ``wait`` (≤ 60s) for its result.
        Raises WaitTimeout (with the job id) when the wait ends first."""
        j = PutJob(payload, payload_bytes, id, None, None, priority, ttl, ttr, tries, key, tags)
        return self._do(self._ops.call(queue, j, wait))

    # --------------------------------------------------------------- queues
    def configure_queue(self, name: str, config: Optional[QueueConfig] = None) -> Queue:
        """Creates the queue or sets the given fields (None ones are kept);
        ``Queue.created`` tells which."""
        return self._do(self._ops.configure_queue(name, config))

    def get_queue(self, name: str) -> Queue:
        return self._do(self._ops.get_queue(name))

    def list_queues(self) -> List[Queue]:
        out: List[Queue] = []
        cursor: Optional[str] = None
        while True:
            qs, cursor = self._do(self._ops.list_queues_page(None, cursor))
            out.extend(qs)
            if not cursor or not qs:
                return out

    def pause(self, name: str) -> Queue:
        return self._do(self._ops.queue_action(name, "pause"))

    def resume(self, name: str) -> Queue:
        return self._do(self._ops.queue_action(name, "resume"))

    def purge_queue(self, name: str) -> int:
        return self._do(self._ops.purge_queue(name))

    def delete_queue(self, name: str) -> None:
        self._do(self._ops.delete_queue(name))

    # ------------------------------------------------------------- channels
    def publish(self, channel: str, data: Any) -> PublishResult:
        return self._do(self._ops.publish(channel, data))

    def history(
        self,
        channel: str,
        *,
        since: Optional[int] = None,
        epoch: Optional[str] = None,
        limit: Optional[int] = None,
        wait: Optional[Duration] = None,
    ) -> History:
        return self._do(self._ops.history(channel, since, epoch, limit, wait))

    def subscribe(
        self, channels: Union[str, Sequence[str]], *, positions: Optional[Dict[str, Tuple[str, int]]] = None
    ) -> "Subscription":
        """An SSE subscription to one or more channels (``name`` or
        ``ns/name``). Iterate it for Publication and Subscribed items; it
        reconnects by itself and recovers from its last position.
        ``positions`` maps a channel to the (epoch, offset) to resume after."""
        chans = [channels] if isinstance(channels, str) else list(channels)
        return Subscription(self, Positions(chans, self.namespace, positions))

    # ---------------------------------------------------------------- admin
    def create_namespace(
        self, name: str, *, auto_create_queues: bool = True, channel_history: Optional[Mapping[str, Any]] = None
    ) -> Namespace:
        return self._do(self._ops.create_namespace(name, auto_create_queues, channel_history))

    def configure_namespace(
        self, name: str, *, auto_create_queues: Optional[bool] = None, channel_history: Optional[Mapping[str, Any]] = None
    ) -> Namespace:
        return self._do(self._ops.configure_namespace(name, auto_create_queues, channel_history))

    def list_namespaces(self) -> List[Namespace]:
        return self._do(self._ops.list_namespaces())

    def create_token(self, namespace: str, description: Optional[str] = None) -> str:
        return self._do(self._ops.create_token(namespace, description))

    def revoke_token(self, namespace: str, token: str) -> None:
        self._do(self._ops.revoke_token(namespace, token))

    def healthz(self) -> None:
        self._do(self._ops.healthz())


class Subscription:
    """An SSE stream that survives disconnects: after one it reconnects
    with backoff and full jitter (0.5s doubling to 30s, reset once a
    stream lasted 10s) and resumes with Last-Event-ID built from the
    positions it delivered. Iterate it; ``close()`` (from any thread) ends
    the iteration."""

    min_delay = 0.5
    max_delay = 30.0
    #: no bytes (not even the server's 25s ping) for this long: reconnect
    read_timeout = 60.0

    def __init__(self, client: Client, positions: Positions) -> None:
        self._client = client
        self.positions = positions
        self._closed = threading.Event()
        self._sock: Optional[socket.socket] = None
        self._lock = threading.Lock()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            s = self._sock
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Item]:
        attempt = 0
        while not self._closed.is_set():
            started = time.monotonic()
            try:
                yield from self._stream()
            except (TransportError, OSError, ValueError, _Reconnect):
                pass
            except APIError as e:
                if e.status in (400, 401, 403, 404):
                    raise
            except SubscriptionEnded:
                return
            if self._closed.is_set():
                return
            if time.monotonic() - started > 10:
                attempt = 0
            delay = random.uniform(0, min(self.max_delay, self.min_delay * 2**attempt))
            attempt += 1
            self._closed.wait(delay)

    def _stream(self) -> Iterator[Item]:
        c = self._client
        pool = c._pool
        conn = pool.new_connection(self.read_timeout)
        with self._lock:
            self._sock = conn.sock
        try:
            if self._closed.is_set():
                return
            headers = c._ops.headers(False)
            headers["Accept"] = "text/event-stream"
            headers["Cache-Control"] = "no-cache"
            target = pool.ep.prefix + c._ops.sse_target(self.positions.channels, self.positions.last_event_id())
            try:
                conn.request("GET", target, headers=headers)
                r = conn.getresponse()
            except (OSError, Exception) as e:
                raise TransportError(f"GET /v1/sse: {e}") from e
            if r.status != 200:
                raise error_from_answer(r.status, r.read(), r.getheader("Retry-After"))
            parser = SSEParser()
            while not self._closed.is_set():
                try:
                    chunk = r.read1(65536)
                except (OSError, Exception) as e:
                    raise TransportError(f"reading the event stream: {e}") from e
                if not chunk:
                    return
                for ev in parser.feed(chunk):
                    item = self.positions.handle(ev)
                    if item is not None:
                        yield item
        finally:
            with self._lock:
                self._sock = None
            conn.close()
