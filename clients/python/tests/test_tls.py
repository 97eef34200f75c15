"""https:// with a CA file: the server's HTTP listener on TLS with a
certificate from a CA made here (openssl), the clients trusting that CA
through ``ca_file``; without it the handshake is refused."""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from typing import Iterator, Tuple

import pytest

from chronoq import AsyncClient, Client

from conftest import Server, start_server

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a test CA")


def _make_ca(d: str) -> Tuple[str, str, str]:
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=30)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=chronoq test CA")
    run("req", *ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "srv.pem", "-days", "1", "-extfile", "san.ext")
    return (os.path.join(d, "ca.pem"), os.path.join(d, "srv.pem"), os.path.join(d, "srv.key"))


@pytest.fixture(scope="module")
def tls_server(chronoq_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Server, str]]:
    ca, cert, key = _make_ca(str(tmp_path_factory.mktemp("tls")))
    # Only the HTTP listener on TLS: the fixture's readiness probe uses the
    # plain admin listener.
    for s in start_server(chronoq_bin, ["--http-tls-cert", cert, "--http-tls-key", key]):
        yield s, ca


def test_ca_file(tls_server: Tuple[Server, str], qname: str) -> None:
    s, ca = tls_server
    url = f"https://127.0.0.1:{s.http_port}"
    with Client(url, admin_url=s.admin_url, ca_file=ca) as c:
        c.put(qname, {"n": 1}, id="tls-1")
        jobs = c.take(qname)
        assert [j.id for j in jobs] == ["tls-1"]
        c.ack(jobs[0])

    async def run() -> None:
        async with AsyncClient(url, admin_url=s.admin_url, ca_file=ca) as ac:
            await ac.put(qname, "async", id="tls-2")
            got = await ac.take(qname)
            assert [j.id for j in got] == ["tls-2"]
            await ac.ack(got[0])

    asyncio.run(run())


def test_unknown_ca_refused(tls_server: Tuple[Server, str], qname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s, _ = tls_server
    monkeypatch.delenv("CHRONOQ_CA_FILE", raising=False)
    with Client(f"https://127.0.0.1:{s.http_port}", admin_url=s.admin_url, retries=0) as c:
        with pytest.raises(Exception) as e:
            c.put(qname, 1)
        assert "CERTIFICATE_VERIFY_FAILED" in repr(e.value) or "certificate verify failed" in str(e.value).lower()


def test_ca_file_from_environment(tls_server: Tuple[Server, str], qname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s, ca = tls_server
    monkeypatch.setenv("CHRONOQ_CA_FILE", ca)
    with Client(f"https://127.0.0.1:{s.http_port}", admin_url=s.admin_url) as c:
        c.put(qname, 2, id="tls-env")
        assert c.peek(qname, "tls-env").id == "tls-env"
