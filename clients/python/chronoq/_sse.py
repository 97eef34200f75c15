"""Server-Sent Events: a parser that follows the WHATWG event-stream rules
and the position bookkeeping of a chronoq subscription (docs/realtime.md,
"SSE" and "Recovery")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._types import Publication, Subscribed


@dataclass
class SSEEvent:
    event: str
    data: str
    id: str
    retry: Optional[int] = None


class SSEParser:
    """Incremental event-stream parser. Feed it bytes as they arrive; it
    returns the events completed so far. Lines end in CRLF, LF or CR (a CR
    at the end of a chunk waits for the next one, which may start with the
    LF of the same line end)."""

    def __init__(self) -> None:
        self._buf = b""
        self._first = True
        self._pending_cr = False
        self._event = ""
        self._data: List[str] = []
        self._has_data = False
        self.last_event_id = ""
        self.retry: Optional[int] = None

    def feed(self, chunk: bytes) -> List[SSEEvent]:
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._pending_cr = False
        buf = self._buf + chunk
        if self._first and len(buf) >= 3:
            if buf.startswith(b"\xef\xbb\xbf"):
                buf = buf[3:]
            self._first = False
        elif self._first and b"\xef\xbb\xbf".startswith(buf):
            self._buf = buf  # might still become a BOM
            return []
        else:
            self._first = False
        out: List[SSEEvent] = []
        start = 0
        n = len(buf)
        while True:
            i = start
            while i < n and buf[i] not in (10, 13):
                i += 1
            if i >= n:
                break
            line = buf[start:i]
            if buf[i] == 13:
                if i + 1 < n:
                    start = i + 2 if buf[i + 1] == 10 else i + 1
                else:
                    self._pending_cr = True
                    start = i + 1
            else:
                start = i + 1
            ev = self._line(line.decode("utf-8", "replace"))
            if ev is not None:
                out.append(ev)
        self._buf = buf[start:]
        return out

    def _line(self, line: str) -> Optional[SSEEvent]:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "id":
            if "\x00" not in value:
                self.last_event_id = value
        elif name == "retry":
            if value.isdigit() and value.isascii():
                self.retry = int(value)
        return None

    def _dispatch(self) -> Optional[SSEEvent]:
        event, data, has = self._event, self._data, self._has_data
        self._event, self._data, self._has_data = "", [], False
        if not has:
            return None
        return SSEEvent(event or "message", "\n".join(data), self.last_event_id, self.retry)


class SubscriptionEnded(Exception):
    """The server ended the stream for good (a ``disconnect`` event that
    says not to reconnect)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"subscription ended by the server: {code} {reason}")
        self.code = code
        self.reason = reason


Item = Union[Publication, Subscribed]


class Positions:
    """Where a subscription is in each of its channels. Publications are
    delivered once, in offset order: a repeat (after a reconnect) is
    dropped."""

    def __init__(self, channels: Sequence[str], namespace: str, start: Optional[Dict[str, Tuple[str, int]]]) -> None:
        # A bare name means the connection's namespace, which for the
        # admin token and open mode is "default", not ours: qualify it.
        self.channels = [c if "/" in c else f"{namespace}/{c}" for c in channels]
        if not self.channels:
            raise ValueError("subscribe: give at least one channel")
        self.pos: Dict[str, Tuple[str, int]] = {}
        for k, v in (start or {}).items():
            key = k if "/" in k else f"{namespace}/{k}"
            self.pos[key] = (v[0], int(v[1]))

    def last_event_id(self) -> Optional[str]:
        if not all(c in self.pos for c in self.channels):
            return None
        return ",".join(f"{self.pos[c][0]}:{self.pos[c][1]}" for c in self.channels)

    def handle(self, ev: SSEEvent) -> Optional[Item]:
        """Turns an event into what the subscriber sees, or None. Raises
        SubscriptionEnded on a final disconnect; answers None and leaves
        the reconnect to the caller on one that allows it."""
        if ev.event == "pub":
            d = json.loads(ev.data)
            ch = str(d.get("channel", ""))
            ns = d.get("namespace")
            if ns and "/" not in ch:
                ch = f"{ns}/{ch}"
            epoch, offset = str(d.get("epoch", "")), int(d.get("offset", 0))
            cur = self.pos.get(ch)
            if cur is not None and cur[0] == epoch and offset <= cur[1]:
                return None
            self.pos[ch] = (epoch, offset)
            return Publication(offset, d.get("data"), epoch, ch)
        if ev.event == "subscribed":
            d = json.loads(ev.data)
            ch = str(d.get("channel", ""))
            epoch, offset = str(d.get("epoch", "")), int(d.get("offset", 0))
            rec: Optional[bool] = d.get("recovered")
            if rec is not True:
                # Fresh or unrecoverable: the live stream goes on from here.
                self.pos[ch] = (epoch, offset)
            return Subscribed(ch, offset, epoch, rec)
        if ev.event == "disconnect":
            d = json.loads(ev.data)
            if not d.get("reconnect"):
                raise SubscriptionEnded(int(d.get("code", 0)), str(d.get("reason", "")))
            raise _Reconnect()
        return None


class _Reconnect(Exception):
    """The server asked us to come back."""
