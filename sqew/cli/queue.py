"""``sqew queue``: create, change, inspect and maintain queues."""

from __future__ import annotations

import contextlib
import inspect
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Annotated, Any

import msgspec
import typer

from sqew import models, queue_settings
from sqew.cli import dlq, output
from sqew.cli import export as export_ndjson
from sqew.cli.state import current

app = typer.Typer(help="Create, change, inspect and maintain queues.", no_args_is_help=True)

Name = Annotated[str, typer.Option("--name", "-n", metavar="NAME", help="The queue.")]
SETTINGS = "Settings"  # help panel grouping the queue settings


def _setting_option(setting: queue_settings.Setting) -> inspect.Parameter:
    """The ``--kebab-case`` option of one queue setting, from its declaration in the model.

    Ranges are checked by the service (exit 1 with a ValidationError, as the REST API answers),
    not by the option parser; the help shows them with the default. None = not given (on
    ``add`` the default, on ``update`` unchanged).
    """
    flag = "--" + setting.name.replace("_", "-")
    words = f"Default: {setting.default_text}." + (
        f" Range: {setting.range}." if setting.range else "")
    extra: dict[str, Any] = {}
    if setting.type is bool:
        flag = f"{flag}/--no-{flag[2:]}"
        extra["show_default"] = False
    if setting.choices:
        extra["metavar"] = "|".join(setting.choices)
    option = typer.Option(flag, help=f"{setting.description}. {words}",
                          rich_help_panel=SETTINGS, **extra)
    return inspect.Parameter(setting.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[setting.type | None, option])


_SETTING_OPTIONS = [_setting_option(s) for s in queue_settings.SETTINGS]


def with_setting_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command(ctx, name, **settings)`` one option per queue setting.

    Typer reads a command's options from its signature: the generated one lists the command's
    own parameters, then every setting of ``queue_settings.SETTINGS``.
    """
    own = list(inspect.signature(command, eval_str=True).parameters.values())[:-1]  # **settings
    command.__signature__ = inspect.Signature([*own, *_SETTING_OPTIONS])  # type: ignore[attr-defined]
    return command


def _given(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings given on the command line (None = not given = unchanged/default)."""
    return {k: v for k, v in settings.items() if v is not None}


@app.command("list")
def list_(ctx: typer.Context) -> None:
    """List every queue, dead-letter queues included.

    Example:

        sqew queue list
    """
    state = current(ctx)
    queues = state.client.list_queues()
    output.emit(state, models.QueueList(queues), output.queues_table(queues))


@app.command("add")
@with_setting_options
def add(ctx: typer.Context, name: Name, **settings: Any) -> None:
    """Create a queue and its dead-letter queue NAME.dlq; unset settings take their defaults.

    Example:

        sqew queue add --name jobs --max-attempts 3 --visibility-ms 60000
    """
    state = current(ctx, create=True)
    q = state.client.create_queue(name, **_given(settings))
    output.emit(state, q, output.queue_detail(q))


@app.command("update")
@with_setting_options
def update(ctx: typer.Context, name: Name, **settings: Any) -> None:
    """Change settings of a queue; settings not given stay as they are.

    Example:

        sqew queue update --name jobs --max-attempts 10 --no-archive
    """
    state = current(ctx)
    q = state.client.update_queue(name, **_given(settings))
    output.emit(state, q, output.queue_detail(q))


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
    output.emit(state, q, output.queue_detail(q))


@app.command("purge")
def purge(ctx: typer.Context, name: Name) -> None:
    """Delete every message of a queue (its dead-letter queue is kept).

    Example:

        sqew queue purge --name jobs
    """
    state = current(ctx)
    n = state.client.purge(name)
    output.emit(state, models.Purged(n),
                output.line(f"purged {output.plural(n, 'message')} from {name}"))


@app.command("pause")
def pause(ctx: typer.Context, name: Name) -> None:
    """Pause delivery: the queue still takes enqueues, polls get nothing until it is resumed.

    Example:

        sqew queue pause --name jobs
    """
    state = current(ctx)
    q = state.client.pause_queue(name)
    output.emit(state, q, output.line(f"paused {name}: polls get nothing until resumed"))


@app.command("resume")
def resume(ctx: typer.Context, name: Name) -> None:
    """Resume delivery of a paused queue.

    Example:

        sqew queue resume --name jobs
    """
    state = current(ctx)
    q = state.client.resume_queue(name)
    output.emit(state, q, output.line(f"resumed {name}"))


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
    output.emit(state, models.MessageList(messages), output.messages_table(messages))


@app.command("requeue-dlq")
def requeue_dlq(ctx: typer.Context, name: Name) -> None:
    """Move every message of the queue's dead-letter queue back, with attempts reset to 0.

    The same as `sqew dlq requeue --queue NAME`.

    Example:

        sqew queue requeue-dlq --name jobs
    """
    state = current(ctx)
    dlq.report_requeued(state, name, state.client.dlq_requeue(name))


@app.command("compact")
def compact(ctx: typer.Context, name: Name) -> None:
    """Remove expired messages and tombstones now, then let the database reclaim space.

    Example:

        sqew queue compact --name jobs
    """
    state = current(ctx)
    n = state.client.compact(name)
    output.emit(state, models.Removed(n),
                output.line(f"compacted {name}: removed {n} expired messages and tombstones"))


Source = Annotated[str, typer.Option(
    "--source", metavar="queue|dlq|archive",
    help="queue: every message of the queue, leased ones included; dlq: its dead-letter "
         "queue; archive: its acked messages (kept when the queue's archive setting is on).")]
Out = Annotated[str, typer.Option(
    "--out", "-o", metavar="FILE|-", help="Where to write the NDJSON ('-' = stdout).")]


@app.command("export")
def export(ctx: typer.Context, name: Name, source: Source = "queue", out: Out = "-") -> None:
    """Write a queue's messages as NDJSON envelopes, one message object a line.

    `sqew message enqueue --file FILE --envelope` reads the file back (payload, priority,
    attributes, idempotency key, remaining TTL and delay): the replay path for a DLQ or an
    archive. A snapshot: messages enqueued after the export started are left out. Nothing is
    leased or changed. The summary goes to stderr; with --json, {"exported": n} goes to stdout,
    or to stderr when the messages do (--out -). A progress counter shows on a terminal.

    Example:

        sqew queue export --name jobs --source dlq --out failed.ndjson
    """
    if source not in models.SCAN_SOURCES:  # before anything is opened or written
        raise typer.BadParameter("must be one of queue, dlq, archive", param_hint="'--source'")
    state = current(ctx)
    state.client.scan(name, source=source, limit=1)  # a missing queue fails before --out exists
    written = [0]

    def counted(n: int) -> None:
        written[0] += n
        if shown is not None:
            shown(n)

    try:
        with _open_out(out) as stream, export_ndjson.progress(name) as shown:
            n = export_ndjson.write(state.client, name, source, stream, counted)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM) or failed: say how far it got
        done = f"export stopped after {output.plural(written[0], 'message')}"
        print(f"{done}: stdout holds only those" if out == "-" else
              f"{done}: '{out}' was not written (run the export again)", file=sys.stderr)
        raise
    summary = {"exported": n}
    if state.json and out != "-":
        output.write_json(summary)
    elif state.json:
        sys.stderr.buffer.write(msgspec.json.encode(summary) + b"\n")
        sys.stderr.flush()
    else:
        what = {"queue": name, "dlq": f"{name}.dlq", "archive": f"the archive of {name}"}[source]
        print(f"exported {output.plural(n, 'message')} from {what}", file=sys.stderr)


@contextlib.contextmanager
def _open_out(out: str) -> Iterator[IO[bytes]]:
    """The byte stream to write to ('-' = stdout).

    A file is written under a temporary name in its directory and renamed over ``out`` only
    when the block ends normally (flushed and synced first): an interrupted or failed export
    leaves no partial file that a later replay would take for the whole queue, and an
    existing ``out`` is left as it was. The file gets the mode ``open`` would give it.
    """
    if out == "-":
        yield sys.stdout.buffer
        return
    target = os.path.abspath(out)
    try:
        fd, spare = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.",
                                     suffix=".partial", dir=os.path.dirname(target))
    except OSError as exc:
        raise typer.BadParameter(f"cannot write '{out}': {exc.strerror or exc}",
                                 param_hint="'--out'") from None
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(spare, _mode_of(target))
        os.replace(spare, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(spare)
        raise


def _mode_of(path: str) -> int:
    """The mode a file written at ``path`` gets: its own if it exists, else what ``open``
    makes under the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
