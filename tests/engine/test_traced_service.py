"""The traced service: an explicit class chosen when the service is built, outside any import
circle of ``sqew.core.service``.

Its spans are tested through a real server in ``tests/server/test_tracing.py``; here, that
the structure holds: the service imports nothing that imports it back (not even lazily or for
type checking), and a service built with a tracer traces without patching itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import msgspec
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from sqew import errors, models
from sqew.backends import open_backend
from sqew.core.service import QueueService
from sqew.core.traced_service import TracedService

from .test_layers import PACKAGE, Import, imports_of, module_name


def _graph() -> dict[str, set[str]]:
    """sqew's modules and the sqew modules each imports, wherever the import statement is
    (``from sqew.core import tracing`` imports ``sqew.core.tracing``, not the package)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}

    def imported(i: Import) -> bool:
        return i.module in files and not (i.stem and files[i.module].name == "__init__.py")

    return {name: {i.module for i in imports_of(path) if imported(i)} - {name}
            for name, path in files.items()}


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A path of imports from ``start`` to ``goal``, None if there is none."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        here = todo.pop()
        for there in sorted(graph.get(here, ())):
            if there == goal:
                return [*paths[here], there]
            if there not in paths:
                paths[there] = [*paths[here], there]
                todo.append(there)
    return None


def test_the_service_is_on_no_import_circle() -> None:
    graph = _graph()
    service = "sqew.core.service"
    for imported in sorted(graph[service]):
        back = _reaches(graph, imported, service)
        assert back is None, " -> ".join([service, *back])


def test_the_tracing_module_and_the_traced_service_are_not_imported_by_the_service() -> None:
    graph = _graph()
    assert _reaches(graph, "sqew.core.service", "sqew.core.traced_service") is None
    assert "sqew.core.service" not in graph["sqew.core.tracing"]


def test_a_traced_service_spans_its_operations_without_patching_itself(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    service = TracedService(open_backend(tmp_path / "q.db"), tracer=provider.get_tracer("t"))
    try:
        assert "enqueue" not in vars(service)  # a method of the class, not of the instance

        async def work() -> None:
            await service.create_queue(models.QueueCreate(name="jobs"))
            await service.enqueue("jobs", [models.MessageIn(payload=msgspec.Raw(b"1"))])
            with contextlib.suppress(errors.QueueNotFound):
                await service.ack("nope", [(1, "t")])
            await service.stats("jobs")

        asyncio.run(work())
    finally:
        service.close()
        provider.shutdown()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["enqueue jobs"].kind == SpanKind.PRODUCER
    transaction = [s for s in exporter.get_finished_spans() if s.name == "transaction"
                   and s.parent is not None
                   and s.parent.span_id == spans["enqueue jobs"].context.span_id]
    assert len(transaction) == 1
    assert spans["ack nope"].status.status_code == StatusCode.ERROR
    assert spans["ack nope"].status.description == "QueueNotFound"
    assert not spans["ack nope"].events  # the error's message is not recorded
    read = spans["read"]
    assert read.parent is not None and read.parent.span_id == spans["stats jobs"].context.span_id
    assert spans["create_queue"].kind == SpanKind.INTERNAL


def test_an_untraced_service_is_the_plain_class(tmp_path: Path) -> None:
    service = QueueService(open_backend(tmp_path / "q.db"))
    try:
        assert type(service) is QueueService
    finally:
        service.close()
