"""Enqueue: payloads, field ranges, batches (all-or-nothing), idempotency."""

from __future__ import annotations

from typing import Any

import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import lease_one

PAYLOADS: list[Any] = [
    {"order": 42, "items": [1, 2, {"x": None}]},
    [1, "two", 3.5, False, None, {"k": []}],
    "plain text",
    "",
    "unicode: é ✓ 漢字 🎉",
    0,
    -17,
    2**53,
    3.25,
    True,
    False,
    None,
    {},
    [],
]


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q")
    return "q"


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: type(p).__name__)
def test_payload_is_any_json_value(client: sqew.Client, q: str, payload: Any) -> None:
    msg_id = client.enqueue(q, payload).message_id
    assert client.get_message(q, msg_id).payload == payload
    assert [m.payload for m in client.peek(q)] == [payload]
    leased = lease_one(client, q)
    assert leased.id == msg_id
    assert leased.payload == payload
    assert type(leased.payload) is type(payload)


def test_payload_must_be_json(client: sqew.Client, q: str) -> None:
    with pytest.raises(errors.ValidationError):
        client.enqueue(q, object())
    assert client.stats(q).enqueued_total == 0


def test_result_and_stored_fields(client: sqew.Client, clock: ManualClock, q: str) -> None:
    now = clock()
    r = client.enqueue(q, {"a": 1}, priority=7, attributes={"k": "v"})
    assert r.duplicate is False and r.message_id >= 1
    m = client.get_message(q, r.message_id)
    assert (m.id, m.queue, m.payload, m.priority, m.attributes) == (
        r.message_id, q, {"a": 1}, 7, {"k": "v"},
    )
    assert (m.attempts, m.last_error) == (0, None)
    assert m.enqueued_at == m.available_at == now
    assert m.expires_at == now + 345_600_000  # the default retention


def test_defaults_of_optional_fields(client: sqew.Client, q: str) -> None:
    m = client.get_message(q, client.enqueue(q, 1).message_id)
    assert m.priority == 0 and m.attributes == {}


def test_ids_increase_across_queues(client: sqew.Client, q: str) -> None:
    client.create_queue("other")
    got = [client.enqueue(name, i).message_id for i, name in enumerate([q, "other"] * 3)]
    assert got == sorted(got) and len(set(got)) == len(got)


def test_missing_queue(client: sqew.Client) -> None:
    with pytest.raises(errors.QueueNotFound):
        client.enqueue("nope", 1)
    with pytest.raises(errors.QueueNotFound):
        client.enqueue_batch("nope", [{"payload": 1}])
    with pytest.raises(errors.QueueNotFound):
        client.enqueue("nope", 1, idempotency_key="k")


# --- field ranges ---------------------------------------------------------------------------------
VALID_FIELDS: list[dict[str, Any]] = [
    {"priority": -1000},
    {"priority": 1000},
    {"delay_ms": 0},
    {"delay_ms": 59_999},  # just under the queue's retention_ms (the default ttl)
    {"ttl_ms": 1000},
    {"ttl_ms": 1_209_600_000},
    {"idempotency_key": "k"},
    {"idempotency_key": "x" * 128},
    {"idempotency_key": " !~{}"},  # printable ASCII, space included
    {"attributes": {}},
    {"attributes": {f"k{i}": "v" for i in range(10)}},
    {"attributes": {"k" * 64: "v" * 1024}},
    {"attributes": {"k": ""}},
]

INVALID_FIELDS: list[dict[str, Any]] = [
    {"priority": -1001},
    {"priority": 1001},
    {"priority": "1"},
    {"priority": 1.5},
    {"delay_ms": -1},
    {"delay_ms": 60_001},  # beyond the queue's retention_ms
    {"ttl_ms": 999},
    {"ttl_ms": 0},
    {"ttl_ms": 1_209_600_001},
    {"idempotency_key": ""},
    {"idempotency_key": "x" * 129},
    {"idempotency_key": "tab\there"},
    {"idempotency_key": "é"},
    {"idempotency_key": "\nline"},
    {"attributes": {f"k{i}": "v" for i in range(11)}},
    {"attributes": {"k" * 65: "v"}},
    {"attributes": {"k": "v" * 1025}},
    {"attributes": {"k": 1}},
    {"attributes": ["k", "v"]},
]


@pytest.mark.parametrize("fields", VALID_FIELDS)
def test_valid_fields(client: sqew.Client, fields: dict[str, Any]) -> None:
    client.create_queue("q", retention_ms=60_000)
    msg_id = client.enqueue("q", "p", **fields).message_id
    m = client.get_message("q", msg_id)
    if "attributes" in fields:
        assert m.attributes == fields["attributes"]
    if "priority" in fields:
        assert m.priority == fields["priority"]
    if "delay_ms" in fields:
        assert m.available_at == m.enqueued_at + fields["delay_ms"]
    if "ttl_ms" in fields:
        assert m.expires_at == m.enqueued_at + fields["ttl_ms"]
    assert client.enqueue_batch("q", [{"payload": "p", **fields}])[0].duplicate is (
        "idempotency_key" in fields
    )


@pytest.mark.parametrize("fields", INVALID_FIELDS)
def test_invalid_fields(client: sqew.Client, fields: dict[str, Any]) -> None:
    client.create_queue("q", retention_ms=60_000)
    with pytest.raises(errors.ValidationError):
        client.enqueue("q", "p", **fields)
    with pytest.raises(errors.ValidationError):
        client.enqueue_batch("q", [{"payload": "ok"}, {"payload": "p", **fields}])
    assert client.stats("q").enqueued_total == 0
    assert client.peek("q") == []


def test_idempotency_key_with_a_trailing_newline_is_invalid(client: sqew.Client, q: str) -> None:
    with pytest.raises(errors.ValidationError):
        client.enqueue(q, 1, idempotency_key="key\n")
    assert client.stats(q).enqueued_total == 0


@pytest.mark.parametrize(
    "item", [{"payload": 1, "bogus": 2}, {"payload": 1, "id": 5}, {"priority": 1}, {}]
)
def test_unknown_or_missing_fields_are_rejected(client: sqew.Client, q: str, item: Any) -> None:
    with pytest.raises(errors.ValidationError):
        client.enqueue_batch(q, [item])
    assert client.stats(q).enqueued_total == 0


def test_payload_size_is_its_json_text(client: sqew.Client) -> None:
    client.create_queue("q", max_payload_bytes=10)
    client.enqueue("q", "12345678")  # '"12345678"' is 10 bytes
    with pytest.raises(errors.PayloadTooLarge):
        client.enqueue("q", "123456789")
    assert client.stats("q").enqueued_total == 1


def test_payload_limit_at_the_maximum(client: sqew.Client) -> None:
    client.create_queue("q", max_payload_bytes=1_048_576)
    big = "x" * (1_048_576 - 2)
    msg_id = client.enqueue("q", big).message_id
    assert client.get_message("q", msg_id).payload == big
    with pytest.raises(errors.PayloadTooLarge):
        client.enqueue("q", big + "x")


# --- batches -----------------------------------------------------------------------------------
def test_batch_in_input_order(client: sqew.Client, q: str) -> None:
    results = client.enqueue_batch(
        q, [{"payload": i, "priority": i % 3, "attributes": {"i": str(i)}} for i in range(5)]
    )
    got = [r.message_id for r in results]
    assert got == sorted(got) and len(set(got)) == 5
    assert not any(r.duplicate for r in results)
    for i, msg_id in enumerate(got):
        m = client.get_message(q, msg_id)
        assert (m.payload, m.priority, m.attributes) == (i, i % 3, {"i": str(i)})


def test_batch_of_1000(client: sqew.Client, q: str) -> None:
    results = client.enqueue_batch(q, [{"payload": {"n": i}} for i in range(1000)])
    assert len(results) == 1000
    assert client.stats(q).ready == 1000
    got = client.poll(q, batch=100)
    assert [m.payload["n"] for m in got] == list(range(100))


@pytest.mark.parametrize("size", [0, 1001])
def test_batch_size_limits(client: sqew.Client, q: str, size: int) -> None:
    with pytest.raises(errors.ValidationError):
        client.enqueue_batch(q, [{"payload": i} for i in range(size)])
    assert client.stats(q).enqueued_total == 0


def test_batch_is_all_or_nothing_on_an_oversized_message(client: sqew.Client) -> None:
    client.create_queue("q", max_payload_bytes=100)
    batch: list[dict[str, Any]] = [{"payload": "x" * 10} for _ in range(9)]
    batch.insert(5, {"payload": "x" * 200})
    with pytest.raises(errors.PayloadTooLarge):
        client.enqueue_batch("q", batch)
    stats = client.stats("q")
    assert (stats.ready, stats.enqueued_total) == (0, 0)
    assert client.peek("q") == []


def test_batch_is_all_or_nothing_on_an_invalid_message(client: sqew.Client, q: str) -> None:
    batch: list[dict[str, Any]] = [{"payload": i, "idempotency_key": f"k{i}"} for i in range(5)]
    batch.append({"payload": "bad", "priority": 5000})
    with pytest.raises(errors.ValidationError):
        client.enqueue_batch(q, batch)
    assert client.stats(q).enqueued_total == 0
    # nothing of the failed batch was remembered for idempotency either
    assert client.enqueue(q, 0, idempotency_key="k0").duplicate is False


# --- idempotency -------------------------------------------------------------------------------
def test_duplicate_returns_first_id(client: sqew.Client, q: str) -> None:
    first = client.enqueue(q, {"v": 1}, idempotency_key="order-42")
    again = client.enqueue(q, {"v": 2}, idempotency_key="order-42", priority=9)
    assert first.duplicate is False
    assert (again.message_id, again.duplicate) == (first.message_id, True)
    stats = client.stats(q)
    assert (stats.ready, stats.enqueued_total) == (1, 1)
    assert client.get_message(q, first.message_id).payload == {"v": 1}  # the first wins


def test_duplicate_even_after_ack(client: sqew.Client, q: str) -> None:
    first = client.enqueue(q, 1, idempotency_key="k").message_id
    m = lease_one(client, q)
    client.ack(q, m.id, m.token)
    again = client.enqueue(q, 1, idempotency_key="k")
    assert (again.message_id, again.duplicate) == (first, True)
    assert client.poll(q) == []
    assert client.stats(q).enqueued_total == 1


def test_dedup_window_passes(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", dedup_window_ms=1000)
    first = client.enqueue("q", 1, idempotency_key="k").message_id
    clock.advance(999)
    assert client.enqueue("q", 1, idempotency_key="k").duplicate is True
    clock.advance(2)
    second = client.enqueue("q", 1, idempotency_key="k")
    assert second.duplicate is False and second.message_id > first
    # and the new message opens a new window
    clock.advance(500)
    assert client.enqueue("q", 1, idempotency_key="k").message_id == second.message_id


def test_idempotency_is_per_queue(client: sqew.Client, q: str) -> None:
    client.create_queue("other")
    a = client.enqueue(q, 1, idempotency_key="k")
    b = client.enqueue("other", 1, idempotency_key="k")
    assert not a.duplicate and not b.duplicate and a.message_id != b.message_id
    assert client.enqueue("other", 1, idempotency_key="k").message_id == b.message_id


def test_idempotency_within_a_batch(client: sqew.Client, q: str) -> None:
    existing = client.enqueue(q, "old", idempotency_key="old").message_id
    results = client.enqueue_batch(
        q,
        [
            {"payload": "a", "idempotency_key": "a"},
            {"payload": "b"},
            {"payload": "a2", "idempotency_key": "a"},
            {"payload": "old2", "idempotency_key": "old"},
        ],
    )
    assert [r.duplicate for r in results] == [False, False, True, True]
    assert results[2].message_id == results[0].message_id
    assert results[3].message_id == existing
    assert client.stats(q).enqueued_total == 3
    assert sorted(m.payload for m in client.peek(q)) == ["a", "b", "old"]


def test_keys_are_case_sensitive(client: sqew.Client, q: str) -> None:
    assert not client.enqueue(q, 1, idempotency_key="Key").duplicate
    assert not client.enqueue(q, 1, idempotency_key="key").duplicate
    assert len(client.peek(q)) == 2
