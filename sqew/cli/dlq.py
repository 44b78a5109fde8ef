"""``sqew dlq``: a queue's dead-letter queue (``<queue>.dlq``)."""

from __future__ import annotations

from typing import Annotated

import typer

from sqew import models
from sqew.cli import output, params
from sqew.cli.state import State, current

app = typer.Typer(
    help="Inspect, requeue and purge a queue's dead-letter queue (QUEUE.dlq).",
    no_args_is_help=True,
)

Queue = Annotated[str, typer.Option(
    "--queue", "-q", metavar="NAME", help="The queue whose dead-letter queue to use.")]


@app.command("list")
def list_(
    ctx: typer.Context,
    queue: Queue,
    limit: Annotated[int, typer.Option("--limit", help="How many at most.")] = 100,
    after_id: Annotated[int | None, typer.Option(
        "--after-id", help="Start after this message id (for paging).")] = None,
) -> None:
    """List dead-lettered messages by id, with their last error.

    Page through a long DLQ with --after-id set to the last id shown.

    Example:

        sqew dlq list --queue jobs --limit 50 --after-id 1200
    """
    state = current(ctx)
    messages = state.client.dlq_list(queue, limit=limit, after_id=after_id)
    output.emit(state, models.MessageList(messages),
                output.messages_table(messages, empty=f"{queue}.dlq is empty", dlq=True))


@app.command("purge")
def purge(ctx: typer.Context, queue: Queue) -> None:
    """Delete every message of the queue's dead-letter queue.

    Example:

        sqew dlq purge --queue jobs
    """
    state = current(ctx)
    n = state.client.dlq_purge(queue)
    output.emit(state, models.Purged(n),
                output.line(f"purged {output.plural(n, 'message')} from {queue}.dlq"))


@app.command("requeue")
def requeue(
    ctx: typer.Context,
    queue: Queue,
    ids: Annotated[str | None, typer.Option(
        "--ids", metavar="ID,…", help="Only these message ids (default: all).")] = None,
) -> None:
    """Move dead-lettered messages back to the queue, with attempts reset to 0.

    Example:

        sqew dlq requeue --queue jobs --ids 1201,1207
    """
    state = current(ctx)
    wanted = None if ids is None else params.id_list(ids)  # a usage error opens nothing
    report_requeued(state, queue, state.client.dlq_requeue(queue, wanted))


def report_requeued(state: State, queue: str, result: models.Requeued) -> None:
    """Print a requeue's result: how many moved, and how many the queue had no room for."""
    text = f"requeued {output.plural(result.requeued, 'message')} from {queue}.dlq"
    if result.left:
        text += (f"; {output.plural(result.left, 'message')} left there: queue '{queue}' "
                 "is at its max_depth")
    output.emit(state, result, output.line(text))
