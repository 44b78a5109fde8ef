"""Rendering: a result as the REST API's JSON (``--json``) or as Rich tables and short lines.

The JSON is ``msgspec.json.encode`` of the same wire models the REST server returns, so local
and remote output match byte for byte in shape (UNSET fields are omitted, as on the wire), and
a message's payload is the text its producer sent (``sqew.payloads``), never re-encoded.
The human forms show user data (payloads, errors, attributes, names) with its control
characters escaped (``sqew.escapes``): what a producer or a consumer wrote cannot move the
cursor, clear the screen or forge a line of the terminal that shows it. ``--json`` stays
exact.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

import msgspec
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sqew import models, payloads, queue_settings
from sqew.escapes import escape_controls

PAYLOAD_WIDTH = 60  # characters of a payload shown in a table cell
ATTRIBUTES_WIDTH = 30  # characters of a message's attributes shown in a table cell
MIN_PAYLOAD_ROOM = 16
"""Below this many characters left for a payload, messages print as blocks, not a table."""
WIDE = 1_000_000
"""The console width under ``--wide``: tables are as wide as their content, nothing is cut."""


class Shown(Protocol):
    """How a command prints (the CLI's ``State``): JSON, or tables cut to the terminal or
    not (``--wide``)."""

    json: bool
    wide: bool

_encode = msgspec.json.Encoder().encode


def console(wide: bool = False) -> Console:
    """A console on stdout; plain (no colour codes, no wrapping surprises) when piped;
    ``wide``: as wide as what it prints (cells never cut)."""
    return Console(highlight=False, soft_wrap=False, width=WIDE if wide else None)


def write_json(value: Any) -> None:
    """Print one JSON document (a wire model or plain data) on its own line of stdout."""
    out = sys.stdout.buffer
    out.write(_encode(_as_sent(value)) + b"\n")
    out.flush()


def _as_sent(value: Any) -> Any:
    """``value`` with its messages' payloads as sent (a message, or a model that holds a
    list of them under ``messages``)."""
    if isinstance(value, models.Message):
        return payloads.as_sent([value])[0]
    held = getattr(value, "messages", None)
    if isinstance(value, msgspec.Struct) and isinstance(held, list) and held \
            and isinstance(held[0], models.Message):
        return msgspec.structs.replace(value, messages=payloads.as_sent(held))  # type: ignore[call-arg]
    return value


def emit(shown: Shown, value: Any, human: Callable[[Console], None]) -> None:
    """Print ``value`` as JSON, or call ``human`` with a console for the human form."""
    if shown.json:
        write_json(value)
    else:
        human(console(shown.wide))


def line(text: str) -> Callable[[Console], None]:
    """A human renderer printing one line (markup-free, so names print as given; control
    characters escaped)."""
    shown = escape_controls(text)
    return lambda c: c.print(shown, markup=False, soft_wrap=True)


def cell(text: str) -> str:
    """User data for a Rich table cell: control characters and Rich markup escaped."""
    return escape(escape_controls(text))


# --- small formatters ---------------------------------------------------------------------------
def when(ms: int | None) -> str:
    """Epoch milliseconds as local time to the millisecond ('-' for none)."""
    if ms is None:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def clock(ms: int) -> str:
    """Epoch milliseconds as local time of day (for leases, which last hours at most)."""
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%H:%M:%S")


def duration(ms: int | None) -> str:
    """A duration in milliseconds, human-sized ('-' for none)."""
    if ms is None:
        return "-"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms" if ms < 1000 else f"{ms / 1000:g}s"


def payload_text(message: models.Message, width: int = PAYLOAD_WIDTH) -> str:
    """A message's payload as sent (control characters, line breaks among them, escaped),
    cut to ``width`` characters."""
    return _cut(escape_controls(payloads.text_of(message)), width)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def plural(n: int, word: str) -> str:
    """``1 message`` / ``2 messages``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _table(*columns: str, fold: Sequence[str] = ()) -> Table:
    """A table whose cells stay on one line, except those of the ``fold`` columns, which
    wrap onto more lines rather than be cut when the terminal is too narrow."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in columns:
        if name in fold:
            table.add_column(name, overflow="fold")
        else:
            table.add_column(name, no_wrap=True)
    return table


def _print_with_payload(
    c: Console, columns: Sequence[str], rows: Sequence[Sequence[str]],
    messages: Sequence[models.Message],
) -> None:
    """A table of ``rows`` plus a last payload column cut to the width left on the console.

    The other columns are measured first and kept whole (the ``id:token`` handle above all:
    commands need it), and the payload gets what remains. A terminal too narrow for that
    shows each message as a block of lines instead (nothing hidden but the end of a long
    payload). ``--wide``: nothing is cut.
    """
    widths = [max([len(col), *(len(r[i]) for r in rows)]) for i, col in enumerate(columns)]
    room = c.width - sum(widths) - 3 * len(columns)  # 3 = padding and rule
    if room < MIN_PAYLOAD_ROOM:
        for i, (row, message) in enumerate(zip(rows, messages, strict=True)):
            fields = list(zip(columns, row, strict=True))
            if i:
                c.print()
            c.print(_pairs([*fields, ("payload", payload_text(message, 4 * c.width))]))
        return
    table = _table(*columns, "payload")
    for row, message in zip(rows, messages, strict=True):
        table.add_row(*map(cell, row), escape(payload_text(message, room)))
    c.print(table)


def attributes_text(attributes: dict[str, str], width: int) -> str:
    """A message's attributes as ``k=v`` pairs (``-`` for none), cut to ``width``."""
    text = " ".join(f"{k}={v}" for k, v in attributes.items()) or "-"
    return _cut(escape_controls(text), width)


# --- queues -------------------------------------------------------------------------------------
def queues_table(queues: Sequence[models.Queue]) -> Callable[[Console], None]:
    """``queue list``: one row per queue."""

    def render(c: Console) -> None:
        if not queues:
            c.print("no queues", markup=False)
            return
        table = _table("name", "dlq", "visibility", "max attempts", "retention", "order", "archive")
        for q in queues:
            table.add_row(
                cell(q.name), cell(q.dlq or "-"), duration(q.visibility_ms),
                str(q.max_attempts), duration(q.retention_ms), q.order,
                "yes" if q.archive else "no",
            )
        c.print(table)

    return render


def _settings_rows(q: models.Queue) -> list[tuple[str, str]]:
    rows = [("name", q.name), ("dlq", q.dlq or "- (this is a dead-letter queue)")]
    for name in queue_settings.SETTING_NAMES:
        if name == "hmac_secret":  # write-only: never returned
            continue
        value = getattr(q, name)
        if name.endswith("_ms"):
            text = f"{value} ({duration(value)})" if value else str(value)
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        else:
            text = f"{value:g}" if isinstance(value, float) else str(value)
        rows.append((name, text))
    rows.append(("paused", "yes (polls get nothing)" if q.paused else "no"))
    rows.append(("created_at", when(q.created_at)))
    return rows


def _stats_rows(s: models.Stats) -> list[tuple[str, str]]:
    rows = []
    for name in s.__struct_fields__:
        value = getattr(s, name)
        if name == "queue":
            continue
        if name.endswith("_ms"):  # the value in the name's unit, and readably
            text = "-" if value is None else f"{value} ({duration(value)})"
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        else:
            text = str(value)
        rows.append((name, text))
    return rows


def _pairs(rows: Iterable[tuple[str, str]], title: str | None = None) -> Table:
    table = Table(box=None, show_header=False, pad_edge=False, title=title, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, cell(value))
    return table


def queue_detail(q: models.Queue) -> Callable[[Console], None]:
    """``queue add/update/show``: the settings, and the stats when present."""

    def render(c: Console) -> None:
        c.print(_pairs(_settings_rows(q)))
        if isinstance(q.stats, models.Stats):
            c.print()
            c.print(_pairs(_stats_rows(q.stats), title="stats"))

    return render


def stats_detail(s: models.Stats) -> Callable[[Console], None]:
    """``stats``: one line per counter."""
    return lambda c: c.print(_pairs([("queue", s.queue), *_stats_rows(s)]))


# --- messages -----------------------------------------------------------------------------------
def messages_table(
    messages: Sequence[models.Message], *, empty: str = "no messages", dlq: bool = False
) -> Callable[[Console], None]:
    """``peek`` / ``dlq list``: one row per message (no tokens)."""

    def render(c: Console) -> None:
        if not messages:
            c.print(empty, markup=False)
            return
        cut = c.width if c.width >= WIDE else None
        columns = ["id", "priority", "attempts", "enqueued", *(["last error"] if dlq else []),
                   "attributes"]
        rows = [
            [str(m.id), str(m.priority), str(m.attempts), when(m.enqueued_at),
             *([_cut(escape_controls(m.last_error or "-"), cut or 40)] if dlq else []),
             attributes_text(m.attributes, cut or ATTRIBUTES_WIDTH)]
            for m in messages
        ]
        _print_with_payload(c, columns, rows, messages)

    return render


def leased_table(messages: Sequence[models.LeasedMessage]) -> Callable[[Console], None]:
    """``message get/poll``: the ``id:token`` handle to ack with, then the message."""

    def render(c: Console) -> None:
        if not messages:
            c.print("no messages ready", markup=False)
            return
        cut = c.width if c.width >= WIDE else ATTRIBUTES_WIDTH
        rows = [[f"{m.id}:{m.token}", str(m.priority), str(m.attempts),
                 clock(m.lease_expires_at), attributes_text(m.attributes, cut)]
                for m in messages]
        _print_with_payload(
            c, ["id:token", "priority", "attempts", "lease until", "attributes"], rows, messages)

    return render


def message_detail(m: models.Message) -> Callable[[Console], None]:
    """``message peek``: every field of one message."""

    def render(c: Console) -> None:
        rows = [
            ("id", str(m.id)), ("queue", m.queue), ("priority", str(m.priority)),
            ("attempts", str(m.attempts)), ("enqueued_at", when(m.enqueued_at)),
            ("available_at", when(m.available_at)), ("expires_at", when(m.expires_at)),
            ("last_error", m.last_error or "-"),
            ("attributes", _encode(m.attributes).decode() if m.attributes else "-"),
            ("payload", payloads.text_of(m)),
        ]
        c.print(_pairs(rows))

    return render


def results_lines(results: Sequence[models.ItemResult]) -> Callable[[Console], None]:
    """``message ack/nack``: ``<id> <status>`` per item."""

    def render(c: Console) -> None:
        for r in results:
            c.print(f"{r.id} {r.status}", markup=False)

    return render


# --- API keys -----------------------------------------------------------------------------------
def _key_queue(key: models.ApiKey) -> str:
    return key.queue if key.queue is not None else "all queues"


def key_summary(key: models.ApiKey) -> str:
    """``keys create``: one line naming a key by its id (never the key itself; its name with
    control characters escaped)."""
    named = f" '{escape_controls(key.name)}'" if key.name is not None else ""
    kind = "SQS access key" if key.sqs else "API key"
    return (f"{kind} {key.id}{named}: scopes {','.join(key.scopes)} on {_key_queue(key)}")


def keys_table(keys: Sequence[models.ApiKey]) -> Callable[[Console], None]:
    """``keys list``: one row per key (never a key or its hash)."""

    def render(c: Console) -> None:
        if not keys:
            c.print("no API keys", markup=False)
            return
        # The id whole (`keys revoke` needs it); on a narrow terminal the scopes, the queue
        # and the name wrap onto more lines: nothing is cut.
        columns = ["id", "scopes", "queue", "created", "last used", "name"]
        rows = [[k.id, ", ".join(k.scopes) + (" (SQS)" if k.sqs else ""), _key_queue(k),
                 when(k.created_at)[:16], when(k.last_used_at)[:16], k.name or "-"]
                for k in keys]  # to the minute
        table = _table(*columns, fold=("scopes", "queue", "name"))
        table.columns[0].min_width = max(len(r[0]) for r in rows)
        for row in rows:
            table.add_row(*map(cell, row))
        c.print(table)

    return render
