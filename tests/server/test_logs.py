"""Structured logs of a real ``sqew serve``: stderr parsed line by line as JSON.

- a session with keys, a bad key, an HMAC queue, payloads, polls and acks: one ``request`` line
  per request with the route template, status, duration, queue, key id and the request id its
  ``X-Request-Id`` header carries (an incoming sane id is kept); lifecycle events in order; no
  key, token, secret or payload anywhere in the log;
- a real 500 (a table dropped under the running server): its traceback under its request id;
- the reaper's runs, with counts; ``--workers 2``: every process logs JSON, each is ready;
- the access log off, a higher level, the text format, and text by default on a terminal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pty
import re
import select
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
from auth_support import bearer, mint

from sqew import __version__
from sqew.core import signing

from .support import SQEW_BIN, START_S, STOP_S, serve

SECRET = "hmac-secret-not-for-logs-5f2c9a"
PAYLOAD_MARK = "payload-text-not-for-logs-81d3"
WRONG_KEY = "sqew_0123456789abcdef_" + "W" * 43
LIFECYCLE = ["start", "migrations_applied", "listening", "ready", "shutdown_begun",
             "shutdown_finished", "stop"]


def records(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` as a JSON object (each line must be one)."""
    out = []
    for line in text.splitlines():
        record = json.loads(line)
        assert isinstance(record, dict), line
        assert {"time", "level", "logger", "message", "pid"} <= set(record), record
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"]), record
        out.append(record)
    return out


def requests_by_id(logged: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The access lines by request id (each id once)."""
    lines = [r for r in logged if r.get("event") == "request"]
    by_id = {r["request_id"]: r for r in lines}
    assert len(by_id) == len(lines), lines
    return by_id


def test_a_session_logs_each_request_once_with_its_id_and_no_secret(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    admin = mint(db, "admin")
    auth = bearer(admin.key)
    responses: list[tuple[httpx.Response, str, str, str | None, str | None]] = []
    with serve(db, "--log-format", "json", "--access-log") as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:

        def call(method: str, path: str, route: str, queue: str | None, key: str | None,
                 **kwargs: Any) -> httpx.Response:
            response = http.request(method, path, **kwargs)
            responses.append((response, method, route, queue, key))
            return response

        call("POST", "/queues", "/queues", None, admin.id, json={"name": "signed",
                                                                 "hmac_secret": SECRET},
             headers=auth)
        body = json.dumps({"payload": {"note": PAYLOAD_MARK}}).encode()
        sent = call("POST", "/queues/signed/messages", "/queues/{q}/messages", "signed",
                    admin.id, content=body, headers={
                        **auth, "X-Sqew-Signature": signing.header(SECRET, body),
                        "Content-Type": "application/json", "X-Request-Id": "client-id-42"})
        assert sent.status_code == 201, sent.text
        assert sent.headers["x-request-id"] == "client-id-42"  # a sane incoming id is kept
        polled = call("POST", "/queues/signed/poll", "/queues/{q}/poll", "signed", admin.id,
                      headers=auth)
        leased = polled.json()["messages"][0]
        call("POST", "/queues/signed/ack", "/queues/{q}/ack", "signed", admin.id,
             json={"id": leased["id"], "token": leased["token"]}, headers=auth)
        refused = call("GET", "/queues", "/queues", None, None, headers=bearer(WRONG_KEY))
        assert refused.status_code == 401
        odd = call("GET", "/queues/signed/stats", "/queues/{q}/stats", "signed", admin.id,
                   headers={**auth, "X-Request-Id": "has spaces and \"quotes\""})
        assert odd.headers["x-request-id"] != "has spaces and \"quotes\""  # replaced
        call("GET", "/no/such/path", "", None, None, headers=auth)
        assert server.stop() == 0
        text = server.stderr()

    logged = records(text)
    by_id = requests_by_id(logged)
    assert len(by_id) == len(responses)
    for response, method, route, queue, key_id in responses:
        rid = response.headers["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{16}|client-id-42", rid), rid
        line = by_id[rid]
        assert (line["method"], line["route"] or "", line["status"], line["queue"],
                line["key_id"]) == (method, route, response.status_code, queue, key_id), line
        assert line["level"] == "info" and line["logger"] == "sqew.access"
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
        assert line["client"] == "127.0.0.1"
    events = [r["event"] for r in logged if r.get("event") in LIFECYCLE]
    assert events == [e for e in LIFECYCLE if e != "migrations_applied"], events  # minted: made
    start = next(r for r in logged if r.get("event") == "start")
    assert start["version"] == __version__ and start["db"] == str(db)
    listening = next(r for r in logged if r.get("event") == "listening")
    assert listening["address"] == server.url
    # The secret is all after "sqew_<16 hex>_"; it may itself hold "_".
    secret_part = admin.key[len("sqew_") + 17:]
    for secret in (admin.key, secret_part, WRONG_KEY, SECRET, PAYLOAD_MARK,
                   leased["token"]):
        assert secret not in text, f"the log holds {secret[:8]}…"


def test_a_500_is_logged_with_its_traceback_under_its_request_id(tmp_path: Path) -> None:
    db = tmp_path / "broken.db"
    with serve(db, "--log-format", "json") as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/queues", json={"name": "q"}).status_code == 201
        with contextlib.closing(sqlite3.connect(db)) as conn:  # another program damages it
            conn.execute("DROP TABLE dedup")
            conn.commit()
        response = http.post("/queues/q/messages", json={"payload": 1, "idempotency_key": "k"})
        assert response.status_code == 500
        rid = response.headers["x-request-id"]
        assert rid in response.json()["error"]["message"] and "dedup" not in response.text
        assert server.stop() == 0
        logged = records(server.stderr())
    errors = [r for r in logged if r.get("event") == "error"]
    assert len(errors) == 1, errors
    error = errors[0]
    assert (error["level"], error["request_id"], error["route"], error["queue"]) == (
        "error", rid, "/queues/{q}/messages", "q")
    assert error["traceback"].startswith("Traceback") and "InternalError" in error["traceback"]
    # The database's own error is logged by the writer that met it (a group commit may hold
    # several requests' operations): the detail is in the log, not in the answer.
    assert [r for r in logged if r["level"] == "error" and "dedup" in r.get("traceback", "")]


def test_the_reaper_logs_what_it_removed(tmp_path: Path) -> None:
    with serve(tmp_path / "r.db", "--log-format", "json", "--reap-interval-ms", "50") as server:
        httpx.post(f"{server.url}/queues", json={"name": "q"}, timeout=30)
        sent = httpx.post(f"{server.url}/queues/q/messages", timeout=30,
                          json={"messages": [{"payload": i, "ttl_ms": 1000} for i in range(3)]})
        assert sent.status_code == 201, sent.text

        def reaped(lines: list[str]) -> int:
            return sum(json.loads(line).get("removed", 0) for line in lines
                       if '"event":"reap"' in line)

        assert server.log.until(lambda lines: reaped(lines) >= 3, START_S), server.log.text()
        logged = records(server.log.text())
    reap = next(r for r in logged if r.get("event") == "reap")
    assert reap["level"] == "info" and reap["removed"] >= 1 and reap["duration_ms"] >= 0
    # A new database: the schema was made, and said so, between start and listening.
    events = [r["event"] for r in logged if r.get("event") in LIFECYCLE]
    assert events[:4] == LIFECYCLE[:4], events
    made = next(r for r in logged if r.get("event") == "migrations_applied")
    assert made["from_revision"] is None and made["to_revision"]


def test_two_workers_log_json_lines_each_ready(tmp_path: Path) -> None:
    with serve(tmp_path / "w.db", "--workers", "2", "--access-log",
               env={"SQEW_LOG_FORMAT": "json"}) as server:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            ids = {http.get("/healthz").headers["x-request-id"] for _ in range(10)}

            def all_logged(lines: list[str]) -> bool:
                return ids <= {json.loads(line).get("request_id") for line in lines}

            assert server.log.until(all_logged, START_S), server.log.text()
        assert server.stop() == 0
        logged = records(server.stderr())
    ready = {r["pid"] for r in logged if r.get("event") == "ready"}
    start = [r for r in logged if r.get("event") == "start"]
    assert len(ready) == 2 and len(start) == 1 and start[0]["pid"] not in ready, logged
    assert {r["pid"] for r in logged if r.get("event") == "shutdown_finished"} == ready


def test_no_access_log_or_a_higher_level_logs_no_request(tmp_path: Path) -> None:
    for args in (["--log-format", "json"], ["--log-format", "json", "--access-log",
                                            "--log-level", "warning"]):
        with serve(tmp_path / "q.db", *args) as server:
            response = httpx.get(f"{server.url}/healthz", timeout=30)
            assert re.fullmatch(r"[0-9a-f]{16}", response.headers["x-request-id"])
            assert server.stop() == 0
            logged = records(server.stderr())
        assert not [r for r in logged if r.get("event") == "request"], logged
        if "warning" in args:
            assert not [r for r in logged if r["level"] == "info"], logged


def test_text_format_and_the_default_on_a_terminal(tmp_path: Path) -> None:
    with serve(tmp_path / "t.db", "--log-format", "text") as server:
        httpx.get(f"{server.url}/healthz", timeout=30)  # serving: its signal handlers are set
        assert server.stop() == 0
        lines = server.stderr().splitlines()
    assert lines and not [line for line in lines if line.startswith("{")], lines
    assert re.match(r"\d{4}-\d\d-\d\dT[\d:.]+Z INFO +sqew.server: starting sqew ", lines[0])
    # With no --log-format, a terminal gets text (a pseudo-terminal as stderr here).
    first = _stderr_on_a_terminal(tmp_path / "tty.db")
    assert " INFO " in first and "starting sqew" in first and not first.startswith("{"), first


def test_text_logs_escape_what_clients_send(tmp_path: Path) -> None:
    """A URL with ``%0a`` cannot forge a log line, nor ``%1b`` drive the operator's terminal:
    control characters of the text format's values are escaped (JSON escapes its own)."""
    forged = "2099-01-01T00:00:00.000Z INFO    sqew.server: forged"
    with serve(tmp_path / "x.db", "--log-format", "text", "--access-log") as server:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for path in ("/queues/a%0a2099-01-01T00:00:00.000Z%20INFO%20%20%20%20sqew.server:"
                         "%20forged/stats", "/queues/b%1b%5b2J%1b%5d0;t%07%c2%9b%e2%80%ae/stats"):
                assert http.get(path).status_code == 404
        assert server.stop() == 0
        text = server.stderr()
    lines = text.splitlines()
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")
    assert all(stamp.match(line) for line in lines), lines
    assert not [line for line in lines if line.startswith(forged)], lines
    for char in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert char not in text, (char, text)
    assert "queue=a\\n2099-01-01" in text, text
    assert "queue=b\\x1b[2J\\x1b]0;t\\x07\\x9b\\u202e" in text, text


def test_a_traceback_in_text_logs_cannot_pass_for_records() -> None:
    """Every line after a record's first is indented, its control characters escaped: an
    exception's message holding a newline and a made-up record stays inside the record."""
    from sqew.server.logs import TextFormatter

    try:
        raise ValueError("bad\n2099-01-01T00:00:00.000Z INFO    sqew.server: forged\x1b[2J")
    except ValueError:
        import sys
        record = logging.LogRecord("sqew.server", logging.ERROR, __file__, 1,
                                   "failed on %s", ("q\x1b[2J",), sys.exc_info())
    lines = TextFormatter().format(record).split("\n")
    assert lines[0].endswith("failed on q\\x1b[2J"), lines
    assert all(line.startswith("  ") for line in lines[1:]), lines
    assert "\x1b" not in "\n".join(lines)


def _stderr_on_a_terminal(db: Path) -> str:
    """The first line ``sqew serve`` writes on stderr when stderr is a terminal."""
    controller, terminal = pty.openpty()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SQEW_")}
    proc = subprocess.Popen([str(SQEW_BIN), "serve", "--db", str(db), "--port", "0"],
                            env=clean, stdout=subprocess.DEVNULL, stderr=terminal,
                            stdin=subprocess.DEVNULL)
    os.close(terminal)
    try:
        first = _read_line(controller)
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
        proc.kill()
        proc.wait(STOP_S)
        os.close(controller)
    return first


def _read_line(fd: int) -> str:
    """The first line readable on ``fd`` ('' if none comes within ``START_S``)."""
    deadline = time.monotonic() + START_S
    data = b""
    while b"\n" not in data and time.monotonic() < deadline:
        readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not readable:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the terminal closed
            break
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").splitlines()[0] if data else ""
