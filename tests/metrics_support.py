"""Helpers for the metrics tests: an exposition parsed with prometheus-client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from sqew import models

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Every sample of an exposition: ``(sample name, sorted labels)`` → value."""

QUEUE_GAUGES = {
    "sqew_queue_ready": "ready",
    "sqew_queue_delayed": "delayed",
    "sqew_queue_leased": "leased",
    "sqew_queue_dlq": "dlq",
}
QUEUE_COUNTERS = {
    "sqew_queue_enqueued_total": "enqueued_total",
    "sqew_queue_acked_total": "acked_total",
    "sqew_queue_nacked_total": "nacked_total",
    "sqew_queue_dead_lettered_total": "dead_lettered_total",
    "sqew_queue_expired_total": "expired_total",
}


def parse(text: str) -> Samples:
    """The samples of a Prometheus text exposition (a family named twice is an error)."""
    out: Samples = {}
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        assert family.name not in names, f"family {family.name} appears twice"
        names.add(family.name)
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in out, f"sample {key} appears twice"
            out[key] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when absent: a labelled counter not incremented yet)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def labels_of(samples: Samples, name: str, label: str) -> set[str]:
    """Every value of ``label`` among the samples named ``name``."""
    return {dict(labels)[label] for (n, labels) in samples if n == name}


def queue_view(samples: Samples, queue: str) -> dict[str, float]:
    """The queue's gauges and counters as a Stats-like dict (field → value)."""
    out = {field: value(samples, name, queue=queue)
           for name, field in {**QUEUE_GAUGES, **QUEUE_COUNTERS}.items()}
    out["oldest_ready_age_ms"] = round(
        value(samples, "sqew_queue_oldest_ready_age_seconds", queue=queue) * 1000)
    return out


def stats_view(stats: models.Stats) -> dict[str, float]:
    """``queue_view``'s shape of a queue's stats (no ready message: age 0)."""
    out: dict[str, float] = {field: getattr(stats, field)
                             for field in {**QUEUE_GAUGES, **QUEUE_COUNTERS}.values()}
    out["oldest_ready_age_ms"] = stats.oldest_ready_age_ms or 0
    return out
