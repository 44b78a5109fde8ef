"""The CLI with API keys (docs/cli.md): ``--api-key`` / ``SQEW_API_KEY`` over ``--url``, none
needed on the database file, and ``sqew serve`` refusing to listen beyond loopback with no key.

Keys are minted straight into the database file (``auth_support.mint``) before the server
starts, so it enforces them from its first request.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import cli_runs
import httpx
import pytest
from auth_support import create_queue, mint
from cli_support import (
    SERVE_START_S,
    SERVE_STOP_S,
    Server,
    Sqew,
    assert_failed,
    clean_env,
    run_sqew,
    serve,
)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str]]:
    """A server whose database holds an admin key and a produce key bound to ``jobs``."""
    base = tmp_path_factory.mktemp("cli-auth")
    db = base / "keyed.db"
    create_queue(db, "jobs")
    admin = mint(db, "admin").key
    producer = mint(db, "produce", queue="jobs").key
    with serve(db, base) as server:
        yield server, admin, producer


def test_api_key_option_and_env_reach_a_keyed_server(
    keyed: tuple[Server, str, str], tmp_path: Path
) -> None:
    server, admin, _ = keyed
    remote = Sqew(tmp_path, server.db, server.url)
    by_option = remote.json("--api-key", admin, "queue", "list")
    by_env = remote.json("queue", "list", env={"SQEW_API_KEY": admin})
    assert by_option == by_env
    assert "jobs" in {q["name"] for q in by_option["queues"]}


def test_without_a_key_or_with_a_wrong_one_the_cli_says_unauthorized(
    keyed: tuple[Server, str, str], tmp_path: Path
) -> None:
    server, admin, _ = keyed
    remote = Sqew(tmp_path, server.db, server.url)
    missing = remote.fails("queue", "list", code="Unauthorized")
    wrong = admin[:-43] + "B" * 43
    bad = remote.fails("--api-key", wrong, "queue", "list", code="Unauthorized")
    assert wrong not in bad.stderr + missing.stderr
    remote.fails("--api-key", "not-a-key", "queue", "list", code="Unauthorized")


def test_a_key_with_stray_whitespace_works_and_a_broken_one_is_never_echoed(
    keyed: tuple[Server, str, str], tmp_path: Path
) -> None:
    """A key read from a file keeps its line ending (``SQEW_API_KEY`` from a CRLF file, say):
    the surrounding whitespace is not part of a key. A key no HTTP header can carry is
    refused before anything is sent, and the error line never holds it (httpx's own error
    quoted the whole header, key and all)."""
    server, admin, _ = keyed
    remote = Sqew(tmp_path, server.db, server.url)
    assert "jobs" in {q["name"] for q in remote.json("--api-key", admin + "\r\n", "queue",
                                                     "list")["queues"]}
    remote.json("queue", "list", env={"SQEW_API_KEY": f" {admin} "})
    secret = admin[-43:]
    for broken in (admin[:30] + "\n" + admin[30:], admin[:30] + "\u00e9" + admin[30:],
                   admin[:30] + "\x01" + admin[30:]):
        failed = remote.fails("--api-key", broken, "queue", "list", code="ValidationError")
        assert secret[:8] not in failed.stderr + failed.stdout, failed.stderr
        assert "\\x" not in failed.stderr, failed.stderr


def test_a_key_without_the_scope_is_forbidden(
    keyed: tuple[Server, str, str], tmp_path: Path
) -> None:
    server, _, producer = keyed
    remote = Sqew(tmp_path, server.db, server.url)
    remote.ok("--api-key", producer, "message", "enqueue", "--queue", "jobs", "--payload", "1")
    remote.fails("--api-key", producer, "queue", "add", "--name", "nope", code="Forbidden")
    remote.fails("--api-key", producer, "message", "get", "--queue", "jobs", code="Forbidden")


def test_the_local_cli_needs_no_key_on_the_file(
    keyed: tuple[Server, str, str], tmp_path: Path
) -> None:
    server, _, _ = keyed
    local = Sqew(tmp_path, server.db)
    assert "jobs" in {q["name"] for q in local.json("queue", "list")["queues"]}
    local.ok("message", "enqueue", "--queue", "jobs", "--payload", "2")


# --- sqew serve beyond loopback -----------------------------------------------------------------
def test_serve_on_a_public_host_with_no_key_refuses_to_start(tmp_path: Path) -> None:
    db = tmp_path / "open.db"
    result = run_sqew(["serve", "--db", str(db), "--host", "0.0.0.0", "--port", "0"],
                      cwd=tmp_path, env=clean_env())
    assert_failed(result, "Forbidden")
    assert f"sqew --db {db} keys create --scope admin" in result.stderr
    assert "--insecure" in result.stderr


@contextlib.contextmanager
def started(args: list[str], cwd: Path, env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """``sqew serve *args`` until it announces itself: (its URL on 127.0.0.1, its log file);
    stopped by its PID afterwards."""
    log = cwd / "serve.log"
    with log.open("wb") as out:
        proc = cli_runs.start(["serve", *args], cwd=cwd, env=env, log=out)
    try:
        deadline = time.monotonic() + SERVE_START_S
        while not (found := re.search(r"sqew serving on http://[^:]+:(\d+)", log.read_text())):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        yield f"http://127.0.0.1:{found.group(1)}", log
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(SERVE_STOP_S)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(SERVE_STOP_S)


def test_serve_on_a_public_host_with_insecure_starts_open_and_warns(tmp_path: Path) -> None:
    args = ["--db", str(tmp_path / "open.db"), "--host", "0.0.0.0", "--port", "0", "--insecure"]
    with started(args, tmp_path, clean_env()) as (url, log):
        assert httpx.get(url + "/queues", timeout=30).status_code == 200  # open
        logged = [json.loads(line) for line in log.read_text().splitlines()
                  if line.startswith("{")]  # stderr (JSON: no terminal), with stdout's line
        warned = [r for r in logged if r["level"] == "warning" and "--insecure" in r["message"]]
        assert warned, log.read_text()


def test_serve_on_a_public_host_starts_when_keys_are_enforced(tmp_path: Path) -> None:
    db = tmp_path / "keyed.db"
    mint(db, "admin")
    with started(["--db", str(db), "--host", "0.0.0.0", "--port", "0"], tmp_path,
                 clean_env()) as (url, _):
        assert httpx.get(url + "/queues", timeout=30).status_code == 401
    required = ["--db", str(tmp_path / "none.db"), "--host", "0.0.0.0", "--port", "0"]
    with started(required, tmp_path, clean_env(SQEW_REQUIRE_AUTH="true")) as (url, _):
        assert httpx.get(url + "/queues", timeout=30).status_code == 401
