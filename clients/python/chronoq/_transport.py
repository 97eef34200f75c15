"""HTTP/1.1 transports: a keep-alive pool of http.client connections for
the sync client, and a small asyncio implementation for the async one
(one connection per in-flight request, so hundreds of long-polls run at
once on one event loop without threads)."""

from __future__ import annotations

import asyncio
import http.client
import os
import select
import socket
import ssl
import threading
import time
from typing import Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from ._errors import TransportError

Response = Tuple[int, Dict[str, str], bytes]


class Endpoint:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        default_port = 443 if self.https else 80
        h = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = h if self.port == default_port else f"{h}:{self.port}"


def _dropped(sock: Optional[socket.socket]) -> bool:
    """An idle keep-alive connection that is readable has been closed by
    the server (or holds junk): either way it must not carry a request."""
    if sock is None:
        return True
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


def tls_context(ssl_context: Optional[ssl.SSLContext], ca_file: Optional[str]) -> Optional[ssl.SSLContext]:
    """The TLS settings of a client: ``ssl_context`` as given, else one that
    trusts the CA file ``ca_file`` (or ``$CHRONOQ_CA_FILE``) as well as the
    system's, else None (the system's defaults for https URLs)."""
    if ssl_context is not None:
        return ssl_context
    path = ca_file or os.environ.get("CHRONOQ_CA_FILE") or None
    if path:
        return ssl.create_default_context(cafile=path)
    return None


class SyncPool:
    """Idle connections kept for reuse; safe for many threads (each
    request owns its connection until it has read the answer)."""

    def __init__(self, url: str, max_idle: int = 32, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.ep = Endpoint(url)
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._max_idle = max_idle
        self._ssl = ssl_context
        self._closed = False

    def _get(self) -> Tuple[Optional[http.client.HTTPConnection], bool]:
        with self._lock:
            while self._idle:
                c = self._idle.pop()
                if _dropped(c.sock):
                    c.close()
                    continue
                return c, True
        return None, False

    def _put(self, c: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(c)
                return
        c.close()

    def new_connection(self, timeout: float) -> http.client.HTTPConnection:
        c: http.client.HTTPConnection
        if self.ep.https:
            c = http.client.HTTPSConnection(
                self.ep.host, self.ep.port, timeout=timeout, context=self._ssl or ssl.create_default_context()
            )
        else:
            c = http.client.HTTPConnection(self.ep.host, self.ep.port, timeout=timeout)
        try:
            c.connect()
        except OSError as e:
            c.close()
            # Nothing reached the server: a refused or unreachable connect
            # is safe to repeat for every method.
            raise TransportError(f"connecting to {self.ep.host}:{self.ep.port}: {e}", sent=False) from e
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return c

    def request(self, method: str, target: str, body: Optional[bytes], headers: Dict[str, str], timeout: float) -> Response:
        c, _reused = self._get()
        if c is None:
            c = self.new_connection(timeout)
        try:
            c.sock.settimeout(timeout)
            c.request(method, target, body=body, headers=headers)
            r = c.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException) as e:
            c.close()
            raise TransportError(f"{method} {target}: {type(e).__name__}: {e}") from e
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        if r.will_close:
            c.close()
        else:
            self._put(c)
        return r.status, hdrs, data

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


# ----------------------------------------------------------------- asyncio


class AsyncConn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.used = time.monotonic()

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing() or self.reader.exception() is not None)

    def close(self) -> None:
        try:
            self.writer.close()
        except (OSError, RuntimeError):
            pass


async def open_conn(ep: Endpoint, ssl_context: Optional[ssl.SSLContext]) -> AsyncConn:
    sslarg: Optional[ssl.SSLContext] = None
    if ep.https:
        sslarg = ssl_context or ssl.create_default_context()
    try:
        r, w = await asyncio.open_connection(
            ep.host, ep.port, ssl=sslarg, server_hostname=ep.host if sslarg else None, limit=1 << 20
        )
    except OSError as e:
        raise TransportError(f"connecting to {ep.host}:{ep.port}: {e}", sent=False) from e
    sock = w.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
    return AsyncConn(r, w)


def encode_request(method: str, target: str, host: str, headers: Dict[str, str], body: Optional[bytes]) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for k, v in headers.items():
        if "\r" in v or "\n" in v:
            raise ValueError(f"header {k}: must not contain a line break")
        lines.append(f"{k}: {v}")
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body or b'')}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (body or b"")


async def read_head(reader: asyncio.StreamReader) -> Tuple[int, Dict[str, str]]:
    while True:
        raw = await reader.readuntil(b"\r\n\r\n")
        text = raw.decode("latin-1")
        lines = text.split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/1."):
            raise ValueError(f"malformed status line {lines[0]!r}")
        status = int(status_line[1])
        headers: Dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            k, _, v = line.partition(":")
            k = k.strip().lower()
            v = v.strip()
            headers[k] = f"{headers[k]}, {v}" if k in headers else v
        if 100 <= status < 200 and status != 101:
            continue  # interim answer (100 Continue): the real one follows
        return status, headers


async def read_chunk(reader: asyncio.StreamReader) -> bytes:
    """One chunk of a chunked body; b"" at its end (trailers consumed)."""
    line = await reader.readuntil(b"\r\n")
    size = int(line.split(b";", 1)[0].strip() or b"0", 16)
    if size == 0:
        while (await reader.readuntil(b"\r\n")) != b"\r\n":
            pass
        return b""
    data = await reader.readexactly(size)
    if await reader.readexactly(2) != b"\r\n":
        raise ValueError("malformed chunk end")
    return data


async def read_body(reader: asyncio.StreamReader, method: str, status: int, headers: Dict[str, str]) -> Tuple[bytes, bool]:
    """The body and whether the connection can carry another request."""
    keep = "close" not in headers.get("connection", "").lower()
    if method == "HEAD" or status in (204, 304):
        return b"", keep
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts: List[bytes] = []
        while True:
            c = await read_chunk(reader)
            if not c:
                return b"".join(parts), keep
            parts.append(c)
    cl = headers.get("content-length")
    if cl is not None:
        return await reader.readexactly(int(cl)), keep
    return await reader.read(), False


class AsyncPool:
    """Idle connections for reuse on one event loop. Every in-flight
    request has its own connection; the pool only bounds the idle ones."""

    def __init__(self, url: str, max_idle: int = 256, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.ep = Endpoint(url)
        self._idle: List[AsyncConn] = []
        self._max_idle = max_idle
        self._ssl = ssl_context
        self._closed = False

    async def connect(self) -> AsyncConn:
        return await open_conn(self.ep, self._ssl)

    async def request(self, method: str, target: str, body: Optional[bytes], headers: Dict[str, str], timeout: float) -> Response:
        conn: Optional[AsyncConn] = None
        while self._idle:
            c = self._idle.pop()
            if c.usable():
                conn = c
                break
            c.close()
        if conn is None:
            try:
                conn = await asyncio.wait_for(self.connect(), timeout)
            except asyncio.TimeoutError as e:
                raise TransportError(f"connecting to {self.ep.host}:{self.ep.port}: timed out", sent=False) from e
        ok = False
        try:
            conn.writer.write(encode_request(method, target, self.ep.host_header, headers, body))
            status, hdrs, data, keep = await asyncio.wait_for(self._exchange(conn, method), timeout)
            ok = keep
            return status, hdrs, data
        except asyncio.TimeoutError as e:
            raise TransportError(f"{method} {target}: no answer within {timeout:.1f}s") from e
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            raise TransportError(f"{method} {target}: {type(e).__name__}: {e}") from e
        finally:
            if ok and not self._closed and len(self._idle) < self._max_idle:
                conn.used = time.monotonic()
                self._idle.append(conn)
            else:
                conn.close()

    async def _exchange(self, conn: AsyncConn, method: str) -> Tuple[int, Dict[str, str], bytes, bool]:
        await conn.writer.drain()
        status, hdrs = await read_head(conn.reader)
        data, keep = await read_body(conn.reader, method, status, hdrs)
        return status, hdrs, data, keep

    def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()
