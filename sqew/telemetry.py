"""OpenTelemetry traces: a message's trace context, a consumer's span, the server's setup.

sqew uses the OpenTelemetry API everywhere (a no-op until an SDK is set up) and the SDK only
where traces are exported: a server process (``sqew serve``) whose ``OTEL_*`` environment
configures an exporter (``server_tracing``), with the ``otel`` extra installed.

**Trace context travels with a message** (docs/rest.md, "Trace context"): a producer's W3C
``traceparent``/``tracestate`` is stored with the message and returned on its leased message.
A Client sends the current span's context with every enqueue (``current_fields``); a consumer
starts its span linked to the producer's with ``consumer_span``::

    for m in client.poll("jobs", batch=10):
        with sqew.telemetry.consumer_span(m):
            handle(m.payload)
        client.ack("jobs", m.id, m.token)

Only W3C Trace Context is stored with messages (whatever ``OTEL_PROPAGATORS`` says about HTTP
headers), through the API's own propagator: a message's fields are W3C's by definition. A
server reads an enqueue's ``traceparent``/``tracestate`` headers as message data with
``request_context``, as W3C says a receiver does: an invalid header is ignored, not refused.

This module imports no other part of sqew but ``models``: the core, the clients and the server
all use it (the dependency rule in ``tests/engine/test_layers.py``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import (
    Link,
    Span,
    SpanContext,
    SpanKind,
    Tracer,
    TracerProvider,
    format_span_id,
    format_trace_id,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.trace.span import TraceState

from sqew import models

INSTRUMENTATION = "sqew"
"""The name of sqew's tracers (the instrumentation scope of its spans)."""
SYSTEM = "sqew"
"""``messaging.system`` of sqew's spans."""
log = logging.getLogger("sqew.telemetry")
_W3C = TraceContextTextMapPropagator()


# --- a message's trace context ------------------------------------------------------------------
def current_fields() -> dict[str, str]:
    """The current span's W3C trace context as a message's fields: ``{"traceparent": …}`` and
    ``"tracestate"`` when there is one; ``{}`` when no span is recording or being continued."""
    if not trace.get_current_span().get_span_context().is_valid:
        return {}
    fields: dict[str, str] = {}
    _W3C.inject(fields)
    return fields


def inject_headers(headers: MutableMapping[str, str]) -> None:
    """Add the current context to outgoing HTTP ``headers`` (the configured propagators: W3C
    ``traceparent``/``tracestate`` and ``baggage`` by default), so a server's span continues
    the caller's trace."""
    propagate.inject(headers)


def message_context(traceparent: str | None, tracestate: str | None = None) -> SpanContext | None:
    """The producer's span context stored with a message (None: none, or not valid)."""
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    context = trace.get_current_span(_W3C.extract(carrier)).get_span_context()
    return context if context.is_valid else None


def producer_link(message: models.Message) -> Link | None:
    """A link to the span that produced ``message`` (None when it carries no trace context)."""
    traceparent = message.traceparent if isinstance(message.traceparent, str) else None
    tracestate = message.tracestate if isinstance(message.tracestate, str) else None
    context = message_context(traceparent, tracestate)
    return None if context is None else Link(context)


@contextlib.contextmanager
def consumer_span(
    message: models.Message, *, tracer: Tracer | None = None, name: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span]:
    """Handle ``message`` in a new CONSUMER span (the current span) linked to its producer's.

    The span is a child of the current span, if any (a Worker's, say), and links to the span
    that enqueued the message, across processes and time: the link is how a trace backend
    shows the consumer's trace beside the producer's.

    Args:
        message: a message from ``Client.poll`` (any message object with trace context).
        tracer: the tracer to start the span with (default: the global provider's tracer
            named ``sqew``).
        name: the span's name (default ``process <queue>``).
        attributes: more attributes of the span.
    """
    tracer = tracer or trace.get_tracer(INSTRUMENTATION)
    link = producer_link(message)
    attrs: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": message.queue,
        "messaging.message.id": str(message.id),
    }
    attrs.update(attributes or {})
    with tracer.start_as_current_span(
        name or f"process {message.queue}", kind=SpanKind.CONSUMER,
        links=[link] if link is not None else None, attributes=attrs,
    ) as span:
        yield span


# --- a request's trace context headers ---------------------------------------------------------
# Read as W3C says a receiver reads them, by the API's W3C propagator: an invalid header is
# ignored, never refused (a version 00 header is exactly 00-<trace id>-<parent id>-<flags>,
# neither id all zeros; a later version, not ff, is read by its first four fields; a repeated
# traceparent is invalid, and the request then has no trace context). Repeated tracestate
# headers are one list; a list W3C's grammar does not accept is dropped, the traceparent kept.
# One thing the propagator does not: a list past 512 characters is cut by whole members (those
# over 128 characters first, then from the end) where it would drop the list.
# A message's own traceparent/tracestate fields are data a client asks to store: those are
# checked (sqew.models), and a malformed one is a ValidationError.
TRACEPARENT_HEADER = b"traceparent"
TRACESTATE_HEADER = b"tracestate"
_LONG_MEMBER = 128
"""Members longer than this go first when a tracestate is cut to fit (W3C)."""


def _tracestate_header(values: list[str]) -> str | None:
    """The request's ``tracestate`` headers (``values``) as one list, cut to fit; None if
    there is none or it is invalid."""
    members = [f"{k}={v}" for k, v in TraceState.from_header(values).items()]
    while len(",".join(members)) > models.TRACESTATE_MAX:
        long = [i for i, m in enumerate(members) if len(m) > _LONG_MEMBER]
        del members[long[-1] if long else -1]
    return ",".join(members) or None


def request_context(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, str | None] | None:
    """``(traceparent, tracestate)`` of a request's raw headers, the traceparent in version
    00's form (the version this server knows, as it would propagate it), or None when its
    ``traceparent`` is missing or invalid (its ``tracestate`` is not read then)."""
    parents: list[str] = []
    states: list[str] = []
    for name, value in headers:
        if name == TRACEPARENT_HEADER:
            parents.append(value.decode("latin-1"))
        elif name == TRACESTATE_HEADER:
            states.append(value.decode("latin-1"))
    if len(parents) != 1:
        return None
    found = trace.get_current_span(_W3C.extract({"traceparent": parents[0]})).get_span_context()
    if not found.is_valid:
        return None
    parent = (f"00-{format_trace_id(found.trace_id)}-{format_span_id(found.span_id)}-"
              f"{found.trace_flags:02x}")
    return parent, _tracestate_header(states)


# --- the server's setup -------------------------------------------------------------------------
_OTLP_BY_PROTOCOL = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}


def exporter_names(env: Mapping[str, str] = os.environ) -> list[str]:
    """The span exporters the environment asks for, as entry-point names of the SDK's
    ``opentelemetry_traces_exporter`` group ([] = tracing off).

    ``OTEL_TRACES_EXPORTER`` lists them (``none`` or unset: none); ``OTEL_SDK_DISABLED=true``
    turns everything off. ``otlp`` is OTLP over the protocol ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``
    or ``OTEL_EXPORTER_OTLP_PROTOCOL`` name, by default ``http/protobuf`` (the OpenTelemetry
    specification's default, and the exporter the ``otel`` extra installs).
    """
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if not names or [n.lower() for n in names] == ["none"]:
        return []
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    return [_OTLP_BY_PROTOCOL.get(protocol, f"otlp ({protocol})") if n == "otlp" else n
            for n in names]


def _sdk_installed(provider: TracerProvider) -> bool:
    """Whether ``provider`` is a real one (not the API's proxy or no-op)."""
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def wanted(explicit: TracerProvider | None = None) -> bool:
    """Whether a server traces: given a provider, or one installed globally by the program
    (``opentelemetry-instrument sqew serve``, an embedding application), or an exporter
    configured by ``OTEL_*`` (decided once, when the app is built)."""
    return (explicit is not None or _sdk_installed(trace.get_tracer_provider())
            or bool(exporter_names()))


@dataclass
class Tracing:
    """A server process's tracing: its tracer, and the provider it set up (if it did)."""

    tracer: Tracer
    owned: Any = None
    """The SDK TracerProvider built from the environment, shut down (flushed) by ``close``."""

    def close(self) -> None:
        """Export what is buffered and stop the exporters (only a provider set up here)."""
        if self.owned is not None:
            self.owned.shutdown()
            self.owned = None


def server_tracing(explicit: TracerProvider | None = None) -> Tracing | None:
    """The tracing of a server process, set up at its startup (in every worker).

    ``explicit`` (tests, embedding programs) wins; else a provider the program installed
    globally; else an SDK TracerProvider built from the ``OTEL_*`` environment, as the SDK's
    own autoconfiguration reads it (exporters by entry point, ``OTEL_SERVICE_NAME`` and
    ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, and each exporter's
    own variables such as ``OTEL_EXPORTER_OTLP_ENDPOINT``). None: tracing is off (nothing
    configured, or the configuration cannot be used: logged).
    """
    if explicit is not None:
        return Tracing(explicit.get_tracer(INSTRUMENTATION))
    installed = trace.get_tracer_provider()
    if _sdk_installed(installed):
        return Tracing(installed.get_tracer(INSTRUMENTATION))
    names = exporter_names()
    if not names:
        return None
    try:
        provider = _provider_from_env(names)
    except _Unusable as exc:
        log.error("traces are not exported: %s", exc)
        return None
    return Tracing(provider.get_tracer(INSTRUMENTATION), owned=provider)


class _Unusable(Exception):
    """The environment asks for an exporter that cannot be had."""


def _provider_from_env(names: list[str]) -> Any:
    try:
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise _Unusable("OTEL_TRACES_EXPORTER is set but the OpenTelemetry SDK is not "
                        "installed (pip install 'sqew[otel]')") from None
    exporters = [_exporter_class(name) for name in names]
    # service.name "sqew" unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names one.
    resource = Resource.create({"service.name": "sqew"}).merge(OTELResourceDetector().detect())
    provider = SdkTracerProvider(resource=resource)  # OTEL_TRACES_SAMPLER: read by the SDK
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter()))
    return provider


def _exporter_class(name: str) -> Any:
    found = importlib.metadata.entry_points(group="opentelemetry_traces_exporter", name=name)
    if not found:
        raise _Unusable(f"no span exporter named {name!r} is installed (OTEL_TRACES_EXPORTER; "
                        "sqew[otel] installs otlp over http/protobuf and console)")
    return next(iter(found)).load()
