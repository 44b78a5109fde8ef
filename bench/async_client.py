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

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqew
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
        _target("file: AsyncClient / Client", local["async"] / local["client"], SINGLE_TARGET),
        _target("HTTP: AsyncClient / Client", http["async"] / http["client"], SINGLE_TARGET),
        _target(f"HTTP: AsyncClient with {TASKS} tasks / Client",
                http["async-32"] / http["client"], CONCURRENT_TARGET),
    ]
    return {"n": n, "rounds": rounds, "rates": {"file": local, "http": http},
            "targets": targets,
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                        "sqew": sqew.__version__, "load_before": load_before,
                        "load_after": os.getloadavg()[0]}}


def _target(name: str, ratio: float, target: float) -> dict[str, Any]:
    return {"name": name, "ratio": ratio, "target": target, "pass": ratio >= target}


def main(argv: list[str] | None = None) -> int:
    """``python -m bench async-client [--quick] [--json FILE]``; exit 1 if a target is missed."""
    parser = argparse.ArgumentParser(prog="scripts/bench async-client", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 300 enqueues")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args, other = parser.parse_known_args(argv)
    if other:
        print(f"async: ignoring options of other suites: {' '.join(other)}", flush=True)
    result = run(args.quick)
    m = result["machine"]
    print()
    print(f"{m['cpus']} cores, Python {m['python']}, sqew {m['sqew']}; load average "
          f"{m['load_before']:.2f} before, {m['load_after']:.2f} after")
    for where, rates in result["rates"].items():
        print(f"{where}: " + ", ".join(f"{s} {r:,.0f} msg/s" for s, r in rates.items()))
    for t in result["targets"]:
        print(f"{t['name']}: {t['ratio']:.2f} (target >= {t['target']})"
              f"{'' if t['pass'] else '  MISSED'}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if all(t["pass"] for t in result["targets"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
