"""Backpressure under a bounded load on 127.0.0.1: a real server with low thresholds refuses
enqueues with 503 ``Overloaded`` and ``Retry-After`` while its writes back up, keeps serving
polls and acks meanwhile (``/readyz`` stays 200 and says so, ``sqew_overloaded`` is 1, every
refusal counts in ``sqew_rejected_total{reason="overload"}``), loses nothing it accepted, and
accepts enqueues again once the load is gone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from .support import START_S, envelope, serve

LOW = {
    # A group of 500-message batches takes milliseconds to commit, and leaves megabytes of WAL.
    "SQEW_OVERLOAD_COMMIT_MS": "2",
    "SQEW_OVERLOAD_WAL_BYTES": str(512 * 1024),
    "SQEW_OVERLOAD_PENDING_WRITES": "4",
}
PRODUCERS, CONSUMERS, BATCH = 4, 2, 500
LOAD_S = 30.0
"""The load stops once refusals were seen and enough was accepted, at the latest after this."""


@dataclass
class Seen:
    """What the clients saw; every list is appended to by several threads (atomic)."""

    created: list[int] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)  # one item per 503 (appends are atomic)
    failures: list[str] = field(default_factory=list)
    overloaded_now: bool = False  # /readyz's last word
    ready_overloaded: list[list[str]] = field(default_factory=list)  # reasons, when overloaded
    gauge_on: bool = False
    served_while_overloaded: set[str] = field(default_factory=set)
    producing: threading.Event = field(default_factory=threading.Event)
    draining: threading.Event = field(default_factory=threading.Event)


def produce(url: str, seen: Seen, me: int) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        n = 0
        while seen.producing.is_set():
            body = {"messages": [{"payload": {"p": me, "n": n + i}} for i in range(BATCH)]}
            answer = http.post("/queues/q/messages", json=body)
            if answer.status_code == 201:
                seen.created.extend(m["message_id"] for m in answer.json()["messages"])
                n += BATCH
            elif answer.status_code == 503:
                envelope(answer, 503, "Overloaded")
                assert int(answer.headers["retry-after"]) >= 1
                seen.refused.append(me)
                time.sleep(0.05)  # (a real producer waits Retry-After; the test keeps it short)
            else:
                seen.failures.append(f"enqueue {answer.status_code} {answer.text}")
                return


def consume(url: str, seen: Seen) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        while True:
            polled = http.post("/queues/q/poll", params={"batch": 100})
            if polled.status_code != 200:
                seen.failures.append(f"poll {polled.status_code} {polled.text}")
                return
            got = polled.json()["messages"]
            if seen.overloaded_now:
                seen.served_while_overloaded.add("poll")
            if not got:
                if seen.draining.is_set() and _empty(http):
                    return
                continue
            acks = {"acks": [{"id": m["id"], "token": m["token"]} for m in got]}
            acked = http.post("/queues/q/ack", json=acks)
            if acked.status_code != 200:
                seen.failures.append(f"ack {acked.status_code} {acked.text}")
                return
            results = acked.json()["results"]
            bad = [r for r in results if r["status"] != "acked"]
            if bad:
                seen.failures.append(f"ack results {bad}")
                return
            if seen.overloaded_now:
                seen.served_while_overloaded.add("ack")
            seen.acked.extend(r["id"] for r in results)


def _empty(http: httpx.Client) -> bool:
    stats = http.get("/queues/q/stats").json()
    return bool(stats["ready"] + stats["delayed"] + stats["leased"] == 0)


def watch(url: str, seen: Seen, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        tick = 0
        while not stop.is_set():
            ready = http.get("/readyz")
            if ready.status_code != 200:  # overloaded or not, the process is ready
                seen.failures.append(f"readyz {ready.status_code} {ready.text}")
            body = ready.json()
            seen.overloaded_now = body["overloaded"]
            if body["overloaded"]:
                seen.ready_overloaded.append(body["overload_reasons"])
            if tick % 4 == 0 and gauge(http) == 1:
                seen.gauge_on = True
            tick += 1
            stop.wait(0.05)


def gauge(http: httpx.Client, name: str = "sqew_overloaded", **labels: str) -> float:
    text = http.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"no {name} in /metrics")


def until(predicate: Callable[[], bool], what: str, timeout: float = START_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_enqueues_are_refused_while_writes_back_up_and_nothing_accepted_is_lost(
    tmp_path: Path,
) -> None:
    seen, stop_watching = Seen(), threading.Event()
    with (ThreadPoolExecutor(PRODUCERS + CONSUMERS + 1) as pool,
          serve(tmp_path / "q.db", env=LOW) as server):
        url = server.url
        assert httpx.post(f"{url}/queues", json={"name": "q"}, timeout=10).status_code == 201
        seen.producing.set()
        watcher = pool.submit(watch, url, seen, stop_watching)
        producers = [pool.submit(produce, url, seen, i) for i in range(PRODUCERS)]
        consumers = [pool.submit(consume, url, seen) for _ in range(CONSUMERS)]
        try:
            deadline = time.monotonic() + LOAD_S
            while time.monotonic() < deadline and not seen.failures and not (
                    len(seen.refused) >= PRODUCERS and seen.ready_overloaded
                    and seen.served_while_overloaded == {"poll", "ack"}
                    and len(seen.created) >= 20 * BATCH):
                time.sleep(0.05)
        finally:
            seen.producing.clear()
            for done in producers:
                done.result(timeout=60)
            seen.draining.set()
            for done in consumers:
                done.result(timeout=120)
        assert not seen.failures, seen.failures[:3]
        assert seen.refused
        assert seen.ready_overloaded and all(seen.ready_overloaded)
        reasons = {r for rs in seen.ready_overloaded for r in rs}
        assert reasons <= {"pending_writes", "wal_bytes", "commit_ms"}, reasons
        assert seen.served_while_overloaded == {"poll", "ack"}
        # Nothing the server accepted is lost: every 201-ed message was delivered and acked.
        assert len(seen.acked) == len(set(seen.acked))
        assert sorted(seen.acked) == sorted(seen.created)

        # With the load gone, the state clears (empty probe groups measure again) by itself.
        until(lambda: not httpx.get(f"{url}/readyz", timeout=10).json()["overloaded"],
              "the overload to clear")
        stop_watching.set()
        watcher.result(timeout=10)
        assert seen.gauge_on
        with httpx.Client(base_url=url, timeout=10) as http:
            assert gauge(http) == 0
            # Every refusal counted as such, per queue and reason.
            assert gauge(http, "sqew_rejected_total", queue="q", reason="overload") == len(
                seen.refused)
            assert http.post("/queues/q/messages", json={"payload": "again"}).status_code == 201
