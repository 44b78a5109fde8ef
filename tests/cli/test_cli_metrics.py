"""``sqew metrics``: the same exposition on a database file (its queues' depths and counters)
and from a server (``--url``: its /metrics), parsed with prometheus-client's parser."""

from __future__ import annotations

from cli_support import Sqew
from metrics_support import parse, queue_view, stats_view, value


def test_metrics_show_each_queue_as_its_stats(sqew: Sqew) -> None:
    q = sqew.name("metered")
    with sqew.arrange(q, max_attempts=1) as client:
        for i in range(5):
            client.enqueue(q, i)
        client.enqueue(q, "later", delay_ms=600_000)
        (leased,) = client.poll(q)
        client.nack(q, leased.id, leased.token)  # dead-lettered
        client.poll(q)
        result = sqew.ok("metrics")
        stats = {name: client.stats(name) for name in (q, f"{q}.dlq")}
    samples = parse(result.stdout)
    for name, s in stats.items():
        view = queue_view(samples, name)
        # the oldest ready message ages between the two reads: compare it apart
        assert abs(view.pop("oldest_ready_age_ms") - (s.oldest_ready_age_ms or 0)) < 60_000
        expected = stats_view(s)
        expected.pop("oldest_ready_age_ms")
        assert view == expected, name
    assert (value(samples, "sqew_queue_ready", queue=q), value(samples, "sqew_queue_leased",
            queue=q), value(samples, "sqew_queue_delayed", queue=q)) == (3, 1, 1)
    assert value(samples, "sqew_queue_dlq", queue=q) == 1
    assert value(samples, "sqew_queue_enqueued_total", queue=q) == 6
    # a server adds what its processes count
    has_requests = any(name == "sqew_http_requests_total" for name, _ in samples)
    assert has_requests == (sqew.mode == "http")


def test_metrics_of_a_missing_file_create_none(local_sqew: Sqew) -> None:
    local_sqew.fails("metrics", code="Unavailable")
    assert not local_sqew.db.exists()
