"""HTTPS: ``sqew serve --tls-cert/--tls-key`` (uvicorn's TLS), and clients that verify it.

A private CA (trustme) issues a certificate for 127.0.0.1. The CLI and the Client verify the
server against ``--ca-cert``/``SQEW_CA_CERT``/``ca_cert``, and by default against the system's
CAs, which do not know it: a clear ``Unavailable`` error, never a traceback, and never an
unverified connection. Bad TLS files and half-given flags fail ``sqew serve`` clearly.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cli_runs
import httpx
import psutil
import pytest
import trustme

from sqew import Client, errors
from sqew.client import tls as client_tls

from .support import Served, serve

RUN_S = 60


@dataclass
class Tls:
    """A private CA's certificate, and a certificate and key it issued for 127.0.0.1."""

    ca: Path
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    where = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    files = Tls(where / "ca.pem", where / "cert.pem", where / "key.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    files.cert.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(files.key))
    return files


@pytest.fixture(scope="module")
def https(tls: Tls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = tmp_path_factory.mktemp("https") / "t.db"
    with serve(db, "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)) as server:
        yield server


def sqew(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The ``sqew`` CLI in a subprocess (no ``SQEW_*`` of the test process)."""
    return cli_runs.completed(args, cwd=os.getcwd(), env=cli_runs.environment(**(env or {})))


def one_error_line(result: subprocess.CompletedProcess[str], status: int, start: str) -> str:
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_serve_announces_https(https: Served) -> None:
    assert https.url.startswith("https://127.0.0.1:")


def test_the_cli_talks_https_with_ca_cert(https: Served, tls: Tls) -> None:
    result = sqew("--url", https.url, "--ca-cert", str(tls.ca), "queue", "add", "--name", "c")
    assert result.returncode == 0, result.stderr
    result = sqew("--url", https.url, "--json", "health", env={"SQEW_CA_CERT": str(tls.ca)})
    assert result.returncode == 0 and result.stdout.strip() == '{"status":"ok"}', result


def test_the_cli_refuses_a_certificate_it_cannot_verify(https: Served) -> None:
    line = one_error_line(sqew("--url", https.url, "health"), 1, "error: Unavailable: ")
    assert "cannot verify the TLS certificate" in line and "CERTIFICATE_VERIFY_FAILED" in line


def test_the_cli_reports_a_ca_cert_it_cannot_read(https: Served, tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    one_error_line(sqew("--url", https.url, "--ca-cert", str(missing), "health"), 1,
                   f"error: ValidationError: cannot read the CA certificate '{missing}'")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    one_error_line(sqew("--url", https.url, "--ca-cert", str(garbage), "health"), 1,
                   f"error: ValidationError: '{garbage}' is not a PEM CA certificate")


def test_the_client_verifies_against_ca_cert(https: Served, tls: Tls) -> None:
    with Client(https.url, ca_cert=tls.ca) as client:
        client.create_queue("py")
        assert client.enqueue("py", {"n": 1}).message_id == 1
        assert client.health().status == "ok"
    with Client(https.url) as client, pytest.raises(errors.Unavailable) as raised:
        client.health()
    assert "cannot verify the TLS certificate" in str(raised.value)


def test_https_with_two_workers(tls: Tls, tmp_path: Path) -> None:
    args = ("--tls-cert", str(tls.cert), "--tls-key", str(tls.key), "--workers", "2")
    with serve(tmp_path / "w.db", *args) as server:
        assert server.url.startswith("https://")
        with Client(server.url, ca_cert=str(tls.ca)) as client:
            client.create_queue("w")
            for i in range(20):  # new connections: both workers' sockets are reached
                with Client(server.url, ca_cert=str(tls.ca)) as each:
                    each.enqueue("w", i)
            assert client.stats("w").ready == 20


def test_a_plain_http_clients_context_trusts_no_certificate(https: Served) -> None:
    """A client of an ``http://`` URL gets a TLS context it never uses, built without loading
    any CA: should it ever make a handshake, the handshake fails, never goes unverified."""
    port = int(https.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=RUN_S) as raw, \
            pytest.raises(ssl.SSLCertVerificationError):
        client_tls.no_tls().wrap_socket(raw, server_hostname="127.0.0.1")


@pytest.mark.parametrize("flag", ["--tls-cert", "--tls-key"])
def test_serve_with_only_one_tls_flag_is_a_usage_error(tls: Tls, tmp_path: Path,
                                                      flag: str) -> None:
    result = sqew("serve", "--db", str(tmp_path / "u.db"), "--port", "0", flag, str(tls.cert))
    assert result.returncode == 2, result
    assert "--tls-cert" in result.stderr and "--tls-key" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_serve_with_unusable_tls_files_fails_clearly(tls: Tls, tmp_path: Path) -> None:
    db = str(tmp_path / "b.db")
    missing = tmp_path / "missing.pem"
    one_error_line(sqew("serve", "--db", db, "--port", "0", "--tls-cert", str(missing),
                        "--tls-key", str(tls.key)), 1,
                   f"error: ValidationError: cannot read the TLS certificate '{missing}'")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    one_error_line(sqew("serve", "--db", db, "--port", "0", "--tls-cert", str(garbage),
                        "--tls-key", str(tls.key)), 1,
                   "error: ValidationError: cannot serve TLS with certificate")
    # A key that is not the certificate's.
    other = trustme.CA().issue_cert("127.0.0.1")
    wrong_key = tmp_path / "wrong.pem"
    other.private_key_pem.write_to_path(str(wrong_key))
    one_error_line(sqew("serve", "--db", db, "--port", "0", "--tls-cert", str(tls.cert),
                        "--tls-key", str(wrong_key)), 1,
                   "error: ValidationError: cannot serve TLS with certificate")


# --- connections that never finish the handshake -------------------------------------------------
# A TLS connection is counted against max_connections, and held to header_timeout_s, from the
# moment it is accepted, its handshake included: silent sockets, or ones that send half a
# ClientHello, are evicted (the longest idle first) or timed out like any idle connection.
CLOSE_S = 20
"""How long a test waits for the server to close a connection (a far longer bound than the
timeout it checks)."""


def _half_client_hello() -> bytes:
    """The first half of a real TLS ClientHello (made by ``ssl``, never sent whole)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls_obj = ssl.create_default_context().wrap_bio(incoming, outgoing,
                                                    server_hostname="127.0.0.1")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls_obj.do_handshake()
    hello = outgoing.read()
    assert hello[:1] == b"\x16"  # a TLS handshake record
    return hello[: len(hello) // 2]


def _silent(port: int, index: int) -> socket.socket:
    """A connection that sends nothing (even ``index``) or half a ClientHello (odd)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if index % 2:
        sock.sendall(_half_client_hello())
    return sock


def _until_closed(sock: socket.socket, timeout: float = CLOSE_S) -> None:
    """Return once the server has closed ``sock`` (what it sends before is ignored)."""
    deadline = time.monotonic() + timeout
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return
        except TimeoutError:
            raise AssertionError(f"the server left the connection open {timeout} s") from None
        except ConnectionResetError:
            return


def _connections(server: Served) -> int:
    """The server's established TCP connections (its listening socket aside)."""
    return sum(c.status == psutil.CONN_ESTABLISHED
               for c in psutil.Process(server.proc.pid).net_connections("tcp"))


def test_handshakes_that_never_end_count_against_max_connections(tls: Tls,
                                                                  tmp_path: Path) -> None:
    env = {"SQEW_MAX_CONNECTIONS": "10", "SQEW_HEADER_TIMEOUT_S": "600",
           "SQEW_KEEP_ALIVE_TIMEOUT_S": "600"}
    args = ("--tls-cert", str(tls.cert), "--tls-key", str(tls.key))
    with serve(tmp_path / "m.db", *args, env=env) as server, contextlib.ExitStack() as stack:
        socks = [stack.enter_context(_silent(server.port, i)) for i in range(30)]
        # The longest idle were closed to make room: the process holds at most 10.
        deadline = time.monotonic() + CLOSE_S
        while _connections(server) > 10:
            assert time.monotonic() < deadline, _connections(server)
            time.sleep(0.05)
        _until_closed(socks[0])
        _until_closed(socks[1])
        # A real client is served, over a handshake of its own.
        with Client(server.url, ca_cert=tls.ca) as client:
            assert client.health().status == "ok"


def test_handshakes_that_never_end_are_closed_after_header_timeout_s(tls: Tls,
                                                                     tmp_path: Path) -> None:
    env = {"SQEW_HEADER_TIMEOUT_S": "1", "SQEW_KEEP_ALIVE_TIMEOUT_S": "1"}
    args = ("--tls-cert", str(tls.cert), "--tls-key", str(tls.key))
    with serve(tmp_path / "t.db", *args, env=env) as server, contextlib.ExitStack() as stack:
        socks = [stack.enter_context(_silent(server.port, i)) for i in range(6)]
        for sock in socks:
            _until_closed(sock)
        with Client(server.url, ca_cert=tls.ca) as client:
            assert client.health().status == "ok"


def test_the_dashboards_cookies_are_secure_over_https(https: Served, tls: Tls) -> None:
    with httpx.Client(base_url=https.url, verify=ssl.create_default_context(cafile=tls.ca),
                      timeout=30,
                      follow_redirects=False) as http:
        page = http.get("/ui/login")
        assert page.status_code == 200
        (csrf,) = [c for c in page.headers.get_list("set-cookie") if c.startswith("sqew_ui_csrf=")]
        assert "secure" in {p.strip().lower() for p in csrf.split(";")}
        # The server has no keys: any key logs in, as the API lets any request in.
        done = http.post("/ui/login", data={"csrf": http.cookies["sqew_ui_csrf"], "key": "k"})
        assert done.status_code == 303
        (kept,) = [c for c in done.headers.get_list("set-cookie") if c.startswith("sqew_ui_key=")]
        assert {"secure", "httponly", "samesite=strict"} <= {
            p.strip().lower() for p in kept.split(";")}
