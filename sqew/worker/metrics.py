"""A Worker's counts as Prometheus metrics, in a prometheus-client registry of the process.

One collector per registry reads the counts of every Worker that registered with it, at
scrape time: nothing is counted twice, a Worker's attributes and its metrics never disagree,
and several Workers in one process (of one queue or of several) sum by queue. A Worker that
ends and is collected leaves the sums (a counter going down reads as a reset in Prometheus).

Metrics (``queue``: the queue the Worker consumes):

- ``sqew_worker_messages_total{queue, outcome}``: messages whose handler returned
  (``processed``), raised (``failed``) or raised ``Reject`` (``rejected``), and acks or nacks
  that found the lease gone (``lost``);
- ``sqew_worker_in_flight{queue}``: messages held now (leased, not settled);
- ``sqew_worker_lease_extensions_total{queue}``: leases extended by heartbeats.

An app that serves its registry (``prometheus_client.REGISTRY`` by default, as its
``make_asgi_app`` and ``start_http_server`` do) exports them with nothing else to do;
``sqew worker --metrics-port P`` serves them on its own.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

OUTCOMES = ("processed", "failed", "rejected", "lost")


class Counted(Protocol):
    """What the collector reads of a Worker."""

    queue: str
    processed: int
    failed: int
    rejected: int
    lost: int
    lease_extensions: int

    @property
    def in_flight(self) -> int:
        """Messages held now."""
        ...


class WorkerCollector:
    """The collector of one registry: the counts of the Workers registered with it."""

    def __init__(self) -> None:
        self._workers: weakref.WeakSet[Counted] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, worker: Counted) -> None:
        """Export ``worker``'s counts from now on (until it is collected)."""
        with self._lock:
            self._workers.add(worker)

    def collect(self) -> Iterator[Metric]:
        """The sums by queue of the registered Workers' counts (prometheus-client's API)."""
        with self._lock:
            workers = list(self._workers)
        messages = CounterMetricFamily(
            "sqew_worker_messages", "Messages a Worker handled, by outcome (lost: the ack or "
            "nack found the lease gone)", labels=("queue", "outcome"))
        in_flight = GaugeMetricFamily("sqew_worker_in_flight", "Messages a Worker holds now",
                                      labels=("queue",))
        extensions = CounterMetricFamily("sqew_worker_lease_extensions",
                                         "Leases a Worker extended by heartbeats",
                                         labels=("queue",))
        sums: dict[str, dict[str, int]] = {}
        for w in workers:
            counts = sums.setdefault(w.queue, dict.fromkeys((*OUTCOMES, "held", "ext"), 0))
            for outcome in OUTCOMES:
                counts[outcome] += getattr(w, outcome)
            counts["held"] += w.in_flight
            counts["ext"] += w.lease_extensions
        for queue, counts in sorted(sums.items()):
            for outcome in OUTCOMES:
                messages.add_metric((queue, outcome), counts[outcome])
            in_flight.add_metric((queue,), counts["held"])
            extensions.add_metric((queue,), counts["ext"])
        yield messages
        yield in_flight
        yield extensions


_collectors: weakref.WeakKeyDictionary[CollectorRegistry, WorkerCollector] = (
    weakref.WeakKeyDictionary())
_registering = threading.Lock()


def export(worker: Counted, registry: CollectorRegistry | None) -> None:
    """Export ``worker``'s counts in ``registry`` (the process's default one when None)."""
    target = REGISTRY if registry is None else registry
    with _registering:
        collector = _collectors.get(target)
        if collector is None:
            collector = _collectors[target] = WorkerCollector()
            target.register(collector)
    collector.add(worker)
