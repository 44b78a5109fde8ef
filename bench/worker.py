"""Worker benchmark: ``sqew.Worker`` with a handler that does nothing, against the same
client's hand-written consumer, on a file and over HTTP.

Per round and side, a fresh queue holds ``n`` ready messages (200-byte JSON payloads), and
the side consumes all of them:

- ``loop``: the same ``sqew.Client`` in a plain loop, ``poll(batch=10)`` then ``ack_batch``
  (what a careful hand-written consumer does);
- ``worker-1``, ``worker-8``, ``worker-32``: ``sqew.Worker(client, q, handler,
  concurrency=N)``, from ``run()`` until its ``processed`` count reaches ``n``.

On a file (``sqew.db`` in a temporary directory) and against ``sqew serve`` on 127.0.0.1 (one
worker, a file of its own). Sides alternate in every round (the order reversed each round);
figures are medians. Target: ``worker-8`` ≥ 0.8 of ``loop`` on each.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import sqew
from bench import ratio_suite
from bench.server import serving, sqew_server

PAYLOAD: dict[str, Any] = {"kind": "order", "data": "x" * 174}
CONCURRENCY = (1, 8, 32)
TARGET = 0.8
TARGET_SIDE = "worker-8"
FILL_BATCH = 500


def _fill(client: sqew.Client, queue: str, n: int) -> None:
    client.create_queue(queue)
    for start in range(0, n, FILL_BATCH):
        client.enqueue_batch(queue, [{"payload": PAYLOAD}] * min(FILL_BATCH, n - start))


def loop_side(client: sqew.Client, queue: str, n: int) -> float:
    """Seconds for a plain poll(batch=10) + ack_batch loop to consume ``n`` messages."""
    began = time.perf_counter()
    done = 0
    while done < n:
        got = client.poll(queue, batch=10)
        if got:
            client.ack_batch(queue, [(m.id, m.token) for m in got])
            done += len(got)
    return time.perf_counter() - began


def worker_side(client: sqew.Client, queue: str, n: int, concurrency: int) -> float:
    """Seconds for a Worker of ``concurrency`` with a no-op handler to process ``n``."""
    worker = sqew.Worker(client, queue, lambda message: None, concurrency=concurrency,
                         wait_ms=100, handle_signals=False)

    def stop_when_done() -> None:
        while worker.processed < n and not worker.stopping:
            time.sleep(0.001)
        finished.append(time.perf_counter())
        worker.stop()

    finished: list[float] = []
    watcher = threading.Thread(target=stop_when_done, daemon=True)
    began = time.perf_counter()
    watcher.start()
    worker.run()
    watcher.join()
    return finished[0] - began


def rounds_of(target: str, rounds: int, n: int) -> dict[str, float]:
    """Alternating rounds of every side on ``target``: the median rate of each."""
    sides = ["loop", *(f"worker-{c}" for c in CONCURRENCY)]
    times: dict[str, list[float]] = {s: [] for s in sides}
    with sqew.Client(target) as client:
        for r in range(rounds):
            for side in sides if r % 2 == 0 else list(reversed(sides)):
                queue = f"{side}-{r}"
                _fill(client, queue, n)
                took = (loop_side(client, queue, n) if side == "loop" else
                        worker_side(client, queue, n, int(side.split("-")[1])))
                client.delete_queue(queue)
                times[side].append(took)
                print(f"round {r + 1} {side}: {n / took:,.0f} msg/s", flush=True)
    return {s: n / statistics.median(t) for s, t in times.items()}


def run(quick: bool) -> dict[str, Any]:
    """Both places' rounds, their rates and the targets."""
    rounds, n = (3, 1000) if quick else (5, 5000)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="sqew-bench-worker-") as tmp:
        print("== on a file", flush=True)
        local = rounds_of(str(Path(tmp) / "local.db"), rounds, n)
        print("== over HTTP", flush=True)
        with serving(lambda: sqew_server("sqew-worker", Path(tmp) / "server.db",
                                         Path(tmp))) as server:
            http = rounds_of(server.url, rounds, n)
    targets = [ratio_suite.target(f"{where}: Worker(concurrency=8) / poll+ack loop",
                                  rates[TARGET_SIDE] / rates["loop"], TARGET)
               for where, rates in (("file", local), ("HTTP", http))]
    return {"n": n, "rounds": rounds, "rates": {"file": local, "http": http},
            "targets": targets,
            "machine": ratio_suite.machine(load_before)}


def main(argv: list[str] | None = None) -> int:
    """``python -m bench worker [--quick] [--json FILE]``; exit 1 if a target is missed."""
    return ratio_suite.main(argv, suite="worker", doc=__doc__,
                            quick="3 rounds of 1,000 messages", run=run)


if __name__ == "__main__":
    raise SystemExit(main())
