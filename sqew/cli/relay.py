"""``sqew relay``: run a ``sqew.Relay``, POSTing each message of a queue to a URL.

Logs and the live status line are ``sqew worker``'s (the relay is a Worker underneath);
SIGINT or SIGTERM drains, and the run ends with a summary on stdout and exit status 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from sqew.cli import output
from sqew.cli.state import State, current
from sqew.cli.worker import logging_for

# sqew.relay is imported by the relay command alone (and its --to check): it brings in httpx,
# about a tenth of the startup of every other command (they all register this one).
if TYPE_CHECKING:
    from sqew.relay import Relay


def _url(value: str) -> str:
    from sqew.relay.runner import check_url

    try:
        check_url(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def relay(
    ctx: typer.Context,
    queue: Annotated[str, typer.Option("--queue", "-q", metavar="NAME",
                                       help="The queue to relay.")],
    to: Annotated[str, typer.Option(
        "--to", metavar="URL", callback=_url,
        help="The receiver: each message is POSTed to this http:// or https:// URL.")],
    concurrency: Annotated[int, typer.Option(
        "--concurrency", "-c", min=1, max=1000,
        help="Requests under way at once (and kept-alive connections).")] = 1,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.001, help="Seconds a request may take to connect, to send, "
        "and between the bytes of the answer; past it the message is retried later.")] = 10.0,
    to_ca_cert: Annotated[str | None, typer.Option(
        "--to-ca-cert", metavar="FILE", help="Verify an https:// --to against this CA "
        "certificate (PEM) instead of the system's.")] = None,
    visibility_ms: Annotated[int | None, typer.Option(
        "--visibility-ms", min=300, help="The lease each poll asks for (default: the "
        "queue's); heartbeats keep it alive while a request is under way.")] = None,
    drain_timeout: Annotated[float, typer.Option(
        "--drain-timeout", min=0, help="Seconds to let requests under way end after "
        "SIGINT/SIGTERM.")] = 30.0,
) -> None:
    """Deliver a queue to a webhook: POST each message to a URL, ack it on a 2xx answer.

    The body is the payload as sent (Content-Type: application/json), with the headers
    X-Sqew-Message-Id, X-Sqew-Attempts, X-Sqew-Enqueued-At, X-Sqew-Attr-<name> per
    attribute, traceparent, and X-Sqew-Signature on a queue with an hmac_secret (give it with
    the global --hmac-secret or SQEW_HMAC_SECRET). 429, 5xx and timeouts are retried after the
    answer's Retry-After or the queue's backoff; other answers are retried with the status
    as the error, to the DLQ after max_attempts. An unreachable receiver is retried without
    leasing more. SIGINT or SIGTERM drains, prints a summary and exits 0.

    Example:

        sqew relay --queue orders --to https://hooks.example.com/orders --concurrency 8
    """
    from sqew.relay import Relay

    state = current(ctx)
    r = Relay(state.client, queue, to, concurrency=concurrency, timeout_s=timeout,
              hmac_secret=state.hmac_secret, ca_cert=to_ca_cert, visibility_ms=visibility_ms,
              drain_timeout_s=drain_timeout)
    with logging_for(state, r.worker):
        r.run()
    _summary(state, r)


def _summary(state: State, r: Relay) -> None:
    w = r.worker
    summary = {"delivered": w.processed, "failed": w.failed, "rejected": w.rejected,
               "lost": w.lost, "connection_retries": r.connection_retries,
               "lease_extensions": w.lease_extensions, "in_flight": w.in_flight}
    text = (f"{w.processed} delivered, {w.failed} failed, {w.rejected} rejected, "
            f"{w.lost} lost, {r.connection_retries} connection retries")
    output.emit(state, summary, output.line(text))
