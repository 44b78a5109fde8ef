"""``sqew serve`` with tracing on, its spans handed to an in-process exporter that drops them.

The ``tracing`` section of ``bench/server.py`` runs this in place of ``sqew serve``: every span
is made, recorded and passed through the SDK's ``BatchSpanProcessor`` as with a real exporter,
and only the export itself (network, a collector) is left out, so the comparison with tracing
off measures what tracing costs the server's own process. The provider is installed globally
before the server starts, as ``opentelemetry-instrument sqew serve`` would; a single-process
server (no ``--workers``) uses it (``sqew.telemetry.server_tracing``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class Discard(SpanExporter):
    """Takes every span and keeps none (a collector that answers at once)."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


def main() -> None:
    """``python -m bench.traced_serve <sqew serve arguments>``."""
    exporter = Discard()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    from sqew.cli.app import run

    status = run(["serve", *sys.argv[1:]])
    provider.shutdown()
    print(f"spans exported: {exporter.exported}", file=sys.stderr)
    sys.exit(status)


if __name__ == "__main__":
    main()
