"""PostgreSQL text cannot hold a NUL character (SQLite's can): such a value is refused as a 400
``ValidationError`` that says why, never a 500, and the other writes of its group commit go on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import sqew
from sqew import errors

pytestmark = pytest.mark.postgres


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    import targets

    store = targets.postgres(tmp_path)
    yield store.url
    store.drop()


def test_an_embedded_client_gets_a_validation_error(url: str) -> None:
    with sqew.Client(url) as c:
        c.create_queue("q")
        c.enqueue("q", 1, attributes={"k": "v\x00w"})  # attributes are stored as JSON: escaped
        (m,) = c.poll("q")
        with pytest.raises(errors.ValidationError, match="NUL"):
            c.nack("q", m.id, m.token, error="bad\x00text")
        assert c.stats("q").leased == 1  # the refused nack changed nothing
        c.ack("q", m.id, m.token)
        with pytest.raises(errors.ValidationError, match="NUL"):
            c.create_queue("r", hmac_secret="sixteen-bytes-\x00-or-more")
        assert [q.name for q in c.list_queues()] == ["q", "q.dlq"]


def test_a_server_answers_400_and_its_group_goes_on(url: str) -> None:
    from targets import ServerThread, server_settings

    server = ServerThread(server_settings(url), reaper_timer=False)
    try:
        with sqew.Client(server.url) as c:
            c.create_queue("q")
            c.enqueue("q", 1)
            (m,) = c.poll("q")
        bad = httpx.post(f"{server.url}/queues/q/nack",
                         json={"id": m.id, "token": m.token, "error": "a\x00b"}, timeout=30)
        assert bad.status_code == 400, bad.text
        assert bad.json()["error"]["code"] == "ValidationError"
        assert "NUL" in bad.json()["error"]["message"]
        good = httpx.post(f"{server.url}/queues/q/messages", json={"payload": 2}, timeout=30)
        assert good.status_code == 201
        with sqew.Client(server.url) as c:
            assert c.stats("q").leased == 1  # the refused nack changed nothing
            assert [m.payload for m in c.poll("q", batch=10)] == [2]
    finally:
        server.stop()
