"""Jobs/s of a no-op handler: the Python async Worker at concurrency 64
against the Go client's Consume at concurrency 64, on one chronoq server,
alternating, each repeated. Run from anywhere:

    /usr/bin/python3 clients/python/bench/bench.py --jobs 10000 --reps 3

The timed part is from the worker's start until the last job was handled
(the jobs are put beforehand); acks are sent by the workers as usual.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, List

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
REPO = PKG.parent.parent
sys.path.insert(0, str(PKG))
sys.path.insert(0, str(PKG / "tests"))

from chronoq import Client, Job, PutJob, Worker  # noqa: E402
from conftest import Server  # noqa: E402


def py_run(url: str, queue: str, n: int, conc: int) -> float:
    with Client(url) as c:
        for i in range(0, n, 1000):
            c.put_batch(queue, [PutJob(payload=j) for j in range(i, min(n, i + 1000))])
    done = 0
    t_end = 0.0

    async def handler(job: Job) -> Any:
        nonlocal done, t_end
        done += 1
        if done == n:
            t_end = time.perf_counter()
            w.stop()
        return None

    w = Worker(queue, handler, client=Client(url), concurrency=conc, wait=1, handle_signals=False)
    t0 = time.perf_counter()
    w.run()
    return n / (t_end - t0)


def go_run(gobin: str, url: str, queue: str, n: int, conc: int) -> float:
    out = subprocess.run(
        [gobin, "-url", url, "-queue", queue, "-n", str(n), "-concurrency", str(conc)],
        check=True, capture_output=True, text=True, timeout=600,
    )
    return float(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--sync", default="always", help="the server's --sync")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="chronoq-bench-")
    go = shutil.which("go") or "/usr/local/go/bin/go"
    subprocess.run([go, "build", "-o", f"{tmp}/chronoq", "./cmd/chronoq"], cwd=REPO, check=True)
    subprocess.run([go, "build", "-o", f"{tmp}/goconsume", "./clients/python/bench/goconsume"], cwd=REPO, check=True)
    os.makedirs(f"{tmp}/data")
    s = Server(f"{tmp}/chronoq", f"{tmp}/data", ["--sync", args.sync])
    s.start()
    py: List[float] = []
    gol: List[float] = []
    try:
        for r in range(args.reps):
            gol.append(go_run(f"{tmp}/goconsume", s.url, f"go-{r}", args.jobs, args.concurrency))
            py.append(py_run(s.url, f"py-{r}", args.jobs, args.concurrency))
            print(f"rep {r + 1}: go {gol[-1]:.0f} jobs/s, python {py[-1]:.0f} jobs/s", flush=True)
    finally:
        s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    mp, mg = statistics.median(py), statistics.median(gol)
    print(f"median: python async Worker {mp:.0f} jobs/s, Go Consume {mg:.0f} jobs/s, ratio python/go {mp / mg:.2f}")
    print(f"(jobs {args.jobs}, concurrency {args.concurrency}, server --sync {args.sync}, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
