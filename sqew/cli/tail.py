"""``sqew message tail``: follow a queue on the terminal, a line per message as it comes
(docs/cli.md#following-a-queue-message-tail), on ``Client.stream``.

With ``--ack`` it is a consumer that prints: each message is acked once printed. Without, it
is a look that leaves the queue as it was: what it printed stays leased to it (each lease as
long as the queue allows, unless ``--visibility-ms``) until it exits, then is given back at
once, attempts not counted. Ctrl-C and SIGTERM end it quietly (``sqew.cli.app`` makes them
130 and 143); leaving the ``with`` block gives the leases back.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from sqew import errors, models, payloads
from sqew.cli import errors as cli_errors
from sqew.cli import output
from sqew.cli.state import current
from sqew.escapes import escape_controls


def tail(
    ctx: typer.Context,
    queue: Annotated[str, typer.Option("--queue", "-q", metavar="NAME", help="The queue.")],
    ack: Annotated[bool, typer.Option(
        "--ack", help="Ack each message once printed (consume the queue). Without it, what "
        "was printed is given back, untouched, when tail exits.")] = False,
    max_in_flight: Annotated[int, typer.Option(
        "--max-in-flight", min=1, max=models.MAX_STREAM_IN_FLIGHT,
        help="The most messages held at once (1-1000). Without --ack, the most it shows "
        "until messages are acked elsewhere.")] = models.DEFAULT_STREAM_IN_FLIGHT,
    visibility_ms: Annotated[int | None, typer.Option(
        "--visibility-ms", min=0, max=models.MAX_VISIBILITY_MS,
        help="Each lease's length (default: the queue's with --ack, else 12 h: held until "
        "tail exits).")] = None,
) -> None:
    """Follow a queue: print each message as it becomes ready, until Ctrl-C.

    One line per message: its id:token handle, its attempt and its payload (with --json the
    leased message as the API answers it). Ctrl-C or SIGTERM stops it quietly (exit status
    130 or 143), giving back the messages it holds.

    Example:

        sqew message tail --queue jobs --ack
    """
    state = current(ctx)
    client = state.client
    if visibility_ms is None and not ack:
        visibility_ms = models.MAX_VISIBILITY_MS  # held while shown: not delivered twice
    with client.stream(queue, max_in_flight=max_in_flight,
                       visibility_ms=visibility_ms) as messages:
        for m in messages:
            if state.json:
                output.write_json(m)
            else:
                text = escape_controls(payloads.text_of(m))
                sys.stdout.write(f"{m.id}:{m.token}  attempt {m.attempts}  {text}\n")
                sys.stdout.flush()
            if ack:
                try:
                    client.ack(queue, m.id, m.token)
                except (errors.LeaseLost, errors.MessageNotFound) as exc:
                    sys.stderr.write(f"warning: not acked: {cli_errors.error_line(exc)}\n")
                    sys.stderr.flush()
