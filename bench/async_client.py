"""AsyncClient benchmark: ``sqew.AsyncClient`` against ``sqew.Client``, on a file and over HTTP.

Per round and side, ``n`` enqueues of a 200-byte JSON payload to a fresh queue:

- ``client``: ``sqew.Client``, one call after another;
- ``async``: ``sqew.AsyncClient``, one awaited call after another (what the asyncio layer
  costs a single caller);
- ``async-32`` (HTTP only): the same client with 32 tasks calling at once (what asyncio buys:
  requests under way together, which the server's group commit merges).

On a file (``sqew.db`` in a temporary directory) and against ``sqew serve`` on 127.0.0.1
(one worker, a file of its own). Sides alternate in every round (the order reversed each
round); figures are medians. Targets: ``async`` ≥ 0.9 of ``client`` on each, and over HTTP
``async-32`` ≥ 3 times ``client``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import sqew
from bench import ratio_suite
from bench.server import serving, sqew_server

PAYLOAD: dict[str, Any] = {"kind": "order", "data": "x" * 174}
TASKS = 32
SINGLE_TARGET = 0.9
CONCURRENT_TARGET = 3.0


def sync_side(target: str, queue: str, n: int) -> float:
    """Seconds for ``sqew.Client`` to enqueue ``n`` messages one after another."""
    with sqew.Client(target) as client:
        client.create_queue(queue)
        began = time.perf_counter()
        for _ in range(n):
            client.enqueue(queue, PAYLOAD)
        return time.perf_counter() - began


async def async_side(target: str, queue: str, n: int, tasks: int) -> float:
    """Seconds for ``sqew.AsyncClient`` to enqueue ``n`` messages from ``tasks`` tasks."""
    async with sqew.AsyncClient(target) as client:
        await client.create_queue(queue)

        async def one_task(count: int) -> None:
            for _ in range(count):
                await client.enqueue(queue, PAYLOAD)

        shares = [n // tasks + (1 if i < n % tasks else 0) for i in range(tasks)]
        began = time.perf_counter()
        await asyncio.gather(*(one_task(k) for k in shares))
        return time.perf_counter() - began


def rounds_of(target: str, sides: list[str], rounds: int, n: int) -> dict[str, float]:
    """Alternating rounds of ``sides`` on ``target``: the median rate of each."""
    times: dict[str, list[float]] = {s: [] for s in sides}
    for r in range(rounds):
        for side in sides if r % 2 == 0 else list(reversed(sides)):
            queue = f"{side}-{r}"
            if side == "client":
                took = sync_side(target, queue, n)
            else:
                tasks = TASKS if side == "async-32" else 1
                took = asyncio.run(async_side(target, queue, n, tasks))
            times[side].append(took)
            print(f"round {r + 1} {side}: {n / took:,.0f} msg/s", flush=True)
    return {s: n / statistics.median(t) for s, t in times.items()}


def run(quick: bool) -> dict[str, Any]:
    """Both places' rounds, their rates and the targets."""
    rounds, n = (3, 300) if quick else (5, 2000)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="sqew-bench-async-") as tmp:
        print("== on a file", flush=True)
        local = rounds_of(str(Path(tmp) / "local.db"), ["client", "async"], rounds, n)
        print("== over HTTP", flush=True)
        with serving(lambda: sqew_server("sqew-async", Path(tmp) / "server.db",
                                         Path(tmp))) as server:
            http = rounds_of(server.url, ["client", "async", "async-32"], rounds, n)
    targets = [
        ratio_suite.target("file: AsyncClient / Client", local["async"] / local["client"],
                           SINGLE_TARGET),
        ratio_suite.target("HTTP: AsyncClient / Client", http["async"] / http["client"],
                           SINGLE_TARGET),
        ratio_suite.target(f"HTTP: AsyncClient with {TASKS} tasks / Client",
                           http["async-32"] / http["client"], CONCURRENT_TARGET),
    ]
    return {"n": n, "rounds": rounds, "rates": {"file": local, "http": http},
            "targets": targets,
            "machine": ratio_suite.machine(load_before)}


def main(argv: list[str] | None = None) -> int:
    """``python -m bench async-client [--quick] [--json FILE]``; exit 1 if a target is missed."""
    return ratio_suite.main(argv, suite="async-client", doc=__doc__,
                            quick="3 rounds of 300 enqueues", run=run)


if __name__ == "__main__":
    raise SystemExit(main())
