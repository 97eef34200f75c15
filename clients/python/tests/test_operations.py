"""Every /v1 job and queue operation, once through the sync client and
once through the asyncio client (the same scenario, awaited or not)."""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import threading
import time
from typing import Any, Awaitable, Callable, List, Union

import pytest

from chronoq import (
    AsyncClient,
    Backoff,
    Client,
    Conflict,
    Job,
    JobNotFound,
    PutJob,
    QueueConfig,
    WaitTimeout,
)
from conftest import Server

AnyClient = Union[Client, AsyncClient]


async def aw(v: Any) -> Any:
    return await v if inspect.isawaitable(v) else v


async def collect(it: Any) -> List[Job]:
    if hasattr(it, "__aiter__"):
        return [j async for j in it]
    return list(it)


def make(kind: str, server: Server) -> AnyClient:
    cls = Client if kind == "sync" else AsyncClient
    return cls(server.url, admin_url=server.admin_url, timeout=10)


def responder(server: Server, queue: str, n: int, fn: Callable[[Any], Any]) -> threading.Thread:
    """Answers n jobs of queue with fn(payload), from a thread of its own."""

    def run() -> None:
        with Client(server.url, timeout=10) as c:
            done = 0
            deadline = time.monotonic() + 20
            while done < n and time.monotonic() < deadline:
                for j in c.take(queue, wait=2):
                    c.ack(j, fn(j.payload))
                    done += 1

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_every_operation(server: Server, qname: str, kind: str) -> None:
    asyncio.run(asyncio.wait_for(scenario(make(kind, server), server, qname), 90))


async def scenario(c: AnyClient, server: Server, q: str) -> None:
    # queue config: create, read, update
    created = await aw(c.configure_queue(q, QueueConfig(default_ttr=5, retain_results=60, backoff=Backoff(initial=30, max=60))))
    assert created.created and created.config.default_ttr == 5.0 and created.config.backoff is not None
    assert created.config.backoff.initial == 30.0
    again = await aw(c.configure_queue(q, QueueConfig(default_priority=7)))
    assert not again.created and again.config.default_priority == 7 and again.config.retain_results == 60.0
    assert (await aw(c.get_queue(q))).name == q
    assert q in [x.name for x in await aw(c.list_queues())]

    # put with every option, and a duplicate by idempotency key
    at = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    r = await aw(c.put(q, {"to": "a@b.c", "n": 1.5}, id="order-1", at=at, priority=3, ttl=7200, ttr=9, tries=4,
                       key="user:1", tags={"user": "1"}, reply_to=q + "-replies", idempotency_key="k-1"))
    assert (r.id, r.state, r.duplicate) == ("order-1", "delayed", False)
    assert r.activate_at is not None and abs((r.activate_at - at).total_seconds()) < 0.01
    dup = await aw(c.put(q, {"other": True}, idempotency_key="k-1"))
    assert dup.duplicate and dup.id == "order-1"
    j = await aw(c.peek(q, "order-1"))
    assert (j.payload, j.priority, j.tries, j.ttr, j.key, j.tags, j.state) == (
        {"to": "a@b.c", "n": 1.5}, 3, 4, 9.0, "user:1", {"user": "1"}, "delayed")
    assert j.expire_at is not None and j.reply_to == q + "-replies"

    # update in place, then cancel by id
    u = await aw(c.update(q, "order-1", priority=1, tags={"user": "1", "vip": "yes"}, payload=None))
    assert (u.priority, u.tags, u.payload) == (1, {"user": "1", "vip": "yes"}, None)
    await aw(c.cancel(q, "order-1"))
    with pytest.raises(JobNotFound):
        await aw(c.peek(q, "order-1"))

    # binary payload
    rb = await aw(c.put(q, payload_bytes=b"\x00\xffbin", delay=3600))
    jb = await aw(c.peek(q, rb.id))
    assert jb.binary and jb.payload_bytes == b"\x00\xffbin"

    # batch put, list with a paging iterator, cancel by tag
    res = await aw(c.put_batch(q, [PutJob(payload=i, tags={"batch": "b"}, delay=3600) for i in range(5)] + ["plain"]))
    assert len(res) == 6 and all(not x.duplicate for x in res)
    listed = await collect(c.list(q, states=["delayed"], tags={"batch": "b"}, page_size=2))
    assert [x.payload for x in listed] == [0, 1, 2, 3, 4]
    page = await aw(c.list_page(q, states=["delayed"], limit=2))
    assert len(page.jobs) == 2 and page.next_cursor
    assert await aw(c.cancel_by_tag({"batch": "b"}, queue=q)) == 5
    assert await aw(c.cancel_by_filter(states=["delayed"], tags={"nothing": "x"})) == 0
    with pytest.raises(ValueError):
        await aw(c.cancel_by_filter(q))
    await aw(c.purge_queue(q))

    # take with long-poll: an empty queue answers [] after the wait, a
    # put during the wait is answered at once
    t0 = time.monotonic()
    assert await aw(c.take(q, wait=0.3)) == []
    assert time.monotonic() - t0 >= 0.25
    side = Client(server.url)
    threading.Timer(0.3, lambda: side.put(q, "late")).start()
    t0 = time.monotonic()
    got = await aw(c.take(q, max=5, wait=10))
    assert [x.payload for x in got] == ["late"] and time.monotonic() - t0 < 5
    late = got[0]
    assert late.receipt and late.state == "reserved" and late.attempt == 1

    # touch, then ack with result and next
    before = late.reserved_until
    await asyncio.sleep(0.05)
    until = await aw(c.touch(late, ttr=20))
    assert until is not None and before is not None and until > before
    ack = await aw(c.ack(late, {"ok": True}, next=PutJob(payload="follow-up", delay=3600)))
    assert ack.state == "completed" and ack.next_id
    assert (await aw(c.peek(q, ack.next_id))).payload == "follow-up"
    res_done = await aw(c.result(q, late.id))
    assert res_done.done and res_done.result == {"ok": True}
    with pytest.raises(Conflict):
        await aw(c.ack(late))  # the receipt is spent
    await aw(c.cancel(q, ack.next_id))

    # nack with error and delay; with no delay the queue's backoff decides
    await aw(c.put(q, "n1"))
    (n1,) = await aw(c.take(q))
    assert await aw(c.nack(n1, "smtp timeout", delay=0)) == "ready"
    (n1,) = await aw(c.take(q))
    assert n1.attempt == 2 and n1.last_error == "smtp timeout"
    assert await aw(c.nack(n1, "again")) == "delayed"
    p = await aw(c.peek(q, n1.id))
    assert p.activate_at is not None and (p.activate_at - dt.datetime.now(dt.timezone.utc)).total_seconds() > 20
    await aw(c.update(q, n1.id, delay=0))

    # bury, respawn, purge dead
    (b1,) = await aw(c.take(q))
    assert await aw(c.bury(b1, "malformed")) == "dead"
    assert await aw(c.respawn(q, limit=10)) == 1
    (b1,) = await aw(c.take(q))
    assert b1.attempt == 1
    await aw(c.bury((b1.queue, b1.id, b1.receipt)))
    assert await aw(c.respawn(q, ids=[b1.id])) == 1
    (b1,) = await aw(c.take(q))
    await aw(c.bury(b1))
    assert await aw(c.purge_dead(q)) == 1

    # pause: puts accepted, nothing handed out
    paused = await aw(c.pause(q))
    assert paused.paused
    await aw(c.put(q, "while-paused"))
    assert await aw(c.take(q, wait=0.2)) == []
    assert not (await aw(c.resume(q))).paused
    (wp,) = await aw(c.take(q, wait=2))
    assert wp.payload == "while-paused"
    await aw(c.ack(wp))

    # several queues at once, in order
    q2 = q + "-b"
    await aw(c.put(q2, "from-b"))
    await aw(c.put(q, "from-a"))
    multi = await aw(c.take([q, q2], max=2))
    assert [x.payload for x in multi] == ["from-a", "from-b"] and [x.queue for x in multi] == [q, q2]
    for x in multi:
        await aw(c.ack(x))

    # RPC: call waits for the result; WaitTimeout when nobody answers
    rq = q + "-rpc"
    t = responder(server, rq, 1, lambda p: {"double": p * 2})
    rr = await aw(c.call(rq, 21, wait=10))
    assert rr.done and rr.result == {"double": 42} and rr.id
    t.join(5)
    with pytest.raises(WaitTimeout) as wt:
        await aw(c.call(rq, 1, wait=0.2))
    assert wt.value.job_id and wt.value.state == "ready"
    pending = await aw(c.result(rq, wt.value.job_id, wait=0.1))
    assert not pending.done and pending.state == "ready"

    # channels: publish and history
    ch = q + "-ch"
    p1 = await aw(c.publish(ch, {"n": 1}))
    p2 = await aw(c.publish(ch, {"n": 2}))
    assert p2.offset == p1.offset + 1 and p1.epoch == p2.epoch
    h = await aw(c.history(ch, since=0, limit=10))
    assert h.recovered and [x.data for x in h.publications] == [{"n": 1}, {"n": 2}]
    h = await aw(c.history(ch, since=p2.offset, epoch="not-the-epoch"))
    assert not h.recovered and h.publications == []

    # delete the queues
    for name in (q, q2, rq):
        await aw(c.delete_queue(name))
    with pytest.raises(Exception):
        await aw(c.get_queue(q))
    side.close()
    await aw(c.close())


def test_keep_alive_reuses_one_connection(server: Server, qname: str) -> None:
    c = Client(server.url)
    made = []
    orig = c._pool.new_connection

    def counting(timeout: float) -> Any:
        conn = orig(timeout)
        made.append(conn)
        return conn

    c._pool.new_connection = counting  # type: ignore[method-assign]
    for i in range(30):
        c.put(qname, i)
    assert len(made) == 1
    c.close()

    async def run() -> int:
        ac = AsyncClient(server.url)
        count = 0
        orig_a = ac._pool.connect

        async def counting_a() -> Any:
            nonlocal count
            count += 1
            return await orig_a()

        ac._pool.connect = counting_a  # type: ignore[method-assign]
        for i in range(30):
            await ac.put(qname, i)
        await ac.close()
        return count

    assert asyncio.run(run()) == 1


def test_async_client_holds_hundreds_of_long_polls(server: Server, qname: str) -> None:
    """300 takes wait at once on one event loop; 300 puts answer them."""

    async def run() -> None:
        async with AsyncClient(server.url, timeout=10) as c:
            takes = [asyncio.ensure_future(c.take(qname, wait=15)) for _ in range(300)]
            await asyncio.sleep(0.5)
            assert not any(t.done() for t in takes)
            t0 = time.monotonic()
            with Client(server.url) as p:
                for chunk in range(3):
                    p.put_batch(qname, list(range(chunk * 100, chunk * 100 + 100)))
            got = await asyncio.wait_for(asyncio.gather(*takes), 15)
            assert time.monotonic() - t0 < 10
            assert sorted(j.payload for js in got for j in js) == list(range(300))

    asyncio.run(run())
