"""Signed enqueues (docs/rest.md, "Signed enqueues") against a real server on 127.0.0.1.

On a queue with an ``hmac_secret`` an enqueue needs ``X-Sqew-Signature: t=<unix seconds>,
v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>`` within 300 s of the server's time, else 401
``InvalidSignature``. The signatures here are computed with the standard library from the documented
formula, not with sqew's own helper, and time is the server's injected ManualClock.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from targets import ServerThread, server_settings

import sqew
from sqew.core.clock import ManualClock

from .support import envelope

SECRET = "an-hmac-secret-of-more-than-16-bytes"
HEADER = "X-Sqew-Signature"
CLOCK = ManualClock()


def now_s() -> int:
    return CLOCK() // 1000


def v1(body: bytes, t: int | str, secret: str = SECRET) -> str:
    """docs/rest.md: hex HMAC-SHA256(secret, "<t>." + raw body)."""
    return hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()


def signed(body: bytes, t: int | None = None, secret: str = SECRET) -> str:
    t = now_s() if t is None else t
    return f"t={t},v1={v1(body, t, secret)}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    srv = ServerThread(server_settings(tmp_path_factory.mktemp("hmac") / "h.db"), CLOCK)
    yield srv
    srv.stop()


@pytest.fixture
def http(server: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def new_queue(http: httpx.Client, **settings: Any) -> str:
    name = f"h{uuid.uuid4().hex[:12]}"
    created = http.post("/queues", json={"name": name, **settings})
    assert created.status_code == 201, created.text
    assert SECRET not in created.text
    return name


@pytest.fixture
def hq(http: httpx.Client) -> str:
    """A queue with the HMAC secret."""
    return new_queue(http, hmac_secret=SECRET)


def post(http: httpx.Client, q: str, body: bytes, *signatures: str,
         **headers: str) -> httpx.Response:
    pairs = [(HEADER, s) for s in signatures] + list(headers.items())
    return http.post(f"/queues/{q}/messages", content=body,
                     headers=[("content-type", "application/json"), *pairs])


def refused(response: httpx.Response, reason: str) -> dict[str, Any]:
    """A 401 InvalidSignature envelope whose details name the failed check; no secret in it."""
    error = envelope(response, 401, "InvalidSignature")
    assert error["details"] == [{"field": HEADER, "in": "header", "message": reason}], error
    assert SECRET not in response.text
    return error


def depth(http: httpx.Client, q: str) -> tuple[int, int]:
    stats = http.get(f"/queues/{q}/stats").json()
    return stats["ready"], stats["enqueued_total"]


# --- accepted -----------------------------------------------------------------------------------
def test_a_signed_enqueue_and_a_signed_batch_are_accepted(http: httpx.Client, hq: str) -> None:
    one = b'{ "payload" : {"n": 1, "text": "\\u00e9"} }'  # the exact bytes, spaces and all
    assert post(http, hq, one, signed(one)).status_code == 201
    batch = json.dumps({"messages": [{"payload": i} for i in range(3)]}).encode()
    answer = post(http, hq, batch, signed(batch))
    assert answer.status_code == 201, answer.text
    assert len(answer.json()["messages"]) == 3
    keyed = b'{"payload": 5, "idempotency_key": "k1"}'  # the idempotency path checks too
    assert post(http, hq, keyed, signed(keyed)).status_code == 201
    by_header = b'{"payload": 6}'
    assert post(http, hq, by_header, signed(by_header), **{"Idempotency-Key": "k2"}
                ).status_code == 201
    assert depth(http, hq) == (6, 6)


def test_several_v1_pass_when_one_matches(http: httpx.Client, hq: str) -> None:
    """A sender signing with an old and a new secret while the queue's secret changes."""
    body = b'{"payload": "rotating"}'
    t = now_s()
    value = f"t={t},v1={v1(body, t, 'the-old-secret-0123456789')},v1={v1(body, t)}"
    assert post(http, hq, body, value).status_code == 201


def test_the_window_is_300_seconds_either_way_of_the_server_clock(
    http: httpx.Client, hq: str
) -> None:
    body = b'{"payload": "edge"}'
    t = now_s()
    assert post(http, hq, body, signed(body, t - 300)).status_code == 201
    assert post(http, hq, body, signed(body, t + 300)).status_code == 201
    stale = refused(post(http, hq, body, signed(body, t - 301)), "stale")
    assert "stale" in stale["message"] and "301 s" in stale["message"]
    future = refused(post(http, hq, body, signed(body, t + 301)), "future")
    assert "future" in future["message"] and "301 s" in future["message"]
    # A signature valid now goes stale as the server's clock moves on.
    kept = signed(body, t)
    CLOCK.advance(301_000)
    refused(post(http, hq, body, kept), "stale")
    assert depth(http, hq) == (2, 2)


def test_a_queue_without_a_secret_ignores_well_formed_signatures(http: httpx.Client) -> None:
    q = new_queue(http)
    body = b'{"payload": 1}'
    assert post(http, q, body).status_code == 201
    assert post(http, q, body, signed(b"another body")).status_code == 201
    assert post(http, q, body, signed(body, t=0)).status_code == 201  # stale: not checked
    assert depth(http, q) == (3, 3)


def test_a_malformed_signature_is_refused_on_any_queue_first(http: httpx.Client) -> None:
    """The header's form is what docs/openapi.yaml states (a pattern): refused whatever the
    queue, before the body, the queue's existence or its settings are looked at."""
    q = new_queue(http, max_payload_bytes=10)
    body = b'{"payload": 1}'
    refused(post(http, q, body, "garbage"), "malformed")
    refused(post(http, q, body, signed(body), signed(body)), "malformed")  # repeated
    refused(post(http, q, b'{"payload": "more than ten bytes"}', "garbage"), "malformed")
    refused(post(http, q, b"not json", "garbage"), "malformed")
    refused(post(http, "no-such-queue", body, "garbage"), "malformed")
    assert depth(http, q) == (0, 0)


# --- refused ------------------------------------------------------------------------------------
def test_a_missing_signature_is_refused(http: httpx.Client, hq: str) -> None:
    error = refused(post(http, hq, b'{"payload": 1}'), "missing")
    assert HEADER in error["message"] and hq in error["message"]
    assert depth(http, hq) == (0, 0)


def test_a_tampered_body_or_another_secret_is_refused(http: httpx.Client, hq: str) -> None:
    body = b'{"payload": {"amount": 10}}'
    tampered = b'{"payload": {"amount": 1000}}'
    refused(post(http, hq, tampered, signed(body)), "mismatch")
    refused(post(http, hq, body + b" ", signed(body)), "mismatch")  # one byte more
    refused(post(http, hq, body, signed(body, secret="some-other-secret-16b")), "mismatch")
    batch = b'{"messages": [{"payload": 1}, {"payload": 2}]}'
    refused(post(http, hq, batch.replace(b"2", b"3"), signed(batch)), "mismatch")
    # The signature binds its t: the same digest under another t does not match.
    t = now_s()
    refused(post(http, hq, body, f"t={t + 1},v1={v1(body, t)}"), "mismatch")
    assert depth(http, hq) == (0, 0)


def _malformed_cases() -> dict[str, str]:
    body = b'{"payload": 1}'
    t = now_s()
    good = v1(body, t)
    return {
        "empty": "",
        "no v1": f"t={t}",
        "no t": f"v1={good}",
        "upper-case hex": f"t={t},v1={good.upper()}",
        "short digest": f"t={t},v1={good[:63]}",
        "long digest": f"t={t},v1={good}0",
        "space after comma": f"t={t}, v1={good}",
        "unknown element": f"t={t},v1={good},v0=abc",
        "t twice": f"t={t},t={t},v1={good}",
        "negative t": f"t=-{t},v1={good}",
        "t with leading zero": f"t=0{t},v1={v1(body, f'0{t}')}",
        "t not a number": f"t=now,v1={good}",
        "t of 20 digits": f"t={'9' * 20},v1={good}",
        "nine v1": f"t={t}" + f",v1={good}" * 9,
        "trailing comma": f"t={t},v1={good},",
        "semicolons": f"t={t};v1={good}",
    }


@pytest.mark.parametrize("case", list(_malformed_cases()))
def test_a_malformed_signature_is_refused(http: httpx.Client, hq: str, case: str) -> None:
    body = b'{"payload": 1}'
    error = refused(post(http, hq, body, _malformed_cases()[case]), "malformed")
    assert error["message"].startswith(f"malformed {HEADER} header: ")
    assert depth(http, hq) == (0, 0)


def test_the_dlq_of_a_queue_with_a_secret_takes_only_enqueues_signed_with_it(
    http: httpx.Client, hq: str
) -> None:
    """Messages in ``q.dlq`` are requeued to ``q``, where a consumer is handed them with a
    valid ``signature``: an unsigned enqueue to the DLQ would launder a message past the
    producer's check (and a produce key bound to ``q`` reaches ``q.dlq``)."""
    dlq = f"{hq}.dlq"
    body = b'{"payload": "forged"}'
    refused(post(http, dlq, body), "missing")
    refused(post(http, dlq, body, signed(body, secret="another-secret-of-16-bytes")), "mismatch")
    assert post(http, dlq, body, signed(body)).status_code == 201  # signed with q's secret
    batch = b'{"messages": [{"payload": "b"}]}'
    refused(post(http, dlq, batch), "missing")
    keyed = b'{"payload": "k", "idempotency_key": "d1"}'
    refused(post(http, dlq, keyed), "missing")
    assert http.post(f"/queues/{hq}/dlq/requeue").json() == {"requeued": 1, "left": 0}
    polled = http.post(f"/queues/{hq}/poll", params={"batch": 10}).json()["messages"]
    assert [m["payload"] for m in polled] == ["forged"]  # only the signed one came through


def test_a_repeated_signature_header_is_malformed(http: httpx.Client, hq: str) -> None:
    body = b'{"payload": 1}'
    refused(post(http, hq, body, signed(body), signed(body)), "malformed")


def test_the_signature_is_checked_before_the_messages_and_quotas(
    http: httpx.Client
) -> None:
    q = new_queue(http, hmac_secret=SECRET, max_depth=1, max_payload_bytes=100)
    big = json.dumps({"payload": "x" * 200}).encode()
    refused(post(http, q, big, signed(b"other")), "mismatch")  # not PayloadTooLarge
    one = b'{"payload": 1}'
    assert post(http, q, one, signed(one)).status_code == 201
    refused(post(http, q, one), "missing")  # not QueueFull
    envelope(post(http, q, one, signed(one)), 429, "QueueFull")


def test_the_secret_read_is_the_one_of_the_moment(http: httpx.Client, hq: str) -> None:
    body = b'{"payload": 1}'
    new_secret = "the-next-secret-0123456789"
    changed = http.patch(f"/queues/{hq}", json={"hmac_secret": new_secret})
    assert changed.status_code == 200 and new_secret not in changed.text
    refused(post(http, hq, body, signed(body)), "mismatch")
    assert post(http, hq, body, signed(body, secret=new_secret)).status_code == 201
    assert http.patch(f"/queues/{hq}", json={"hmac_secret": None}).status_code == 200
    assert post(http, hq, body).status_code == 201  # no secret: nothing to check


# --- a bad signature among merged enqueues --------------------------------------------------------
@pytest.mark.parametrize("quota", [False, True], ids=["plain", "with max_depth"])
def test_concurrent_good_and_bad_signatures_fail_only_their_own_requests(
    http: httpx.Client, server: ServerThread, quota: bool
) -> None:
    """Concurrent enqueues to one queue share a group commit and merge into one insert (with a
    quota, they run one by one in it): a bad signature fails its request alone."""
    q = new_queue(http, hmac_secret=SECRET, **({"max_depth": 10_000} if quota else {}))
    kinds = ["good", "tampered", "good", "missing", "good", "stale", "good batch"] * 6

    def request(i: int, kind: str) -> tuple[bytes, list[tuple[str, str]]]:
        if kind == "good batch":
            body = json.dumps({"messages": [{"payload": [i, 0]}, {"payload": [i, 1]}]})
            return body.encode(), [(HEADER, signed(body.encode()))]
        body_ = json.dumps({"payload": [i]}).encode()
        sig = {"good": signed(body_), "tampered": signed(body_ + b" "),
               "stale": signed(body_, now_s() - 400)}.get(kind)
        return body_, [] if sig is None else [(HEADER, sig)]

    async def send_all() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=len(kinds))
        async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=limits) as client:
            calls = []
            for i, kind in enumerate(kinds):
                body, headers = request(i, kind)
                calls.append(client.post(f"/queues/{q}/messages", content=body,
                                         headers=[("content-type", "application/json"),
                                                  *headers]))
            return list(await asyncio.gather(*calls))

    answers = asyncio.run(send_all())
    expected: list[Any] = []
    for i, (kind, answer) in enumerate(zip(kinds, answers, strict=True)):
        if kind.startswith("good"):
            assert answer.status_code == 201, (kind, answer.text)
            expected += [[i, 0], [i, 1]] if kind == "good batch" else [[i]]
        else:
            refused(answer, {"tampered": "mismatch"}.get(kind, kind))
    leased = http.post(f"/queues/{q}/poll", params={"batch": 100}).json()["messages"]
    assert sorted(m["payload"] for m in leased) == sorted(expected)
    assert depth(http, q) == (0, len(expected))  # all leased; nothing else was counted


# --- the secret stays write-only -----------------------------------------------------------------
def test_the_secret_never_comes_back(http: httpx.Client, hq: str) -> None:
    body = b'{"payload": "x"}'
    answers = [post(http, hq, body, signed(body)), post(http, hq, body),
               post(http, hq, body, signed(b"y")), post(http, hq, body, "t=1,v1=zz"),
               http.get(f"/queues/{hq}"), http.get("/queues"), http.get(f"/queues/{hq}/stats"),
               http.get(f"/queues/{hq}/peek"), http.post(f"/queues/{hq}/poll")]
    expected = v1(body, now_s())  # what the server computed for the wrong signatures
    for answer in answers:
        assert SECRET not in answer.text and expected not in answer.text
    (leased,) = answers[-1].json()["messages"]
    assert leased["signature"] == hmac.new(SECRET.encode(), b'"x"', hashlib.sha256).hexdigest()


# --- the clients --------------------------------------------------------------------------------
def test_an_http_client_with_the_secret_signs_its_enqueues(module_server: Any) -> None:
    """``Client(url, hmac_secret=)`` signs with the wall clock (a server on the system clock)."""
    admin = sqew.Client(module_server.url)
    signer = sqew.Client(module_server.url, hmac_secret=SECRET)
    wrong = sqew.Client(module_server.url, hmac_secret="not-the-queue-secret")
    try:
        q = f"c{uuid.uuid4().hex[:12]}"
        admin.create_queue(q, hmac_secret=SECRET)
        assert signer.enqueue(q, {"n": 1}).message_id > 0
        assert len(signer.enqueue_batch(q, [{"payload": i} for i in range(3)])) == 3
        for client in (admin, wrong):
            with pytest.raises(sqew.errors.InvalidSignature) as caught:
                client.enqueue(q, 1)
            assert SECRET not in str(caught.value)
            with pytest.raises(sqew.errors.InvalidSignature):
                client.enqueue_batch(q, [{"payload": 1}])
        assert admin.stats(q).enqueued_total == 4
    finally:
        for client in (admin, signer, wrong):
            client.close()


def test_leased_messages_verify_with_sqew_verify_signature_over_http(module_server: Any) -> None:
    with sqew.Client(module_server.url, hmac_secret=SECRET) as client, httpx.Client(
            base_url=module_server.url) as raw:
        q = f"v{uuid.uuid4().hex[:12]}"
        client.create_queue(q, hmac_secret=SECRET)
        client.enqueue(q, {"b": [1, 2.5, "é"]})
        # Payload text that is not what an encoder would write again: kept as sent, and the
        # signature covers that text.
        body = b'{"payload": {"a" : 1,  "z": 1.50}}'
        assert raw.post(f"/queues/{q}/messages", content=body,
                        headers={HEADER: signed(body, int(time.time()))}).status_code == 201
        leased = client.poll(q, batch=10)
        assert [m.payload for m in leased] == [{"b": [1, 2.5, "é"]}, {"a": 1, "z": 1.5}]
        for m in leased:
            assert isinstance(m.signature, str)
            assert sqew.verify_signature(m, SECRET)
            assert not sqew.verify_signature(m, SECRET + "x")
        plain = f"p{uuid.uuid4().hex[:12]}"
        client.create_queue(plain)
        client.enqueue(plain, 1)
        (unsigned,) = client.poll(plain)
        assert not sqew.verify_signature(unsigned, SECRET)  # no signature to check


def test_verify_signature_takes_a_leased_message_decoded_from_json(module_server: Any) -> None:
    """A dict (``json.loads`` of a poll answer): its payload is checked as compact JSON, which
    is what sqew's clients send."""
    with sqew.Client(module_server.url, hmac_secret=SECRET) as client, httpx.Client(
            base_url=module_server.url) as raw:
        q = f"d{uuid.uuid4().hex[:12]}"
        client.create_queue(q, hmac_secret=SECRET)
        client.enqueue(q, {"b": [1, 2.5, "é"]})
        (m,) = raw.post(f"/queues/{q}/poll").json()["messages"]
        assert sqew.verify_signature(m, SECRET)
        assert not sqew.verify_signature(m, SECRET + "x")
        assert not sqew.verify_signature({**m, "payload": {"b": [2]}}, SECRET)
        assert not sqew.verify_signature({"payload": 1}, SECRET)  # no signature to check


def test_a_local_client_takes_the_secret_and_its_leases_verify(tmp_path: Path) -> None:
    """On a file the owner is trusted: enqueues are not checked (with or without the secret),
    and leased messages carry their signature all the same."""
    with sqew.Client(tmp_path / "l.db", hmac_secret=SECRET) as client, sqew.Client(
            tmp_path / "l.db") as plain:
        assert isinstance(client, sqew.LocalClient)
        client.create_queue("q", hmac_secret=SECRET)
        client.enqueue("q", {"n": 1})
        plain.enqueue("q", {"n": 2})
        plain.enqueue("q", msgspec.Raw(b'{"n" :  3.0}'))  # JSON text kept as it is
        leased = client.poll("q", batch=10)
        assert [m.payload for m in leased] == [{"n": 1}, {"n": 2}, {"n": 3.0}]
        assert all(sqew.verify_signature(m, SECRET) for m in leased)
        assert not any(sqew.verify_signature(m, "another-secret-16-bytes") for m in leased)
        # A message whose payload was changed after it was leased no longer verifies.
        leased[0].payload = {"n": 100}
        tampered = msgspec.structs.replace(leased[0])  # a copy keeps no payload text
        assert not sqew.verify_signature(tampered, SECRET)
