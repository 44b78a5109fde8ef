"""The queues' metrics, read from the database: every queue's depths and lifetime counters.

These are state, not events counted by a process: they are read from the queue rows at scrape
time (``QueueService.all_stats``, one statement for all queues), so they are right whichever
process (server worker, CLI, embedded Client) did the work. ``QueueCollector`` turns one such
reading into Prometheus families; the server's ``/metrics`` and ``sqew metrics`` on a database
file both render it. Names and meanings are listed in docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Info, generate_latest
from prometheus_client.core import Metric, Sample
from prometheus_client.registry import Collector

from sqew import __version__, models

GAUGES: tuple[tuple[str, str, Callable[[models.Stats], float]], ...] = (
    ("sqew_queue_ready", "Messages ready to be leased now.", lambda s: s.ready),
    ("sqew_queue_delayed", "Messages not available yet (delay, retry backoff).",
     lambda s: s.delayed),
    ("sqew_queue_leased", "Messages leased to a consumer and not acked yet.", lambda s: s.leased),
    ("sqew_queue_dlq", "Messages in the queue's dead-letter queue (0 for a DLQ itself).",
     lambda s: s.dlq),
    ("sqew_queue_oldest_ready_age_seconds",
     "Age of the oldest ready message since it became available (0 when none is ready).",
     lambda s: (s.oldest_ready_age_ms or 0) / 1000),
    ("sqew_queue_paused", "1 while the queue's delivery is paused (polls get nothing), else 0.",
     lambda s: 1.0 if s.paused else 0.0),
)
COUNTERS: tuple[tuple[str, str, Callable[[models.Stats], float]], ...] = (
    ("sqew_queue_enqueued", "Messages enqueued (duplicates not included).",
     lambda s: s.enqueued_total),
    ("sqew_queue_acked", "Messages acknowledged.", lambda s: s.acked_total),
    ("sqew_queue_nacked", "Messages nacked (released for a retry or dead-lettered).",
     lambda s: s.nacked_total),
    ("sqew_queue_dead_lettered", "Messages moved to the queue's DLQ.",
     lambda s: s.dead_lettered_total),
    ("sqew_queue_expired", "Messages removed unconsumed when their TTL ended.",
     lambda s: s.expired_total),
)


class QueueCollector(Collector):
    """Prometheus families of one reading of every queue's stats (label ``queue``).

    Args:
        stats: ``QueueService.all_stats()`` (or ``Client``-side the same list); None when the
            database did not answer (only ``sqew_queue_metrics_up`` 0 is collected).
    """

    def __init__(self, stats: Sequence[models.Stats] | None) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        up = Metric("sqew_queue_metrics_up", "1 when this scrape read the queues' metrics from "
                    "the database, 0 when the database did not answer (they are left out).",
                    "gauge")
        up.samples = [Sample("sqew_queue_metrics_up", {}, 0.0 if self._stats is None else 1.0)]
        yield up
        if self._stats is None:
            return
        # Samples made directly, one label dict per queue shared by every family: with
        # thousands of queues, add_metric's per-sample work was a third of a scrape.
        labels = [{"queue": s.queue} for s in self._stats]
        for kind, families in (("gauge", GAUGES), ("counter", COUNTERS)):
            for name, doc, value in families:
                metric = Metric(name, doc, kind)
                sample = name + "_total" if kind == "counter" else name
                metric.samples = [Sample(sample, label, float(value(s)))
                                  for s, label in zip(self._stats, labels, strict=True)]
                yield metric


def add_build_info(registry: CollectorRegistry) -> None:
    """``sqew_build_info{version}`` in ``registry``."""
    Info("sqew_build", "sqew build information", registry=registry).info(
        {"version": __version__}
    )


def render(stats: Sequence[models.Stats] | None) -> bytes:
    """The text exposition of the queues' metrics only (``stats`` of every queue; None: the
    database did not answer, and only ``sqew_queue_metrics_up 0`` is shown)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(stats))
    return generate_latest(registry)


def render_local(stats: Sequence[models.Stats]) -> bytes:
    """What ``sqew metrics`` prints on a database file: build information and the queues'
    metrics (a server adds its processes' request and database metrics)."""
    registry = CollectorRegistry(auto_describe=True)
    add_build_info(registry)
    return generate_latest(registry) + render(stats)
