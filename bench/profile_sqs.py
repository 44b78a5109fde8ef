"""Where the server's time goes in an SQS send: ``python -m bench.profile_sqs [-n N]``.

Runs the SQS endpoint's own code (``sqew.sqs.protocol.answer``: decode, input check, action,
encode) in this process on a service built as ``sqew serve`` builds it (group commit on the
event loop, reads on a thread pool, a SQLite file), without HTTP: for SendMessage,
SendMessageBatch of 10 and, beside them, the REST API's enqueue underneath
(``QueueService.enqueue`` of one message and of 10). It prints microseconds per call
(wall clock, median of ``--repeat`` interleaved runs of ``N`` calls), then a cProfile of ``N``
calls of each SQS action: the functions with the most cumulative time on the event loop's
thread (the reads' work on the pool's threads shows only as the time awaited for them).

A tool for work on the endpoint's speed; it changes nothing and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from bench.server import payload_text
from sqew import models
from sqew.backends import open_backend
from sqew.core.service import QueueService
from sqew.sqs import protocol
from sqew.sqs.urls import Context

QUEUE = "bench"


async def _main(n: int, repeat: int, top: int) -> None:
    body = payload_text()
    with tempfile.TemporaryDirectory(prefix="sqew-profile-sqs-") as tmp, \
            ThreadPoolExecutor(4) as pool:
        loop = asyncio.get_running_loop()
        backend = open_backend(str(Path(tmp) / "p.db"))
        service = QueueService(backend, group_commit=True, reap_when_due=False,
                               offload=lambda fn: loop.run_in_executor(pool, fn))
        await service.create_queue(models.QueueCreate(name=QUEUE))
        ctx = Context(service=service, base_url="http://127.0.0.1:1")
        url = ctx.queue_url(QUEUE)
        one = json.dumps({"QueueUrl": url, "MessageBody": body}).encode()
        ten = json.dumps({"QueueUrl": url, "Entries": [
            {"Id": str(i), "MessageBody": body} for i in range(10)]}).encode()
        message = models.MessageIn(payload=msgspec.Raw(body.encode()))

        async def sqs(action: str, content: bytes) -> None:
            a = await protocol.answer(ctx, f"AmazonSQS.{action}", content)
            assert a.status == 200 and b'"Failed":[{' not in a.body, a

        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "SendMessage": lambda: sqs("SendMessage", one),
            "enqueue(1)": lambda: service.enqueue(QUEUE, [message]),
            "SendMessageBatch(10)": lambda: sqs("SendMessageBatch", ten),
            "enqueue(10)": lambda: service.enqueue(QUEUE, [message] * 10),
        }
        times: dict[str, list[float]] = {k: [] for k in calls}
        for _ in range(repeat):
            for name, call in calls.items():
                start = time.perf_counter()
                for _ in range(n):
                    await call()
                times[name].append((time.perf_counter() - start) / n * 1e6)
        print(f"µs per call (median of {repeat} runs of {n}):")
        for name, ts in times.items():
            print(f"  {name:<22}{statistics.median(ts):>10,.0f}")
        for name in ("SendMessage", "SendMessageBatch(10)"):
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(n):
                await calls[name]()
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
            print(f"\n== cProfile of {n} {name}\n" + out.getvalue())
        backend.close()


def main(argv: list[str] | None = None) -> None:
    """Parse the options and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=35)
    args = parser.parse_args(argv)
    asyncio.run(_main(args.n, args.repeat, args.top))


if __name__ == "__main__":
    main()
