"""What guessing API keys from many addresses costs a server (real HTTP on 127.0.0.1).

Every request comes from a source address of its own (``127.0.x.y``: Linux routes the whole
``127.0.0.0/8`` to loopback), as an attacker rotating addresses would send them.

- A key id with too many failed secrets is answered 429 ``RateLimited`` whatever the address,
  before any argon2 work; a key a process has verified keeps working there.
- IPv6 clients are counted by /64 (a host is given a whole /64 to pick addresses from).
- While wrong secrets for real key ids pour in from many addresses, a valid key still
  authenticates, and the argon2 verifications that run stay bounded: waiting ones are few,
  the rest refused at once.

``sqew_auth_verifications_total`` (``/metrics``) counts the argon2 verifications run.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from auth_support import bearer, mint
from metrics_support import parse, value
from targets import ServerThread, server_settings

from .support import envelope

Start = Callable[..., ServerThread]


def address(i: int) -> str:
    """The ``i``-th source address of the attack (never 127.0.0.1, the test's own)."""
    return f"127.0.{1 + i // 250}.{1 + i % 250}"


def client_from(url: str, source: str) -> httpx.Client:
    """An HTTP client whose connections leave from ``source``."""
    return httpx.Client(base_url=url, timeout=60,
                        transport=httpx.HTTPTransport(local_address=source))


def wrong_secret(key: str) -> dict[str, str]:
    """``key``'s id with another secret: a real id, so argon2 would run."""
    return bearer(key[:-43] + secrets.token_urlsafe(32)[:43])


def allowance(per_minute: int, since: float) -> int:
    """The failed attempts a leaky bucket of ``per_minute`` admits from ``since``
    (``time.monotonic()``) until now: the burst, then one per ``60 / per_minute`` s."""
    return per_minute + int((time.monotonic() - since) * per_minute / 60)


def verifications(url: str, result: str) -> float:
    """The argon2 verifications run so far with ``result`` (valid or invalid)."""
    response = httpx.get(url + "/metrics", timeout=30)
    assert response.status_code == 200, response.text
    return value(parse(response.text), "sqew_auth_verifications_total", result=result)


def test_wrong_secrets_for_one_key_id_from_many_addresses_are_limited_by_key_id(
    start_server: Start, tmp_path: Path
) -> None:
    db = tmp_path / "k.db"
    target = mint(db, "admin").key
    other = mint(db, "admin").key
    server = start_server(db=str(db), auth_failures_per_minute=5)
    with client_from(server.url, address(999)) as user:
        assert user.get("/queues", headers=bearer(target)).status_code == 200  # verified here
        statuses = []
        started = time.monotonic()
        for i in range(40):
            with client_from(server.url, address(i)) as attacker:
                response = attacker.get("/queues", headers=wrong_secret(target))
            if response.status_code == 429:
                envelope(response, 429, "RateLimited")
                assert float(response.headers["retry-after"]) >= 1
            else:
                envelope(response, 401, "Unauthorized")
            statuses.append(response.status_code)
        # 5 at once, then one more per 12 s of the run (a slow machine's run leaks some)
        assert statuses[:6] == [401] * 5 + [429], statuses
        assert statuses.count(401) <= allowance(5, started), statuses
        assert verifications(server.url, "invalid") == statuses.count(401)
        # The key id is slowed, not its holder where the key is known: this process verified
        # it before, and keeps serving it without argon2. Another key is not slowed at all.
        assert user.get("/queues", headers=bearer(target)).status_code == 200
        with client_from(server.url, address(998)) as fresh:
            assert fresh.get("/queues", headers=bearer(other)).status_code == 200
    assert verifications(server.url, "valid") == 2


@pytest.fixture
def behind_a_proxy(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A server that takes the client's address from ``X-Forwarded-For`` (uvicorn's own
    proxy-headers middleware, trusting 127.0.0.1), as behind a reverse proxy that says who
    the client is: how a test gives requests IPv6 addresses of its choosing. Yields the URL
    and an admin key."""
    import uvicorn

    from sqew.server import runner
    from sqew.server.app import create_app

    db = tmp_path / "v6.db"
    key = mint(db, "admin").key
    settings = server_settings(db, auth_failures_per_minute=3)
    config = runner.uvicorn_config(settings, app=create_app(settings))
    config.proxy_headers, config.forwarded_allow_ips = True, "127.0.0.1"
    server = uvicorn.Server(config)
    sock = runner.bind("127.0.0.1", 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", key
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def test_ipv6_clients_are_limited_by_their_64(behind_a_proxy: tuple[str, str]) -> None:
    url, key = behind_a_proxy

    def get(source: str, **headers: str) -> httpx.Response:
        return httpx.get(url + "/queues", headers={"X-Forwarded-For": source, **headers},
                         timeout=30)

    unknown = bearer("sqew_0123456789abcdef_" + "A" * 43)  # no such id: per address only
    statuses = [get(f"2001:db8:0:1:{i:x}::{i + 1:x}", **unknown).status_code
                for i in range(6)]
    assert statuses == [401] * 3 + [429] * 3, statuses
    envelope(get("2001:db8:0:1:ffff:ffff:ffff:ffff", **bearer(key)), 429, "RateLimited")
    assert get("2001:db8:0:2::1", **bearer(key)).status_code == 200  # another /64
    assert get("127.0.0.1", **bearer(key)).status_code == 200


def test_a_valid_key_authenticates_while_wrong_secrets_pour_in(
    start_server: Start, tmp_path: Path
) -> None:
    """Wrong secrets for three real key ids from 90 addresses at once, and a valid key that
    this process has never seen in the middle of them: the valid key is served, and argon2
    ran for few of the wrong ones (at most the allowance of each key id); the others were
    refused at once."""
    db = tmp_path / "a.db"
    targets = [mint(db, "produce").key for _ in range(3)]
    valid = mint(db, "admin").key
    server = start_server(db=str(db), auth_failures_per_minute=4)
    count = 90
    ready = threading.Barrier(count + 2)  # the attackers, the valid key and this thread

    def attack(i: int) -> int:
        with client_from(server.url, address(i)) as attacker:
            assert attacker.get("/healthz").status_code == 200  # connected
            ready.wait(30)
            response = attacker.get("/queues", headers=wrong_secret(targets[i % 3]))
        assert response.status_code in (401, 429), response.text
        return response.status_code

    def legit() -> Any:
        with client_from(server.url, address(count)) as user:
            assert user.get("/healthz").status_code == 200
            ready.wait(30)
            return user.get("/queues", headers=bearer(valid))

    with ThreadPoolExecutor(count + 1) as pool:
        attacks = [pool.submit(attack, i) for i in range(count)]
        answer = pool.submit(legit)
        ready.wait(30)  # (never passes before every thread is there)
        started = time.monotonic()
        statuses = [a.result(120) for a in attacks]
        assert answer.result(120).status_code == 200, answer.result().text
    # Each key id's allowance (and its leak while the attack ran) at most: counted from the
    # start of each verification, so concurrent ones cannot all pass.
    assert statuses.count(401) <= 3 * allowance(4, started), statuses
    assert verifications(server.url, "invalid") == statuses.count(401)
    assert verifications(server.url, "valid") == 1


def test_suspect_verifications_beyond_a_few_waiting_are_refused_at_once(
    start_server: Start, tmp_path: Path
) -> None:
    """With the allowances out of the way (a huge one), a flood of wrong secrets for one real
    key id from 100 addresses: a few verifications run and a few wait, the rest are answered
    429 at once without argon2; a valid key (clean: its client and id have no failure) goes
    before every waiting suspect one and is never refused."""
    db = tmp_path / "g.db"
    target = mint(db, "produce").key
    valid = mint(db, "admin").key
    server = start_server(db=str(db), auth_failures_per_minute=100_000)
    count = 100
    ready = threading.Barrier(count + 1)

    def attack(i: int) -> httpx.Response:
        with client_from(server.url, address(i)) as attacker:
            assert attacker.get("/healthz").status_code == 200  # connected
            ready.wait(30)
            return attacker.get("/queues", headers=wrong_secret(target))

    def legit() -> httpx.Response:
        with client_from(server.url, address(count)) as user:
            assert user.get("/healthz").status_code == 200
            ready.wait(30)
            return user.get("/queues", headers=bearer(valid))

    with ThreadPoolExecutor(count + 1) as pool:
        attacks = [pool.submit(attack, i) for i in range(count)]
        answer = pool.submit(legit).result(120)
        responses = [a.result(120) for a in attacks]
    assert answer.status_code == 200, answer.text
    refused = [r for r in responses if r.status_code == 429]
    for r in refused:
        assert "verifications are waiting" in envelope(r, 429, "RateLimited")["message"]
        assert r.headers["retry-after"] == "1"
    assert all(r.status_code in (401, 429) for r in responses)
    assert refused, "100 wrong secrets at once: more than a few must have been refused"
    assert verifications(server.url, "invalid") == count - len(refused)
