"""``sqew message``: enqueue, lease, settle and inspect messages."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import IO, Annotated, Any

import typer

from sqew import errors, models
from sqew.cli import bulk, interrupts, output, params
from sqew.cli import errors as cli_errors
from sqew.cli.state import State, current
from sqew.cli.tail import tail
from sqew.client.arguments import message_in

app = typer.Typer(help="Enqueue, lease, settle and inspect messages.", no_args_is_help=True)

Queue = Annotated[str, typer.Option("--queue", "-q", metavar="NAME", help="The queue.")]
Ids = Annotated[str, typer.Option(
    "--ids", metavar="ID:TOKEN,…", help="Leased messages as id:token pairs, comma-separated.")]
Batch = Annotated[int, typer.Option("--batch", help="Most messages to lease (1-100).")]
VisibilityMs = Annotated[int | None, typer.Option(
    "--visibility-ms", help="Lease length for this poll (default: the queue's).")]
PollOrder = Annotated[str, typer.Option(
    "--order", help="priority (the head of the queue) or shuffle (random ready messages).")]


@app.command("enqueue")
def enqueue(
    ctx: typer.Context,
    queue: Queue,
    payload: Annotated[str | None, typer.Option(
        "--payload", "-p", metavar="JSON", help="The payload: any JSON value.")] = None,
    file: Annotated[str | None, typer.Option(
        "--file", "-f", metavar="PATH|-",
        help="Newline-delimited JSON, one message per line ('-' = stdin).")] = None,
    priority: Annotated[int | None, typer.Option(
        "--priority", help="-1000..1000, higher first (default 0).")] = None,
    delay_ms: Annotated[int | None, typer.Option(
        "--delay-ms", help="Deliver no earlier than this many ms from now.")] = None,
    ttl_ms: Annotated[int | None, typer.Option(
        "--ttl-ms", help="Expire after this many ms (default: the queue's retention).")] = None,
    idempotency_key: Annotated[str | None, typer.Option(
        "--idempotency-key", help="Enqueue at most once per key within the dedup window.")] = None,
    attr: Annotated[list[str] | None, typer.Option(
        "--attr", metavar="KEY=VALUE", help="A string attribute (repeatable).")] = None,
    envelope: Annotated[bool, typer.Option(
        "--envelope",
        help="The payload / each line is a message object: {payload, priority, delay_ms, "
             "ttl_ms, idempotency_key, attributes}.")] = False,
) -> None:
    """Enqueue one message (--payload) or a stream of them (--file).

    With --file, each line is one payload (or, with --envelope, one message object); lines are
    sent in batches. A bad line is reported with its number and skipped, every good line is
    enqueued, and the exit status is 1 if any line failed. A progress bar shows on a terminal.
    Ctrl-C or SIGTERM stops it once the batch being sent is counted, with a summary of what
    was committed (exit status 130 or 143).

    Examples:

        sqew message enqueue --queue jobs --payload '{"order": 42}' --priority 5 --attr src=web

        sqew message enqueue --queue jobs --file orders.ndjson

        zcat events.ndjson.gz | sqew message enqueue --queue jobs --file - --envelope
    """
    state = current(ctx)
    if (payload is None) == (file is None):
        raise typer.BadParameter("give exactly one of --payload or --file",
                                 param_hint="'--payload' / '--file'")
    fields = {"priority": priority, "delay_ms": delay_ms, "ttl_ms": ttl_ms,
              "idempotency_key": idempotency_key, "attributes": params.attributes(attr)}
    fields = {k: v for k, v in fields.items() if v is not None}
    if envelope and fields:  # never silently ignore an option
        given = ", ".join("--attr" if k == "attributes" else f"--{k.replace('_', '-')}"
                          for k in fields)
        raise typer.BadParameter(f"{given} cannot be combined with --envelope: put the "
                                 "field in the message object instead", param_hint="'--envelope'")
    if file is not None:
        _enqueue_file(state, queue, file, envelope, fields)
    else:
        assert payload is not None
        _enqueue_one(state, queue, payload, envelope, fields)


def _enqueue_one(
    state: State, queue: str, payload: str, envelope: bool, fields: dict[str, Any]
) -> None:
    if envelope:  # every field of the API's message, traceparent and tracestate among them
        message = bulk.parse_envelope(payload.encode(errors="surrogateescape"))
        (result,) = state.client.enqueue_batch(queue, [message])
    else:
        result = state.client.enqueue(queue, params.json_payload(payload), **fields)
    word = "duplicate of message" if result.duplicate else "enqueued message"
    output.emit(state, result, output.line(f"{word} {result.message_id}"))


def _enqueue_file(
    state: State, queue: str, file: str, envelope: bool, defaults: dict[str, Any]
) -> None:
    if "idempotency_key" in defaults:
        raise typer.BadParameter(
            "one key for many lines would make all but the first a duplicate; "
            "with --file put idempotency_key in each line and use --envelope",
            param_hint="'--idempotency-key'")
    if defaults:
        message_in(None, **defaults)  # reject a bad --priority etc. before reading anything
    stopped: errors.SqewError | None = None
    guard = bulk.InterruptGuard()
    with _open_lines(file) as (stream, size), _progress(size) as advance:
        # The client is opened once the file is: an unreadable file is a usage error that
        # leaves no database file (or connection) behind.
        enqueuer = bulk.FileEnqueuer(state.client, queue, envelope=envelope, defaults=defaults,
                                     guard=guard)
        try:
            with guard.installed():
                enqueuer.run(stream, advance)
        except errors.SqewError as exc:
            stopped = exc
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: say what was committed, then exit
            enqueuer.interrupted()
    summary = enqueuer.summary
    output.emit(state, summary.to_json(), summary.render(queue))
    if summary.interrupted:
        raise typer.Exit(interrupts.exit_status(guard.signum) if guard.signum else
                         cli_errors.EXIT_INTERRUPTED)
    if stopped is not None:
        raise type(stopped)(
            f"{stopped.message} (stopped at line {summary.stopped_at}; "
            "the lines before it were processed)"
        )
    if summary.failed_total:
        first = min(summary.failed)
        raise errors.by_code(first.code)(
            f"{summary.failed_total} line(s) failed, the first at line {first.line}: "
            f"{first.message}"
        )


@contextlib.contextmanager
def _open_lines(file: str) -> Iterator[tuple[IO[bytes], int | None]]:
    """The byte stream of ``file`` ('-' = stdin) and its size when known (for progress)."""
    if file == "-":
        if sys.stdin is None:  # started with its standard input closed (`<&-`)
            raise typer.BadParameter("standard input is closed: there is nothing to read",
                                     param_hint="'--file'")
        yield sys.stdin.buffer, None
        return
    try:
        stream = open(file, "rb")  # noqa: SIM115 - closed below, after the run
    except OSError as exc:
        raise typer.BadParameter(f"cannot read '{file}': {exc.strerror or exc}",
                                 param_hint="'--file'") from None
    with stream:
        size = os.fstat(stream.fileno()).st_size
        yield stream, size if size > 0 else None


@contextlib.contextmanager
def _progress(total: int | None) -> Iterator[Callable[[int], None] | None]:
    """A Rich progress bar on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [TextColumn("enqueueing"), BarColumn(), DownloadColumn(), TimeElapsedColumn(),
               TimeRemainingColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("enqueue", total=total)
        yield lambda n: bar.advance(task, n)


@app.command("get")
def get(
    ctx: typer.Context,
    queue: Queue,
    batch: Batch = 1,
    visibility_ms: VisibilityMs = None,
    order: PollOrder = "priority",
) -> None:
    """Lease up to --batch ready messages now, without waiting.

    Prints each message's id:token handle for `message ack` / `message nack`.

    Example:

        sqew message get --queue jobs --batch 10
    """
    _poll(current(ctx), queue, batch, 0, visibility_ms, order)


@app.command("poll")
def poll(
    ctx: typer.Context,
    queue: Queue,
    batch: Batch = 1,
    wait_ms: Annotated[int, typer.Option(
        "--wait-ms", help="Wait up to this long for a message (0-20000).")] = 20000,
    visibility_ms: VisibilityMs = None,
    order: PollOrder = "priority",
) -> None:
    """Lease up to --batch messages, waiting up to --wait-ms for one to be ready.

    Example:

        sqew message poll --queue jobs --batch 10 --wait-ms 5000 --order shuffle
    """
    _poll(current(ctx), queue, batch, wait_ms, visibility_ms, order)


def _poll(state: State, queue: str, batch: int, wait_ms: int, visibility_ms: int | None,
          order: str = "priority") -> None:
    got = state.client.poll(queue, batch=batch, wait_ms=wait_ms, visibility_ms=visibility_ms,
                            order=order)
    output.emit(state, models.LeasedMessageList(got), output.leased_table(got))


@app.command("ack")
def ack(ctx: typer.Context, queue: Queue, ids: Ids) -> None:
    """Acknowledge leased messages: they are done and removed (or archived).

    With several ids each gets a status (acked, lease_lost, not_found); the exit status is 1
    if any was not acked.

    Example:

        sqew message ack --queue jobs --ids 17:9f2c…,18:03ab…
    """
    state = current(ctx)
    pairs = params.ids_tokens(ids)
    if len(pairs) == 1:
        results = [state.client.ack(queue, *pairs[0])]
    else:
        results = state.client.ack_batch(queue, pairs)
    _settled(state, results, ok=("acked",), verb="ack")


@app.command("nack")
def nack(
    ctx: typer.Context,
    queue: Queue,
    ids: Ids,
    delay_ms: Annotated[int | None, typer.Option(
        "--delay-ms", help="Retry after this long (default: the queue's backoff).")] = None,
    error: Annotated[str | None, typer.Option(
        "--error", help="Why it failed; kept as the message's last_error.")] = None,
    dead_letter: Annotated[bool, typer.Option(
        "--dead-letter", help="A permanent failure: move them to the DLQ now, whatever "
        "attempts they have left.")] = False,
) -> None:
    """Release leased messages for a retry (dead-lettered once out of attempts).

    With several ids each gets a status (requeued, dead_lettered, lease_lost, not_found);
    the exit status is 1 if any could not be released.

    Example:

        sqew message nack --queue jobs --ids 17:9f2c… --delay-ms 60000 --error "upstream 503"
        sqew message nack --queue jobs --ids 18:4e1a… --dead-letter --error "no such customer"
    """
    state = current(ctx)
    pairs = params.ids_tokens(ids)
    if len(pairs) == 1:
        results = [state.client.nack(queue, *pairs[0], delay_ms=delay_ms, error=error,
                                     dead_letter=dead_letter)]
    else:
        items = [{"id": i, "token": t, "delay_ms": delay_ms, "error": error,
                  "dead_letter": dead_letter or None} for i, t in pairs]
        results = state.client.nack_batch(queue, items)
    _settled(state, results, ok=("requeued", "dead_lettered"), verb="nack")


def _settled(
    state: State, results: list[models.ItemResult], *, ok: tuple[str, ...], verb: str
) -> None:
    output.emit(state, models.ResultList(results), output.results_lines(results))
    failed = [r for r in results if r.status not in ok]
    if failed:
        first = failed[0]
        raise errors.for_item(first.status, first.id, f"{len(failed)} of {len(results)} {verb}s "
                              f"failed (first: message {first.id} {first.status})")


@app.command("extend-lease")
def extend_lease(
    ctx: typer.Context,
    queue: Queue,
    ms: Annotated[int, typer.Option("--ms", help="New lease length from now (ms).")],
    id: Annotated[str | None, typer.Option(
        "--id", metavar="ID:TOKEN", help="The leased message.")] = None,
    ids: Annotated[str | None, typer.Option(
        "--ids", metavar="ID:TOKEN,…",
        help="Several leased messages (up to 1000), comma-separated, in one call.")] = None,
) -> None:
    """Extend leases you hold: they now expire --ms milliseconds from now (a heartbeat).

    One message (--id) prints when its lease now ends; several (--ids) get a status each
    (extended, lease_lost, not_found), and the exit status is 1 if any was not extended.

    Examples:

        sqew message extend-lease --queue jobs --id 17:9f2c… --ms 60000

        sqew message extend-lease --queue jobs --ids 17:9f2c…,18:03ab… --ms 60000
    """
    state = current(ctx)
    if (id is None) == (ids is None):
        raise typer.BadParameter("give exactly one of --id or --ids", param_hint="'--id' / '--ids'")
    if ids is not None:
        items = [(msg_id, token, ms) for msg_id, token in params.ids_tokens(ids)]
        _settled(state, state.client.extend_leases(queue, items), ok=("extended",),
                 verb="extend-lease")
        return
    assert id is not None
    msg_id, token = params.id_token(id)
    result = state.client.extend_lease(queue, msg_id, token, ms)
    output.emit(state, result, output.line(
        f"lease of message {result.id} expires {output.when(result.lease_expires_at)}"))


MessageIdOpt = Annotated[int, typer.Option("--id", metavar="ID", help="The message id.")]


@app.command("peek")
def peek(ctx: typer.Context, queue: Queue, id: MessageIdOpt) -> None:
    """Show one message by id, without leasing it.

    Example:

        sqew message peek --queue jobs --id 17
    """
    state = current(ctx)
    m = state.client.get_message(queue, id)
    output.emit(state, m, output.message_detail(m))


@app.command("remove")
def remove(ctx: typer.Context, queue: Queue, id: MessageIdOpt) -> None:
    """Delete one message by id, whatever its state.

    Prints nothing with --json (the REST API answers 204 No Content).

    Example:

        sqew message remove --queue jobs --id 17
    """
    state = current(ctx)
    state.client.remove_message(queue, id)
    if not state.json:
        output.line(f"removed message {id} from {queue}")(output.console())


app.command("tail")(tail)  # (in a module of its own)
