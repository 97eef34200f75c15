"""Every error class, token auth, and CHRONOQ_URL/CHRONOQ_TOKEN."""

from __future__ import annotations

import asyncio
import time
from typing import Iterator

import pytest

import chronoq
from chronoq import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    Forbidden,
    InternalError,
    JobNotFound,
    MethodNotAllowed,
    NamespaceNotFound,
    NotFound,
    PayloadTooLarge,
    QueueConfig,
    QueueFull,
    QueueNotFound,
    RateLimited,
    TransportError,
    Unauthorized,
    Unavailable,
)
from chronoq._errors import error_from_answer
from conftest import ADMIN_TOKEN, Server, free_port, start_server


def test_errors_from_the_server(server: Server, qname: str) -> None:
    c = Client(server.url, admin_url=server.admin_url)
    with pytest.raises(BadRequest) as e:
        c.put(qname, 1, id="has space")
    assert e.value.status == 400 and e.value.code == "bad_request" and e.value.message.startswith("id")
    with pytest.raises(BadRequest) as e:
        c.take(qname, max=5000)
    assert "max" in e.value.message
    with pytest.raises(QueueNotFound) as qe:
        c.get_queue(qname)
    assert isinstance(qe.value, NotFound) and qe.value.status == 404
    with pytest.raises(NamespaceNotFound):
        Client(server.url, namespace="no-such-ns").put(qname, 1)
    c.put(qname, 1)
    with pytest.raises(JobNotFound):
        c.peek(qname, "nope")
    (j,) = c.take(qname)
    with pytest.raises(Conflict) as ce:
        c.ack((qname, j.id, "0-0"))
    assert "receipt" in ce.value.message
    c.configure_queue(qname + "-small", QueueConfig(max_payload=16, max_jobs=1))
    with pytest.raises(PayloadTooLarge):
        c.put(qname + "-small", "x" * 100)
    c.put(qname + "-small", 1)
    with pytest.raises(QueueFull) as fe:
        # not retried for long: the keyed put is retried like any 429
        Client(server.url, retries=0).put(qname + "-small", 2)
    assert fe.value.status == 429 and fe.value.code == "queue_full"


def test_unreachable_server_is_a_transport_error_never_sent() -> None:
    c = Client(f"http://127.0.0.1:{free_port()}", retries=1, backoff=0.01)
    with pytest.raises(TransportError) as e:
        c.take("q")
    assert e.value.sent is False

    async def run() -> None:
        ac = AsyncClient(f"http://127.0.0.1:{free_port()}", retries=0)
        with pytest.raises(TransportError) as ae:
            await ac.ack(("q", "id", "r"))
        assert ae.value.sent is False

    asyncio.run(run())


def test_answers_that_did_not_come_from_chronoq() -> None:
    assert isinstance(error_from_answer(405, b'{"error":{"code":"method_not_allowed","message":"m"}}', None), MethodNotAllowed)
    e = error_from_answer(503, b"", "2")
    assert isinstance(e, Unavailable) and e.retry_after == 2.0
    e = error_from_answer(500, b"<html>proxy</html>", None)
    assert isinstance(e, InternalError) and e.code == "internal" and "proxy" in e.message
    e = error_from_answer(429, b'{"error":{"code":"rate_limited","message":"slow down"}}', "30")
    assert isinstance(e, RateLimited) and e.retry_after == 30.0 and str(e) == "rate_limited: slow down"
    e = error_from_answer(502, b"", None)
    assert type(e) is chronoq.APIError and e.status == 502


def test_token_auth_and_environment(auth_server: Server, qname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s = auth_server
    with pytest.raises(Unauthorized):
        Client(s.url).put(qname, 1)
    admin = Client(s.url, token=ADMIN_TOKEN, admin_url=s.admin_url)
    admin.put(qname, 1)
    admin.create_namespace("billing")
    tok = admin.create_token("billing", "workers")
    assert tok
    assert "billing" in [n.name for n in admin.list_namespaces()]
    monkeypatch.setenv("CHRONOQ_URL", s.url)
    monkeypatch.setenv("CHRONOQ_TOKEN", tok)
    env = Client(namespace="billing")
    assert env.put(qname, "hi").state == "ready"
    with pytest.raises(Forbidden):
        Client().put(qname, 1)  # the billing token on namespace default

    async def run() -> None:
        async with AsyncClient(namespace="billing") as ac:
            (j,) = await ac.take(qname)
            assert j.payload == "hi"
            await ac.ack(j)

    asyncio.run(run())
    admin.revoke_token("billing", tok)
    with pytest.raises(Unauthorized):
        Client(namespace="billing").put(qname, 1)


def test_rate_limited_after_failed_authentications(chronoq_bin: str) -> None:
    # Its own server: the brake covers every call from 127.0.0.1 for a minute.
    gen: Iterator[Server] = start_server(chronoq_bin, ["--admin-token", ADMIN_TOKEN])
    s = next(gen)
    try:
        bad = Client(s.url, token="wrong-token-wrong-token", retries=0)
        with pytest.raises(RateLimited) as e:
            for _ in range(20):
                try:
                    bad.put("q", 1)
                except Unauthorized:
                    pass
        assert e.value.retry_after is not None and e.value.retry_after > 0
    finally:
        gen.close()


def test_more_error_codes_from_the_server(auth_server: Server) -> None:
    from chronoq._ops import Req

    admin = Client(auth_server.url, token=ADMIN_TOKEN, admin_url=auth_server.admin_url)
    admin.create_namespace("other")
    with pytest.raises(NotFound) as e:
        admin.revoke_token("other", "cq_not_a_token")
    assert type(e.value) is NotFound and e.value.code == "not_found"
    with pytest.raises(MethodNotAllowed):
        admin._do(Req("GET", "/v1/ns/default/queues/q/take", lambda s, d: d))


def test_a_put_whose_answer_was_lost_is_retried_without_a_duplicate(server: Server, qname: str) -> None:
    """The first attempt reaches the server, then the answer is 'lost': the
    retry carries the same idempotency key and is answered as a duplicate."""
    c = Client(server.url, backoff=0.01)
    real = c._pool.request
    calls = []

    def lossy(*a: object, **k: object) -> object:
        out = real(*a, **k)  # type: ignore[arg-type]
        calls.append(a[0])
        if len(calls) == 1:
            raise TransportError("answer lost", sent=True)
        return out

    c._pool.request = lossy  # type: ignore[method-assign]
    r = c.put(qname, "once")
    assert r.duplicate and len(calls) == 2
    assert [j.payload for j in c.list(qname)] == ["once"]
    calls.clear()
    rs = c.put_batch(qname, ["a", "b"])  # a batch whose jobs all carry keys: the same
    assert [x.duplicate for x in rs] == [True, True] and len(calls) == 2
    assert sorted(j.payload for j in c.list(qname)) == ["a", "b", "once"]
    # take is never repeated: a lost answer may have reserved jobs
    calls.clear()
    with pytest.raises(TransportError):
        c.take(qname)
    assert calls == ["POST"]
    # nor is an ack
    (j,) = Client(server.url).take(qname)
    calls.clear()
    with pytest.raises(TransportError):
        c.ack(j)
    assert calls == ["POST"]
    # a put without idempotency key is not repeated either
    raw = Client(server.url, idempotency_keys=False)
    raw._pool.request = lossy  # type: ignore[method-assign]
    calls.clear()
    with pytest.raises(TransportError):
        raw.put(qname, "unkeyed")
    assert calls == ["POST"]
