"""SQS benchmark: sqew's SQS endpoint beside its REST API, and boto3 on sqew beside moto's server.

Four sides in one run, each one client in this process sending one request at a time:

- ``boto3``: boto3 (botocore's HTTP stack) against ``sqew serve``'s SQS endpoint: what a user's
  SQS code gets;
- ``sqs``: the same SQS requests (AWS JSON 1.0: the body boto3 sends, its ``X-Amz-Target``)
  posted through one ``httpx.Client``;
- ``rest``: the same operations on the same queue of the same server over its REST API through
  that same ``httpx.Client``; so ``sqs``/``rest`` measures the server (the SQS layer's cost),
  not botocore's serialising, parsing and MD5 checks;
- ``moto``: boto3 against moto's SQS server (``bench/peers.py``), which slows with depth;
  ``boto3``/``moto`` is the peer ratio (the same client on both).

Workloads, in messages per second: ``send`` (SendMessage / one enqueue per request),
``send10`` (SendMessageBatch of 10 / a batch of 10), ``recv10+del`` (ReceiveMessage of 10 plus
DeleteMessageBatch / poll(batch=10) plus a batch ack). At each ``--depth`` (1,000, 4,000 and
10,000 by default) every queue holds that many ready messages when a run starts: sqew's is
purged and refilled over REST before each of its runs; moto's (one queue per depth) drifts by
the few messages its runs move. A run lasts ``--seconds`` (or fewer for a receive that would
take a quarter of the depth); sides alternate in every round, in reversed order each round;
figures are medians.

Targets (exit status 1 when missed): ``sqs``/``rest`` ≥ 0.7 on each workload at every depth,
and ``boto3``/``moto`` ≥ 100 on each at a depth of 4,000 or more.
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
SIDES = ("boto3", "sqs", "rest", "moto")
DEPTHS = (1000, 4000, 10000)
SQS_OVER_REST = 0.7
OVER_MOTO = 100.0
MOTO_TARGET_DEPTH = 4000
JSON_10 = "application/x-amz-json-1.0"

Rates = dict[str, dict[str, list[float]]]


def boto3_client(url: str) -> Any:
    """A boto3 SQS client for ``url`` (no retries: a failure shows)."""
    import boto3
    from botocore.config import Config

    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 1}))


class SqsSide:
    """One workload step over SQS with boto3 (sqew's endpoint or moto's): messages moved per
    call."""

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


class SqsHttpxSide:
    """The same SQS steps posted through the REST side's ``httpx.Client``: the JSON bodies
    boto3 sends (bytes made once, as the REST side's are), no signature (the server enforces
    no keys), the answers decoded and not checked further (as on the REST side)."""

    def __init__(self, client: httpx.Client, queue_url: str, body: str) -> None:
        self.c, self.url = client, queue_url
        self.one = json.dumps({"QueueUrl": queue_url, "MessageBody": body}).encode()
        self.ten = json.dumps({"QueueUrl": queue_url, "Entries": [
            {"Id": str(i), "MessageBody": body} for i in range(10)]}).encode()
        self.receive = json.dumps({"QueueUrl": queue_url, "MaxNumberOfMessages": 10,
                                   "VisibilityTimeout": 60}).encode()

    def _post(self, action: str, content: bytes) -> Any:
        r = self.c.post("/", content=content, headers={
            "Content-Type": JSON_10, "X-Amz-Target": f"AmazonSQS.{action}"})
        r.raise_for_status()
        return r.json()

    def send(self) -> int:
        self._post("SendMessage", self.one)
        return 1

    def send10(self) -> int:
        assert not self._post("SendMessageBatch", self.ten).get("Failed")
        return 10

    def recv10(self) -> int:
        got = self._post("ReceiveMessage", self.receive).get("Messages", [])
        if got:
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                       for i, m in enumerate(got)]
            self._post("DeleteMessageBatch",
                       json.dumps({"QueueUrl": self.url, "Entries": entries}).encode())
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


def moto_queue(depth: int) -> str:
    """moto's queue for runs at ``depth`` (one per depth: moto's cannot be refilled fast)."""
    return f"{QUEUE}-{depth}"


def run(depths: list[int], seconds: float, rounds: int) -> dict[int, Rates]:
    """The rates of every side and workload at each depth, ``rounds`` each."""
    body = payload_text()
    payload = json.loads(body)
    out: dict[int, Rates] = {}
    with tempfile.TemporaryDirectory(prefix="sqew-bench-sqs-") as tmp:
        work = Path(tmp)
        prefill(work / "sqs.db", {QUEUE: 0})
        with serving(lambda: sqew_server("sqew", work / "sqs.db", work)) as sqew_srv, \
                serving(lambda: moto_server(work, {moto_queue(d): d for d in depths})) \
                as moto_srv, httpx.Client(base_url=sqew_srv.url, timeout=60) as http:
            sqs_client = boto3_client(sqew_srv.url)
            moto_client = boto3_client(moto_srv.url)
            url = sqs_client.get_queue_url(QueueName=QUEUE)["QueueUrl"]
            sqew_sides: dict[str, Any] = {
                "boto3": SqsSide(sqs_client, url, body),
                "sqs": SqsHttpxSide(http, url, body),
                "rest": RestSide(http, payload),
            }
            for side in sqew_sides.values():  # connections open, code paths warm
                side.send()
                side.recv10()
            for depth in depths:
                moto = SqsSide(moto_client, moto_queue_url(moto_srv, moto_queue(depth)), body)
                sides = {**sqew_sides, "moto": moto}
                out[depth] = _rounds(sides, http, depth, payload, seconds, rounds)
    return out


def _rounds(sides: dict[str, Any], http: httpx.Client, depth: int, payload: Any,
            seconds: float, rounds: int) -> Rates:
    rates: Rates = {s: {w: [] for w in WORKLOADS} for s in SIDES}
    for r in range(rounds):
        order = SIDES if r % 2 == 0 else tuple(reversed(SIDES))
        for workload in WORKLOADS:
            for name in order:
                if name != "moto":
                    refill(http, depth, payload)
                side = sides[name]
                step = side.recv10 if workload == "recv10+del" else getattr(side, workload)
                rate = timed(step, seconds, max(10, depth // 4))
                rates[name][workload].append(rate)
                print(f"  depth {depth:>6,} round {r + 1} {name:<5} {workload:<10} "
                      f"{rate:>10,.1f} msg/s", flush=True)
    return rates


def report(rates: Rates, depth: int) -> tuple[list[str], bool]:
    """The table and the targets' checks at one depth; whether its targets were met."""
    med = {s: {w: statistics.median(v) for w, v in ws.items()} for s, ws in rates.items()}
    lines = [f"depth {depth:,}: messages/s (medians), and ratios",
             f"{'workload':<12}" + "".join(f"{s:>9}" for s in SIDES)
             + f"{'sqs/rest':>10}{'boto3/rest':>11}{'boto3/moto':>11}"]
    ok = True
    for w in WORKLOADS:
        over_rest = med["sqs"][w] / med["rest"][w]
        boto_over_rest = med["boto3"][w] / med["rest"][w]
        over_moto = med["boto3"][w] / med["moto"][w]
        lines.append(f"{w:<12}" + "".join(f"{med[s][w]:>9,.0f}" for s in SIDES[:3])
                     + f"{med['moto'][w]:>9,.1f}{over_rest:>10.2f}{boto_over_rest:>11.2f}"
                     f"{over_moto:>11,.0f}")
        ok &= over_rest >= SQS_OVER_REST
        if depth >= MOTO_TARGET_DEPTH:
            ok &= over_moto >= OVER_MOTO
    lines.append(f"targets: sqs/rest >= {SQS_OVER_REST}; boto3/moto >= {OVER_MOTO:.0f} at a "
                 f"depth of {MOTO_TARGET_DEPTH:,} or more: {'met' if ok else 'MISSED'}")
    return lines, ok


def main(argv: list[str]) -> int:
    """``python -m bench sqs [--quick] [--depth N ...] [--seconds S] [--json FILE]``."""
    parser = argparse.ArgumentParser(prog="bench sqs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s runs, 2 rounds")
    parser.add_argument("--depth", type=int, action="append",
                        help=f"ready messages when a run starts (repeatable; default: "
                        f"{', '.join(map(str, DEPTHS))})")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    seconds = args.seconds or (1.0 if args.quick else 3.0)
    rounds = args.rounds or (2 if args.quick else 3)
    depths = args.depth or list(DEPTHS)
    rates = run(depths, seconds, rounds)
    ok = True
    for depth in depths:
        lines, met = report(rates[depth], depth)
        print("\n".join(lines))
        ok &= met
    if args.json:
        Path(args.json).write_text(json.dumps({"seconds": seconds, "met": ok, "depths": {
            str(d): rates[d] for d in depths}}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
