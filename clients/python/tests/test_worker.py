"""The Worker against the real server: exactly-once at concurrency 50 with
per-key order, auto-touch, nack on error, graceful stop on SIGTERM, and
reconnect after a server restart."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import defaultdict
from typing import Any, Callable, Dict, List, Tuple

import pytest

from chronoq import Backoff, Client, Job, JobNotFound, QueueConfig, Worker
from conftest import PKG, Server


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def run_in_thread(w: Worker) -> Tuple[threading.Thread, List[BaseException]]:
    errs: List[BaseException] = []

    def target() -> None:
        try:
            w.run()
        except BaseException as e:  # reported to the test
            errs.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, errs


def put_keyed(c: Client, q: str, keys: int, per_key: int) -> None:
    jobs = [{"k": f"key-{k}", "seq": s} for s in range(per_key) for k in range(keys)]
    from chronoq import PutJob

    batch = [PutJob(payload=j, key=j["k"]) for j in jobs]
    for i in range(0, len(batch), 500):
        c.put_batch(q, batch[i : i + 500])


def check_order(calls: List[Tuple[str, str, int]], keys: int, per_key: int) -> None:
    assert len(calls) == keys * per_key
    assert len({c[0] for c in calls}) == keys * per_key, "a job ran twice"
    by_key: Dict[str, List[int]] = defaultdict(list)
    for _, k, s in calls:
        by_key[k].append(s)
    assert len(by_key) == keys
    for k, seqs in by_key.items():
        assert seqs == list(range(per_key)), f"{k} ran out of order: {seqs}"


def test_async_worker_concurrency_50_exactly_once_in_key_order(server: Server, qname: str) -> None:
    c = Client(server.url)
    put_keyed(c, qname, 50, 20)
    calls: List[Tuple[str, str, int]] = []
    running = 0
    peak = 0

    async def handler(job: Job) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        calls.append((job.id, job.payload["k"], job.payload["seq"]))
        await asyncio.sleep(random.uniform(0, 0.004))
        running -= 1
        return None

    w = Worker(qname, handler, client=c, concurrency=50, wait=1, handle_signals=False)

    async def main() -> None:
        task = asyncio.ensure_future(w.run_async())
        deadline = time.monotonic() + 60
        while w.acked < 1000 and time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.05)
        w.stop()
        await asyncio.wait_for(task, 20)

    asyncio.run(main())
    check_order(calls, 50, 20)
    assert w.acked == 1000 and w.nacked == 0
    assert peak > 1, "handlers never overlapped"
    counts = c.get_queue(qname).counts
    assert sum(counts.values()) == 0, counts


def test_sync_worker_threads_exactly_once_in_key_order(server: Server, qname: str) -> None:
    c = Client(server.url)
    put_keyed(c, qname, 10, 20)
    calls: List[Tuple[str, str, int]] = []
    lock = threading.Lock()
    threads = set()

    def handler(job: Job) -> Any:
        with lock:
            calls.append((job.id, job.payload["k"], job.payload["seq"]))
            threads.add(threading.get_ident())
        time.sleep(random.uniform(0, 0.003))
        return {"seen": job.payload["seq"]}

    w = Worker(qname, handler, client=c, concurrency=8, prefetch=16, wait=1, handle_signals=False)
    t, errs = run_in_thread(w)
    wait_until(lambda: w.acked == 200, 60, "200 acks")
    w.stop()
    t.join(20)
    assert not t.is_alive() and not errs
    check_order(calls, 10, 20)
    assert len(threads) > 1


def test_auto_touch_keeps_a_slow_job_past_its_ttr(server: Server, qname: str) -> None:
    c = Client(server.url)
    c.configure_queue(qname, QueueConfig(default_ttr=1))
    c.put(qname, "slow")
    attempts: List[int] = []

    def handler(job: Job) -> Any:
        attempts.append(job.attempt)
        time.sleep(3)  # three TTRs
        return "finished"

    w = Worker(qname, handler, client=c, concurrency=1, wait=1, handle_signals=False)
    t, errs = run_in_thread(w)
    wait_until(lambda: len(attempts) == 1, 10, "the handler to start")
    time.sleep(2)
    # Past its TTR, still reserved: nobody else can take it.
    assert c.take(qname) == []
    (j,) = list(c.list(qname))
    assert j.state == "reserved" and j.attempt == 1
    wait_until(lambda: w.acked == 1, 10, "the ack")
    w.stop()
    t.join(10)
    assert attempts == [1] and not errs
    assert list(c.list(qname)) == []


def test_handler_error_nacks_with_text_and_traceback(server: Server, qname: str) -> None:
    c = Client(server.url)
    c.configure_queue(qname, QueueConfig(backoff=Backoff(initial=60, max=120, jitter=0)))
    r = c.put(qname, {"n": 7})

    async def handler(job: Job) -> Any:
        raise ValueError(f"boom {job.payload['n']}")

    w = Worker(qname, handler, client=c, wait=1, handle_signals=False)
    t, errs = run_in_thread(w)
    wait_until(lambda: w.nacked == 1, 10, "the nack")
    w.stop()
    t.join(10)
    j = c.peek(qname, r.id)
    assert j.state == "delayed"
    assert j.last_error.startswith("ValueError: boom 7")
    assert "Traceback" in j.last_error and "in handler" in j.last_error
    # the queue's backoff (60s), not an immediate retry
    assert j.activate_at is not None and j.created_at is not None
    assert (j.activate_at - j.created_at).total_seconds() > 50


WORKER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[3])
    from chronoq import Client, Worker

    def handler(job):
        print("started", job.id, flush=True)
        time.sleep(1.5)
        return "done"

    w = Worker(sys.argv[2], handler, client=Client(sys.argv[1]), concurrency=1, prefetch=10, wait=2)
    w.run()
    print("stopped", w.acked, w.released, flush=True)
    """
)


def test_sigterm_finishes_in_flight_and_gives_back_prefetched(server: Server, qname: str, tmp_path: Any) -> None:
    c = Client(server.url)
    ids = [r.id for r in c.put_batch(qname, list(range(10)))]
    script = tmp_path / "worker.py"
    script.write_text(WORKER_SCRIPT)
    p = subprocess.Popen(
        [sys.executable, str(script), server.url, qname, str(PKG)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("started "), line
        started = line.split()[1]
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0
    assert "stopped 1 9" in out, out
    with pytest.raises(JobNotFound):
        c.peek(qname, started)  # finished and acked
    rest = {j.id: j for j in c.list(qname)}
    assert set(rest) == set(ids) - {started}
    for j in rest.values():
        assert j.state == "ready" and j.attempt == 1, j
        assert "released unstarted" in j.last_error


def test_worker_reconnects_after_a_server_restart(own_server: Server, qname: str) -> None:
    s = own_server
    c = Client(s.url, retries=8, backoff=0.2)
    # No client-level retries for the worker: the restart must be ridden
    # out by the worker's own reconnect loop.
    wc = Client(s.url, retries=0)
    seen: List[int] = []
    errors: List[str] = []

    async def handler(job: Job) -> Any:
        seen.append(job.payload)
        return None

    w = Worker(qname, handler, client=wc, concurrency=4, wait=2, handle_signals=False,
               on_error=lambda what, e: errors.append(f"{what}: {e}"))
    t, errs = run_in_thread(w)
    c.put_batch(qname, list(range(20)))
    wait_until(lambda: w.acked == 20, 20, "the first 20 jobs")
    s.stop()
    time.sleep(1)
    s.start()
    c.put_batch(qname, list(range(20, 40)))
    wait_until(lambda: w.acked == 40, 30, "the 20 jobs put after the restart")
    w.stop()
    t.join(20)
    assert not errs
    assert sorted(seen) == list(range(40))
    assert any(e.startswith("take") for e in errors), errors


def test_grace_expiry_cancels_async_handlers_and_nacks(server: Server, qname: str) -> None:
    c = Client(server.url)
    r = c.put(qname, "stuck")
    started = threading.Event()

    async def handler(job: Job) -> Any:
        started.set()
        await asyncio.sleep(30)

    w = Worker(qname, handler, client=c, wait=1, grace=0.3, handle_signals=False)
    t, errs = run_in_thread(w)
    assert started.wait(10)
    t0 = time.monotonic()
    w.stop()
    t.join(10)
    assert not t.is_alive() and not errs and time.monotonic() - t0 < 5
    j = c.peek(qname, r.id)
    assert j.state in ("ready", "delayed") and "grace period" in j.last_error
    assert w.nacked == 1


def test_lost_reservation_cancels_the_async_handler(server: Server, qname: str) -> None:
    c = Client(server.url)
    c.configure_queue(qname, QueueConfig(default_ttr=1))
    c.put(qname, "doomed")
    started = threading.Event()
    cancelled = threading.Event()
    errors: List[str] = []

    async def handler(job: Job) -> Any:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    w = Worker(qname, handler, client=c, wait=1, handle_signals=False,
               on_error=lambda what, e: errors.append(f"{what}: {type(e).__name__}"))
    t, errs = run_in_thread(w)
    assert started.wait(10)
    assert c.purge_queue(qname) == 1  # deletes the reserved job
    assert cancelled.wait(5), errors
    w.stop()
    t.join(10)
    assert not errs and w.acked == 0 and w.nacked == 0
    assert any("ReservationLost" in e for e in errors), errors
