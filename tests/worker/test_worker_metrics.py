"""A Worker's counts in a prometheus-client registry: what its attributes say, summed by queue
over the Workers of a process, in the registry an app's /metrics serves."""

from __future__ import annotations

import threading
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import sqew
from sqew import models

from .test_worker import DEADLINE_S, running, until


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def outcome(queue: str, name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("sqew_worker_messages_total", (("outcome", name), ("queue", queue)))


def test_counts_are_exported_as_they_change(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    client = sqew.Client(tmp_path / "w.db")
    client.create_queue("jobs", visibility_ms=600)
    client.enqueue_batch("jobs", [{"payload": p} for p in ("ok", "ok", "bad", "flaky")])
    go_on = threading.Event()
    holding = threading.Event()

    def handle(m: models.LeasedMessage) -> None:
        if m.payload == "bad":
            raise sqew.Reject("bad")
        if m.payload == "flaky":
            raise ValueError("flaky")
        if m.payload == "slow":  # a long handler: its lease is extended meanwhile
            holding.set()
            go_on.wait(DEADLINE_S)

    worker = sqew.Worker(client, "jobs", handle, concurrency=2, wait_ms=50, registry=registry)
    try:
        with running(worker):
            until(lambda: worker.processed + worker.failed + worker.rejected == 4, "all four")
            seen = samples(registry)
            assert seen[outcome("jobs", "processed")] == 2
            assert seen[outcome("jobs", "failed")] == 1
            assert seen[outcome("jobs", "rejected")] == 1
            assert seen[outcome("jobs", "lost")] == 0
            client.enqueue("jobs", "slow")
            assert holding.wait(DEADLINE_S)
            until(lambda: samples(registry)[
                ("sqew_worker_lease_extensions_total", (("queue", "jobs"),))] >= 1,
                "a lease extension")
            assert samples(registry)[("sqew_worker_in_flight", (("queue", "jobs"),))] == 1
            go_on.set()
    finally:
        go_on.set()
        client.close()
    final = samples(registry)
    assert final[("sqew_worker_in_flight", (("queue", "jobs"),))] == 0
    assert final[outcome("jobs", "processed")] == worker.processed == 3
    assert final[("sqew_worker_lease_extensions_total", (("queue", "jobs"),))] == (
        worker.lease_extensions)


def test_workers_of_a_queue_sum_and_queues_stay_apart(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    client = sqew.Client(tmp_path / "w.db")
    for q in ("a", "b"):
        client.create_queue(q)
    client.enqueue_batch("a", [{"payload": i} for i in range(4)])
    client.enqueue("b", 1)
    workers = [sqew.Worker(client, q, lambda m: None, wait_ms=50, registry=registry)
               for q in ("a", "a", "b")]
    try:
        for w in workers:  # one after the other: the first takes what is ready
            with running(w):
                until(lambda q=w.queue: client.stats(q).ready == 0, f"{w.queue} drained")
    finally:
        client.close()
    seen = samples(registry)
    assert seen[outcome("a", "processed")] == 4 == workers[0].processed + workers[1].processed
    assert seen[outcome("b", "processed")] == 1


def test_the_default_registry(tmp_path: Path) -> None:
    from prometheus_client import REGISTRY

    with sqew.Client(tmp_path / "w.db") as client:
        client.create_queue("default-registry")
        client.enqueue("default-registry", 1)
        worker = sqew.Worker(client, "default-registry", lambda m: None, wait_ms=50)
        with running(worker):
            until(lambda: worker.processed == 1, "the message")
    assert REGISTRY.get_sample_value(
        "sqew_worker_messages_total",
        {"queue": "default-registry", "outcome": "processed"}) == 1
