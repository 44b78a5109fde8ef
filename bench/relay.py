"""Relay benchmark: ``sqew.Relay`` delivering a queue to a trivial local receiver, against a
plain httpx POST loop to the same receiver.

The receiver is a minimal ASGI app under uvicorn in a process of its own (it answers every
POST ``200`` with an empty body, reading the body first), on 127.0.0.1. Per round and side,
``n`` messages of 200-byte JSON payloads:

- plain: one ``httpx.Client`` (keep-alive) POSTs the ``n`` bodies one after another — the
  least a relay must do;
- relay, concurrency 1: ``n`` messages already in a SQLite queue (enqueued before the clock
  starts) delivered by a ``sqew.Relay`` (poll, POST, ack, one request at a time), timed
  until the last is delivered;
- relay, concurrency 8: the same with eight requests under way.

Sides alternate in every round (the order reversed each round); figures are medians. The
target (≥ 0.5) is the relay at concurrency 8 over the plain loop: the relay as it is meant to
run (requests under way while others are leased and acked, acks batched), against the least
a sender can do. The relay at concurrency 1 is reported beside it: one request at a time
like the loop, so the gap is what leasing and acking around each POST cost — a fixed cost
per message that a receiver doing real work (milliseconds per request) makes small.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

import sqew

TARGET = 0.5
PAYLOAD: dict[str, Any] = {"kind": "order", "data": "x" * 174}
BODY = json.dumps(PAYLOAD, separators=(",", ":")).encode()
assert len(BODY) == 200, len(BODY)

RECEIVER = """
import sys, uvicorn

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
            access_log=False, http="h11", lifespan="off")
"""


class Receiver:
    """The receiver's process; ``url`` once it answers."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/hook"
        self.proc = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port)])
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(self.url, content=b"{}").raise_for_status()
                return
            except httpx.TransportError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise RuntimeError("the receiver did not start") from None
                time.sleep(0.05)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def plain(url: str, n: int) -> float:
    """Seconds for ``n`` POSTs, one after another on one keep-alive client."""
    with httpx.Client() as http:
        start = time.perf_counter()
        for _ in range(n):
            http.post(url, content=BODY,
                      headers={"content-type": "application/json"}).raise_for_status()
        return time.perf_counter() - start


def relayed(url: str, n: int, concurrency: int, directory: Path) -> float:
    """Seconds for a Relay to deliver ``n`` queued messages."""
    path = directory / f"relay-{time.monotonic_ns()}.db"
    with sqew.Client(path) as client:
        client.create_queue("hooks")
        for start in range(0, n, 1000):
            client.enqueue_batch("hooks", [{"payload": PAYLOAD}
                                           for _ in range(min(1000, n - start))])
        relay = sqew.Relay(client, "hooks", url, concurrency=concurrency, wait_ms=100,
                           handle_signals=False)
        thread = threading.Thread(target=relay.run)
        began = time.perf_counter()
        thread.start()
        while relay.worker.processed < n:
            time.sleep(0.01)
        took = time.perf_counter() - began
        relay.stop()
        thread.join()
        assert relay.worker.failed == 0 and client.stats("hooks").acked_total == n
    path.unlink(missing_ok=True)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return took


def run(quick: bool) -> dict[str, Any]:
    """Alternating rounds of the three sides; medians, rates and the ratio."""
    rounds, n = (3, 500) if quick else (7, 2000)
    sides = ["plain", "relay-1", "relay-8"]
    times: dict[str, list[float]] = {s: [] for s in sides}
    receiver = Receiver()
    load_before = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory(prefix="sqew-bench-relay-") as tmp:
            plain(receiver.url, 100)  # warm the receiver
            for r in range(rounds):
                for side in sides if r % 2 == 0 else reversed(sides):
                    if side == "plain":
                        took = plain(receiver.url, n)
                    else:
                        took = relayed(receiver.url, n, int(side.split("-")[1]), Path(tmp))
                    times[side].append(took)
                    print(f"round {r + 1} {side}: {n / took:,.0f} msg/s", flush=True)
    finally:
        receiver.close()
    rates = {s: n / statistics.median(t) for s, t in times.items()}
    ratio = rates["relay-8"] / rates["plain"]
    return {
        "n": n, "rounds": rounds, "rates": rates, "ratio": ratio,
        "ratio_concurrency_1": rates["relay-1"] / rates["plain"],
        "targets": [{"name": "relay (concurrency 8) / plain httpx POST loop",
                     "ratio": ratio, "target": TARGET, "pass": ratio >= TARGET}],
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                    "sqew": sqew.__version__, "httpx": httpx.__version__,
                    "load_before": load_before, "load_after": os.getloadavg()[0]},
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench relay [--quick] [--json FILE]``; exit 1 if the target is missed."""
    parser = argparse.ArgumentParser(prog="scripts/bench relay", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 500 messages")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args, other = parser.parse_known_args(argv)
    if other:
        print(f"relay: ignoring options of other suites: {' '.join(other)}", flush=True)
    result = run(args.quick)
    m, rates = result["machine"], result["rates"]
    print()
    print(f"{m['cpus']} cores, Python {m['python']}, sqew {m['sqew']}, httpx {m['httpx']}; "
          f"load average {m['load_before']:.2f} before, {m['load_after']:.2f} after")
    print(f"plain httpx POST loop: {rates['plain']:,.0f} msg/s")
    print(f"relay, concurrency 8:  {rates['relay-8']:,.0f} msg/s "
          f"({result['ratio']:.2f} of plain; target >= {TARGET})")
    print(f"relay, concurrency 1:  {rates['relay-1']:,.0f} msg/s "
          f"({result['ratio_concurrency_1']:.2f} of plain)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if all(t["pass"] for t in result["targets"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
