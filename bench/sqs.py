"""SQS benchmark: boto3 against sqew's SQS endpoint, beside sqew's REST API and moto's server.

Three sides in one run, each one client in this process sending one request at a time:

- ``sqs``: boto3 (botocore's HTTP stack) against ``sqew serve``'s SQS endpoint;
- ``rest``: the same operations on the same queue of the same server over its REST API
  through one ``httpx.Client`` (kept-alive): what the SQS layer costs;
- ``moto``: boto3 against moto's SQS server (``bench/peers.py``), which slows with depth.

Workloads, in messages per second: ``send`` (SendMessage / one enqueue per request),
``send10`` (SendMessageBatch of 10 / a batch of 10), ``recv10+del`` (ReceiveMessage of 10 plus
DeleteMessageBatch / poll(batch=10) plus a batch ack). Each queue holds ``--depth`` ready
messages (4,000 by default, where moto has degraded) when a run starts: sqew's is purged and
refilled over REST before each of its runs; moto's drifts by the few messages its runs move.
A run lasts ``--seconds`` (or fewer for a receive that would take a quarter of the depth);
sides alternate in every round, in reversed order each round; figures are medians.

Targets (exit status 1 when missed): the SQS endpoint at ≥ 0.7 of REST on each workload, and
100 times moto or more on each at the default depth.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.server import moto_queue_url, moto_server, payload_text, prefill, serving, sqew_server

QUEUE = "bench"
WORKLOADS = ("send", "send10", "recv10+del")
SIDES = ("sqs", "rest", "moto")
SQS_OVER_REST = 0.7
OVER_MOTO = 100.0
MOTO_TARGET_DEPTH = 4000


def boto3_client(url: str) -> Any:
    """A boto3 SQS client for ``url`` (no retries: a failure shows)."""
    import boto3
    from botocore.config import Config

    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 1}))


class SqsSide:
    """One workload step over SQS (sqew's endpoint or moto's): messages moved per call."""

    def __init__(self, client: Any, queue_url: str, body: str) -> None:
        self.c, self.url, self.body = client, queue_url, body

    def send(self) -> int:
        self.c.send_message(QueueUrl=self.url, MessageBody=self.body)
        return 1

    def send10(self) -> int:
        entries = [{"Id": str(i), "MessageBody": self.body} for i in range(10)]
        assert not self.c.send_message_batch(QueueUrl=self.url, Entries=entries).get("Failed")
        return 10

    def recv10(self) -> int:
        got = self.c.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10,
                                     VisibilityTimeout=60).get("Messages", [])
        if got:
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                       for i, m in enumerate(got)]
            self.c.delete_message_batch(QueueUrl=self.url, Entries=entries)
        return len(got)


class RestSide:
    """The same steps over sqew's REST API."""

    def __init__(self, client: httpx.Client, payload: Any) -> None:
        self.c = client
        self.one = json.dumps({"payload": payload}).encode()
        self.ten = json.dumps({"messages": [{"payload": payload}] * 10}).encode()
        self.headers = {"Content-Type": "application/json"}

    def send(self) -> int:
        self.c.post(f"/queues/{QUEUE}/messages", content=self.one,
                    headers=self.headers).raise_for_status()
        return 1

    def send10(self) -> int:
        self.c.post(f"/queues/{QUEUE}/messages", content=self.ten,
                    headers=self.headers).raise_for_status()
        return 10

    def recv10(self) -> int:
        r = self.c.post(f"/queues/{QUEUE}/poll", params={"batch": 10})
        r.raise_for_status()
        got = r.json()["messages"]
        if got:
            acks = [{"id": m["id"], "token": m["token"]} for m in got]
            self.c.post(f"/queues/{QUEUE}/ack", json={"acks": acks}).raise_for_status()
        return len(got)


def timed(step: Callable[[], int], seconds: float, most: int) -> float:
    """Messages per second of ``step`` called for ``seconds`` (or until ``most`` moved)."""
    moved, start = 0, time.perf_counter()
    while True:
        moved += step()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds or moved >= most:
            return moved / elapsed


def refill(rest: httpx.Client, depth: int, payload: Any) -> None:
    """sqew's queue back to exactly ``depth`` ready messages (a purge, then batches)."""
    rest.post(f"/queues/{QUEUE}/purge").raise_for_status()
    left = depth
    while left > 0:
        n = min(left, 1000)
        rest.post(f"/queues/{QUEUE}/messages",
                  json={"messages": [{"payload": payload}] * n}).raise_for_status()
        left -= n


def run(depth: int, seconds: float, rounds: int) -> dict[str, dict[str, list[float]]]:
    """The rates of every side and workload, ``rounds`` each."""
    body = payload_text()
    payload = json.loads(body)
    out: dict[str, dict[str, list[float]]] = {s: {w: [] for w in WORKLOADS} for s in SIDES}
    with tempfile.TemporaryDirectory(prefix="sqew-bench-sqs-") as tmp:
        work = Path(tmp)
        prefill(work / "sqs.db", {QUEUE: depth})
        with serving(lambda: sqew_server("sqew", work / "sqs.db", work)) as sqew_srv, \
                serving(lambda: moto_server(work, {QUEUE: depth})) as moto_srv, \
                httpx.Client(base_url=sqew_srv.url, timeout=60) as rest:
            sqs_client = boto3_client(sqew_srv.url)
            moto_client = boto3_client(moto_srv.url)
            sides: dict[str, Any] = {
                "sqs": SqsSide(sqs_client, sqs_client.get_queue_url(QueueName=QUEUE)["QueueUrl"],
                               body),
                "rest": RestSide(rest, payload),
                "moto": SqsSide(moto_client, moto_queue_url(moto_srv, QUEUE), body),
            }
            for side in sides.values():  # connections open, code paths warm
                side.send()
                side.recv10()
            for r in range(rounds):
                order = SIDES if r % 2 == 0 else tuple(reversed(SIDES))
                for workload in WORKLOADS:
                    for name in order:
                        if name != "moto":
                            refill(rest, depth, payload)
                        side = sides[name]
                        step = side.recv10 if workload == "recv10+del" else getattr(
                            side, workload)
                        rate = timed(step, seconds, max(10, depth // 4))
                        out[name][workload].append(rate)
                        print(f"  round {r + 1} {name:<4} {workload:<10} {rate:>10,.1f} msg/s",
                              flush=True)
    return out


def report(rates: dict[str, dict[str, list[float]]], depth: int) -> tuple[list[str], bool]:
    """The table and the targets' checks; whether all targets were met."""
    med = {s: {w: statistics.median(v) for w, v in ws.items()} for s, ws in rates.items()}
    lines = [f"depth {depth:,}: messages/s (medians), and ratios",
             f"{'workload':<12}{'sqs':>10}{'rest':>10}{'moto':>10}{'sqs/rest':>10}{'sqs/moto':>10}"]
    ok = True
    for w in WORKLOADS:
        over_rest = med["sqs"][w] / med["rest"][w]
        over_moto = med["sqs"][w] / med["moto"][w]
        lines.append(f"{w:<12}{med['sqs'][w]:>10,.0f}{med['rest'][w]:>10,.0f}"
                     f"{med['moto'][w]:>10,.1f}{over_rest:>10.2f}{over_moto:>10,.0f}")
        ok &= over_rest >= SQS_OVER_REST
        if depth >= MOTO_TARGET_DEPTH:
            ok &= over_moto >= OVER_MOTO
    lines.append(f"targets: sqs/rest >= {SQS_OVER_REST}; sqs/moto >= {OVER_MOTO:.0f} at a depth "
                 f"of {MOTO_TARGET_DEPTH:,} or more: {'met' if ok else 'MISSED'}")
    return lines, ok


def main(argv: list[str]) -> int:
    """``python -m bench sqs [--quick] [--depth N] [--seconds S] [--json FILE]``."""
    parser = argparse.ArgumentParser(prog="bench sqs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s runs, 2 rounds")
    parser.add_argument("--depth", type=int, default=MOTO_TARGET_DEPTH)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    seconds = args.seconds or (1.0 if args.quick else 3.0)
    rounds = args.rounds or (2 if args.quick else 3)
    rates = run(args.depth, seconds, rounds)
    lines, ok = report(rates, args.depth)
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"depth": args.depth, "seconds": seconds,
                                               "rates": rates, "met": ok}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
