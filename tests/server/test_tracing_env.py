"""``sqew serve`` exports traces as the standard ``OTEL_*`` environment configures them.

Each test runs ``sqew serve`` in a subprocess with OTEL_* variables: ``console`` prints the
spans on stdout (every worker process sets up its own exporter), ``otlp`` sends them over
OTLP/HTTP to a small receiver on 127.0.0.1 that decodes them with the OTLP protobuf types.
Spans are exported at the latest when the server stops (its shutdown flushes them).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.server.support import STOP_S, serve

ROUTE = "POST /queues/{q}/messages"


def enqueue_some(url: str, count: int) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/queues", json={"name": "jobs"}).status_code in (201, 409)
        for i in range(count):
            r = client.post("/queues/jobs/messages", json={"payload": i},
                            headers={"traceparent": f"00-{'ab' * 16}-{i + 1:016x}-01"})
            assert r.status_code == 201, r.text


def console_spans(text: str) -> list[dict[str, object]]:
    """The spans ConsoleSpanExporter printed (one JSON object each, pretty-printed)."""
    decoder = json.JSONDecoder()
    spans, at = [], text.find("{")
    while at != -1:
        span, end = decoder.raw_decode(text, at)
        spans.append(span)
        at = text.find("{", end)
    return spans


@pytest.mark.parametrize("workers", [1, 2])
def test_otel_traces_exporter_console_prints_the_spans(tmp_path: Path, workers: int) -> None:
    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "sqew-test"}
    with serve(tmp_path / "q.db", "--workers", str(workers), env=env) as served:
        enqueue_some(served.url, 6)
        assert served.stop() == 0
        assert served.proc.stdout is not None
        spans = console_spans(served.proc.stdout.read())
    requests = [s for s in spans if s["name"] == ROUTE]
    assert len(requests) == 6, [s["name"] for s in spans]
    for span in requests:
        assert span["kind"] == "SpanKind.SERVER"
        assert span["context"]["trace_id"] == "0x" + "ab" * 16  # type: ignore[index]
        assert span["resource"]["attributes"]["service.name"] == "sqew-test"  # type: ignore[index]
    assert any(s["name"] == "enqueue jobs" for s in spans)


class _Receiver(BaseHTTPRequestHandler):
    """OTLP/HTTP's trace endpoint: decodes each export, answers 200."""

    exports: list[ExportTraceServiceRequest]
    arrived: threading.Event

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        assert self.path == "/v1/traces"
        assert self.headers["content-type"] == "application/x-protobuf"
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.exports.append(request)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
        self.arrived.set()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Receiver", (_Receiver,), {"exports": [], "arrived": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(STOP_S)


def test_otel_traces_exporter_otlp_exports_over_http_to_the_endpoint(
    tmp_path: Path, receiver: tuple[str, type[_Receiver]]
) -> None:
    endpoint, handler = receiver
    env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
    with serve(tmp_path / "q.db", env=env) as served:
        enqueue_some(served.url, 3)
        assert served.stop() == 0
    assert handler.arrived.wait(STOP_S)
    spans = [(rs.resource, span) for export in handler.exports
             for rs in export.resource_spans for ss in rs.scope_spans for span in ss.spans]
    requests = [(resource, span) for resource, span in spans if span.name == ROUTE]
    assert len(requests) == 3, [span.name for _, span in spans]
    for resource, span in requests:
        attrs = {a.key: a.value.string_value for a in resource.attributes}
        assert attrs["service.name"] == "sqew"  # sqew's default service name
        assert span.trace_id == bytes.fromhex("ab" * 16)


def test_an_exporter_that_is_not_installed_is_logged_and_the_server_serves(
    tmp_path: Path
) -> None:
    with serve(tmp_path / "q.db", env={"OTEL_TRACES_EXPORTER": "zipkin"}) as served:
        enqueue_some(served.url, 1)
        assert served.stop() == 0
        assert "no span exporter named 'zipkin' is installed" in served.stderr()
