"""``create_app(reuse=app)``: a stopped app serves again with a new runtime, and nothing of
the last one (its store, keys, counters, the dashboard's samples) is carried over; an app
that is serving, or was built for another shape of settings, is refused.

The test servers (``targets.ServerThread``) reuse apps this way, so every HTTP test of the
suite runs on an app that may have served before; these tests say what that must mean.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from metrics_support import parse, value
from targets import ServerThread, server_settings, wait_closed

import sqew
from sqew.server.app import create_app


def test_a_reused_app_serves_its_new_store_keys_and_counters_only(tmp_path: Path) -> None:
    wait_closed()  # no other test's server is still stopping: the next app is the first's
    first = ServerThread(server_settings(tmp_path / "one.db"))
    try:
        with sqew.Client(first.url) as client:
            client.create_queue("jobs")
            client.enqueue("jobs", {"n": 1})
            overview = httpx.get(f"{first.url}/ui/", timeout=30)
            assert overview.status_code == 200 and "jobs" in overview.text
            admin = client.create_key(["admin"]).key  # keys are enforced from now on
    finally:
        first.stop()

    second = ServerThread(server_settings(tmp_path / "two.db"))
    try:
        assert second.app is first.app
        with sqew.Client(second.url) as client:
            assert client.list_queues() == []  # no key needed: the new store has none
            client.create_queue("other")
            overview = httpx.get(f"{second.url}/ui/", timeout=30)
            own = client.create_key(["admin"]).key
        with sqew.Client(second.url, api_key=own) as keyed:
            assert keyed.stats("other").ready == 0
        with sqew.Client(second.url, api_key=admin) as stale, \
                pytest.raises(sqew.errors.Unauthorized):  # the first store's key means nothing
            stale.stats("other")
        assert overview.status_code == 200
        assert "other" in overview.text and "jobs" not in overview.text
        metrics = parse(httpx.get(f"{second.url}/metrics", timeout=30,
                                  headers={"Authorization": f"Bearer {own}"}).text)
        assert value(metrics, "sqew_http_requests_total", method="POST",
                     route="/queues/{q}/messages", status="201") == 0
        assert value(metrics, "sqew_http_requests_total", method="POST", route="/queues",
                     status="201") == 1
    finally:
        second.stop()
    with sqew.Client(str(tmp_path / "one.db")) as old:
        assert [q.name for q in old.list_queues()] == ["jobs", "jobs.dlq"]  # not the second's
        assert old.stats("jobs").ready == 1


def test_an_app_that_is_serving_or_of_another_shape_is_refused(tmp_path: Path) -> None:
    server = ServerThread(server_settings(tmp_path / "a.db"))
    try:
        with pytest.raises(ValueError, match="stopped app"):
            create_app(server_settings(tmp_path / "b.db"), reuse=server.app)
        with sqew.Client(server.url) as client:
            client.create_queue("still-served")  # the refusal changed nothing
    finally:
        server.stop()
    with pytest.raises(ValueError, match="same shape"):
        create_app(server_settings(tmp_path / "b.db", max_body_bytes=1024), reuse=server.app)
    with pytest.raises(ValueError, match="same shape"):
        create_app(server_settings(tmp_path / "b.db", metrics=False), reuse=server.app)
