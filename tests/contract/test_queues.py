"""Queues: create (settings, ranges, names), DLQ pairing, update, list, get, delete."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import DEFAULTS, SETTINGS, lease_one, settings_of

# (setting, lowest valid, highest valid, just below, just above; None = no such bound)
RANGES: list[tuple[str, Any, Any, Any, Any]] = [
    ("visibility_ms", 0, 43_200_000, -1, 43_200_001),
    ("max_attempts", 1, 1000, 0, 1001),
    ("backoff_base_ms", 0, 3_600_000, -1, 3_600_001),
    ("backoff_max_ms", 1000, 86_400_000, 999, 86_400_001),  # low bound = default base
    ("retention_ms", 60_000, 1_209_600_000, 59_999, 1_209_600_001),
    ("dedup_window_ms", 1000, 604_800_000, 999, 604_800_001),
    ("max_payload_bytes", 1, 1_048_576, 0, 1_048_577),
    ("max_depth", 0, 2**63 - 1, -1, 2**63),  # a signed 64-bit column
    ("rate_limit_per_s", 0, 1_000_000, -1, float("inf")),
]

# settings that a valid value of another setting needs alongside (base ≤ max)
COMPANIONS: dict[tuple[str, Any], dict[str, Any]] = {
    ("backoff_base_ms", 3_600_000): {"backoff_max_ms": 3_600_000},
}


def test_defaults(client: sqew.Client, clock: ManualClock) -> None:
    q = client.create_queue("jobs")
    assert q.name == "jobs"
    assert q.dlq == "jobs.dlq"
    assert settings_of(q) == DEFAULTS
    assert q.created_at == clock()
    assert settings_of(client.get_queue("jobs")) == DEFAULTS


@pytest.mark.parametrize(("setting", "low", "high"), [(r[0], r[1], r[2]) for r in RANGES])
def test_range_edges_are_accepted(client: sqew.Client, setting: str, low: Any, high: Any) -> None:
    for i, value in enumerate((low, high)):
        extra = COMPANIONS.get((setting, value), {})
        q = client.create_queue(f"q{i}", **{setting: value, **extra})
        assert getattr(q, setting) == value
        assert getattr(client.get_queue(f"q{i}"), setting) == value


@pytest.mark.parametrize(
    ("setting", "value"),
    [(r[0], v) for r in RANGES for v in (r[3], r[4]) if v is not None]
    + [
        ("order", "random"),
        ("order", "FIFO"),
        ("archive", "yes"),
        ("hmac_secret", "x" * 15),
        ("visibility_ms", "100"),  # a string is not an integer
        ("max_attempts", True),  # nor is a bool
        ("max_attempts", 2.5),
        ("retention_ms", None),
    ],
)
def test_out_of_range_is_a_validation_error(client: sqew.Client, setting: str, value: Any) -> None:
    with pytest.raises(errors.ValidationError):
        client.create_queue("q", **{setting: value})
    with pytest.raises(errors.QueueNotFound):
        client.get_queue("q")


def test_every_setting_at_once(client: sqew.Client) -> None:
    settings: dict[str, Any] = {
        "visibility_ms": 1234,
        "max_attempts": 7,
        "backoff_base_ms": 10,
        "backoff_max_ms": 10,  # equal to the base is allowed
        "retention_ms": 120_000,
        "dedup_window_ms": 5000,
        "max_payload_bytes": 100,
        "max_depth": 50,
        "rate_limit_per_s": 2.5,
        "order": "lifo",
        "archive": True,
    }
    q = client.create_queue("q", hmac_secret="s" * 16, **settings)
    assert settings_of(q) == settings
    assert settings_of(client.get_queue("q")) == settings


def test_backoff_max_below_base_is_rejected(client: sqew.Client) -> None:
    with pytest.raises(errors.ValidationError):
        client.create_queue("q", backoff_base_ms=2000, backoff_max_ms=1999)
    with pytest.raises(errors.ValidationError):  # against the default max (900000)
        client.create_queue("q", backoff_base_ms=900_001)
    with pytest.raises(errors.QueueNotFound):
        client.get_queue("q")


def test_unknown_setting_is_rejected(client: sqew.Client) -> None:
    with pytest.raises(errors.ValidationError):
        client.create_queue("q", visibility=100)
    with pytest.raises(errors.QueueNotFound):
        client.get_queue("q")


@pytest.mark.parametrize(
    "name", ["a", "Z", "0", "a" * 80, "A-b_9", "9-_", "jobs-2024_v1"]
)
def test_valid_names(client: sqew.Client, name: str) -> None:
    assert client.create_queue(name).name == name
    assert client.get_queue(name).dlq == name + ".dlq"


@pytest.mark.parametrize(
    "name",
    ["", "-a", "_a", "a" * 81, "a b", "a.b", "a/b", "é", "\na", "jobs.dlq", ".dlq"],
)
def test_invalid_names(client: sqew.Client, name: str) -> None:
    with pytest.raises(errors.ValidationError):
        client.create_queue(name)
    assert client.list_queues() == []


def test_name_with_a_trailing_newline_is_invalid(client: sqew.Client) -> None:
    with pytest.raises(errors.ValidationError):
        client.create_queue("a\n")
    assert client.list_queues() == []


def test_hmac_secret_of_16_bytes_is_accepted(client: sqew.Client) -> None:
    assert client.create_queue("q", hmac_secret="k" * 16).name == "q"


def test_hmac_secret_minimum_counts_bytes(client: sqew.Client) -> None:
    secret = "é" * 8  # 8 characters, 16 bytes of UTF-8
    assert len(secret.encode()) == 16
    assert client.create_queue("q", hmac_secret=secret).name == "q"


def test_queue_exists(client: sqew.Client) -> None:
    client.create_queue("q", max_attempts=3)
    with pytest.raises(errors.QueueExists):
        client.create_queue("q", max_attempts=9)
    assert client.get_queue("q").max_attempts == 3  # the first one is untouched


def test_dlq_is_created_with_its_queue_and_is_a_real_queue(client: sqew.Client) -> None:
    client.create_queue("q")
    dlq = client.get_queue("q.dlq")
    assert dlq.name == "q.dlq"
    assert dlq.dlq is None  # a DLQ has no DLQ of its own
    assert dlq.stats is not msgspec.UNSET
    assert client.poll("q.dlq") == []
    assert client.peek("q.dlq") == []
    assert client.stats("q.dlq").queue == "q.dlq"


def test_dlq_cannot_be_created_or_deleted_by_hand(client: sqew.Client) -> None:
    client.create_queue("q")
    with pytest.raises(errors.ValidationError):
        client.delete_queue("q.dlq")
    assert client.get_queue("q.dlq").name == "q.dlq"
    with pytest.raises((errors.ValidationError, errors.QueueExists)):
        client.create_queue("q.dlq")


def test_delete_removes_queue_dlq_and_messages(client: sqew.Client) -> None:
    client.create_queue("q", max_attempts=1)
    client.create_queue("other")
    kept = client.enqueue("other", "stay").message_id
    dead = client.enqueue("q", "dead").message_id
    client.nack("q", dead, lease_one(client, "q").token)
    live = client.enqueue("q", "live").message_id
    assert [m.id for m in client.dlq_list("q")] == [dead]

    client.delete_queue("q")

    for name in ("q", "q.dlq"):
        with pytest.raises(errors.QueueNotFound):
            client.get_queue(name)
        with pytest.raises(errors.QueueNotFound):
            client.poll(name)
    with pytest.raises(errors.QueueNotFound):
        client.delete_queue("q")
    assert {q.name for q in client.list_queues()} == {"other", "other.dlq"}
    # a queue of the same name starts empty: the old messages are gone, not adopted
    client.create_queue("q")
    for name, msg_id in (("q", live), ("q.dlq", dead)):
        with pytest.raises(errors.MessageNotFound):
            client.get_message(name, msg_id)
    assert client.stats("q").ready == 0 and client.stats("q").dlq == 0
    assert client.get_message("other", kept).payload == "stay"


def test_update_changes_only_what_is_given(client: sqew.Client) -> None:
    before = settings_of(client.create_queue("q", max_attempts=3, order="lifo"))
    after = client.update_queue("q", visibility_ms=5, archive=True)
    assert settings_of(after) == {**before, "visibility_ms": 5, "archive": True}
    assert settings_of(client.get_queue("q")) == settings_of(after)
    assert settings_of(client.update_queue("q")) == settings_of(after)  # nothing given


@pytest.mark.parametrize(
    "change",
    [
        {"max_attempts": 0},
        {"backoff_base_ms": 900_001},  # above the current backoff_max_ms
        {"backoff_max_ms": 999},  # below the current backoff_base_ms
        {"order": "random"},
        {"dlq": "other.dlq"},
        {"created_at": 1},
        {"bogus": 1},
    ],
)
def test_invalid_update_changes_nothing(client: sqew.Client, change: dict[str, Any]) -> None:
    before = settings_of(client.create_queue("q"))
    with pytest.raises(errors.ValidationError):
        client.update_queue("q", **change)
    assert settings_of(client.get_queue("q")) == before


def test_update_checks_backoff_against_the_new_pair(client: sqew.Client) -> None:
    client.create_queue("q")
    q = client.update_queue("q", backoff_base_ms=5000, backoff_max_ms=5000)
    assert (q.backoff_base_ms, q.backoff_max_ms) == (5000, 5000)


def test_update_missing_queue(client: sqew.Client) -> None:
    with pytest.raises(errors.QueueNotFound):
        client.update_queue("nope", max_attempts=2)


def test_update_order_applies_to_waiting_messages(client: sqew.Client) -> None:
    client.create_queue("q")
    first, _, last = (client.enqueue("q", i).message_id for i in range(3))
    client.update_queue("q", order="lifo")
    assert lease_one(client, "q").id == last
    client.update_queue("q", order="fifo")
    assert lease_one(client, "q").id == first


def test_list_queues(client: sqew.Client) -> None:
    assert client.list_queues() == []
    client.create_queue("b")
    client.create_queue("a", max_attempts=2)
    queues = client.list_queues()
    assert [q.name for q in queues] == ["a", "a.dlq", "b", "b.dlq"]
    by_name = {q.name: q for q in queues}
    assert by_name["a"].max_attempts == 2
    assert by_name["a"].dlq == "a.dlq" and by_name["a.dlq"].dlq is None


def test_get_queue_has_stats(client: sqew.Client) -> None:
    client.create_queue("q")
    client.enqueue("q", 1)
    q = client.get_queue("q")
    assert isinstance(q.stats, sqew.Stats)
    assert q.stats == client.stats("q")
    assert q.stats.queue == "q" and q.stats.ready == 1


def test_get_missing_queue(client: sqew.Client) -> None:
    with pytest.raises(errors.QueueNotFound):
        client.get_queue("nope")
    with pytest.raises(errors.QueueNotFound):
        client.stats("nope")
    with pytest.raises(errors.QueueNotFound):
        client.delete_queue("nope")


def test_hmac_secret_is_never_returned(client: sqew.Client) -> None:
    secret = "very-secret-value-0123456789"
    shown = [client.create_queue("q", hmac_secret=secret)]
    shown.append(client.update_queue("q", hmac_secret=secret + "2"))
    shown.append(client.get_queue("q"))
    shown.extend(client.list_queues())
    for q in shown:
        assert "hmac_secret" not in msgspec.structs.asdict(q)
        text = msgspec.json.encode(q).decode()
        assert "hmac_secret" not in text and secret not in text
    assert set(SETTINGS) <= set(msgspec.structs.asdict(shown[0]))


@pytest.mark.parametrize("name", ["q/x", "q/stats", "/", ".", "..", ""])
def test_a_name_that_is_no_path_segment_names_no_queue(client: sqew.Client, name: str) -> None:
    # Over HTTP such a name would reach another endpoint (a '/' or a dot segment): the client
    # refuses it with the answer of a local client rather than call that endpoint.
    client.create_queue("q")
    client.enqueue("q", 1)
    calls = [lambda: client.get_queue(name), lambda: client.stats(name),
             lambda: client.peek(name), lambda: client.delete_queue(name),
             lambda: client.purge(name), lambda: client.enqueue(name, 1)]
    for call in calls:
        with pytest.raises(errors.QueueNotFound) as caught:
            call()
        assert caught.value.message == f"queue '{name}' does not exist"
    assert client.stats("q").ready == 1
