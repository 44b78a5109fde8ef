"""When keys are enforced, and what failed attempts cost (docs/rest.md, "Auth").

- No key ever in the database: the server is open (any header, or none, works); the first key
  minted over HTTP turns enforcement on in that process at once, and it stays on when every
  key is gone (revoked, or deleted with its queue), until the owner of the file runs
  ``sqew keys open-access``; a server beyond loopback without ``--insecure`` requires keys
  even then.
- ``require_auth``: enforced with no key at all; only /healthz, /readyz (and /metrics, unless
  ``metrics_auth``) answer.
- ``/metrics`` is open while keys are enforced, unless ``metrics_auth``.
- Failed attempts per client address: beyond ``auth_failures_per_minute``, 429 ``RateLimited``
  with ``Retry-After`` for that address, its right key included; a request without any key
  counts as a failed attempt too.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import cli_runs
import httpx
from auth_support import bearer, create_queue, mint
from targets import ServerThread

from sqew.server.authenticator import KEYS_CHECK_S

from .support import envelope
from .test_auth_matrix import endpoints

Start = Callable[..., ServerThread]


def test_with_no_key_the_server_is_open_until_one_is_minted(start_server: Start) -> None:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.get("/queues").status_code == 200
        assert http.get("/queues", headers={"Authorization": "Bearer junk"}).status_code == 200
        made = http.post("/keys", json={"scopes": ["admin"]})  # the first key, over HTTP
        assert made.status_code == 201, made.text
        envelope(http.get("/queues"), 401, "Unauthorized")  # at once, in this process
        key = made.json()
        assert http.get("/queues", headers=bearer(key["key"])).status_code == 200
        gone = http.delete(f"/keys/{key['id']}", headers=bearer(key["key"]))
        assert gone.status_code == 204, gone.text
        envelope(http.get("/queues"), 401, "Unauthorized")  # no key left: still required


def test_a_bound_admin_key_deleting_its_queue_leaves_auth_on(
    start_server: Start, tmp_path: Any
) -> None:
    db = tmp_path / "bound.db"
    create_queue(db, "jobs")
    key = mint(db, "admin", queue="jobs").key
    server = start_server(db=db)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        gone = http.delete("/queues/jobs", headers=bearer(key))  # its key goes with it
        assert gone.status_code == 204, gone.text
        for response in (http.get("/queues"), http.post("/keys", json={"scopes": ["admin"]}),
                         http.post("/queues", json={"name": "mine"})):
            envelope(response, 401, "Unauthorized")


def test_open_access_on_the_file_opens_a_loopback_server_only(
    start_server: Start, tmp_path: Any
) -> None:
    db = tmp_path / "opened.db"
    key = mint(db, "admin")
    local = start_server(db=db)
    exposed = start_server(db=db, host="0.0.0.0")  # bound to 127.0.0.1 all the same
    refused = sqew_cli("--db", str(db), "keys", "open-access", "--yes")
    assert refused.returncode == 1 and "still has API keys" in refused.stderr
    httpx.delete(f"{local.url}/keys/{key.id}", headers=bearer(key.key)).raise_for_status()
    assert sqew_cli("--db", str(db), "keys", "open-access").returncode == 1  # no --yes
    done = sqew_cli("--db", str(db), "--json", "keys", "open-access", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '{"auth_required":false}'
    deadline = time.monotonic() + 10 * KEYS_CHECK_S  # a server reads the file again by then
    while httpx.get(f"{local.url}/queues").status_code != 200:
        assert time.monotonic() < deadline, "the loopback server still requires a key"
        time.sleep(0.05)
    envelope(httpx.get(f"{exposed.url}/queues"), 401, "Unauthorized")
    over_http = sqew_cli("--url", local.url, "keys", "open-access", "--yes")
    assert over_http.returncode == 1 and "--db" in over_http.stderr


def sqew_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``sqew`` command."""
    return cli_runs.completed(args, cwd=os.getcwd(), env=dict(os.environ))


def test_require_auth_with_no_key_refuses_all_but_the_open_routes(
    start_server: Start, tmp_path: Any
) -> None:
    server = start_server(require_auth=True, auth_failures_per_minute=0)  # each one a 401
    opened = {"/healthz", "/readyz", "/metrics"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for endpoint in endpoints():
            if endpoint.method == "OPTIONS":
                continue
            response = http.request(endpoint.method, endpoint.path)
            if endpoint.path in opened:
                assert response.status_code == 200, (str(endpoint), response.text)
            else:
                envelope(response, 401, "Unauthorized")
        envelope(http.post("/keys", json={"scopes": ["admin"]}), 401, "Unauthorized")


def test_metrics_are_open_unless_metrics_auth(start_server: Start, tmp_path: Any) -> None:
    db = tmp_path / "m.db"
    mint(db, "admin")
    server = start_server(db=str(db))
    assert httpx.get(server.url + "/metrics").status_code == 200
    envelope(httpx.get(server.url + "/queues"), 401, "Unauthorized")


def test_failed_attempts_are_rate_limited_per_address(start_server: Start, tmp_path: Any) -> None:
    db = tmp_path / "r.db"
    key = mint(db, "admin").key
    server = start_server(db=str(db), auth_failures_per_minute=3)
    wrong = bearer(key[:-43] + "A" * 43)  # a real id, another secret: argon2 runs
    with httpx.Client(base_url=server.url, timeout=30) as http:
        envelope(http.get("/queues"), 401, "Unauthorized")  # no key at all is an attempt too
        for _ in range(2):
            envelope(http.get("/queues", headers=wrong), 401, "Unauthorized")
        limited = http.get("/queues", headers=wrong)
        envelope(limited, 429, "RateLimited")
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        # the address is limited, whatever it sends: its right key too
        envelope(http.get("/queues", headers=bearer(key)), 429, "RateLimited")
        assert http.get("/healthz").status_code == 200  # open routes need no key work
        envelope(http.get("/queues/jobs/stats"), 429, "RateLimited")  # no key: limited too


def test_requests_without_a_key_use_up_the_addresss_allowance(
    start_server: Start, tmp_path: Any
) -> None:
    """Anonymous clients are limited like guessing ones: a flood of keyless requests costs
    the server one 401 per allowed attempt, then 429s before any other work."""
    db = tmp_path / "anon.db"
    key = mint(db, "admin").key
    server = start_server(db=str(db), auth_failures_per_minute=3)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        statuses = [http.get(f"/queues/q{i}/stats").status_code for i in range(10)]
        assert statuses == [401] * 3 + [429] * 7, statuses
        envelope(http.get("/queues", headers=bearer(key)), 429, "RateLimited")


def test_concurrent_wrong_keys_of_one_address_are_limited_like_sequential_ones(
    start_server: Start, tmp_path: Any
) -> None:
    """Each wrong key with a real id costs an argon2 verification: an address that sends many
    at once (one per connection) gets no more of them under way than it may fail; the rest
    are answered 429 before any key work. Counted only once verified, all of them passed."""
    db = tmp_path / "c.db"
    key = mint(db, "admin").key
    server = start_server(db=str(db), auth_failures_per_minute=3)
    count = 24
    ready = threading.Barrier(count)

    def attempt(i: int) -> int:
        wrong = bearer(key[:-43] + secrets.token_urlsafe(32))  # another secret each: no sharing
        with httpx.Client(base_url=server.url, timeout=60) as http:
            assert http.get("/healthz").status_code == 200  # connected
            ready.wait(30)
            response = http.get("/queues", headers=wrong)
        if response.status_code == 429:
            envelope(response, 429, "RateLimited")
            assert float(response.headers["retry-after"]) >= 1
        else:
            envelope(response, 401, "Unauthorized")
        return response.status_code

    with ThreadPoolExecutor(count) as pool:
        statuses = list(pool.map(attempt, range(count)))
    assert statuses.count(401) <= 3, statuses
    assert statuses.count(429) >= count - 3, statuses

