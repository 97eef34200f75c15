"""Every /v1 and admin call as a request description, shared by the sync
and asyncio clients: they differ only in how they send it."""

from __future__ import annotations

import base64
import datetime as _dt
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import quote, urlencode, urlsplit

from ._errors import WaitTimeout
from ._types import (
    AckResult,
    Duration,
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
    dumps,
    job_filter_query,
    parse_time,
    query_duration,
    seconds,
    wire_duration,
    wire_time,
)

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:7777"
DEFAULT_ADMIN_URL = "http://127.0.0.1:7778"
DEFAULT_NAMESPACE = "default"
MAX_WAIT = 60.0

Answer = Tuple[int, Any]  # status and decoded JSON body (None when empty)


@dataclass
class Req(Generic[T]):
    """One API call. ``body`` is encoded once so every retry sends the same
    bytes (and the same idempotency keys). ``retry``: safe to send again
    after a failure the server may have seen. ``extra_time`` is a
    long-poll wait added to the per-attempt timeout; ``ok`` lists non-2xx
    statuses that are answers (call's 504)."""

    method: str
    path: str
    parse: Callable[[int, Any], T]
    query: List[Tuple[str, str]] = field(default_factory=list)
    body: Optional[bytes] = None
    retry: bool = False
    extra_time: float = 0.0
    ok: Tuple[int, ...] = ()
    admin: bool = False

    def target(self, prefix: str) -> str:
        t = prefix + self.path
        if self.query:
            t += "?" + urlencode(self.query)
        return t


@dataclass
class Config:
    """Connection settings shared by both clients."""

    base_url: str
    admin_url: str
    token: Optional[str]
    namespace: str
    timeout: float
    retries: int
    backoff: float
    max_backoff: float = 10.0
    #: add a generated idempotency key to puts that carry none
    idempotency_keys: bool = True

    @classmethod
    def make(
        cls,
        base_url: Optional[str],
        token: Optional[str],
        namespace: str,
        admin_url: Optional[str],
        timeout: float,
        retries: int,
        backoff: float,
        idempotency_keys: bool,
    ) -> "Config":
        url = (base_url or os.environ.get("CHRONOQ_URL") or DEFAULT_URL).rstrip("/")
        tok = token if token is not None else (os.environ.get("CHRONOQ_TOKEN") or None)
        admin = (admin_url or os.environ.get("CHRONOQ_ADMIN_URL") or DEFAULT_ADMIN_URL).rstrip("/")
        for u in (url, admin):
            parts = urlsplit(u)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"chronoq: URL {u!r} must be http:// or https:// with a host")
        return cls(url, admin, tok, namespace, timeout, max(retries, 0), backoff, idempotency_keys=idempotency_keys)

    def retry_delay(self, attempt: int, retry_after: Optional[float]) -> float:
        """Exponential with ±20% jitter (so a fleet does not retry in
        lockstep), and at least the server's Retry-After."""
        d: float = min(self.backoff * float(2 ** min(attempt, 16)), self.max_backoff)
        d *= 0.8 + 0.4 * random.random()
        if retry_after is not None and retry_after > d:
            d = min(retry_after, self.max_backoff)
        return d


def _seg(s: str) -> str:
    if not s:
        raise ValueError("chronoq: a name in the path is empty")
    return quote(s, safe="")


def _nothing(status: int, doc: Any) -> None:
    return None


def _deleted(status: int, doc: Any) -> int:
    return int(doc.get("deleted", 0)) if isinstance(doc, dict) else 0


def _job(status: int, doc: Any) -> Job:
    return Job.from_wire(doc)


def _jobs(status: int, doc: Any) -> List[Job]:
    return [Job.from_wire(j) for j in (doc or {}).get("jobs") or []]


def _queue(status: int, doc: Any) -> Queue:
    return Queue.from_wire(doc, created=status == 201)


def _state(status: int, doc: Any) -> str:
    return str((doc or {}).get("state", ""))


def _page(status: int, doc: Any) -> Page:
    return Page([Job.from_wire(j) for j in doc.get("jobs") or []], doc.get("next_cursor") or None)


def _history(status: int, doc: Any) -> History:
    pubs = [
        Publication(int(p.get("offset", 0)), p.get("data"), str(doc.get("epoch", "")), "", parse_time(p.get("time")))
        for p in doc.get("publications") or []
    ]
    return History(pubs, int(doc.get("offset", 0)), str(doc.get("epoch", "")), bool(doc.get("recovered")))


def _check_wait(wait: Optional[Duration]) -> float:
    if wait is None:
        return 0.0
    w = seconds(wait)
    if w > MAX_WAIT:
        raise ValueError(f"wait: at most {MAX_WAIT:.0f}s, got {w}s")
    return w


class Ops:
    """Request builders. A client holds one and runs what it builds."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg

    # paths
    def ns_path(self) -> str:
        return "/v1/ns/" + _seg(self.cfg.namespace)

    def queue_path(self, q: str) -> str:
        return self.ns_path() + "/queues/" + _seg(q)

    def job_path(self, q: str, job_id: str) -> str:
        return self.queue_path(q) + "/jobs/" + _seg(job_id)

    def channel_path(self, ch: str) -> str:
        return self.ns_path() + "/channels/" + _seg(ch)

    # ---------------------------------------------------------------- jobs
    def put(self, queue: str, job: PutJob) -> Req[PutResult]:
        w = job.wire(self.cfg.idempotency_keys)
        # Only a put with an idempotency key is safe to repeat: the server
        # answers the repeat as a duplicate instead of storing it twice.
        return Req(
            "POST",
            self.queue_path(queue) + "/jobs",
            lambda s, d: PutResult.from_wire(d),
            body=dumps(w),
            retry="idempotency_key" in w,
        )

    def put_batch(self, queue: str, jobs: Sequence[PutJob]) -> Req[List[PutResult]]:
        if not jobs:
            raise ValueError("put_batch: jobs is empty")
        wires = []
        for i, j in enumerate(jobs):
            try:
                wires.append(j.wire(self.cfg.idempotency_keys))
            except ValueError as e:
                raise ValueError(f"jobs[{i}]: {e}") from None
        return Req(
            "POST",
            self.queue_path(queue) + "/jobs/batch",
            lambda s, d: [PutResult.from_wire(r) for r in d.get("jobs") or []],
            body=dumps({"jobs": wires}),
            retry=all("idempotency_key" in w for w in wires),
        )

    def take(
        self,
        queues: Union[str, Sequence[str]],
        max: int = 1,
        wait: Optional[Duration] = None,
        ttr: Optional[Duration] = None,
    ) -> Req[List[Job]]:
        # Never retried: a lost answer may have reserved jobs, which then
        # come back after their TTR.
        w = _check_wait(wait)
        body: Dict[str, Any] = {"max": max}
        if w:
            body["wait"] = wire_duration(w)
        if ttr is not None:
            body["ttr"] = wire_duration(ttr)
        if isinstance(queues, str):
            path = self.queue_path(queues) + "/take"
            only = queues
        else:
            if not queues:
                raise ValueError("take: give at least one queue")
            body["queues"] = list(queues)
            path = self.ns_path() + "/take"
            only = queues[0] if len(queues) == 1 else ""

        def parse(s: int, d: Any) -> List[Job]:
            jobs = _jobs(s, d)
            for j in jobs:
                if not j.queue:
                    j.queue = only
            return jobs

        return Req("POST", path, parse, body=dumps(body), extra_time=w)

    def ack(
        self,
        queue: str,
        job_id: str,
        receipt: str,
        result: Any = None,
        next: Optional[PutJob] = None,
        next_queue: Optional[str] = None,
        reschedule_delay: Optional[Duration] = None,
        reschedule_at: Optional[_dt.datetime] = None,
    ) -> Req[AckResult]:
        body: Dict[str, Any] = {"receipt": receipt}
        if result is not None:
            body["result"] = result
        if next is not None:
            # No generated key: the next job is put inside the ack, which
            # the server applies once or not at all.
            n = next.wire(False)
            if next_queue:
                n["queue"] = next_queue
            body["next"] = n
        if reschedule_delay is not None and reschedule_at is not None:
            raise ValueError("reschedule: delay and at are exclusive")
        if reschedule_delay is not None:
            body["reschedule"] = {"delay": wire_duration(reschedule_delay)}
        elif reschedule_at is not None:
            body["reschedule"] = {"at": wire_time(reschedule_at)}

        def parse(s: int, d: Any) -> AckResult:
            return AckResult(str(d.get("id") or job_id), str(d.get("state", "")), d.get("next_id") or None)

        return Req("POST", self.job_path(queue, job_id) + "/ack", parse, body=dumps(body))

    def nack(
        self, queue: str, job_id: str, receipt: str, error: Optional[str] = None, delay: Optional[Duration] = None
    ) -> Req[str]:
        body: Dict[str, Any] = {"receipt": receipt}
        if delay is not None:
            body["delay"] = wire_duration(delay)
        if error:
            body["error"] = error
        return Req("POST", self.job_path(queue, job_id) + "/nack", _state, body=dumps(body))

    def touch(self, queue: str, job_id: str, receipt: str, ttr: Optional[Duration] = None) -> Req[Optional[_dt.datetime]]:
        body: Dict[str, Any] = {"receipt": receipt}
        if ttr is not None:
            body["ttr"] = wire_duration(ttr)
        return Req(
            "POST",
            self.job_path(queue, job_id) + "/touch",
            lambda s, d: parse_time(d.get("reserved_until")),
            body=dumps(body),
        )

    def bury(self, queue: str, job_id: str, receipt: str, reason: Optional[str] = None) -> Req[str]:
        body: Dict[str, Any] = {"receipt": receipt}
        if reason:
            body["reason"] = reason
        return Req("POST", self.job_path(queue, job_id) + "/bury", _state, body=dumps(body))

    def peek(self, queue: str, job_id: str) -> Req[Job]:
        return Req("GET", self.job_path(queue, job_id), _job, retry=True)

    _UNSET: Any = object()

    def update(
        self,
        queue: str,
        job_id: str,
        payload: Any = _UNSET,
        payload_bytes: Optional[bytes] = None,
        delay: Optional[Duration] = None,
        at: Optional[_dt.datetime] = None,
        priority: Optional[int] = None,
        tags: Optional[Mapping[str, str]] = None,
        receipt: Optional[str] = None,
    ) -> Req[Job]:
        body: Dict[str, Any] = {}
        if payload is not Ops._UNSET:
            if payload_bytes is not None:
                raise ValueError("give either payload or payload_bytes, not both")
            body["payload"] = payload
        elif payload_bytes is not None:
            body["payload_base64"] = base64.b64encode(payload_bytes).decode("ascii")
        if delay is not None and at is not None:
            raise ValueError("delay and at are exclusive")
        if delay is not None:
            body["delay"] = wire_duration(delay)
        if at is not None:
            body["at"] = wire_time(at)
        if priority is not None:
            body["priority"] = priority
        if tags is not None:
            body["tags"] = dict(tags)
        if receipt:
            body["receipt"] = receipt
        return Req("PATCH", self.job_path(queue, job_id), _job, body=dumps(body))

    def cancel(self, queue: str, job_id: str, receipt: Optional[str] = None) -> Req[None]:
        q = [("receipt", receipt)] if receipt else []
        return Req("DELETE", self.job_path(queue, job_id), _nothing, query=q, retry=True)

    def cancel_by_filter(
        self,
        queue: Optional[str],
        states: Optional[List[str]] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
    ) -> Req[int]:
        q = job_filter_query(states, key, tags)
        # Refused here as well as by the server: a filterless DELETE on a
        # collection must never go out by accident.
        if not q:
            raise ValueError("cancel_by_filter: give at least one filter (states, key or tags)")
        path = (self.queue_path(queue) if queue else self.ns_path()) + "/jobs"
        return Req("DELETE", path, _deleted, query=q, retry=True)

    def list_page(
        self,
        queue: str,
        states: Optional[List[str]] = None,
        key: Optional[str] = None,
        tags: Optional[Mapping[str, str]] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Req[Page]:
        q = job_filter_query(states, key, tags)
        if limit is not None:
            q.append(("limit", str(limit)))
        if cursor:
            q.append(("cursor", cursor))
        return Req("GET", self.queue_path(queue) + "/jobs", _page, query=q, retry=True)

    def respawn(self, queue: str, limit: Optional[int] = None, ids: Optional[Sequence[str]] = None) -> Req[int]:
        if limit is not None and ids is not None:
            raise ValueError("respawn: limit and ids are exclusive")
        body: Dict[str, Any] = {}
        if limit is not None:
            body["limit"] = limit
        if ids is not None:
            body["ids"] = list(ids)
        return Req(
            "POST",
            self.queue_path(queue) + "/dead/respawn",
            lambda s, d: int(d.get("respawned", 0)),
            body=dumps(body),
        )

    def purge_dead(self, queue: str) -> Req[int]:
        # Not retried: a retry would also delete jobs that died in between.
        return Req("DELETE", self.queue_path(queue) + "/dead", _deleted)

    def result(self, queue: str, job_id: str, wait: Optional[Duration] = None) -> Req[JobResult]:
        w = _check_wait(wait)
        q = [("wait", query_duration(w))] if w else []
        return Req(
            "GET",
            self.job_path(queue, job_id) + "/result",
            lambda s, d: JobResult.from_wire(job_id, s == 200, d or {}),
            query=q,
            retry=True,
            extra_time=w,
        )

    def call(self, queue: str, job: PutJob, wait: Optional[Duration] = None) -> Req[JobResult]:
        # No generated key and no retry: a call is a request for work whose
        # answer we wait for; a repeat would be a second request.
        w = _check_wait(wait)
        body = job.wire(False)
        if w:
            body["wait"] = wire_duration(w)

        def parse(s: int, d: Any) -> JobResult:
            d = d or {}
            if s == 504:
                if not isinstance(d, dict) or not d.get("id"):
                    # A 504 without the server's {"id","state"} is a
                    # gateway's own timeout: nothing says the job was put.
                    from ._errors import APIError

                    raise APIError(504, "gateway_timeout", "gateway timeout without a job id")
                raise WaitTimeout(str(d["id"]), str(d.get("state", "")))
            return JobResult.from_wire("", True, d)

        return Req("POST", self.queue_path(queue) + "/call", parse, body=dumps(body), extra_time=w, ok=(504,))

    # -------------------------------------------------------------- queues
    def configure_queue(self, name: str, config: Optional[QueueConfig] = None) -> Req[Queue]:
        body = (config or QueueConfig()).wire()
        return Req("PUT", self.queue_path(name), _queue, body=dumps(body), retry=True)

    def get_queue(self, name: str) -> Req[Queue]:
        return Req("GET", self.queue_path(name), _queue, retry=True)

    def list_queues_page(self, limit: Optional[int] = None, cursor: Optional[str] = None) -> Req[Tuple[List[Queue], Optional[str]]]:
        q: List[Tuple[str, str]] = []
        if limit is not None:
            q.append(("limit", str(limit)))
        if cursor:
            q.append(("cursor", cursor))
        return Req(
            "GET",
            self.ns_path() + "/queues",
            lambda s, d: ([Queue.from_wire(x) for x in d.get("queues") or []], d.get("next_cursor") or None),
            query=q,
            retry=True,
        )

    def queue_action(self, name: str, action: str) -> Req[Queue]:
        # Pausing or resuming twice is harmless, so these are retried.
        return Req("POST", self.queue_path(name) + "/" + action, _queue, retry=True)

    def purge_queue(self, name: str) -> Req[int]:
        return Req("POST", self.queue_path(name) + "/purge", _deleted)

    def delete_queue(self, name: str) -> Req[None]:
        return Req("DELETE", self.queue_path(name), _nothing, retry=True)

    # ------------------------------------------------------------ channels
    def publish(self, channel: str, data: Any) -> Req[PublishResult]:
        # Not retried: a retry could publish twice.
        return Req(
            "POST",
            self.channel_path(channel) + "/publish",
            lambda s, d: PublishResult(int(d["offset"]), str(d["epoch"])),
            body=dumps({"data": data}),
        )

    def history(
        self,
        channel: str,
        since: Optional[int] = None,
        epoch: Optional[str] = None,
        limit: Optional[int] = None,
        wait: Optional[Duration] = None,
    ) -> Req[History]:
        w = _check_wait(wait)
        q: List[Tuple[str, str]] = []
        if since is not None:
            q.append(("since", str(since)))
        if epoch:
            q.append(("epoch", epoch))
        if limit is not None:
            q.append(("limit", str(limit)))
        if w:
            q.append(("wait", query_duration(w)))
        return Req("GET", self.channel_path(channel) + "/history", _history, query=q, retry=True, extra_time=w)

    # --------------------------------------------------------------- admin
    def create_namespace(
        self, name: str, auto_create_queues: bool = True, channel_history: Optional[Mapping[str, Any]] = None
    ) -> Req[Namespace]:
        body: Dict[str, Any] = {"name": name, "auto_create_queues": auto_create_queues}
        if channel_history is not None:
            body["channel_history"] = dict(channel_history)
        return Req("POST", "/admin/namespaces", _namespace, body=dumps(body), retry=True, admin=True)

    def configure_namespace(
        self, name: str, auto_create_queues: Optional[bool] = None, channel_history: Optional[Mapping[str, Any]] = None
    ) -> Req[Namespace]:
        body: Dict[str, Any] = {}
        if auto_create_queues is not None:
            body["auto_create_queues"] = auto_create_queues
        if channel_history is not None:
            body["channel_history"] = dict(channel_history)
        return Req("PUT", "/admin/namespaces/" + _seg(name), _namespace, body=dumps(body), retry=True, admin=True)

    def list_namespaces(self) -> Req[List[Namespace]]:
        return Req(
            "GET",
            "/admin/namespaces",
            lambda s, d: [_namespace(s, n) for n in d.get("namespaces") or []],
            retry=True,
            admin=True,
        )

    def create_token(self, namespace: str, description: Optional[str] = None) -> Req[str]:
        body = {"description": description} if description else {}
        return Req(
            "POST",
            "/admin/namespaces/" + _seg(namespace) + "/tokens",
            lambda s, d: str(d["token"]),
            body=dumps(body),
            admin=True,
        )

    def revoke_token(self, namespace: str, token: str) -> Req[None]:
        return Req(
            "DELETE", "/admin/namespaces/" + _seg(namespace) + "/tokens/" + _seg(token), _nothing, retry=True, admin=True
        )

    def healthz(self) -> Req[None]:
        return Req("GET", "/healthz", _nothing, retry=True)

    # ----------------------------------------------------------------- SSE
    def sse_target(self, channels: Sequence[str], last_event_id: Optional[str]) -> str:
        q: List[Tuple[str, str]] = [("channel", c) for c in channels]
        if last_event_id:
            q.append(("last_event_id", last_event_id))
        return "/v1/sse?" + urlencode(q)

    def headers(self, has_body: bool) -> Dict[str, str]:
        # Never Origin or Sec-Fetch-Site: in open loopback mode the server
        # refuses requests that look like they came from a web page.
        h = {"Accept": "application/json", "User-Agent": "chronoq-python/0.1"}
        if has_body:
            h["Content-Type"] = "application/json"
        if self.cfg.token:
            h["Authorization"] = "Bearer " + self.cfg.token
        return h


def _namespace(status: int, d: Any) -> Namespace:
    return Namespace(str(d.get("name", "")), bool(d.get("auto_create_queues")), d.get("channel_history"))

