"""``sqew.Relay`` on every target (a file, a server in a thread, PostgreSQL) delivering to a
real HTTP receiver on 127.0.0.1: every message ends acked, delayed by the receiver's
``Retry-After`` or in the DLQ as the answers say, none delivered twice at once; the request
is the payload as sent with the documented headers; a signed queue's deliveries verify; an
unreachable receiver costs no attempts while it is away."""

from __future__ import annotations

import email.utils
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
import trustme
from relay_support import Answer, Receiver, until
from targets import Target

import sqew
from sqew.core import signing
from sqew.relay import verify_delivery

SECRET = "s3cret-s3cret-s3cret-s3cret-s3cret"


@contextmanager
def running(relay: sqew.Relay) -> Iterator[list[BaseException]]:
    """``relay.run()`` on a thread; stopped and joined when the block ends. Yields the
    list its exception lands in."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            relay.run()
        except BaseException as exc:  # handed to the test
            failure.append(exc)

    thread = threading.Thread(target=run, name="test-relay")
    thread.start()
    try:
        yield failure
    finally:
        relay.stop()
        thread.join(20)
        assert not thread.is_alive(), "the relay did not return"


def scripted(payload: Any, attempts: int) -> Answer:
    """Answers by the payload's ``answer`` (and the attempt): see the test below."""
    kind = payload["answer"]
    later = email.utils.formatdate(time.time() + 3600, usegmt=True)
    return {
        "ok": Answer(),
        "created": Answer(201),
        "429-later": Answer(429, {"Retry-After": "1000"}),
        "503-date": Answer(503, {"Retry-After": later}),
        "429-then-ok": Answer(429, {"Retry-After": "0"}) if attempts == 1 else Answer(),
        "500": Answer(500),
        "400": Answer(400),
        "slow": Answer(pause_s=0.3),
        "hang-once": Answer(pause_s=5) if attempts == 1 else Answer(),
    }[kind]


ANSWERS = ["ok"] * 6 + ["created", "429-later", "503-date", "429-then-ok", "500", "400",
                        "slow", "hang-once"]


def test_every_message_ends_as_its_answers_say(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("hooks", max_attempts=2, backoff_base_ms=0, backoff_max_ms=0)
    ids = {r.message_id: kind for r, kind in zip(client.enqueue_batch(
        "hooks", [{"payload": {"n": n, "answer": kind}} for n, kind in enumerate(ANSWERS)]),
        ANSWERS, strict=True)}
    by_kind = {kind: msg_id for msg_id, kind in ids.items()}
    with Receiver(scripted) as receiver:
        relay = sqew.Relay(client, "hooks", receiver.url, concurrency=4, timeout_s=1,
                           wait_ms=100)
        with running(relay) as failure:
            until(lambda: _settled(client.stats("hooks")), "every message settled")
        assert failure == []
    stats = client.stats("hooks")
    assert (stats.acked_total, stats.dlq, stats.delayed) == (len(ANSWERS) - 4, 2, 2)
    dead = {m.id: m.last_error for m in client.dlq_list("hooks")}
    assert dead == {by_kind["500"]: "HTTP 500 Internal Server Error",
                    by_kind["400"]: "HTTP 400 Bad Request"}
    # Retry-After in seconds and as an HTTP date: the message waits about that long.
    now_ms = int(time.time() * 1000)
    later = client.get_message("hooks", by_kind["429-later"])
    assert later.last_error == "HTTP 429 Too Many Requests"
    assert 900_000 < later.available_at - now_ms <= 1_000_000
    dated = client.get_message("hooks", by_kind["503-date"])
    assert dated.last_error == "HTTP 503 Service Unavailable"
    assert 3_000_000 < dated.available_at - now_ms <= 3_600_000
    expected = {"429-then-ok": [1, 2], "hang-once": [1, 2], "500": [1, 2], "400": [1, 2]}
    for msg_id, kind in ids.items():
        assert [d.attempts for d in receiver.of(msg_id)] == expected.get(kind, [1]), kind
    assert receiver.overlaps == []
    w = relay.worker
    assert (w.processed, w.failed, w.rejected, w.lost) == (len(ANSWERS) - 4, 8, 0, 0)
    assert relay.connection_retries == 0


def _settled(stats: sqew.Stats) -> bool:
    return (stats.ready, stats.leased, stats.dlq, stats.delayed) == (0, 0, 2, 2)


def test_the_request_is_the_payload_as_sent_with_its_headers(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("hooks")
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    attributes = {"tenant": "acme", "naïve key/ü": "a b,c\tü%"}
    client.enqueue_batch("hooks", [
        {"payload": {"total": 2.50, "items": ["ä", 1]}, "attributes": attributes,
         "traceparent": parent, "tracestate": "vendor=x"},
        {"payload": "plain"},
    ])
    sent = client.peek("hooks", limit=2)
    with Receiver() as receiver:
        relay = sqew.Relay(client, "hooks", receiver.url, wait_ms=100)
        with running(relay):
            until(lambda: client.stats("hooks").acked_total == 2, "two deliveries")
    first, second = (receiver.of(m.id)[0] for m in sent)
    assert first.body == '{"total":2.5,"items":["ä",1]}'.encode() == _text(sent[0])
    assert second.body == b'"plain"'
    for d, m in ((first, sent[0]), (second, sent[1])):
        assert d.header("Content-Type") == "application/json"
        assert d.header("X-Sqew-Message-Id") == str(m.id)
        assert d.header("X-Sqew-Attempts") == "1"
        assert d.header("X-Sqew-Enqueued-At") == str(m.enqueued_at)
        assert d.header("X-Sqew-Signature") is None  # the queue has no secret
    got = {unquote(k[len("X-Sqew-Attr-"):]): unquote(v) for k, v in first.headers
           if k.lower().startswith("x-sqew-attr-")}
    assert got == attributes
    assert (first.header("traceparent"), first.header("tracestate")) == (parent, "vendor=x")
    fresh = second.header("traceparent") or ""
    assert fresh.startswith("00-") and len(fresh) == 55 and fresh[3:35] != parent[3:35]
    assert second.header("tracestate") is None


def _text(m: sqew.LeasedMessage | sqew.Message) -> bytes:
    from sqew import payloads

    return payloads.text_of(m).encode()


def test_the_payload_text_is_kept_byte_for_byte(start_server: Any) -> None:
    server = start_server()
    body = b'{"messages": [{"payload": {"a": 2.50,  "b": "\\u00e4"}}]}'
    httpx.post(f"{server.url}/queues", json={"name": "hooks"}).raise_for_status()
    httpx.post(f"{server.url}/queues/hooks/messages", content=body,
               headers={"content-type": "application/json"}).raise_for_status()
    with sqew.Client(server.url) as client, Receiver() as receiver:
        relay = sqew.Relay(client, "hooks", receiver.url, wait_ms=100)
        with running(relay):
            until(lambda: len(receiver.deliveries) == 1, "the delivery")
    assert receiver.deliveries[0].body == b'{"a": 2.50,  "b": "\\u00e4"}'


def test_a_signed_queue_signs_its_deliveries(tmp_path: Any) -> None:
    with sqew.Client(tmp_path / "r.db") as client, Receiver() as receiver:
        client.create_queue("signed", hmac_secret=SECRET, max_attempts=5)
        msg_id = client.enqueue("signed", {"order": 7}).message_id
        relay = sqew.Relay(client, "signed", receiver.url, hmac_secret=SECRET, wait_ms=100)
        with running(relay):
            until(lambda: client.stats("signed").acked_total == 1, "the delivery")
        (d,) = receiver.of(msg_id)
        headers = dict(d.headers)
        assert verify_delivery(headers, d.body, SECRET)
        assert not verify_delivery(headers, d.body + b" ", SECRET)
        assert not verify_delivery(headers, d.body, SECRET + "x")
        # The signed-enqueue scheme: what sqew's server checks on a signed enqueue.
        signing.verify(SECRET, signing.Proof(d.header("X-Sqew-Signature"), d.body),
                       int(time.time() * 1000), "signed")

        # Without the secret the relay cannot sign: it stops, the message goes back.
        client.enqueue("signed", {"order": 8})
        relay = sqew.Relay(client, "signed", receiver.url, wait_ms=100)
        with pytest.raises(sqew.errors.ValidationError, match="hmac_secret"):
            relay.run()
        assert client.stats("signed").acked_total == 1 and len(receiver.deliveries) == 1
        # With another secret, the message's own signature does not match: not vouched for.
        relay = sqew.Relay(client, "signed", receiver.url, hmac_secret=SECRET + "-other",
                           wait_ms=100)
        with running(relay):
            until(lambda: client.stats("signed").dlq == 1, "the rejection")
        (dead,) = client.dlq_list("signed")
        assert dead.last_error == "its signature does not match the hmac_secret: not delivered"
        assert len(receiver.deliveries) == 1


def test_an_unreachable_receiver_costs_no_attempts(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("hooks", max_attempts=2)
    ids = [r.message_id for r in client.enqueue_batch(
        "hooks", [{"payload": n} for n in range(3)])]
    with socket.socket() as s:  # a port nothing listens on (until the receiver below)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    relay = sqew.Relay(client, "hooks", f"http://127.0.0.1:{port}/hook", concurrency=2,
                       wait_ms=100, visibility_ms=300)
    with running(relay) as failure:
        # Long enough for several leases to end: heartbeats keep the two held.
        until(lambda: relay.connection_retries >= 6, "retries")
        stats = client.stats("hooks")
        assert (stats.leased, stats.ready, stats.acked_total) == (2, 1, 0)
        with Receiver(port=port) as receiver:
            until(lambda: client.stats("hooks").acked_total == 3, "the deliveries")
    assert failure == []
    assert sorted((d.message_id, d.attempts) for d in receiver.deliveries) == [
        (i, 1) for i in ids]
    assert client.stats("hooks").dlq == 0 and relay.worker.failed == 0


def test_https_is_verified(tmp_path: Any) -> None:
    ca = trustme.CA()
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(server_tls)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with sqew.Client(tmp_path / "r.db") as client, Receiver(tls=server_tls) as receiver:
        client.create_queue("hooks")
        msg_id = client.enqueue("hooks", {"n": 1}).message_id
        # The system's CAs do not know this one: nothing is sent, and no attempt is spent.
        relay = sqew.Relay(client, "hooks", receiver.url, wait_ms=100)
        with running(relay):
            until(lambda: relay.connection_retries >= 2, "refused certificates")
        assert receiver.deliveries == []
        relay = sqew.Relay(client, "hooks", receiver.url, ca_cert=ca_file, wait_ms=100)
        with running(relay):
            until(lambda: client.stats("hooks").acked_total == 1, "the delivery")
    assert [(d.message_id, d.attempts) for d in receiver.deliveries] == [(msg_id, 2)]


def test_bad_arguments_are_refused(tmp_path: Any) -> None:
    with sqew.Client(tmp_path / "r.db") as client:
        for url in ("ftp://x/", "http://", "nonsense", "http://h:99999/"):
            with pytest.raises(ValueError, match="http:// or https://"):
                sqew.Relay(client, "q", url)
        with pytest.raises(ValueError, match="timeout_s"):
            sqew.Relay(client, "q", "http://127.0.0.1:1/", timeout_s=0)
