"""Runs the README's producer, worker, per-key FIFO and RPC examples
verbatim against a fresh server and compares what they print with the
output the README shows."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from typing import Dict, List, Tuple

from conftest import PKG, Server

SECTIONS = ["## A producer", "## A worker", "## Per-key FIFO", "## RPC"]


def examples() -> Dict[str, Tuple[str, List[str]]]:
    text = (PKG / "README.md").read_text(encoding="utf-8")
    out: Dict[str, Tuple[str, List[str]]] = {}
    for sec in SECTIONS:
        part = text[text.index(sec) :]
        code = re.search(r"```python\n(.*?)```", part, re.S)
        shown = re.search(r"```python\n.*?```\s*```\n(.*?)```", part, re.S)
        assert code and shown, sec
        out[sec] = (code.group(1), shown.group(1).splitlines())
    return out


def env(server: Server) -> Dict[str, str]:
    e = dict(os.environ)
    e["CHRONOQ_URL"] = server.url
    e.pop("CHRONOQ_TOKEN", None)
    e["PYTHONPATH"] = str(PKG)
    return e


def run(code: str, server: Server) -> List[str]:
    p = subprocess.run([sys.executable, "-c", code], env=env(server), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_readme_examples_run_verbatim(own_server: Server) -> None:
    ex = examples()
    code, shown = ex["## A producer"]
    got = run(code, own_server)
    ulid = re.compile(r"\b[0-9A-Z]{26}\b")
    assert [ulid.sub("ID", x) for x in got] == [ulid.sub("ID", x) for x in shown]

    code, shown = ex["## A worker"]
    p = subprocess.Popen([sys.executable, "-c", code], env=env(own_server), stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        lines = [p.stdout.readline().rstrip("\n") for _ in shown]
        p.send_signal(signal.SIGTERM)
        rest, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0
    assert sorted(lines) == sorted(shown) and rest == ""

    for sec in ("## Per-key FIFO", "## RPC"):
        code, shown = ex[sec]
        t0 = time.monotonic()
        assert run(code, own_server) == shown, sec
        assert time.monotonic() - t0 < 30
