"""SSE subscriptions: delivery, and recovery across a server restart
(durable channel: every publication, none twice; memory-only channel:
recovered False)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, List, Union

from chronoq import AsyncClient, Client, Publication, Subscribed
from conftest import Server

Item = Union[Publication, Subscribed]


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def pubs(items: List[Item], channel: str) -> List[Publication]:
    return [i for i in items if isinstance(i, Publication) and i.channel == channel]


def subs(items: List[Item], channel: str) -> List[Subscribed]:
    return [i for i in items if isinstance(i, Subscribed) and i.channel == channel]


def test_sync_subscription_recovers_across_restart(own_server: Server) -> None:
    s = own_server
    c = Client(s.url, admin_url=s.admin_url, retries=8)
    c.configure_namespace("default", channel_history={"durable": True})
    c.create_namespace("mem")
    items: List[Item] = []
    sub = c.subscribe(["news", "mem/live"])
    sub.min_delay = 0.1

    def consume() -> None:
        for it in sub:
            items.append(it)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    wait_until(lambda: len(subs(items, "mem/live")) == 1, 10, "subscribed")
    for i in range(3):
        c.publish("news", {"n": i})
    mem = Client(s.url, namespace="mem")
    mem.publish("live", "before")
    wait_until(lambda: len(pubs(items, "default/news")) == 3 and len(pubs(items, "mem/live")) == 1, 10, "3 publications")

    s.restart()
    # Published while the subscriber may still be away: recovery brings them.
    c.publish("news", {"n": 3})
    c.publish("news", {"n": 4})
    wait_until(lambda: len(pubs(items, "default/news")) == 5, 20, "the publications after the restart")
    mem.publish("live", "after")
    wait_until(lambda: len(pubs(items, "mem/live")) == 2, 10, "the memory-only publication")
    sub.close()
    t.join(10)
    assert not t.is_alive()

    news = pubs(items, "default/news")
    assert [p.data for p in news] == [{"n": i} for i in range(5)]
    assert [p.offset for p in news] == [1, 2, 3, 4, 5]
    assert len({p.epoch for p in news}) == 1, "a durable channel keeps its epoch"
    assert [x.recovered for x in subs(items, "default/news")] == [None, True]
    # the memory-only channel cannot be recovered: the app is told
    assert [x.recovered for x in subs(items, "mem/live")] == [None, False]

    # an explicit position resumes after it
    epoch = news[0].epoch
    resumed: List[Item] = []
    with c.subscribe("news", positions={"news": (epoch, 3)}) as sub2:
        for it in sub2:
            resumed.append(it)
            if len(pubs(resumed, "default/news")) == 2:
                break
    assert subs(resumed, "default/news")[0].recovered is True
    assert [p.offset for p in pubs(resumed, "default/news")] == [4, 5]


def test_async_subscription_recovers_across_restart(own_server: Server) -> None:
    s = own_server
    admin = Client(s.url, admin_url=s.admin_url)
    admin.configure_namespace("default", channel_history={"durable": True})

    async def run() -> None:
        async with AsyncClient(s.url, retries=8) as c:
            items: List[Item] = []
            sub = c.subscribe("feed")
            sub.min_delay = 0.1

            async def consume() -> None:
                async for it in sub:
                    items.append(it)

            task = asyncio.ensure_future(consume())

            async def until(cond: Callable[[], bool], what: str) -> None:
                deadline = time.monotonic() + 20
                while not cond():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    await asyncio.sleep(0.02)

            await until(lambda: len(items) == 1, "subscribed")
            for i in range(3):
                await c.publish("feed", i)
            await until(lambda: len(pubs(items, "default/feed")) == 3, "3 publications")
            await asyncio.get_running_loop().run_in_executor(None, s.restart)
            await c.publish("feed", 3)
            await until(lambda: len(pubs(items, "default/feed")) == 4, "the publication after the restart")
            await sub.close()
            await asyncio.wait_for(task, 10)
            feed = pubs(items, "default/feed")
            assert [p.data for p in feed] == [0, 1, 2, 3] and [p.offset for p in feed] == [1, 2, 3, 4]
            assert [x.recovered for x in subs(items, "default/feed")] == [None, True]

    asyncio.run(asyncio.wait_for(run(), 60))
