"""OpenTelemetry traces: spans of a real server, and trace context in messages.

The server under test is real (uvicorn on 127.0.0.1, ``ServerThread``) and traces with an SDK
``TracerProvider`` given to its app, whose spans go to the SDK's ``InMemorySpanExporter``. A
second processor (``Spans``) only signals when spans start and end, so tests wait for the span
they need instead of sleeping (a server span ends just after its response was sent).
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode, Tracer, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import sqew
from sqew import errors, telemetry
from sqew.cli import export
from sqew.core import signing
from tests.server.support import envelope
from tests.targets import ServerThread, server_settings

WAIT_S = 15
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
"""A producer's traceparent from elsewhere (W3C's example)."""


class Spans(SpanProcessor):
    """Signals spans starting and ending (after the exporter's processor has them)."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter
        self.started: list[str] = []
        self._changed = threading.Condition()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        with self._changed:
            self.started.append(span.name)
            self._changed.notify_all()

    def on_end(self, span: ReadableSpan) -> None:
        with self._changed:
            self._changed.notify_all()

    def until(self, found: Callable[[Sequence[ReadableSpan]], bool]) -> list[ReadableSpan]:
        """Every finished span, once ``found`` holds of them (bounded)."""
        with self._changed:
            ok = self._changed.wait_for(lambda: found(self.exporter.get_finished_spans()), WAIT_S)
        spans = list(self.exporter.get_finished_spans())
        assert ok, [s.name for s in spans]
        return spans

    def until_started(self, name: str, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.started.count(name) >= count, WAIT_S)


class Traced:
    """A traced server, its spans and a tracer of the same provider (the tests' producer)."""

    def __init__(self, db: Path) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.spans = Spans(self.exporter)
        self.provider.add_span_processor(self.spans)
        self.tracer: Tracer = self.provider.get_tracer("tests")
        self.db = db
        # Commit time is no overload here: a test holds the write lock while its enqueues
        # gather, however long a loaded machine takes to send them all.
        self.server = ServerThread(server_settings(db, overload_commit_ms=0),
                                   reaper_timer=False, tracer_provider=self.provider)
        self.url = self.server.url

    def close(self) -> None:
        self.server.stop()
        self.provider.shutdown()


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    t = Traced(tmp_path_factory.mktemp("traced") / "q.db")
    try:
        yield t
    finally:
        t.close()


@pytest.fixture
def queue(traced: Traced) -> str:
    name = f"t{uuid.uuid4().hex[:12]}"
    assert httpx.post(f"{traced.url}/queues", json={"name": name}).status_code == 201
    return name


def traceparent(span: ReadableSpan | Any) -> str:
    """The W3C traceparent of ``span``, as its context propagates."""
    fields: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(fields, set_span_in_context(span))
    return fields["traceparent"]


def ids(traceparent: str) -> tuple[int, int]:
    """(trace id, span id) of a traceparent."""
    _, trace_id, span_id, _ = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


def named(spans: Sequence[ReadableSpan], name: str, **attrs: Any) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name
            and all((s.attributes or {}).get(k) == v for k, v in attrs.items())]


def new_caller() -> tuple[str, int]:
    """A caller's traceparent with a trace id of its own, and that trace id."""
    trace_id = uuid.uuid4().int
    return f"00-{trace_id:032x}-00f067aa0ba902b7-01", trace_id


def in_trace(spans: Sequence[ReadableSpan], trace_id: int, name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name and s.context.trace_id == trace_id]


def child_of(spans: Sequence[ReadableSpan], parent: ReadableSpan, name: str) -> ReadableSpan:
    (child,) = [s for s in spans if s.name == name and s.parent is not None
                and s.parent.span_id == parent.get_span_context().span_id]
    return child


def linked(span: ReadableSpan) -> set[int]:
    return {link.context.span_id for link in span.links}


# --- spans of a request --------------------------------------------------------------------------
def test_a_request_span_has_the_route_template_continues_the_callers_trace_and_has_children(
    traced: Traced, queue: str
) -> None:
    caller, trace_id = new_caller()
    r = httpx.post(f"{traced.url}/queues/{queue}/messages", json={"payload": 1},
                   headers={"traceparent": caller})
    assert r.status_code == 201, r.text
    route = "POST /queues/{q}/messages"
    spans = traced.spans.until(lambda s: bool(in_trace(s, trace_id, route)))
    (server,) = in_trace(spans, trace_id, route)
    assert server.kind == SpanKind.SERVER
    assert server.attributes is not None
    assert server.attributes["http.route"] == "/queues/{q}/messages"
    assert server.attributes["http.request.method"] == "POST"
    assert server.attributes["http.response.status_code"] == 201
    assert server.parent is not None and server.parent.span_id == 0x00F067AA0BA902B7
    assert server.parent.is_remote
    operation = child_of(spans, server, f"enqueue {queue}")
    assert operation.kind == SpanKind.PRODUCER
    transaction = child_of(spans, operation, "transaction")  # alone in its group: a child
    assert transaction.attributes is not None
    assert transaction.attributes["db.system.name"] == "sqlite"
    assert transaction.context.trace_id == server.context.trace_id

    caller, trace_id = new_caller()
    r = httpx.get(f"{traced.url}/queues/{queue}/stats", headers={"traceparent": caller})
    assert r.status_code == 200
    spans = traced.spans.until(lambda s: bool(in_trace(s, trace_id, "GET /queues/{q}/stats")))
    (server,) = in_trace(spans, trace_id, "GET /queues/{q}/stats")
    child_of(spans, child_of(spans, server, f"stats {queue}"), "read")


def test_a_refused_request_has_its_span_with_the_status(traced: Traced) -> None:
    caller, trace_id = new_caller()
    r = httpx.post(f"{traced.url}/queues/nope/ack", json={"id": 1, "token": "t"},
                   headers={"traceparent": caller})
    envelope(r, 404, "QueueNotFound")
    spans = traced.spans.until(lambda s: bool(in_trace(s, trace_id, "POST /queues/{q}/ack")))
    (server,) = in_trace(spans, trace_id, "POST /queues/{q}/ack")
    assert server.attributes is not None
    assert server.attributes["http.response.status_code"] == 404
    operation = child_of(spans, server, "ack nope")
    assert operation.status.status_code == StatusCode.ERROR
    assert operation.status.description == "QueueNotFound"


def test_a_merged_group_commit_has_one_span_linked_to_each_requests_span(
    traced: Traced, queue: str
) -> None:
    """The write lock is held elsewhere while 8 enqueues arrive: the first one's group waits
    for it, the other 7 gather into the next group: one merged transaction."""
    blocker = sqlite3.connect(traced.db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    statuses: list[int] = []

    def post(i: int) -> None:
        r = httpx.post(f"{traced.url}/queues/{queue}/messages", json={"payload": i}, timeout=30)
        statuses.append(r.status_code)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(8)]
    try:
        for t in threads:
            t.start()
        # Each enqueue's operation joins the pending group as its span starts (same loop turn).
        traced.spans.until_started(f"enqueue {queue}", 8)
    finally:
        blocker.execute("COMMIT")
        blocker.close()
        for t in threads:
            t.join(WAIT_S)
    assert statuses == [201] * 8
    spans = traced.spans.until(lambda s: len(named(s, f"enqueue {queue}")) == 8)
    operations = {s.context.span_id for s in named(spans, f"enqueue {queue}")}
    transactions = [s for s in named(spans, "transaction")
                    if (s.parent is not None and s.parent.span_id in operations)
                    or linked(s) & operations]
    served = {s.parent.span_id for s in transactions if s.parent is not None} | {
        i for s in transactions for i in linked(s)}
    assert served == operations  # every request's transaction is found from its span
    merged = [s for s in transactions if len(s.links) > 1]
    assert merged, [(s.parent, len(s.links)) for s in transactions]
    for s in merged:
        assert s.parent is None  # a span of its own, not a child of one of the requests
        assert s.attributes is not None and s.attributes["sqew.group.size"] == len(s.links)


# --- trace context through a message -------------------------------------------------------------
def produce(client: sqew.Client, tracer: Tracer, queue: str) -> str:
    """Enqueue one message and a batch (one of its messages with a traceparent of its own)
    inside a producer span; that span's traceparent."""
    with tracer.start_as_current_span("produce", kind=SpanKind.PRODUCER) as span:
        client.enqueue(queue, {"n": 1})
        client.enqueue_batch(queue, [{"payload": {"n": 2}},
                                     {"payload": {"n": 3}, "traceparent": OTHER}])
    return traceparent(span)


def consume(client: sqew.Client, tracer: Tracer, queue: str,
            exporter: InMemorySpanExporter) -> dict[int, str | None]:
    """Poll the three messages, handle each in a consumer span; each one's traceparent, and
    check that its consumer span links to exactly it."""
    got = client.poll(queue, batch=10)
    assert [m.payload["n"] for m in got] == [1, 2, 3]
    out: dict[int, str | None] = {}
    for m in got:
        with telemetry.consumer_span(m, tracer=tracer) as span:
            pass
        assert isinstance(m.traceparent, str)
        (link,) = span.links  # type: ignore[attr-defined]
        assert (link.context.trace_id, link.context.span_id) == ids(m.traceparent)
        assert span.kind == SpanKind.CONSUMER  # type: ignore[attr-defined]
        out[m.payload["n"]] = m.traceparent
        client.ack(queue, m.id, m.token)
    return out


def test_a_consumer_span_links_to_the_producers_through_a_message_over_http(
    traced: Traced, queue: str
) -> None:
    with sqew.Client(traced.url) as client:
        producer = produce(client, traced.tracer, queue)
        assert consume(client, traced.tracer, queue, traced.exporter) == {
            1: producer, 2: producer, 3: OTHER}
    # The server's poll span links to the producers too.
    spans = traced.spans.until(lambda s: bool(named(s, f"poll {queue}")))
    (poll,) = named(spans, f"poll {queue}")
    assert poll.kind == SpanKind.CONSUMER
    producer_span = ids(producer)[1]
    assert linked(poll) == {producer_span, ids(OTHER)[1]}
    # The enqueue requests continued the producer's trace (headers sent by the HttpClient).
    requests = in_trace(spans, ids(producer)[0], "POST /queues/{q}/messages")
    assert len(requests) == 2
    assert {s.parent.span_id for s in requests if s.parent} == {producer_span}


def test_a_consumer_span_links_to_the_producers_through_a_message_locally(
    traced: Traced, tmp_path: Path
) -> None:
    with sqew.Client(str(tmp_path / "local.db")) as client:
        client.create_queue("jobs")
        producer = produce(client, traced.tracer, "jobs")
        assert consume(client, traced.tracer, "jobs", traced.exporter) == {
            1: producer, 2: producer, 3: OTHER}


def test_headers_carry_a_single_enqueues_context_and_tracestate_is_kept(
    traced: Traced, queue: str
) -> None:
    base = f"{traced.url}/queues/{queue}"
    assert httpx.post(f"{base}/messages", json={"payload": "traced"},
                      headers={"traceparent": OTHER, "tracestate": "a=1,b=2"}).status_code == 201
    assert httpx.post(f"{base}/messages", json={"payload": "plain"}).status_code == 201
    # A batch: the header is each message's unless it has its own.
    mine = "00-11111111111111111111111111111111-2222222222222222-00"
    r = httpx.post(f"{base}/messages", headers={"traceparent": OTHER},
                   json={"messages": [{"payload": "b1"}, {"payload": "b2", "traceparent": mine}]})
    assert r.status_code == 201, r.text
    got = httpx.post(f"{base}/poll", params={"batch": 10}).json()["messages"]
    by_payload = {m["payload"]: m for m in got}
    assert by_payload["traced"]["traceparent"] == OTHER
    assert by_payload["traced"]["tracestate"] == "a=1,b=2"
    assert "traceparent" not in by_payload["plain"] and "tracestate" not in by_payload["plain"]
    assert by_payload["b1"]["traceparent"] == OTHER and "tracestate" not in by_payload["b1"]
    assert by_payload["b2"]["traceparent"] == mine


@pytest.mark.parametrize(("headers", "body", "field"), [
    ({}, {"payload": 1, "traceparent": "nope"}, "traceparent"),
    # A field is stored as given: a later version's extra fields are not taken there.
    ({}, {"payload": 1, "traceparent": "cc" + OTHER[2:] + "-more"}, "traceparent"),
    ({}, {"messages": [{"payload": 1}, {"payload": 2, "traceparent": "ff" + OTHER[2:]}]},
     "messages[1].traceparent"),
    ({}, {"payload": 1, "tracestate": "a=1"}, "tracestate"),
    ({"traceparent": OTHER}, {"payload": 1, "traceparent": OTHER, "tracestate": "\u00e9"},
     "tracestate"),
    # An invalid header, ignored, hides no malformed field.
    ({"traceparent": "00-abc-def-01"}, {"payload": 1, "traceparent": "nope"}, "traceparent"),
])
def test_a_malformed_trace_context_field_is_a_validation_error_naming_it(
    traced: Traced, queue: str, headers: dict[str, str], body: dict[str, Any], field: str
) -> None:
    r = httpx.post(f"{traced.url}/queues/{queue}/messages", json=body, headers=headers)
    error = envelope(r, 400, "ValidationError")
    assert error["details"][0]["field"] == field, error
    assert "traceparent" in error["message"] or "tracestate" in error["message"], error


def request_span(traced: Traced, queue: str) -> ReadableSpan:
    """The server span of the one enqueue to ``queue`` (the parent of its operation's)."""
    spans = traced.spans.until(lambda s: bool(named(s, f"enqueue {queue}")))
    (operation,) = named(spans, f"enqueue {queue}")
    assert operation.parent is not None
    (server,) = [s for s in spans if s.context.span_id == operation.parent.span_id]
    return server


INVALID_TRACEPARENTS: dict[str, Callable[[str], list[str]]] = {
    "garbage": lambda c: ["00-abc-def-01"],
    "upper case": lambda c: [c.upper()],
    "short": lambda c: [c[:-1]],
    "trace id all zeros": lambda c: ["00-" + "0" * 32 + c[35:]],
    "parent id all zeros": lambda c: [c[:36] + "0" * 16 + c[52:]],
    "version ff": lambda c: ["ff" + c[2:]],
    "version 00 with more": lambda c: [c + "-more"],
    "later version, flags not ended": lambda c: ["cc" + c[2:] + "x"],
    "repeated": lambda c: [c, c],
}


@pytest.mark.parametrize("make", INVALID_TRACEPARENTS.values(), ids=INVALID_TRACEPARENTS.keys())
def test_an_invalid_traceparent_header_is_ignored_with_its_tracestate(
    traced: Traced, queue: str, make: Callable[[str], list[str]]
) -> None:
    """W3C: a receiver ignores an invalid traceparent (and then tracestate). The enqueue
    succeeds, its message has no trace context, and its span starts a trace of its own."""
    caller, trace_id = new_caller()
    headers = [("traceparent", value) for value in make(caller)] + [("tracestate", "a=1")]
    r = httpx.post(f"{traced.url}/queues/{queue}/messages", json={"payload": 1}, headers=headers)
    assert r.status_code == 201, r.text
    (m,) = httpx.post(f"{traced.url}/queues/{queue}/poll").json()["messages"]
    assert "traceparent" not in m and "tracestate" not in m, m
    server = request_span(traced, queue)
    assert server.parent is None and server.context.trace_id != trace_id


def test_a_later_versions_traceparent_header_is_read_by_its_first_four_fields(
    traced: Traced, queue: str
) -> None:
    """W3C: a version above 00 (not ff) is parsed by its first four fields, the rest ignored;
    it is stored in version 00's form."""
    caller, trace_id = new_caller()
    later = "cc" + caller[2:] + "-what-a-later-version-adds"
    r = httpx.post(f"{traced.url}/queues/{queue}/messages", json={"payload": 1},
                   headers={"traceparent": later, "tracestate": "a=1"})
    assert r.status_code == 201, r.text
    (m,) = httpx.post(f"{traced.url}/queues/{queue}/poll").json()["messages"]
    assert (m["traceparent"], m["tracestate"]) == (caller, "a=1")
    server = request_span(traced, queue)
    assert server.parent is not None and server.parent.span_id == 0x00F067AA0BA902B7
    assert server.context.trace_id == trace_id


def test_a_tracestate_header_is_one_list_dropped_when_invalid_and_cut_to_fit(
    traced: Traced, queue: str
) -> None:
    """Failing to parse tracestate never affects traceparent (W3C): an invalid list is
    dropped, the traceparent kept; past 512 characters whole members go, the long ones
    first."""
    members = [f"k{i}={'v' * 20}" for i in range(30)]  # 23 or 24 characters: 739 in all
    cases: list[tuple[list[str], str | None]] = [
        (["a=1 , ,b=2", "c=3"], "a=1,b=2,c=3"),  # (empty members mean nothing)
        (["t@sys=x y"], "t@sys=x y"),
        (["x" * 600], None),  # not a key=value list
        (["a=1,a=2"], None),  # a key twice
        (["A=1"], None),  # keys are lower case
        ([",".join(f"k{i}=1" for i in range(33))], None),  # 33 members: too many
        ([",".join(members)], ",".join(members[:20])),  # cut from the end: 20 fit in 512
        ([f"big={'v' * 200}", ",".join(members[:13])], ",".join(members[:13])),  # long first
    ]
    for i, (states, _) in enumerate(cases):
        r = httpx.post(f"{traced.url}/queues/{queue}/messages", json={"payload": i},
                       headers=[("traceparent", OTHER)] + [("tracestate", s) for s in states])
        assert r.status_code == 201, r.text
    got = httpx.post(f"{traced.url}/queues/{queue}/poll", params={"batch": 10}).json()
    by_case = {m["payload"]: m for m in got["messages"]}
    for i, (_, kept) in enumerate(cases):
        assert by_case[i]["traceparent"] == OTHER
        assert by_case[i].get("tracestate") == kept, (i, by_case[i])


SECRET = "an-hmac-secret-of-more-than-16-bytes"


def test_a_signed_request_replayed_with_a_traceparent_header_stores_no_context(
    traced: Traced
) -> None:
    """The signature covers the body, not the headers: on a signed request the trace context
    headers are not stored (a message's own ``traceparent`` field, inside the signed body,
    is). Replaying a captured signed request with an added header changes nothing stored."""
    q = f"s{uuid.uuid4().hex[:12]}"
    assert httpx.post(f"{traced.url}/queues", json={"name": q, "hmac_secret": SECRET}
                      ).status_code == 201
    mine = "00-11111111111111111111111111111111-2222222222222222-01"
    for body in (b'{"payload": "captured"}',
                 b'{"messages": [{"payload": "b1"}, {"payload": "b2", "traceparent": "'
                 + mine.encode() + b'"}]}'):
        signature = signing.header(SECRET, body)
        r = httpx.post(f"{traced.url}/queues/{q}/messages", content=body, headers={
            "content-type": "application/json", signing.HEADER: signature,
            "traceparent": OTHER, "tracestate": "attacker=1"})
        assert r.status_code == 201, r.text
    got = httpx.post(f"{traced.url}/queues/{q}/poll", params={"batch": 10}).json()["messages"]
    by_payload = {m["payload"]: m for m in got}
    assert set(by_payload) == {"captured", "b1", "b2"}
    for payload in ("captured", "b1"):
        assert "traceparent" not in by_payload[payload], by_payload[payload]
        assert "tracestate" not in by_payload[payload], by_payload[payload]
    assert by_payload["b2"]["traceparent"] == mine  # signed, in the body


def test_a_signing_client_inside_a_span_stores_its_trace_context(traced: Traced) -> None:
    """``Client(url, hmac_secret=)`` puts the span's context in each message's body, which
    the signature covers: signed and traced enqueues work together."""
    q = f"s{uuid.uuid4().hex[:12]}"
    with sqew.Client(traced.url, hmac_secret=SECRET) as client:
        client.create_queue(q, hmac_secret=SECRET)
        producer = produce(client, traced.tracer, q)
        got = client.poll(q, batch=10)
    assert [m.traceparent for m in got] == [producer, producer, OTHER]
    assert all(sqew.verify_signature(m, SECRET) for m in got)


def test_a_client_refuses_a_malformed_traceparent_alike_locally(tmp_path: Path) -> None:
    with sqew.Client(str(tmp_path / "q.db")) as client:
        client.create_queue("jobs")
        with pytest.raises(errors.ValidationError) as caught:
            client.enqueue_batch("jobs", [{"payload": 1, "traceparent": "00-x"}])
        assert caught.value.details[0]["field"] == "traceparent"


def test_the_dlq_the_archive_and_an_export_keep_a_messages_trace_context(tmp_path: Path) -> None:
    with sqew.Client(str(tmp_path / "q.db")) as client:
        client.create_queue("jobs", archive=True, max_attempts=1)
        client.enqueue_batch("jobs", [{"payload": i, "traceparent": OTHER, "tracestate": "k=v"}
                                      for i in (1, 2)])
        first, second = client.poll("jobs", batch=2)
        client.ack("jobs", first.id, first.token)
        assert client.nack("jobs", second.id, second.token).status == "dead_lettered"
        (archived,) = client.scan("jobs", source="archive").messages
        (dead,) = client.dlq_list("jobs")
        for m in (archived, dead):
            assert (m.traceparent, m.tracestate) == (OTHER, "k=v")
        (scanned,) = client.scan("jobs", source="dlq").messages
        line = export.envelope(scanned, 0)
        assert (line["traceparent"], line["tracestate"]) == (OTHER, "k=v")
        client.dlq_requeue("jobs")
        (again,) = client.poll("jobs")
        assert again.traceparent == OTHER  # still the producer's, back on its queue


# --- tracing off ---------------------------------------------------------------------------------
def test_with_tracing_off_no_tracing_runs_and_messages_still_carry_trace_context(
    tmp_path: Path
) -> None:
    """Storing a producer's trace context is not tracing: a server that does not trace (no
    provider, no OTEL_* exporter) still keeps it with the message."""
    assert not telemetry.wanted()
    server = ServerThread(server_settings(tmp_path / "q.db"), reaper_timer=False)
    try:
        assert server.app.state.runtime.tracing is None
        # No tracing middleware: only metrics', answer_cancelled and auth.
        assert not [m for m in server.app.middleware
                    if getattr(m, "__module__", "") == "sqew.server.tracing"]
        assert len(server.app.middleware) == 3
        with sqew.Client(server.url) as client:
            client.create_queue("jobs")
            r = httpx.post(f"{server.url}/queues/jobs/messages", json={"payload": 1},
                           headers={"traceparent": OTHER})
            assert r.status_code == 201
            (m,) = client.poll("jobs")
            assert m.traceparent == OTHER
    finally:
        server.stop()


def test_a_request_sampled_out_by_its_caller_has_no_spans_and_still_stores_its_context(
    traced: Traced, queue: str
) -> None:
    """The caller's traceparent says "not sampled" (flags 00): the default sampler follows
    the parent, so neither the request nor its operation or transaction is recorded; the
    message keeps the context all the same."""
    unsampled_id, sampled_id = uuid.uuid4().int, uuid.uuid4().int
    unsampled = f"00-{unsampled_id:032x}-00f067aa0ba902b7-00"
    base = f"{traced.url}/queues/{queue}"
    assert httpx.post(f"{base}/messages", json={"payload": 1},
                      headers={"traceparent": unsampled}).status_code == 201
    assert httpx.post(f"{base}/messages", json={"payload": 2},
                      headers={"traceparent": f"00-{sampled_id:032x}-00f067aa0ba902b7-01"}
                      ).status_code == 201
    route = "POST /queues/{q}/messages"
    spans = traced.spans.until(lambda s: bool(in_trace(s, sampled_id, route)))
    assert [s.name for s in spans if s.context.trace_id == unsampled_id] == []
    assert [s for s in named(spans, "transaction")
            if any(link.context.trace_id == unsampled_id for link in s.links)] == []
    (first, _) = httpx.post(f"{base}/poll", params={"batch": 2}).json()["messages"]
    assert first["traceparent"] == unsampled
