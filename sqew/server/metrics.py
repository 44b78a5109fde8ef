"""Prometheus metrics of one app (prometheus-client; a registry per app, no global state).

Two kinds, rendered together at /metrics (every name is in docs/operations.md):

- **Read at scrape time** (state): the queues' depths and counters, one statement for all
  queues (``sqew.queue_metrics``, given to ``render``), plus any Collector another module
  registers in ``Metrics.registry`` whose ``collect`` reads state any process reads alike (the
  database's). Read once per scrape, by the process that answers it.
- **Counted by the process** (events, and a process's own state): HTTP requests by route
  template and status, database transactions, group-commit sizes, long polls waiting,
  duplicates and refusals per queue (labelled only with queues that exist:
  ``sqew.server.queue_labels``): prometheus-client Counters, Gauges and Histograms in
  ``Metrics.registry`` (made with ``counter``/``gauge``/``histogram``, or directly with
  ``registry=metrics.registry``). Right in both modes:

  - one process: the registry shows them;
  - ``sqew serve --workers N``: the runner gives every worker one ``PROMETHEUS_MULTIPROC_DIR``
    (prometheus-client's multiprocess mode; the variable must be set before the library is
    imported, as it is in a spawned worker); each process writes their values to files there,
    and the scrape, whichever worker answers it, shows every process's files combined (sums;
    a Gauge's ``multiprocess_mode`` says how: ``livesum``, ``livemax``, …), while the registry
    leaves them out so that none appears twice.

The API for other modules (``rt.metrics``): ``registry`` as above; ``counter``, ``gauge``,
``histogram``; ``rejected(queue, reason)``, ``duplicates(queue, n)``,
``long_poll_started/ended``; ``observer`` (the writers' hook, ``QueueService(observer=...)``);
``queue_labels`` (what names label a queue: ``look_up_with``, and ``settle`` with a scrape's
names).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal

from litestar.types import ASGIApp, Message, Receive, Scope, Send
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Summary,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from sqew import models, queue_metrics
from sqew.core.writer import WriteObserver
from sqew.server.queue_labels import QueueLabels

# Litestar appends the charset to text types itself; giving it twice would repeat it.
CONTENT_TYPE = CONTENT_TYPE_LATEST.replace("; charset=utf-8", "")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

Reason = Literal["quota", "rate_limit", "validation", "auth", "signature", "overload"]
REASONS: tuple[Reason, ...] = ("quota", "rate_limit", "validation", "auth", "signature",
                               "overload")
MAX_QUEUE_LABELS = 10_000
"""Distinct queues a process gives labels of their own in its per-queue counters; further
queues are counted under ``queue=""`` (names that are no queue, under ``"_unknown"``:
``sqew.server.queue_labels``)."""
_PARAM_TYPE = re.compile(r"\{(\w+):[^}]*\}")
UNMATCHED = "unmatched"
"""The ``route`` label of requests that match no route."""
REQUEST_SECONDS = "sqew_http_request_duration_seconds"
_UNANSWERED = "sqew.metrics.unanswered"
"""Scope state: a request whose exception went past the metrics middleware, to be counted
when the exception handler answers it."""

REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)
TRANSACTION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                       0.25, 0.5, 1.0, 2.5, 5.0)
GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
GaugeMode = Literal["all", "liveall", "min", "livemin", "max", "livemax", "sum", "livesum",
                    "mostrecent", "livemostrecent"]


class Metrics:
    """The metrics an app exposes.

    Args:
        enabled: count events (requests, transactions, …); off, only the state read at
            scrape time is shown (the setting ``metrics``).
        multiprocess_dir: prometheus-client's multiprocess directory (default: the
            ``PROMETHEUS_MULTIPROC_DIR`` variable; unset: this process alone).
    """

    _request_seconds: Histogram
    _transaction_seconds: Histogram
    _group_size: Histogram
    _long_polls: Gauge
    _duplicates: Counter
    _rejected: Counter

    def __init__(self, *, enabled: bool = True, multiprocess_dir: str | None = None) -> None:
        self.enabled = enabled
        self.multiprocess_dir = multiprocess_dir or os.environ.get(MULTIPROC_ENV) or None
        self.registry: CollectorRegistry = _Registry(self.multiprocess_dir is not None)
        """Register collectors here (see the module docstring)."""
        queue_metrics.add_build_info(self.registry)
        # Every process's counters, gauges and histograms, from their files (the instruments
        # of this process are among them: ``_Registry`` leaves them out).
        self._workers = None if self.multiprocess_dir is None else MultiProcessCollector(
            None, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        self.queue_labels = QueueLabels(self._count_rejected, MAX_QUEUE_LABELS)
        """The names that label queues (``sqew.server.queue_labels``)."""
        self._request_children: dict[tuple[str, str, int], Any] = {}
        self._templates: dict[str, str] = {}
        self.observer: WriteObserver = WriteObserver()
        """What the writers report their transactions to (``QueueService(observer=...)``)."""
        if enabled:  # off, these do not exist (every use checks ``enabled``)
            self._instruments()

    def _instruments(self) -> None:
        # sqew_http_requests_total is derived from this histogram's counts at scrape time
        # (``_WithRequests``): one metric to update per request, not two.
        self._request_seconds = self.histogram(
            REQUEST_SECONDS,
            "Time from a request's routing to the start of its response (long polls included).",
            ("method", "route", "status"), buckets=REQUEST_BUCKETS)
        self._transaction_seconds = self.histogram(
            "sqew_db_transaction_seconds",
            "Write transactions, from asking for the write lock to the end of the commit.",
            buckets=TRANSACTION_BUCKETS)
        self._group_size = self.histogram(
            "sqew_group_commit_batch_size", "Operations per group-commit transaction.",
            buckets=GROUP_BUCKETS)
        self._long_polls = self.gauge(
            "sqew_long_polls_waiting", "Long polls (wait_ms > 0) in progress.",
            multiprocess_mode="livesum")
        self._duplicates = self.counter(
            "sqew_queue_duplicates", "Enqueued messages answered as duplicates (idempotency).",
            ("queue",))
        self._rejected = self.counter(
            "sqew_rejected", "Requests refused, by queue (\"\" for none, \"_unknown\" for a "
            "name that is no queue) and reason: quota, rate_limit, validation, auth, signature, "
            "overload.", ("queue", "reason"))
        self.observer = _TransactionObserver(self._transaction_seconds.observe,
                                             self._group_size.observe)

    # --- making metrics -------------------------------------------------------------------------
    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        """A counter of events in this process, summed over workers (``name`` without
        ``_total``: prometheus-client adds it)."""
        return Counter(name, documentation, labels, registry=self.registry)

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = (), *,
              multiprocess_mode: GaugeMode = "livesum") -> Gauge:
        """A gauge set by this process; with several workers ``multiprocess_mode`` says how
        their values combine (``livesum``: the sum over running workers; ``max``, ``all``
        with a ``pid`` label, …: prometheus-client's modes)."""
        return Gauge(name, documentation, labels, registry=self.registry,
                     multiprocess_mode=multiprocess_mode)

    def histogram(self, name: str, documentation: str, labels: Sequence[str] = (), *,
                  buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS) -> Histogram:
        """A histogram of observations in this process, summed over workers."""
        return Histogram(name, documentation, labels, registry=self.registry,
                         buckets=buckets)

    # --- counting -------------------------------------------------------------------------------
    def rejected(self, queue: str | None, reason: Reason) -> None:
        """Count a refused request (``queue``: the queue its path named, if any; one that is
        not known to exist yet is counted once it has been looked up)."""
        if not self.enabled:
            return
        label = self.queue_labels.label(queue)
        if label is None:
            self.queue_labels.hold(queue or "", reason)
        else:
            self._rejected.labels(label, reason).inc()

    def _count_rejected(self, label: str, reason: str, n: int) -> None:
        if self.enabled:
            self._rejected.labels(label, reason).inc(n)

    def duplicates(self, queue: str, n: int) -> None:
        """Count ``n`` enqueued messages answered as duplicates (by an enqueue to ``queue``,
        which therefore exists)."""
        if self.enabled and n:
            self._duplicates.labels(self.queue_labels.add(queue)).inc(n)

    def long_poll_started(self) -> None:
        """A long poll begins to wait (call ``long_poll_ended`` when it ends)."""
        if self.enabled:
            self._long_polls.inc()

    def long_poll_ended(self) -> None:
        """A long poll ended."""
        if self.enabled:
            self._long_polls.dec()

    def request(self, method: str, template: str | None, status: int, seconds: float) -> None:
        """Count an answered request (``template``: its route's path template)."""
        key = (method, template or UNMATCHED, status)
        child = self._request_children.get(key)
        if child is None:  # labels resolved once per route, method and status
            child = self._request_children[key] = self._request_seconds.labels(
                method, self._route(template), str(status))
        child.observe(seconds)

    def error_answered(self, scope: Scope, status: int) -> None:
        """The app's exception handler answers ``status``: count the request if the
        middleware could not (an exception raised past it, or a request that matched no
        route: ``route="unmatched"``, with a duration of 0 as it never reached a route)."""
        if not self.enabled:
            return
        counting: _CountingSend | None = scope["state"].pop(_UNANSWERED, None)
        if counting is not None:
            counting.count(status)
        elif "route_handler" not in scope:
            self.request(scope["method"], None, status, 0.0)  # type: ignore[typeddict-item]

    def _route(self, template: str | None) -> str:
        """The route's path template, parameters without their types (``/queues/{q}``)."""
        if template is None:
            return UNMATCHED
        route = self._templates.get(template)
        if route is None:
            route = self._templates[template] = _PARAM_TYPE.sub(r"{\1}", template)
        return route

    def close(self) -> None:
        """This process stops serving: its ``live`` gauges leave the workers' sums."""
        if self.multiprocess_dir:
            multiprocess.mark_process_dead(  # type: ignore[no-untyped-call]
                os.getpid(), self.multiprocess_dir)

    def render(self, queues: Sequence[models.Stats] | None = None) -> bytes:
        """The Prometheus text exposition: state collectors, every process's events, and
        ``queues`` (``QueueService.all_stats()``; None: the database did not answer, shown as
        ``sqew_queue_metrics_up 0``)."""
        body = generate_latest(_WithRequests(self.registry, self._workers))
        return body + queue_metrics.render(queues)


def middleware(metrics_of: Callable[[Scope], Metrics]) -> Callable[[ASGIApp], ASGIApp]:
    """ASGI middleware (the outermost of a route's): every request's route template, status
    and duration, counted into ``metrics_of(scope)`` as its response starts, so that a client
    that has the answer finds it counted (a scrape right after sees it)."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def measure(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":  # type: ignore[comparison-overlap]  # str: cheaper
                await app(scope, receive, send)
                return
            counting = _CountingSend(metrics_of(scope), scope, send)
            try:
                await app(scope, receive, counting)
            except Exception:
                # Raised past the route's own handlers (the auth middleware's refusals): the
                # app's exception handler answers with the original send, and counts it.
                if not counting.counted:
                    scope["state"][_UNANSWERED] = counting
                raise
            if not counting.counted:  # ended without an answer: the server answers 500
                counting.count(500)

        return measure

    return wrap


class _CountingSend:
    """A request's ``send``, counting the request when its response starts. A callable object
    handing back ``send``'s own awaitable: no coroutine of its own per message."""

    __slots__ = ("_method", "_metrics", "_send", "_start", "_template", "counted")

    def __init__(self, metrics: Metrics, scope: Scope, send: Send) -> None:
        self._metrics = metrics
        self._send = send
        self._method: str = scope["method"]  # type: ignore[typeddict-item]
        self._template: str | None = scope.get("path_template")
        self._start = time.perf_counter()
        self.counted = False

    def __call__(self, message: Message) -> Awaitable[None]:
        if not self.counted and message["type"] == "http.response.start":
            self.count(message["status"])
        return self._send(message)

    def count(self, status: int) -> None:
        self.counted = True
        self._metrics.request(self._method, self._template, status,
                              time.perf_counter() - self._start)


class _Registry(CollectorRegistry):
    """``Metrics.registry``: a CollectorRegistry that, with several workers, leaves out the
    counters, gauges, histograms and summaries registered in it. Their values are in the
    workers' files then, shown summed by the ``MultiProcessCollector``; shown here as well,
    they would appear twice, once with this process's values alone."""

    def __init__(self, multiprocess: bool) -> None:
        super().__init__(auto_describe=True)
        self._multiprocess = multiprocess
        self._order: list[Collector] = []

    def register(self, collector: Collector) -> None:
        super().register(collector)
        self._order.append(collector)

    def unregister(self, collector: Collector) -> None:
        super().unregister(collector)
        self._order.remove(collector)

    def collect(self) -> Iterator[Metric]:
        for collector in list(self._order):
            if self._multiprocess and isinstance(collector, _IN_FILES):
                continue
            yield from collector.collect()


_IN_FILES = (Counter, Gauge, Histogram, Summary)
"""The metric kinds prometheus-client's multiprocess mode keeps in files."""


class _WithRequests(Collector):
    """What /metrics shows of ``Metrics``: its registry, every worker's files, and
    ``sqew_http_requests_total``, the request histogram's counts as a counter (by method,
    route and status), made when scraped."""

    def __init__(self, *sources: Collector | None) -> None:
        self._sources = [s for s in sources if s is not None]

    def collect(self) -> Iterator[Metric]:
        for source in self._sources:
            for family in source.collect():
                yield family
                if family.name == REQUEST_SECONDS:
                    counter = Metric("sqew_http_requests",
                                     "HTTP requests answered, by route template and status.",
                                     "counter")
                    counter.samples = [
                        Sample("sqew_http_requests_total", s.labels, s.value)
                        for s in family.samples if s.name == REQUEST_SECONDS + "_count"
                    ]
                    yield counter


class _TransactionObserver(WriteObserver):
    """The writers' reports (``sqew.core.writer.WriteObserver``) into two histograms."""

    def __init__(self, seconds: Callable[[float], None], size: Callable[[float], None]) -> None:
        self.transaction = seconds  # type: ignore[method-assign,assignment]
        self.group = size  # type: ignore[method-assign,assignment]
