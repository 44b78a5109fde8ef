"""The peer of the server benchmark: moto's SQS server, with queues filled before it serves.

moto's SendMessage takes time linear in the queue's depth (each call recomputes the queue's
attributes over all of its messages: ~14 ms a message at a depth of 1,000, ~140 ms at 4,000), so
filling 4,000 messages through its API takes minutes. This script puts the messages straight
into moto's in-memory queues, as the same ``Message`` objects SendMessage makes, then runs
``moto.server.main`` -- exactly what the ``moto_server`` command runs (werkzeug, threaded) --
in the same process. The load is then driven over HTTP by wrk as for sqew.

Usage::

    python bench/peers.py moto --port 5000 --queue send-1k=1000 --queue deep=4000
"""

from __future__ import annotations

import argparse
import uuid

ACCOUNT = "123456789012"  # moto's default account, used for unsigned test credentials
REGION = "us-east-1"  # the region of the bench's Authorization header (bench/lua/sqs.lua)


def fill(name: str, depth: int, body: str) -> None:
    """Create the standard queue ``name`` holding ``depth`` ready messages with ``body``."""
    from moto.sqs.models import Message, sqs_backends

    queue = sqs_backends[ACCOUNT][REGION].create_queue(name)
    for _ in range(depth):
        message = Message(str(uuid.uuid4()), body)
        message.mark_sent()
        queue._messages.append(message)  # what Queue.add_message does for a standard queue


def main(argv: list[str] | None = None) -> None:
    """Fill the queues given with ``--queue NAME=DEPTH``, then serve moto on 127.0.0.1."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("peer", choices=["moto"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--queue", action="append", default=[], metavar="NAME=DEPTH")
    parser.add_argument("--body", default='{"hello":"world"}', help="the messages' body")
    args = parser.parse_args(argv)
    for spec in args.queue:
        name, _, depth = spec.partition("=")
        fill(name, int(depth or 0), args.body)

    from moto.server import main as moto_main

    moto_main(["-H", "127.0.0.1", "-p", str(args.port)])


if __name__ == "__main__":
    main()
