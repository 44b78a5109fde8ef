"""Over real HTTP: request bodies that fail validation are worded like the service's own checks
(never msgspec's ``Expected `int` <= 1000 - at `$.priority```), with the field in ``details``;
and a rate limit's ``Retry-After`` is whole seconds, at most a day, whatever the stored rate."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sqew import errors


@pytest.fixture
def http(start_server: Callable[..., Any], tmp_path: Path) -> Iterator[httpx.Client]:
    server = start_server(db=str(tmp_path / "w.db"))
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.post("/queues", json={"name": "q"}).status_code == 201
        client.db = tmp_path / "w.db"  # type: ignore[attr-defined]
        yield client


BAD_BODIES = [
    ("/queues/q/messages", {"payload": 1, "priority": 1001}, "priority",
     "must be an integer between -1000 and 1000"),
    ("/queues/q/messages", {"messages": [{"payload": 1}, {"payload": 2, "ttl_ms": 5}]},
     "messages[1].ttl_ms", "must be an integer between 1000 and 1209600000"),
    ("/queues/q/messages", {"payload": 1, "idempotency_key": "tab\there"}, "idempotency_key",
     "must be a string of 1 to 128 characters, printable ASCII"),
    ("/queues", {"name": "x", "visibility_ms": "long"}, "visibility_ms",
     "must be an integer between 0 and 43200000 (got a string)"),
    ("/queues", {"name": "x", "rate_limit_per_s": 1e-300}, "rate_limit_per_s",
     "must be 0 (off) or at least 0.00001"),
    ("/queues/q/ack", {"acks": [{"id": 0, "token": "t"}]}, "acks[0].id",
     "must be an integer between 1 and 9223372036854775807"),
    # worded by the key's own model: its `name` is not a queue's
    ("/keys", {"scopes": ["admin"], "name": ""}, "name",
     "must be a string of 1-100 characters, none of them a control character"),
    ("/keys", {"scopes": ["read"]}, "scopes[0]", "must be one of admin, consume, produce"),
    ("/keys", {"scopes": []}, "scopes", "must be a list of 1 to 3 items"),
    ("/keys", {"scopes": ["admin", "admin"]}, "scopes", "must not repeat a scope"),
    ("/keys", {"scopes": ["admin"], "queue": "a b"}, "queue",
     "must be a string of 1-80 letters, digits, '_' or '-', starting with a letter or digit "
     "(it may end in '.fifo')"),
]


@pytest.mark.parametrize(("path", "body", "field", "words"), BAD_BODIES)
def test_validation_errors_name_the_field_and_its_range(
    http: httpx.Client, path: str, body: Any, field: str, words: str
) -> None:
    response = http.post(path, json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error == {"code": "ValidationError", "message": f"{field} {words}",
                     "details": [{"field": field, "message": words}]}


def test_unknown_and_missing_fields_are_named(http: httpx.Client) -> None:
    unknown = http.post("/queues/q/messages", json={"payload": 1, "prio": 2}).json()["error"]
    assert unknown["message"] == "unknown field 'prio'"
    missing = http.post("/queues/q/messages", json={"messages": [{"priority": 1}]})
    assert missing.json()["error"]["message"] == "messages[0].payload is required"


def test_retry_after_is_at_most_a_day_even_for_a_denormal_stored_rate(
    http: httpx.Client,
) -> None:
    # A rate below today's smallest can only come from an older database: write it directly.
    assert http.patch("/queues/q", json={"rate_limit_per_s": 1}).status_code == 200
    with sqlite3.connect(http.db) as db:  # type: ignore[attr-defined]
        db.execute("UPDATE queues SET rate_limit_per_s = 5e-324 WHERE name = 'q'")
    db.close()
    assert http.post("/queues/q/messages", json={"payload": 1}).status_code == 201
    limited = http.post("/queues/q/messages", json={"payload": 2})
    assert limited.status_code == errors.RateLimited.status, limited.text
    assert limited.headers["retry-after"] == "86400"
