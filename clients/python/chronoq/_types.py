"""Values of docs/api.md: jobs, queues, answers, and their wire forms."""

from __future__ import annotations

import base64
import datetime as _dt
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

#: A duration given to the client: seconds (int or float) or a timedelta.
Duration = Union[int, float, _dt.timedelta]

STATE_DELAYED = "delayed"
STATE_READY = "ready"
STATE_BLOCKED = "blocked"
STATE_RESERVED = "reserved"
STATE_DEAD = "dead"
STATE_COMPLETED = "completed"


def seconds(d: Duration) -> float:
    """A Duration as seconds; negative durations are refused here because
    the server refuses them too (docs/api.md, Conventions)."""
    s = d.total_seconds() if isinstance(d, _dt.timedelta) else float(d)
    if s != s or s < 0:
        raise ValueError(f"duration must be a non-negative number of seconds, got {d!r}")
    return s


def wire_duration(d: Duration) -> Union[int, float]:
    """The JSON form of a duration: a number of seconds, which the server
    reads exactly as it reads "1.5s"."""
    s = seconds(d)
    return int(s) if s == int(s) else s


def query_duration(d: Duration) -> str:
    s = wire_duration(d)
    return str(s)


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DUR_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(v: Any) -> float:
    """Reads a duration of an answer: Go's duration string ("1h0m0s",
    "250ms") or a number of seconds."""
    if v is None or v == "":
        return 0.0
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v).strip()
    sign = 1.0
    if s[:1] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    total = 0.0
    pos = 0
    for m in _DUR_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise ValueError(f"invalid duration {v!r}")
    return sign * total


def wire_time(t: _dt.datetime) -> str:
    """RFC 3339 for the server; a naive datetime is taken as UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.astimezone(_dt.timezone.utc).isoformat().replace("+00:00", "Z")


_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)$")


def parse_time(v: Any) -> Optional[_dt.datetime]:
    """Reads an answer's RFC 3339 time (any number of fraction digits, which
    Python 3.9's fromisoformat does not accept) as an aware datetime."""
    if not v:
        return None
    m = _TIME.match(str(v))
    if not m:
        raise ValueError(f"invalid time {v!r}")
    y, mo, d, h, mi, s, frac, tz = m.groups()
    us = int((frac or "0")[:6].ljust(6, "0"))
    if tz in ("Z", "z"):
        tzinfo = _dt.timezone.utc
    else:
        off = _dt.timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
        tzinfo = _dt.timezone(off if tz[0] == "+" else -off)
    return _dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), us, tzinfo=tzinfo)


def dumps(v: Any) -> bytes:
    """Compact JSON, UTF-8, non-ASCII kept as is (the server stores a
    payload as the text it receives)."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def new_idempotency_key() -> str:
    """Random, so that only a retry of the same call ever repeats it."""
    return "cq-" + secrets.token_hex(16)


def _b64(v: Any) -> Optional[bytes]:
    if v is None:
        return None
    return base64.b64decode(str(v), validate=True)


@dataclass
class Job:
    """A job as the server answers it (take, peek, list, update).
    ``payload`` is the decoded JSON payload; a job put with bytes has
    ``payload`` None and ``payload_bytes`` set. Durations are seconds."""

    id: str
    namespace: str = ""
    queue: str = ""
    state: str = ""
    payload: Any = None
    payload_bytes: Optional[bytes] = None
    priority: int = 0
    key: str = ""
    tags: Dict[str, str] = field(default_factory=dict)
    created_at: Optional[_dt.datetime] = None
    activate_at: Optional[_dt.datetime] = None
    expire_at: Optional[_dt.datetime] = None
    ttr: float = 0.0
    tries: int = 0
    attempt: int = 0
    receipt: str = ""
    reserved_until: Optional[_dt.datetime] = None
    last_error: str = ""
    reply_to: str = ""
    notify: str = ""
    cron: str = ""
    result: Any = None
    result_bytes: Optional[bytes] = None

    @property
    def binary(self) -> bool:
        return self.payload_bytes is not None

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "Job":
        return cls(
            id=str(w.get("id", "")),
            namespace=str(w.get("namespace", "")),
            queue=str(w.get("queue", "")),
            state=str(w.get("state", "")),
            payload=w.get("payload"),
            payload_bytes=_b64(w.get("payload_base64")),
            priority=int(w.get("priority", 0)),
            key=str(w.get("key", "")),
            tags=dict(w.get("tags") or {}),
            created_at=parse_time(w.get("created_at")),
            activate_at=parse_time(w.get("activate_at")),
            expire_at=parse_time(w.get("expire_at")),
            ttr=parse_duration(w.get("ttr")),
            tries=int(w.get("tries", 0)),
            attempt=int(w.get("attempt", 0)),
            receipt=str(w.get("receipt", "")),
            reserved_until=parse_time(w.get("reserved_until")),
            last_error=str(w.get("last_error", "")),
            reply_to=str(w.get("reply_to", "")),
            notify=str(w.get("notify", "")),
            cron=str(w.get("cron", "")),
            result=w.get("result"),
            result_bytes=_b64(w.get("result_base64")),
        )


@dataclass
class PutJob:
    """One job to put (``put``'s keyword arguments, for ``put_batch`` and
    ``next`` on ack). ``payload`` is any JSON value (None is JSON null);
    ``payload_bytes`` an opaque payload instead. ``idempotency_key`` None
    gets a generated one where the client adds them (put, put_batch)."""

    payload: Any = None
    payload_bytes: Optional[bytes] = None
    id: Optional[str] = None
    delay: Optional[Duration] = None
    at: Optional[_dt.datetime] = None
    priority: Optional[int] = None
    ttl: Optional[Duration] = None
    ttr: Optional[Duration] = None
    tries: Optional[int] = None
    key: Optional[str] = None
    tags: Optional[Mapping[str, str]] = None
    reply_to: Optional[str] = None
    cron: Optional[str] = None
    idempotency_key: Optional[str] = None
    notify: Optional[str] = None

    def wire(self, generate_key: bool) -> Dict[str, Any]:
        w: Dict[str, Any] = {}
        if self.payload_bytes is not None:
            if self.payload is not None:
                raise ValueError("give either payload or payload_bytes, not both")
            w["payload_base64"] = base64.b64encode(self.payload_bytes).decode("ascii")
        else:
            w["payload"] = self.payload
        if self.delay is not None and self.at is not None:
            raise ValueError("delay and at are exclusive")
        for name in ("id", "key", "reply_to", "cron", "notify", "priority", "tries"):
            v = getattr(self, name)
            if v is not None:
                w[name] = v
        for name in ("delay", "ttl", "ttr"):
            v = getattr(self, name)
            if v is not None:
                w[name] = wire_duration(v)
        if self.at is not None:
            w["at"] = wire_time(self.at)
        if self.tags is not None:
            w["tags"] = dict(self.tags)
        key = self.idempotency_key
        if key is None and generate_key:
            key = new_idempotency_key()
        if key:
            w["idempotency_key"] = key
        return w


@dataclass
class PutResult:
    id: str
    state: str
    activate_at: Optional[_dt.datetime]
    duplicate: bool

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "PutResult":
        return cls(str(w.get("id", "")), str(w.get("state", "")), parse_time(w.get("activate_at")), bool(w.get("duplicate")))


@dataclass
class AckResult:
    """``state``: completed, deleted or delayed; ``next_id`` when ack had
    ``next``."""

    id: str
    state: str
    next_id: Optional[str] = None


@dataclass
class JobResult:
    """The outcome of ``result`` and ``call``. ``done`` once the job was
    acked; then ``result`` holds its result (None for JSON null or none)
    or ``result_bytes`` a binary one."""

    id: str
    done: bool
    state: str
    result: Any = None
    result_bytes: Optional[bytes] = None

    @classmethod
    def from_wire(cls, job_id: str, done: bool, w: Mapping[str, Any]) -> "JobResult":
        state = str(w.get("state") or (STATE_COMPLETED if done else ""))
        return cls(str(w.get("id") or job_id), done, state, w.get("result"), _b64(w.get("result_base64")))


@dataclass
class Backoff:
    initial: Optional[Duration] = None
    max: Optional[Duration] = None
    multiplier: Optional[float] = None
    jitter: Optional[float] = None


@dataclass
class QueueConfig:
    """A queue's settings; None fields are left as they are (docs/api.md,
    PUT queue). In answers every field is set, durations in seconds."""

    default_ttr: Optional[Duration] = None
    default_tries: Optional[int] = None
    default_ttl: Optional[Duration] = None
    default_priority: Optional[int] = None
    max_jobs: Optional[int] = None
    max_payload: Optional[int] = None
    dedup_window: Optional[Duration] = None
    retain_results: Optional[Duration] = None
    key_mode: Optional[str] = None
    backoff: Optional[Backoff] = None

    _DURATIONS = ("default_ttr", "default_ttl", "dedup_window", "retain_results")
    _INTS = ("default_tries", "default_priority", "max_jobs", "max_payload")

    def wire(self) -> Dict[str, Any]:
        w: Dict[str, Any] = {}
        for name in self._DURATIONS:
            v = getattr(self, name)
            if v is not None:
                w[name] = wire_duration(v)
        for name in self._INTS:
            v = getattr(self, name)
            if v is not None:
                w[name] = v
        if self.key_mode is not None:
            w["key_mode"] = self.key_mode
        if self.backoff is not None:
            b: Dict[str, Any] = {}
            if self.backoff.initial is not None:
                b["initial"] = wire_duration(self.backoff.initial)
            if self.backoff.max is not None:
                b["max"] = wire_duration(self.backoff.max)
            if self.backoff.multiplier is not None:
                b["multiplier"] = self.backoff.multiplier
            if self.backoff.jitter is not None:
                b["jitter"] = self.backoff.jitter
            w["backoff"] = b
        return w

    @classmethod
    def from_wire(cls, w: Mapping[str, Any]) -> "QueueConfig":
        c = cls()
        for name in cls._DURATIONS:
            if name in w:
                setattr(c, name, parse_duration(w[name]))
        for name in cls._INTS:
            if name in w:
                setattr(c, name, int(w[name]))
        c.key_mode = w.get("key_mode")
        b = w.get("backoff")
        if isinstance(b, dict):
            c.backoff = Backoff(
                parse_duration(b.get("initial")), parse_duration(b.get("max")), b.get("multiplier"), b.get("jitter")
            )
        return c


@dataclass
class Queue:
    namespace: str
    name: str
    config: QueueConfig
    paused: bool
    counts: Dict[str, int]
    oldest_ready_age: float
    #: True when the PUT that answered this created the queue
    created: bool = False

    @classmethod
    def from_wire(cls, w: Mapping[str, Any], created: bool = False) -> "Queue":
        return cls(
            str(w.get("namespace", "")),
            str(w.get("name", "")),
            QueueConfig.from_wire(w.get("config") or {}),
            bool(w.get("paused")),
            {str(k): int(v) for k, v in (w.get("counts") or {}).items()},
            parse_duration(w.get("oldest_ready_age")),
            created,
        )


@dataclass
class Page:
    """One page of a listing; ``next_cursor`` None on the last."""

    jobs: List[Job]
    next_cursor: Optional[str]


@dataclass
class PublishResult:
    offset: int
    epoch: str


@dataclass
class Publication:
    """A channel message. ``channel`` is ``ns/name`` on a subscription and
    empty in a history answer (which is for one channel)."""

    offset: int
    data: Any
    epoch: str = ""
    channel: str = ""
    time: Optional[_dt.datetime] = None


@dataclass
class History:
    """``recovered`` False: the epoch changed or ``since`` left history;
    ``publications`` is then empty, go on from ``offset``."""

    publications: List[Publication]
    offset: int
    epoch: str
    recovered: bool


@dataclass
class Subscribed:
    """A subscription (re)started on ``channel`` at ``offset``/``epoch``.
    ``recovered`` is None for a fresh start, True when every missed
    publication follows, False when they could not be: reload your state."""

    channel: str
    offset: int
    epoch: str
    recovered: Optional[bool] = None


@dataclass
class Namespace:
    name: str
    auto_create_queues: bool
    channel_history: Optional[Dict[str, Any]] = None


def job_filter_query(
    states: Optional[List[str]], key: Optional[str], tags: Optional[Mapping[str, str]]
) -> List[tuple[str, str]]:
    q: List[tuple[str, str]] = []
    if states:
        q.append(("state", ",".join(states)))
    if key is not None:
        q.append(("key", key))
    for k, v in (tags or {}).items():
        q.append(("tag." + k, v))
    return q
