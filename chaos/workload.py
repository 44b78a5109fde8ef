"""A workload process: ``python -m chaos.workload producer|consumer --kind KIND ...``.

A producer enqueues ``<slot>-<i>`` for ``i`` from ``--start`` up to ``--count`` (each key's
payload is derived from the key, so a producer restarted after a kill sends the key it was
killed on again, with the same payload: the idempotency key makes it one message). A
consumer polls (long polls sometimes), acks most of what it gets, nacks some, extends some,
and lets some leases expire, some of them only after working past the lease. On the
``--contended`` queues (short leases, kept near-empty) it works past the lease often and long
enough that another consumer leases the message again before the late ack, nack or extend,
which sqew must then refuse with ``LeaseLost``. Both stop by themselves at ``--until`` (epoch
seconds), and journal each acknowledged operation (``chaos.journal``) before the next one.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from chaos import fd_closer, transports
from chaos.journal import OK, UNKNOWN, Journal, Record, payload_digest
from chaos.transports import NoAnswer, Refused, Transport

RETRY_S = 0.1
"""Pause before calling again after a call that got no answer (a server restarting)."""

SLOW_DOWN = frozenset({"Overloaded", "QueueFull", "RateLimited"})

OVERRUN = 0.04
"""How often a consumer works past a lease on an ordinary queue (a short overrun)."""
CONTENDED_OVERRUN = 0.4
"""How often it does on a contended queue, by ``CONTENDED_PAST_S`` past the lease's end: time
for another consumer's poll to lease the message again before the late settle."""
CONTENDED_PAST_S = (0.2, 0.7)
CONTENDED_WORK_S = (0.03, 0.1)
"""How long a consumer works on a message of a contended queue before settling it."""
CONTENDED_SHARE = 0.3
"""The share of polls that go to a contended queue first (then one at random among all):
while one consumer works past a lease, another is likely polling there, often a long poll,
which takes the message as soon as the lease ends."""


def payload_for(key: str) -> dict[str, Any]:
    """The payload a producer sends under ``key`` (the same every time it sends the key)."""
    return {"key": key, "body": "x" * (len(key) * 7 % 97)}


def produce(tr: Transport, journal: Journal, args: argparse.Namespace) -> int:
    """Enqueue keys ``start..count-1`` until done or ``until``; returns how many were
    acknowledged."""
    done = 0
    for i in range(args.start, args.count):
        key = f"{args.slot}-{i}"
        queue = args.queues[i % len(args.queues)]
        payload = payload_for(key)
        while time.time() < args.until:
            t0 = time.time()
            try:
                msg_id, duplicate = tr.enqueue(queue, payload, key)
            except Refused as exc:
                if exc.code not in SLOW_DOWN:
                    print(f"enqueue {key} refused: {exc}", file=sys.stderr)
                    break
                time.sleep(RETRY_S)
            except NoAnswer:
                time.sleep(RETRY_S)  # the same key again: at most one message
            else:
                journal.write({"op": "enqueue", "queue": queue, "key": key, "id": msg_id,
                               "duplicate": duplicate, "digest": payload_digest(payload),
                               "t0": t0, "t1": time.time()})
                done += 1
                break
        if time.time() >= args.until:
            break
        time.sleep(args.pace)
    return done


def _settle(tr: Transport, journal: Journal, op: str, queue: str, lease: Record,
            call: Any, **extra: Any) -> str:
    """Run one ack/nack/extend ``call``, journalling its intent (ack, nack) and outcome."""
    base = {"queue": queue, "id": lease["id"], "token": lease["token"], **extra}
    t0 = time.time()
    if op in ("ack", "nack"):
        journal.write({"op": f"{op}-intent", **base, "t0": t0})
    record: Record = {"op": op, **base, "t0": t0}
    try:
        result = call()
        record["outcome"] = OK
        if op == "extend":
            record["lease_expires_at"] = result
    except Refused as exc:
        record["outcome"] = exc.code
    except NoAnswer:
        record["outcome"] = UNKNOWN
    record["t1"] = time.time()
    journal.write(record)
    return str(record["outcome"])


def handle(tr: Transport, journal: Journal, queue: str, lease: Record,
           rng: random.Random, contended: bool = False) -> None:
    """Do what a consumer does with one leased message, chosen at random. On a ``contended``
    queue it works a while, more often past the lease and longer, and always settles (acks,
    nacks or extends): a lease that lapsed meanwhile is followed by a late settle."""
    i, token = lease["id"], lease["token"]
    time.sleep(rng.uniform(*CONTENDED_WORK_S) if contended
               else rng.choice((0.0, 0.0, 0.005, 0.02)))
    left = max(0.0, lease["lease_expires_at"] / 1000 - time.time())
    if contended and rng.random() < CONTENDED_OVERRUN:
        time.sleep(left + rng.uniform(*CONTENDED_PAST_S))  # another consumer may lease it
    elif rng.random() < OVERRUN:  # work past the lease: the ack may come after another's poll
        time.sleep(left + 0.05)
    roll = rng.random() * (0.88 if contended else 1.0)  # (0.88 and up: abandoned)
    if roll < 0.62:
        _settle(tr, journal, "ack", queue, lease, lambda: tr.ack(queue, i, token))
    elif roll < 0.74:
        delay = rng.choice((0, 50, 200))
        _settle(tr, journal, "nack", queue, lease,
                lambda: tr.nack(queue, i, token, delay), delay_ms=delay)
    elif roll < 0.88:
        ms = rng.choice((0, 300, 1000))
        if _settle(tr, journal, "extend", queue, lease,
                   lambda: tr.extend(queue, i, token, ms), ms=ms) == OK and ms:
            _settle(tr, journal, "ack", queue, lease, lambda: tr.ack(queue, i, token))
    # else: abandoned; the lease expires and the message is delivered again (or dead-lettered)


def consume(tr: Transport, journal: Journal, args: argparse.Namespace) -> int:
    """Poll and handle messages until ``until``; returns how many polls answered."""
    rng = random.Random(args.seed)
    polls = 0
    while (left := args.until - time.time()) > 0:
        queue = rng.choice(args.queues)
        if args.contended and rng.random() < CONTENDED_SHARE:
            queue = rng.choice(args.contended)
        wait_ms = min(rng.choice((0, 0, 250, 1000)), int(left * 1000))
        batch = rng.choice((1, 1, 2, 4))
        visibility = rng.choice((None, None, 600))
        t0 = time.time()
        try:
            leases = tr.poll(queue, batch, wait_ms, visibility)
        except (Refused, NoAnswer):
            time.sleep(RETRY_S)
            continue
        polls += 1
        if not leases and wait_ms:  # (how long it waited: a missed wake-up waits it all)
            journal.write({"op": "poll-empty", "queue": queue, "wait_ms": wait_ms, "t0": t0,
                           "t1": time.time()})
        time.sleep(args.pace)
        if not leases:
            continue
        journal.write({"op": "poll", "queue": queue, "messages": leases, "wait_ms": wait_ms,
                       "t0": t0, "t1": time.time()})
        for lease in leases:
            handle(tr, journal, queue, lease, rng, queue in args.contended)
    return polls


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line of a workload process."""
    p = argparse.ArgumentParser(prog="python -m chaos.workload")
    p.add_argument("role", choices=("producer", "consumer"))
    p.add_argument("--kind", choices=("local", "http", "cli"), required=True)
    p.add_argument("--target", required=True, help="the SQLite file or the server's URL")
    p.add_argument("--journal", type=Path, required=True)
    p.add_argument("--queues", type=lambda s: s.split(","), required=True)
    p.add_argument("--contended", type=lambda s: s.split(","), default=[],
                   help="queues on which a consumer often works past the lease")
    p.add_argument("--slot", default="p")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--pace", type=float, default=0.0, help="seconds between calls")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--until-file", type=Path, required=True,
                   help="a file the runner writes the run's end into (epoch seconds) once "
                        "every process has started")
    return p.parse_args(argv)


def _until(path: Path, timeout: float = 120.0) -> float:
    """The run's end, once the runner has written it (bounded wait: 0 if it never does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return float(path.read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.02)
    return 0.0


def main(argv: list[str]) -> int:
    """Run one workload process to its end."""
    args = parse(argv)
    tr = transports.open_transport(args.kind, args.target)
    if args.kind == "local":  # the close-fd scenario's fault, made on request (a signal)
        fd_closer.install(args.target, args.seed)
    args.journal.with_suffix(".ready").touch()  # imports done: the runner may go on
    args.until = _until(args.until_file)
    try:
        with Journal(args.journal) as journal:
            if args.role == "producer":
                produce(tr, journal, args)
            else:
                consume(tr, journal, args)
    finally:
        tr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
