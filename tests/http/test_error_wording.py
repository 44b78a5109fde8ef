"""Over real HTTP: request bodies that fail validation are worded like the service's own checks
(never msgspec's ``Expected `int` <= 1000 - at `$.priority```), with the field in ``details``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest


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
    ("/queues/q/ack", {"acks": [{"id": 0, "token": "t"}]}, "acks[0].id",
     "must be an integer between 1 and 9223372036854775807"),
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
