"""``message enqueue --file``: stream newline-delimited JSON into a queue in batches.

The lines become messages that ``Client.enqueue_many`` (``sqew.client.bulk``) enqueues: it
validates each one, sends them in batches, isolates a message the queue refuses, and waits
out refusals that say "try again" under its retry policy. This module only reads the lines
(a blank one is skipped; an ``--envelope`` line is decoded into its fields), maps each
message back to its line number, and keeps the summary by line. Memory stays flat whatever
the file size: at most one batch's lines are held, results are only counted, and at most
``KEEP_FAILED`` failed lines are remembered (the rest only counted). Errors that are not about
a message (unknown queue, a refusal past the retry policy's bounds, database unavailable)
stop the run.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import FrameType
from typing import Any, NamedTuple

import msgspec
from rich.console import Console

from sqew import errors, jsonlimits, models
from sqew.cli.output import plural
from sqew.client import bulk
from sqew.client.base import Client, validation_error
from sqew.escapes import escape_controls

FILE_RETRY = bulk.RetryPolicy(retry_on=(errors.RateLimited, errors.Overloaded,
                                        errors.Unavailable))
"""``message enqueue --file``'s retries: a ``QueueFull`` ends the run at its line (a full
queue waits for a consumer, which a command at a terminal should not wait for silently)."""

BATCH_SIZE = bulk.BATCH_SIZE
KEEP_FAILED = 1000  # failed lines remembered with their error; beyond, only counted
SHOW_FAILED = 20  # failed lines listed in the human summary

_BATCH_INDEX = re.compile(r"^message \d+: ")
_BOM = b"\xef\xbb\xbf"


class LineError(NamedTuple):
    """A line that was not enqueued, and why."""

    line: int
    code: str
    message: str


class Summary:
    """Counts of one run, the failed lines (capped) and where it stopped, if it did."""

    def __init__(self) -> None:
        self.enqueued = 0
        self.duplicates = 0
        self.failed: list[LineError] = []
        self.failed_total = 0
        self.stopped_at: int | None = None  # first line not processed when the run stopped
        self.last_committed: int | None = None  # the last line whose batch was committed
        self.interrupted = False  # stopped by a signal (Ctrl-C, SIGTERM)
        self.in_doubt: tuple[int, int] | None = None  # lines of a batch cut short, first-last

    def fail(self, line: int, code: str, message: str) -> None:
        """Record that ``line`` failed with the error ``code`` and its ``message``."""
        self.failed_total += 1
        if len(self.failed) < KEEP_FAILED:
            self.failed.append(LineError(line, code, _BATCH_INDEX.sub("", message)))

    def to_json(self) -> dict[str, Any]:
        """``{"enqueued", "duplicates", "failed": [{"line", "error": {"code", "message"}}]}``.

        ``failed_not_listed`` is added only when more than ``KEEP_FAILED`` lines failed;
        ``interrupted`` and ``last_committed_line`` only when a signal stopped the run, and
        ``lines_in_doubt`` (``[first, last]``) when a second one cut a batch short.
        """
        body: dict[str, Any] = {
            "enqueued": self.enqueued,
            "duplicates": self.duplicates,
            "failed": [
                {"line": f.line, "error": {"code": f.code, "message": f.message}}
                for f in sorted(self.failed)
            ],
        }
        if self.failed_total > len(self.failed):
            body["failed_not_listed"] = self.failed_total - len(self.failed)
        if self.interrupted:
            body["interrupted"] = True
            body["last_committed_line"] = self.last_committed
        if self.in_doubt is not None:
            body["lines_in_doubt"] = list(self.in_doubt)
        return body

    def render(self, queue: str) -> Callable[[Console], None]:
        """The human summary: counts, then the first failed lines with their errors."""

        def show(c: Console) -> None:
            dup = f" ({plural(self.duplicates, 'duplicate')})"
            c.print(f"enqueued {plural(self.enqueued, 'message')} to {queue}"
                    + (dup if self.duplicates else ""), markup=False, soft_wrap=True)
            if self.interrupted:
                c.print(self._interrupted_text(), markup=False, soft_wrap=True)
            if not self.failed_total:
                return
            c.print(f"failed {plural(self.failed_total, 'line')}:", markup=False,
                    soft_wrap=True)
            for f in sorted(self.failed)[:SHOW_FAILED]:
                c.print(f"  line {f.line}: {f.code}: {escape_controls(f.message)}",
                        markup=False, soft_wrap=True)
            more = self.failed_total - min(len(self.failed), SHOW_FAILED)
            if more:
                c.print(f"  … and {more} more (use --json to list up to {KEEP_FAILED})",
                        markup=False, soft_wrap=True)

        return show

    def _interrupted_text(self) -> str:
        if self.in_doubt is not None:
            first, last = self.in_doubt
            before = ("" if self.last_committed is None else
                      f"; the last line committed before them is line {self.last_committed}")
            return (f"stopped at once while lines {first} to {last} were being sent: they may "
                    f"or may not have been enqueued{before}; the lines after line {last} were "
                    "not enqueued")
        if self.last_committed is None:
            return "interrupted before any line was committed"
        return (f"interrupted: the last line committed is line {self.last_committed}; "
                "the lines after it were not enqueued")


def parse_envelope(line: bytes, max_depth: int = jsonlimits.MAX_DEPTH) -> dict[str, Any]:
    """One ``--envelope`` line: a message object with the API's fields.

    It is decoded straight into ``MessageIn`` — the validation ``message_from_mapping`` does,
    with unknown fields rejected — so the payload keeps its exact text. ``max_depth`` is the
    deepest payload accepted (see ``parse_plain``).
    """
    _check_utf8(line)
    jsonlimits.check_depth(line, max_depth, levels=jsonlimits.MESSAGE_LEVELS)
    try:
        m = msgspec.json.decode(line, type=models.MessageIn)
    except msgspec.ValidationError as exc:
        raise validation_error(exc) from None
    except msgspec.DecodeError as exc:
        raise errors.ValidationError(f"invalid JSON: {exc}") from None
    fields = {"payload": m.payload, "priority": m.priority, "delay_ms": m.delay_ms,
              "ttl_ms": m.ttl_ms, "idempotency_key": m.idempotency_key,
              "attributes": m.attributes, "traceparent": m.traceparent,
              "tracestate": m.tracestate}
    return {k: v for k, v in fields.items() if v is not None}


def envelope_fields(line: bytes) -> dict[str, Any]:
    """One ``--file --envelope`` line: a JSON object of the API's message fields, as a
    mapping for ``Client.enqueue_many`` (which checks them), its payload kept as its text.

    Raises:
        sqew.errors.ValidationError: not UTF-8, or not a JSON object.
    """
    # First: msgspec decodes a field's name without the UTF-8 check it gives values, and an
    # invalid one would end the whole run with a UnicodeDecodeError instead of failing a line.
    _check_utf8(line)
    try:
        fields = _object(line)
        return {k: v if k == "payload" else _field(k, v) for k, v in fields.items()}
    except msgspec.ValidationError:
        raise errors.ValidationError(
            "the line is not a JSON object of the message's fields (payload, priority, …)"
        ) from None
    except msgspec.DecodeError as exc:
        raise errors.ValidationError(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise errors.ValidationError("the line is nested too deep to read") from None


_object = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode


def _field(name: str, raw: msgspec.Raw) -> Any:
    """A field other than the payload, decoded (no field of a message is nested deep)."""
    text = bytes(raw)
    jsonlimits.check_depth(text, 1, what=name, field=name)
    return msgspec.json.decode(text)


def _check_utf8(line: bytes) -> None:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.ValidationError(f"line is not valid UTF-8 (byte {exc.start + 1})") from None


class InterruptGuard:
    """Holds back Ctrl-C (SIGINT) and SIGTERM while a batch is sent and counted.

    A signal that arrives while the service commits a batch is acted on once the result is
    counted, so the summary printed then tells exactly what was committed. Anywhere else
    (reading input, waiting out a rate limit), and for a second signal, ``KeyboardInterrupt``
    is raised at once. ``signum`` is the signal that stopped the run; ``cut_short`` says a
    second one stopped it in the middle of a batch, which may or may not have been committed.
    A signal ignored when sqew started (a background job's SIGINT) stays ignored.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self._holding = False
        self._pending = False
        self.signum: int | None = None
        self.cut_short = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[InterruptGuard]:
        """Route SIGINT and SIGTERM through this guard for the duration (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous: dict[int, Any] = {}
        try:
            for sig in self.SIGNALS:
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    previous[sig] = signal.signal(sig, self._on_signal)
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        if self._holding and not self._pending:
            self._pending = True
            return
        self.cut_short = self._holding
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A block that a signal does not cut short; a held one is raised at its end."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
            if self._pending:
                self._pending = False
                raise KeyboardInterrupt


class FileEnqueuer:
    """Enqueues the lines of one NDJSON stream through ``Client.enqueue_many``.

    Args:
        client: where to enqueue.
        queue: the queue's name.
        envelope: lines are message objects (else payloads).
        defaults: fields for plain-payload lines (priority, delay_ms, ttl_ms, attributes).
        batch_size: messages per batch.
        sleep: how to wait before a refused batch is sent again.
        guard: holds Ctrl-C back while a batch is sent and counted (none by default).
        retry: the retry policy (by default ``FILE_RETRY``: the library's, except that a
            full queue stops the run rather than waiting for a consumer).
    """

    def __init__(
        self,
        client: Client,
        queue: str,
        *,
        envelope: bool = False,
        defaults: Mapping[str, Any] | None = None,
        batch_size: int = BATCH_SIZE,
        sleep: Callable[[float], None] = time.sleep,
        guard: InterruptGuard | None = None,
        retry: bulk.RetryPolicy | None = None,
    ) -> None:
        self.client = client
        self.queue = queue
        self.envelope = envelope
        self.defaults = dict(defaults or {})
        self.batch_size = batch_size
        self.sleep = sleep
        self.retry = retry or FILE_RETRY
        self.guard = guard or InterruptGuard()  # not installed: holds nothing back
        self.summary = Summary()
        self._lines: dict[int, int] = {}  # message index → its line, until it is settled
        self._sending: tuple[int, int] | None = None  # lines of the batch sent last

    def run(self, lines: Iterable[bytes], advance: Callable[[int], None] | None = None) -> Summary:
        """Enqueue every good line; returns the summary.

        Raises:
            sqew.errors.SqewError: an error not caused by one message stopped the run;
                ``self.summary`` holds what was done and ``stopped_at`` the first line not done.
        """
        run = bulk.BulkEnqueue(
            self.client, self.queue, batch_size=self.batch_size, on_progress=self._settled,
            retry=self.retry, skip_invalid=True, keep_failed=0, hold=self._hold,
            sleep=self.sleep)
        try:
            run.run(self._messages(lines, advance))
        except errors.SqewError:
            self.summary.stopped_at = min(self._lines.values(), default=None)
            raise
        return self.summary

    def _messages(
        self, lines: Iterable[bytes], advance: Callable[[int], None] | None
    ) -> Iterator[Mapping[str, Any]]:
        """The messages of the good lines, each index noted with its line number."""
        index = 0
        for number, raw in enumerate(lines, 1):
            if advance is not None:
                advance(len(raw))
            text = raw.strip()
            if number == 1 and text.startswith(_BOM):
                text = text[len(_BOM):].strip()
            if not text:
                continue
            if self.envelope:
                try:
                    message = envelope_fields(text)
                except errors.SqewError as exc:
                    self.summary.fail(number, exc.code, exc.message)
                    continue
            else:  # checked by the client, as every payload is
                message = {"payload": msgspec.Raw(text), **self.defaults}
            self._lines[index] = number
            index += 1
            yield message

    @contextlib.contextmanager
    def _hold(self, indexes: list[int]) -> Iterator[None]:
        self._sending = (self._lines[indexes[0]], self._lines[indexes[-1]])
        with self.guard.held():
            yield

    def _settled(self, progress: bulk.Progress) -> None:
        numbers = [self._lines.pop(i) for i in progress.indexes]
        failure = progress.failure
        if failure is not None:
            self.summary.fail(numbers[0], failure.code, failure.message)
            return
        for r in progress.results:
            if r.duplicate:
                self.summary.duplicates += 1
            else:
                self.summary.enqueued += 1
        self.summary.last_committed = max(numbers)

    def interrupted(self) -> None:
        """Record in the summary that a signal stopped the run (and, if a second one cut a
        batch short, which lines may or may not have been enqueued)."""
        self.summary.interrupted = True
        committed = self.summary.last_committed or 0
        if self.guard.cut_short and self._sending is not None and self._sending[0] > committed:
            self.summary.in_doubt = self._sending
