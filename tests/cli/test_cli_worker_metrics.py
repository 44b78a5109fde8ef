"""``sqew worker --metrics-port P`` serves the Worker's counts at /metrics while it runs; an
address it cannot listen on is a one-line error."""

from __future__ import annotations

import signal
import socket
import time

import httpx
from cli_support import Sqew
from process_support import TIMEOUT_S, end
from prometheus_client.parser import text_string_to_metric_families


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _processed(url: str) -> float | None:
    try:
        text = httpx.get(url, timeout=5).text
    except httpx.TransportError:
        return None  # not listening yet
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "sqew_worker_messages_total" and s.labels == {
                    "queue": "q", "outcome": "processed"}:
                return s.value
    return None


def test_metrics_port_serves_the_counts(local_sqew: Sqew) -> None:
    (local_sqew.cwd / "tasks.py").write_text("def handle(m):\n    pass\n")
    with local_sqew.arrange("q") as client:
        client.enqueue_batch("q", [{"payload": i} for i in range(3)])
    port = _free_port()
    proc = local_sqew.start("worker", "--queue", "q", "--handler", "tasks:handle",
                            "--metrics-port", str(port))
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + TIMEOUT_S
        while _processed(url) != 3:
            assert time.monotonic() < deadline, "the counts never reached /metrics"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        end(proc)
    assert proc.returncode == 0, err
    assert out.decode().startswith("3 processed")


def test_a_port_in_use_is_a_clear_error(local_sqew: Sqew) -> None:
    (local_sqew.cwd / "tasks.py").write_text("def handle(m):\n    pass\n")
    local_sqew.arrange("q").close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = local_sqew.run("worker", "--queue", "q", "--handler", "tasks:handle",
                                "--metrics-port", str(port))
    assert result.returncode != 0
    assert "cannot listen on 127.0.0.1:" in result.stderr and "Traceback" not in result.stderr
