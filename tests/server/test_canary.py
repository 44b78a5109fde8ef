"""The canary of a real ``sqew serve``: with ``--canary-interval-s`` it enqueues, takes and acks
a message of ``_canary`` every interval and shows the rounds in /metrics, labelled with its
replica; a failed round (the queue deleted under it) is counted, and the next works again."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

import sqew
from sqew import errors
from tests import metrics_support

from .support import START_S, Served, serve

INTERVAL_S = "0.1"


def samples(server: Served) -> metrics_support.Samples:
    return metrics_support.parse(httpx.get(f"{server.url}/metrics", timeout=10).text)


def until(predicate: Callable[[], bool], what: str) -> None:
    """Check ``predicate`` every 50 ms until it holds; fail after ``START_S`` seconds."""
    deadline = time.monotonic() + START_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db: Path = tmp_path_factory.mktemp("canary") / "q.db"
    with serve(db, "--canary-interval-s", INTERVAL_S, "--canary-replica", "east-1") as server:
        yield server


def rounds(server: Served) -> float:
    return metrics_support.value(samples(server), "sqew_canary_latency_seconds_count",
                                 replica="east-1")


def test_rounds_are_measured_and_leave_nothing_behind(served: Served) -> None:
    until(lambda: rounds(served) >= 3, "three canary rounds")
    seen = samples(served)
    assert metrics_support.value(seen, "sqew_canary_latency_seconds_sum", replica="east-1") >= 0
    assert metrics_support.value(seen, "sqew_canary_failures_total", replica="east-1") == 0
    assert ("sqew_canary_failures_total", (("replica", "east-1"),)) in seen  # shown at 0
    with sqew.Client(served.url) as client:
        stats = client.stats("_canary")
    assert stats.ready + stats.delayed + stats.leased <= 1  # at most the round under way
    assert stats.acked_total >= 3


def test_a_failed_round_is_counted_and_the_next_works(served: Served) -> None:
    until(lambda: rounds(served) >= 1, "a canary round")

    def failures() -> float:
        return metrics_support.value(samples(served), "sqew_canary_failures_total",
                                     replica="east-1")

    with sqew.Client(served.url) as client:

        def deleted_and_failed() -> bool:
            # A round that finds no queue fails; the next one creates it again.
            with contextlib.suppress(errors.QueueNotFound):
                client.delete_queue("_canary")
            return failures() > 0

        until(deleted_and_failed, "a failed canary round")
        after = rounds(served)
        until(lambda: rounds(served) > after + 1, "canary rounds after the failure")
        assert client.stats("_canary").acked_total >= 1
    assert "canary round failed" in served.log.text()


def test_off_by_default(tmp_path: Path) -> None:
    with serve(tmp_path / "off.db") as server:
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
        assert "sqew_canary" not in text
        with sqew.Client(server.url) as client:
            assert "_canary" not in [q.name for q in client.list_queues()]
