"""Worker: long-polls queues, runs a handler per job, acks or nacks, keeps
reservations alive, and stops gracefully. The loop is asyncio; sync
handlers run in a thread pool of ``concurrency`` threads, async handlers
as tasks on the loop."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import inspect
import logging
import random
import signal
import threading
import traceback
from typing import Any, Awaitable, Callable, Deque, List, Optional, Sequence, Set, Union

from ._errors import APIError, Conflict, NotFound, TransportError
from .aio import AsyncClient
from .client import Client
from ._types import Job, seconds

log = logging.getLogger("chronoq.worker")

Handler = Callable[[Job], Any]

MAX_TAKE = 1000
MAX_ERROR_TEXT = 8 << 10
TRACEBACK_FRAMES = 5
TAKE_RETRY_FIRST = 0.1
TAKE_RETRY_MAX = 5.0
MIN_TOUCH_EVERY = 0.01
DEFAULT_TTR = 30.0


class ReservationLost(Exception):
    """A touch found that the job is no longer reserved by this worker (its
    TTR ran out first, or it was cancelled or purged): the handler's
    outcome cannot be recorded."""


def error_text(e: BaseException) -> str:
    """What a nack records: the exception's type and text first, then the
    innermost frames of its traceback, within the server's bounds."""
    head = f"{type(e).__name__}: {e}"
    tb = traceback.extract_tb(e.__traceback__)[-TRACEBACK_FRAMES:]
    lines = [head]
    if tb:
        lines.append("Traceback (innermost last):")
        lines.extend(f'  {f.filename}:{f.lineno} in {f.name}: {(f.line or "").strip()}' for f in tb)
    text = "\n".join(lines)
    b = text.encode("utf-8")
    if len(b) > MAX_ERROR_TEXT:
        text = b[:MAX_ERROR_TEXT].decode("utf-8", "ignore")
    return text


class _Held:
    def __init__(self, job: Job) -> None:
        self.job = job
        self.keepalive: Optional["asyncio.Task[None]"] = None
        self.handler: Optional["asyncio.Future[Any]"] = None
        self.lost = False


class Worker:
    """Consumes ``queues`` (one name or several, tried in order) with
    ``handler(job)``: a plain function (run in threads) or a coroutine
    function (run as tasks). A return value acks the job (with it as the
    result when not None); an exception nacks it with the exception text
    and a traceback summary, and the queue's backoff decides the retry.

    ``concurrency`` handlers run at once; ``prefetch`` is the take batch
    size (default: ``concurrency``; above it, the extra jobs wait reserved
    in a buffer). Every held job is touched at half its TTR. On SIGTERM or
    SIGINT (or ``stop()``) the worker stops taking, gives back the jobs
    it took but never started (nack, delay 0) and lets running handlers
    finish within ``grace`` seconds; async handlers still running then are
    cancelled and their jobs nacked (a thread cannot be interrupted: sync
    handlers are waited for, their jobs touched meanwhile). When the server
    is away, takes are retried with exponential backoff and full jitter.
    """

    def __init__(
        self,
        queues: Union[str, Sequence[str]],
        handler: Handler,
        *,
        client: Optional[Union[Client, AsyncClient]] = None,
        concurrency: int = 1,
        prefetch: Optional[int] = None,
        wait: float = 20.0,
        ttr: Optional[float] = None,
        grace: float = 30.0,
        handle_signals: bool = True,
        on_error: Optional[Callable[[str, BaseException], None]] = None,
    ) -> None:
        self.queues: List[str] = [queues] if isinstance(queues, str) else list(queues)
        if not self.queues:
            raise ValueError("Worker: give at least one queue")
        if not callable(handler):
            raise TypeError("Worker: handler must be callable")
        if concurrency < 1:
            raise ValueError(f"Worker: concurrency must be at least 1, got {concurrency}")
        self.handler = handler
        self.is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)
        )
        self.concurrency = concurrency
        self.prefetch = min(prefetch if prefetch and prefetch > 0 else concurrency, MAX_TAKE)
        self.wait = seconds(wait)
        self.ttr = ttr
        self.grace = grace
        self.handle_signals = handle_signals
        self.on_error = on_error or (lambda what, e: log.warning("chronoq worker: %s: %s", what, e))
        self._client_arg = client
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None
        self._stop_requested = threading.Event()
        #: jobs acked, nacked after a handler error, and given back unstarted
        self.acked = 0
        self.nacked = 0
        self.released = 0

    # ------------------------------------------------------------- control
    def run(self) -> None:
        """Runs until stopped (signal or ``stop()``); raises when the server
        refuses the takes for good (bad request, auth, unknown namespace)."""
        asyncio.run(self.run_async())

    def stop(self) -> None:
        """Asks the worker to stop; safe from any thread or a handler."""
        self._stop_requested.set()
        loop, ev = self._loop, self._stop
        if loop is not None and ev is not None:
            try:
                loop.call_soon_threadsafe(ev.set)
            except RuntimeError:
                pass

    async def run_async(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._stop_requested.is_set():
            self._stop.set()
        own = not isinstance(self._client_arg, AsyncClient)
        client: AsyncClient
        if isinstance(self._client_arg, AsyncClient):
            client = self._client_arg
        elif isinstance(self._client_arg, Client):
            # The sync client's settings, on connections of this loop.
            c = self._client_arg.config
            client = AsyncClient(
                c.base_url, token=c.token, namespace=c.namespace, admin_url=c.admin_url,
                timeout=c.timeout, retries=c.retries, backoff=c.backoff,
                idempotency_keys=c.idempotency_keys, ssl_context=self._client_arg._ssl,
            )
        else:
            client = AsyncClient()
        installed: List[signal.Signals] = []
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    self._loop.add_signal_handler(sig, self._stop.set)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        pool = None if self.is_async else concurrent.futures.ThreadPoolExecutor(self.concurrency, "chronoq-worker")
        try:
            await self._run(client, pool)
        finally:
            for sig in installed:
                self._loop.remove_signal_handler(sig)
            if pool is not None:
                pool.shutdown(wait=False)
            if own:
                await client.close()

    # ---------------------------------------------------------------- loop
    async def _run(self, client: AsyncClient, pool: Optional[concurrent.futures.ThreadPoolExecutor]) -> None:
        assert self._stop is not None
        stop = self._stop
        n = self.concurrency
        capacity = max(n, self.prefetch)
        buf: Deque[_Held] = collections.deque()
        running: Set["asyncio.Task[None]"] = set()
        changed = asyncio.Event()
        fatal: Optional[BaseException] = None
        retry_delay = 0.0
        stop_wait = asyncio.ensure_future(stop.wait())

        def done(t: "asyncio.Task[None]") -> None:
            running.discard(t)
            changed.set()

        try:
            while not stop.is_set():
                while len(running) < n and buf:
                    t = asyncio.ensure_future(self._process(client, pool, buf.popleft()))
                    running.add(t)
                    t.add_done_callback(done)
                if buf or len(running) >= n:
                    changed.clear()
                    cw = asyncio.ensure_future(changed.wait())
                    await asyncio.wait({cw, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                    cw.cancel()
                    continue
                size = min(self.prefetch, capacity - len(running))
                take = asyncio.ensure_future(client.take(self.queues if len(self.queues) > 1 else self.queues[0], size, wait=self.wait, ttr=self.ttr))
                await asyncio.wait({take, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if not take.done():
                    # Stopping: the take is cut short. A job the server
                    # reserved in that instant comes back after its TTR.
                    take.cancel()
                    try:
                        await take
                    except BaseException:
                        pass
                    break
                err = take.exception()
                if err is None:
                    retry_delay = 0.0
                    for j in take.result():
                        buf.append(self._hold(client, j))
                    continue
                if isinstance(err, APIError) and err.status in (400, 401, 403, 404):
                    self.on_error("take (stopping)", err)
                    fatal = err
                    break
                if not isinstance(err, (APIError, TransportError)):
                    fatal = err
                    break
                self.on_error("take", err)
                # The server is away or busy: back off exponentially with
                # full jitter so a fleet of workers does not come back at once.
                retry_delay = min(max(2 * retry_delay, TAKE_RETRY_FIRST), TAKE_RETRY_MAX)
                try:
                    await asyncio.wait_for(stop.wait(), random.uniform(0, retry_delay))
                except asyncio.TimeoutError:
                    pass
        finally:
            stop_wait.cancel()
            # Give back what was taken but never started.
            await asyncio.gather(*(self._release(client, h) for h in buf))
            buf.clear()
            if running:
                _, pending = await asyncio.wait(set(running), timeout=self.grace)
                if pending:
                    if self.is_async:
                        for t in pending:
                            t.cancel()
                    # A thread cannot be interrupted: sync handlers are
                    # waited for (their jobs stay touched meanwhile).
                    await asyncio.wait(pending)
        if fatal is not None:
            raise fatal

    def _hold(self, client: AsyncClient, job: Job) -> _Held:
        h = _Held(job)
        h.keepalive = asyncio.ensure_future(self._keepalive(client, h))
        return h

    async def _keepalive(self, client: AsyncClient, h: _Held) -> None:
        """Touches the job every half TTR, counted on the local clock from
        the last touch, so server clock skew does not matter."""
        ttr = h.job.ttr if h.job.ttr > 0 else DEFAULT_TTR
        every = max(ttr / 2, MIN_TOUCH_EVERY)
        nxt = every
        while True:
            await asyncio.sleep(nxt)
            try:
                await client.touch(h.job)
                nxt = every
            except (Conflict, NotFound) as e:
                h.lost = True
                self.on_error(f"touch {h.job.queue}/{h.job.id}", ReservationLost(str(e)))
                if h.handler is not None and self.is_async:
                    h.handler.cancel()
                return
            except (APIError, TransportError) as e:
                # Try again well before the reservation ends.
                self.on_error(f"touch {h.job.queue}/{h.job.id}", e)
                nxt = max(ttr / 8, MIN_TOUCH_EVERY)

    async def _finish_keepalive(self, h: _Held) -> None:
        if h.keepalive is not None:
            h.keepalive.cancel()
            try:
                await h.keepalive
            except BaseException:
                pass

    async def _process(self, client: AsyncClient, pool: Optional[concurrent.futures.ThreadPoolExecutor], h: _Held) -> None:
        job = h.job
        result: Any = None
        failure: Optional[BaseException] = None
        fut: "asyncio.Future[Any]"
        if self.is_async:
            fut = asyncio.ensure_future(self.handler(job))
        else:
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(pool, functools.partial(self.handler, job))
        h.handler = fut
        try:
            result = await asyncio.shield(fut)
        except asyncio.CancelledError:
            if fut.cancelled() and h.lost:
                # The keep-alive cancelled it: the reservation is gone.
                await self._finish_keepalive(h)
                return
            # Our own task was cancelled (the grace period ran out): cancel
            # the handler too, and nack.
            fut.cancel()
            failure = asyncio.CancelledError("handler cancelled: the grace period after stop expired")
        except Exception as e:
            failure = e
        await self._finish_keepalive(h)
        if h.lost:
            self.on_error(f"job {job.queue}/{job.id}", ReservationLost("the outcome was not recorded"))
            return
        if failure is not None:
            text = error_text(failure)
            ok = await self._settle(client, job, lambda: client.nack(job, text))
            if ok:
                self.nacked += 1
        else:
            ok = await self._settle(client, job, lambda: client.ack(job, result))
            if ok:
                self.acked += 1

    async def _settle(self, client: AsyncClient, job: Job, op: Callable[[], Awaitable[Any]]) -> bool:
        """Runs an ack or nack, repeating it while the server is away for
        up to the job's TTR: a repeat is harmless (a settled receipt is
        refused with 409/404, nothing changes twice), and giving up early
        would make the job run again after its TTR."""
        deadline = asyncio.get_running_loop().time() + max(job.ttr or DEFAULT_TTR, 5.0)
        delay = TAKE_RETRY_FIRST
        attempt = 0
        while True:
            try:
                await op()
                return True
            except (Conflict, NotFound) as e:
                if attempt == 0:
                    self.on_error(f"settle {job.queue}/{job.id}", e)
                # A repeat refused: the first attempt went through.
                return attempt > 0
            except (APIError, TransportError) as e:
                retry = isinstance(e, TransportError) or e.status in (429, 503)
                if not retry or asyncio.get_running_loop().time() + delay > deadline:
                    self.on_error(f"settle {job.queue}/{job.id}", e)
                    return False
            attempt += 1
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, TAKE_RETRY_MAX)

    async def _release(self, client: AsyncClient, h: _Held) -> None:
        await self._finish_keepalive(h)
        j = h.job
        ok = await self._settle(client, j, lambda: client.nack(j, "released unstarted: the worker stopped", delay=0))
        if ok:
            self.released += 1
