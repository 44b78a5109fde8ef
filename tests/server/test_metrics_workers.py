"""``/metrics`` of ``sqew serve --workers 2``: every scrape, whichever worker answers it, shows
the requests of all workers (prometheus-client's multiprocess mode, a directory per server) and
reads the queues once from the database.

Each request goes on a connection of its own, so the kernel spreads them over both workers'
sockets; a count that held only the answering worker's requests would fall short.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
import psutil
import pytest
from metrics_support import parse, value

from .support import serve

pytestmark = pytest.mark.slow
ENQUEUES = 12
SCRAPES = 8


def test_every_worker_counts_in_every_scrape(tmp_path: Path) -> None:
    with serve(tmp_path / "w.db", "--workers", "2") as server:
        httpx.post(f"{server.url}/queues", json={"name": "jobs"}, timeout=30).raise_for_status()
        for i in range(ENQUEUES):
            httpx.post(f"{server.url}/queues/jobs/messages", json={"payload": i},
                       timeout=30).raise_for_status()
        shared = _multiprocess_dir(server.proc.pid)  # the workers serve: they are there
        created = {"method": "POST", "route": "/queues/{q}/messages", "status": "201"}
        for n in range(SCRAPES):
            response = httpx.get(f"{server.url}/metrics", timeout=30)
            assert response.status_code == 200
            samples = parse(response.text)
            assert value(samples, "sqew_http_requests_total", **created) == ENQUEUES
            assert value(samples, "sqew_http_request_duration_seconds_count",
                         **created) == ENQUEUES
            # the scrapes before this one, each answered by one worker or the other
            assert value(samples, "sqew_http_requests_total", method="GET", route="/metrics",
                         status="200") == n
            assert value(samples, "sqew_queue_enqueued_total", queue="jobs") == ENQUEUES
            assert value(samples, "sqew_queue_ready", queue="jobs") == ENQUEUES
            assert ("sqew_queue_ready", (("queue", "jobs"),)) in samples  # once, not per worker
        workers = {p.name.rsplit("_", 1)[1] for p in shared.iterdir()}
        assert len(workers) == 2, sorted(p.name for p in shared.iterdir())
        assert server.stop() == 0
    assert not shared.exists()  # removed when the server stopped


def _multiprocess_dir(pid: int) -> Path:
    """The PROMETHEUS_MULTIPROC_DIR the server gave its workers (read from a worker)."""
    dirs: set[str] = set()
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            dirs.add(child.environ().get("PROMETHEUS_MULTIPROC_DIR", ""))
    dirs.discard("")
    assert len(dirs) == 1, dirs
    return Path(dirs.pop())
