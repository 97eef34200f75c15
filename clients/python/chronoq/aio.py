"""The asyncio client: the same surface as Client, with coroutines. It
speaks HTTP/1.1 itself over asyncio streams (no threads): every in-flight
request has its own connection and idle ones are kept for reuse, so a
process can hold hundreds of long-poll takes at once."""

from __future__ import annotations

import asyncio
import datetime as _dt
import random
import ssl
import time
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from ._errors import APIError, TransportError, error_from_answer
from ._ops import DEFAULT_NAMESPACE, Config, Ops, Req
from ._sse import Item, Positions, SSEParser, SubscriptionEnded, _Reconnect
from ._transport import AsyncConn, AsyncPool, encode_request, read_chunk, read_head, tls_context
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
from .client import _UNSET, JobRef, as_put_job, decode, ref, retryable

T = TypeVar("T")


class AsyncClient:
    """The asyncio twin of Client (same arguments, same methods, awaited).
    Use it from one event loop."""

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
        max_idle: int = 256,
    ) -> None:
        self.config = Config.make(base_url, token, namespace, admin_url, timeout, retries, backoff, idempotency_keys)
        self._ops = Ops(self.config)
        self._ssl = tls_context(ssl_context, ca_file)
        self._pool = AsyncPool(self.config.base_url, max_idle, self._ssl)
        self._admin = AsyncPool(self.config.admin_url, 2, self._ssl)

    @property
    def namespace(self) -> str:
        return self.config.namespace

    async def close(self) -> None:
        self._pool.close()
        self._admin.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _do(self, req: Req[T]) -> T:
        pool = self._admin if req.admin else self._pool
        target = req.target(pool.ep.prefix)
        headers = self._ops.headers(req.body is not None)
        attempt = 0
        while True:
            try:
                status, hdrs, raw = await pool.request(
                    req.method, target, req.body, headers, self.config.timeout + req.extra_time
                )
                if 200 <= status < 300 or status in req.ok:
                    return req.parse(status, decode(status, raw))
                err: Exception = error_from_answer(status, raw, hdrs.get("retry-after"))
            except TransportError as e:
                err = e
            if attempt >= self.config.retries or not retryable(req, err):
                raise err
            await asyncio.sleep(self.config.retry_delay(attempt, getattr(err, "retry_after", None)))
            attempt += 1

    # ----------------------------------------------------------------- jobs
    async def put(
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
        return await self._do(self._ops.put(queue, j))

    async def put_batch(self, queue: str, jobs: Sequence[Any]) -> List[PutResult]:
        """Puts up to 1000 jobs, all or nothing; answers in order. Items are
        PutJob, or plain payloads."""
        return await self._do(self._ops.put_batch(queue, [as_put_job(j) for j in jobs]))

    async def take(
        self,
        queues: Union[str, Sequence[str]],
        max: int = 1,
        *,
        wait: Optional[Duration] = None,
        ttr: Optional[Duration] = None,
    ) -> List[Job]:
        """Reserves up to ``max`` jobs from one queue or several (tried in
        order), long-polling up to ``wait`` (≤ 60s). Never retried."""
        return await self._do(self._ops.take(queues, max, wait, ttr))

    async def ack(
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
        return await self._do(self._ops.ack(q, i, r, result, n, next_queue, reschedule_delay, reschedule_at))

    async def nack(self, job: JobRef, error: Optional[str] = None, *, delay: Optional[Duration] = None) -> str:
        """Gives a job back; ``delay`` None lets the queue's backoff decide.
        Answers the new state (delayed, ready or dead)."""
        q, i, r = ref(job)
        return await self._do(self._ops.nack(q, i, r, error, delay))

    async def touch(self, job: JobRef, ttr: Optional[Duration] = None) -> Optional[_dt.datetime]:
        """Extends a reservation; answers its new end."""
        q, i, r = ref(job)
        return await self._do(self._ops.touch(q, i, r, ttr))

    async def bury(self, job: JobRef, reason: Optional[str] = None) -> str:
        q, i, r = ref(job)
        return await self._do(self._ops.bury(q, i, r, reason))

    async def peek(self, queue: str, job_id: str) -> Job:
        return await self._do(self._ops.peek(queue, job_id))

    async def update(
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
        return await self._do(self._ops.update(queue, job_id, payload, payload_bytes, delay, at, priority, tags, receipt))

    async def cancel(self, queue: str, job_id: str, receipt: Optional[str] = None) -> None:
        await self._do(self._ops.cancel(queue, job_id, receipt))

    async def cancel_by_filter(
        self,
        queue: Optional[str] = None,
        *,
        states: Optional[List[str]] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
    ) -> int:
        """Deletes matching jobs of ``queue`` (every queue when None);
        at least one filter is required. Answers how many."""
        return await self._do(self._ops.cancel_by_filter(queue, states, key, tags))

    async def cancel_by_tag(self, tags: Mapping[str, str], queue: Optional[str] = None) -> int:
        return await self.cancel_by_filter(queue, tags=tags)

    async def list_page(
        self,
        queue: str,
        *,
        states: Optional[List[str]] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Page:
        return await self._do(self._ops.list_page(queue, states, key, tags, limit, cursor))

    async def list(
        self,
        queue: str,
        *,
        states: Optional[List[str]] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
        page_size: Optional[int] = None,
    ) -> AsyncIterator[Job]:
        """Every matching job, fetched page by page as the iteration goes."""
        cursor: Optional[str] = None
        while True:
            page = await self.list_page(queue, states=states, key=key, tags=tags, limit=page_size, cursor=cursor)
            for j in page.jobs:
                yield j
            # An empty page with a cursor would loop forever: it ends too.
            if not page.next_cursor or not page.jobs:
                return
            cursor = page.next_cursor

    async def respawn(self, queue: str, *, limit: Optional[int] = None, ids: Optional[Sequence[str]] = None) -> int:
        return await self._do(self._ops.respawn(queue, limit, ids))

    async def purge_dead(self, queue: str) -> int:
        return await self._do(self._ops.purge_dead(queue))

    async def result(self, queue: str, job_id: str, wait: Optional[Duration] = None) -> JobResult:
        """A job's result; ``done`` False when ``wait`` ended first."""
        return await self._do(self._ops.result(queue, job_id, wait))

    async def call(
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
        return await self._do(self._ops.call(queue, j, wait))

    # --------------------------------------------------------------- queues
    async def configure_queue(self, name: str, config: Optional[QueueConfig] = None) -> Queue:
        """Creates the queue or sets the given fields (None ones are kept);
        ``Queue.created`` tells which."""
        return await self._do(self._ops.configure_queue(name, config))

    async def get_queue(self, name: str) -> Queue:
        return await self._do(self._ops.get_queue(name))

    async def list_queues(self) -> List[Queue]:
        out: List[Queue] = []
        cursor: Optional[str] = None
        while True:
            qs, cursor = await self._do(self._ops.list_queues_page(None, cursor))
            out.extend(qs)
            if not cursor or not qs:
                return out

    async def pause(self, name: str) -> Queue:
        return await self._do(self._ops.queue_action(name, "pause"))

    async def resume(self, name: str) -> Queue:
        return await self._do(self._ops.queue_action(name, "resume"))

    async def purge_queue(self, name: str) -> int:
        return await self._do(self._ops.purge_queue(name))

    async def delete_queue(self, name: str) -> None:
        await self._do(self._ops.delete_queue(name))

    # ------------------------------------------------------------- channels
    async def publish(self, channel: str, data: Any) -> PublishResult:
        return await self._do(self._ops.publish(channel, data))

    async def history(
        self,
        channel: str,
        *,
        since: Optional[int] = None,
        epoch: Optional[str] = None,
        limit: Optional[int] = None,
        wait: Optional[Duration] = None,
    ) -> History:
        return await self._do(self._ops.history(channel, since, epoch, limit, wait))

    def subscribe(
        self, channels: Union[str, Sequence[str]], *, positions: Optional[Dict[str, Tuple[str, int]]] = None
    ) -> "AsyncSubscription":
        """An SSE subscription to one or more channels (``name`` or
        ``ns/name``). Iterate it for Publication and Subscribed items; it
        reconnects by itself and recovers from its last position.
        ``positions`` maps a channel to the (epoch, offset) to resume after."""
        chans = [channels] if isinstance(channels, str) else list(channels)
        return AsyncSubscription(self, Positions(chans, self.namespace, positions))

    # ---------------------------------------------------------------- admin
    async def create_namespace(
        self, name: str, *, auto_create_queues: bool = True, channel_history: Optional[Mapping[str, Any]] = None
    ) -> Namespace:
        return await self._do(self._ops.create_namespace(name, auto_create_queues, channel_history))

    async def configure_namespace(
        self, name: str, *, auto_create_queues: Optional[bool] = None, channel_history: Optional[Mapping[str, Any]] = None
    ) -> Namespace:
        return await self._do(self._ops.configure_namespace(name, auto_create_queues, channel_history))

    async def list_namespaces(self) -> List[Namespace]:
        return await self._do(self._ops.list_namespaces())

    async def create_token(self, namespace: str, description: Optional[str] = None) -> str:
        return await self._do(self._ops.create_token(namespace, description))

    async def revoke_token(self, namespace: str, token: str) -> None:
        await self._do(self._ops.revoke_token(namespace, token))

    async def healthz(self) -> None:
        await self._do(self._ops.healthz())



class AsyncSubscription:
    """The asyncio twin of Subscription: ``async for item in sub``."""

    min_delay = 0.5
    max_delay = 30.0
    read_timeout = 60.0

    def __init__(self, client: AsyncClient, positions: Positions) -> None:
        self._client = client
        self.positions = positions
        self._closed = False
        self._conn: Optional[AsyncConn] = None

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()

    async def __aenter__(self) -> "AsyncSubscription":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def __aiter__(self) -> AsyncIterator[Item]:
        attempt = 0
        while not self._closed:
            started = time.monotonic()
            try:
                async for item in self._stream():
                    yield item
            except (TransportError, OSError, ValueError, asyncio.IncompleteReadError, asyncio.TimeoutError, _Reconnect):
                pass
            except APIError as e:
                if e.status in (400, 401, 403, 404):
                    raise
            except SubscriptionEnded:
                return
            if self._closed:
                return
            if time.monotonic() - started > 10:
                attempt = 0
            delay = random.uniform(0, min(self.max_delay, self.min_delay * 2**attempt))
            attempt += 1
            await asyncio.sleep(delay)

    async def _stream(self) -> AsyncIterator[Item]:
        c = self._client
        pool = c._pool
        conn = await asyncio.wait_for(pool.connect(), self.read_timeout)
        self._conn = conn
        try:
            headers = c._ops.headers(False)
            headers["Accept"] = "text/event-stream"
            headers["Cache-Control"] = "no-cache"
            target = pool.ep.prefix + c._ops.sse_target(self.positions.channels, self.positions.last_event_id())
            conn.writer.write(encode_request("GET", target, pool.ep.host_header, headers, None))
            await conn.writer.drain()
            status, hdrs = await asyncio.wait_for(read_head(conn.reader), self.read_timeout)
            chunked = "chunked" in hdrs.get("transfer-encoding", "").lower()
            if status != 200:
                from ._transport import read_body

                raw, _ = await asyncio.wait_for(read_body(conn.reader, "GET", status, hdrs), self.read_timeout)
                raise error_from_answer(status, raw, hdrs.get("retry-after"))
            parser = SSEParser()
            while not self._closed:
                if chunked:
                    chunk = await asyncio.wait_for(read_chunk(conn.reader), self.read_timeout)
                else:
                    chunk = await asyncio.wait_for(conn.reader.read(65536), self.read_timeout)
                if not chunk:
                    return
                for ev in parser.feed(chunk):
                    item = self.positions.handle(ev)
                    if item is not None:
                        yield item
        finally:
            self._conn = None
            conn.close()
