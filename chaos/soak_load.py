"""A soak load process: ``python -m chaos.soak_load --target T --rate R --until E --out F``.

At a fixed rate of cycles per second (a schedule, not as fast as it can), each cycle enqueues
one message, polls up to two, and settles each: most are acked, a message on its first
attempt is sometimes nacked (it comes back, and is acked next time: no message reaches the
DLQ) and sometimes has its lease extended before the ack. The queue's depth so stays near
its start whatever the run's length. Each call's latency is appended to ``F`` as
``<op>,<epoch seconds>,<ms>`` lines (flushed every second; ``chaos.soak`` reads them); a
cycle that failed (an error from sqew) is an ``error`` line, and the load goes on.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import IO

import sqew

QUEUE = "soak"
NACK_SHARE = 0.1
EXTEND_SHARE = 0.1
PAYLOAD = {"body": "x" * 200}
LATE_S = 1.0
"""A cycle this late is dropped rather than sent at once (no burst to catch up)."""


class Timings:
    """Latencies, buffered and flushed to the file every second."""

    def __init__(self, out: IO[str]) -> None:
        self.out, self.flushed = out, time.monotonic()
        self.lines: list[str] = []

    def time(self, op: str, began: float) -> None:
        now = time.time()
        self.lines.append(f"{op},{now:.3f},{(time.perf_counter() - began) * 1000:.3f}\n")
        if time.monotonic() - self.flushed >= 1.0:
            self.flush()

    def flush(self) -> None:
        self.out.write("".join(self.lines))
        self.out.flush()
        self.lines.clear()
        self.flushed = time.monotonic()


def cycle(client: sqew.Client, timings: Timings, rng: random.Random) -> None:
    """One cycle: enqueue one, poll up to two, settle each."""
    began = time.perf_counter()
    client.enqueue(QUEUE, PAYLOAD)
    timings.time("enqueue", began)
    began = time.perf_counter()
    leased = client.poll(QUEUE, batch=2)
    timings.time("poll", began)
    for m in leased:
        roll = rng.random()
        try:
            if roll < NACK_SHARE and m.attempts <= 1:
                began = time.perf_counter()
                client.nack(QUEUE, m.id, m.token, delay_ms=0)
                timings.time("nack", began)
                continue
            if roll < NACK_SHARE + EXTEND_SHARE:
                began = time.perf_counter()
                client.extend_lease(QUEUE, m.id, m.token, ms=30_000)
                timings.time("extend", began)
            began = time.perf_counter()
            client.ack(QUEUE, m.id, m.token)
            timings.time("ack", began)
        except sqew.errors.LeaseLost:  # its lease ended (a very slow cycle): it comes back
            pass


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m chaos.soak_load")
    p.add_argument("--target", required=True, help="a database (file or URL) or a server URL")
    p.add_argument("--rate", type=float, required=True, help="cycles per second")
    p.add_argument("--until", type=float, required=True, help="stop at (epoch seconds)")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    period = 1.0 / args.rate
    with (open(args.out, "a", encoding="utf-8") as out,
          sqew.Client(args.target) as client):  # type: ignore[abstract]
        timings = Timings(out)
        print("ready", flush=True)
        due = time.monotonic()
        while time.time() < args.until:
            now = time.monotonic()
            if now < due:
                time.sleep(due - now)
            elif now - due > LATE_S:
                due = now  # behind by more than a second: drop the missed cycles
            try:
                cycle(client, timings, rng)
            except sqew.errors.SqewError as exc:  # counted (``chaos.soak``), and on we go
                timings.time("error", time.perf_counter())
                print(f"{exc.code}: {exc.message}", file=sys.stderr, flush=True)
            due += period
        timings.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
