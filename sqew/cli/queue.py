"""``sqew queue``: create, change, inspect and maintain queues."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sqew import models
from sqew.cli import output
from sqew.cli.state import current

app = typer.Typer(help="Create, change, inspect and maintain queues.", no_args_is_help=True)

Name = Annotated[str, typer.Option("--name", "-n", metavar="NAME", help="The queue.")]
SETTINGS = "Settings"  # help panel grouping the queue settings

# Every queue setting as --kebab-case. Ranges are checked by the service (exit 1 with a
# ValidationError, as the REST API answers), not by the option parser.
VisibilityMs = Annotated[int | None, typer.Option(
    "--visibility-ms", help="Lease length of a poll (0-43200000).", rich_help_panel=SETTINGS)]
MaxAttempts = Annotated[int | None, typer.Option(
    "--max-attempts", help="Deliveries before dead-lettering (1-1000).", rich_help_panel=SETTINGS)]
BackoffBaseMs = Annotated[int | None, typer.Option(
    "--backoff-base-ms", help="First nack retry delay (0-3600000).", rich_help_panel=SETTINGS)]
BackoffMaxMs = Annotated[int | None, typer.Option(
    "--backoff-max-ms", help="Largest nack retry delay (>= base, <= 86400000).",
    rich_help_panel=SETTINGS)]
RetentionMs = Annotated[int | None, typer.Option(
    "--retention-ms", help="Default message TTL (60000-1209600000).", rich_help_panel=SETTINGS)]
DedupWindowMs = Annotated[int | None, typer.Option(
    "--dedup-window-ms", help="Idempotency-key window (1000-604800000).",
    rich_help_panel=SETTINGS)]
MaxPayloadBytes = Annotated[int | None, typer.Option(
    "--max-payload-bytes", help="Largest payload (1-1048576).", rich_help_panel=SETTINGS)]
MaxDepth = Annotated[int | None, typer.Option(
    "--max-depth", help="Most messages held; 0 = unlimited.", rich_help_panel=SETTINGS)]
RateLimitPerS = Annotated[float | None, typer.Option(
    "--rate-limit-per-s", help="Enqueue rate limit per second; 0 = off.",
    rich_help_panel=SETTINGS)]
Order = Annotated[str | None, typer.Option(
    "--order", metavar="fifo|lifo", help="Order within one priority.", rich_help_panel=SETTINGS)]
Archive = Annotated[bool | None, typer.Option(
    "--archive/--no-archive", help="Keep acked messages in an archive.",
    rich_help_panel=SETTINGS, show_default=False)]
HmacSecret = Annotated[str | None, typer.Option(
    "--hmac-secret", help="Secret (>= 16 bytes) for signed enqueues and deliveries.",
    rich_help_panel=SETTINGS)]


def _settings(values: dict[str, Any]) -> dict[str, Any]:
    """The settings given on the command line (None = not given = unchanged/default)."""
    return {k: v for k, v in values.items() if k in models.SETTING_NAMES and v is not None}


@app.command("list")
def list_(ctx: typer.Context) -> None:
    """List every queue, dead-letter queues included.

    Example:

        sqew queue list
    """
    state = current(ctx)
    queues = state.client.list_queues()
    output.emit(state.json, models.QueueList(queues), output.queues_table(queues))


@app.command("add")
def add(
    ctx: typer.Context,
    name: Name,
    visibility_ms: VisibilityMs = None,
    max_attempts: MaxAttempts = None,
    backoff_base_ms: BackoffBaseMs = None,
    backoff_max_ms: BackoffMaxMs = None,
    retention_ms: RetentionMs = None,
    dedup_window_ms: DedupWindowMs = None,
    max_payload_bytes: MaxPayloadBytes = None,
    max_depth: MaxDepth = None,
    rate_limit_per_s: RateLimitPerS = None,
    order: Order = None,
    archive: Archive = None,
    hmac_secret: HmacSecret = None,
) -> None:
    """Create a queue and its dead-letter queue NAME.dlq; unset settings take their defaults.

    Example:

        sqew queue add --name jobs --max-attempts 3 --visibility-ms 60000
    """
    state = current(ctx)
    q = state.client.create_queue(name, **_settings(locals()))
    output.emit(state.json, q, output.queue_detail(q))


@app.command("update")
def update(
    ctx: typer.Context,
    name: Name,
    visibility_ms: VisibilityMs = None,
    max_attempts: MaxAttempts = None,
    backoff_base_ms: BackoffBaseMs = None,
    backoff_max_ms: BackoffMaxMs = None,
    retention_ms: RetentionMs = None,
    dedup_window_ms: DedupWindowMs = None,
    max_payload_bytes: MaxPayloadBytes = None,
    max_depth: MaxDepth = None,
    rate_limit_per_s: RateLimitPerS = None,
    order: Order = None,
    archive: Archive = None,
    hmac_secret: HmacSecret = None,
) -> None:
    """Change settings of a queue; settings not given stay as they are.

    Example:

        sqew queue update --name jobs --max-attempts 10 --no-archive
    """
    state = current(ctx)
    q = state.client.update_queue(name, **_settings(locals()))
    output.emit(state.json, q, output.queue_detail(q))


@app.command("rm")
def rm(ctx: typer.Context, name: Name) -> None:
    """Remove a queue, its dead-letter queue and all their messages.

    Prints nothing with --json (the REST API answers 204 No Content).

    Example:

        sqew queue rm --name jobs
    """
    state = current(ctx)
    state.client.delete_queue(name)
    if not state.json:
        output.line(f"removed queue {name} and {name}.dlq")(output.console())


@app.command("show")
def show(ctx: typer.Context, name: Name) -> None:
    """Show a queue's settings and stats.

    Example:

        sqew queue show --name jobs
    """
    state = current(ctx)
    q = state.client.get_queue(name)
    output.emit(state.json, q, output.queue_detail(q))


@app.command("purge")
def purge(ctx: typer.Context, name: Name) -> None:
    """Delete every message of a queue (its dead-letter queue is kept).

    Example:

        sqew queue purge --name jobs
    """
    state = current(ctx)
    n = state.client.purge(name)
    output.emit(state.json, models.Purged(n),
                output.line(f"purged {output.plural(n, 'message')} from {name}"))


@app.command("peek")
def peek(
    ctx: typer.Context,
    name: Name,
    limit: Annotated[int, typer.Option("--limit", help="How many (1-100).")] = 10,
) -> None:
    """Show the next ready messages without leasing them (no side effect).

    Example:

        sqew queue peek --name jobs --limit 5
    """
    state = current(ctx)
    messages = state.client.peek(name, limit=limit)
    output.emit(state.json, models.MessageList(messages), output.messages_table(messages))


@app.command("requeue-dlq")
def requeue_dlq(ctx: typer.Context, name: Name) -> None:
    """Move every message of the queue's dead-letter queue back, with attempts reset to 0.

    The same as `sqew dlq requeue --queue NAME`.

    Example:

        sqew queue requeue-dlq --name jobs
    """
    state = current(ctx)
    n = state.client.dlq_requeue(name)
    output.emit(state.json, models.Requeued(n),
                output.line(f"requeued {output.plural(n, 'message')} from {name}.dlq"))


@app.command("compact")
def compact(ctx: typer.Context, name: Name) -> None:
    """Remove expired messages and tombstones now, then let the database reclaim space.

    Example:

        sqew queue compact --name jobs
    """
    state = current(ctx)
    n = state.client.compact(name)
    output.emit(state.json, models.Removed(n),
                output.line(f"compacted {name}: removed {n} expired messages and tombstones"))
