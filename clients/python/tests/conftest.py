"""Runs the real ``chronoq serve`` binary on free loopback ports. The
binary is built once per session from the repository root."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
REPO = PKG.parent.parent
sys.path.insert(0, str(PKG))

ADMIN_TOKEN = "test-admin-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _go() -> str:
    return shutil.which("go") or "/usr/local/go/bin/go"


@pytest.fixture(scope="session")
def chronoq_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    prebuilt = os.environ.get("CHRONOQ_BIN")
    if prebuilt:
        return prebuilt
    out = tmp_path_factory.mktemp("bin") / "chronoq"
    subprocess.run([_go(), "build", "-o", str(out), "./cmd/chronoq"], cwd=REPO, check=True, timeout=600)
    return str(out)


class Server:
    """One chronoq process; ``restart`` keeps its data directory and ports."""

    def __init__(self, binary: str, data: str, extra: Optional[List[str]] = None) -> None:
        self.binary = binary
        self.data = data
        self.extra = extra or []
        self.http_port = free_port()
        self.admin_port = free_port()
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log_path = os.path.join(data, "server.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def start(self) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [
                self.binary, "serve", "--data", self.data,
                "--http", f"127.0.0.1:{self.http_port}",
                "--admin", f"127.0.0.1:{self.admin_port}",
                "--beanstalk", "", *self.extra,
            ],
            stdout=log,
            stderr=log,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chronoq exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.admin_url + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"chronoq did not become ready:\n{self.log()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""


def start_server(binary: str, extra: Optional[List[str]] = None) -> Iterator[Server]:
    data = tempfile.mkdtemp(prefix="chronoq-py-")
    s = Server(binary, data, extra)
    s.start()
    try:
        yield s
    finally:
        s.stop()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def server(chronoq_bin: str) -> Iterator[Server]:
    yield from start_server(chronoq_bin)


@pytest.fixture
def own_server(chronoq_bin: str) -> Iterator[Server]:
    """A server of the test's own, for tests that restart it."""
    yield from start_server(chronoq_bin)


@pytest.fixture(scope="module")
def auth_server(chronoq_bin: str) -> Iterator[Server]:
    yield from start_server(chronoq_bin, ["--admin-token", ADMIN_TOKEN])


@pytest.fixture
def qname() -> str:
    return "q-" + uuid.uuid4().hex[:12]
