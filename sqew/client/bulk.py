"""``Client.enqueue_many``: any number of messages, in batches, with one retry policy.

The messages are read lazily from any iterable, so memory stays flat whatever their number:
at most one batch is held, results are counted (and handed to ``on_progress``), and at most
``keep_failed`` failures are remembered. Each message is validated on its own as it is read
(``sqew.client.arguments``, the one place every client checks a message): an invalid one is
never sent. A batch the service refuses for one message's sake (a payload over the queue's
``max_payload_bytes``, a ``delay_ms`` beyond its retention) is sent again one message at a
time, so that only that message fails.

**Retries** (``RetryPolicy``): a batch refused with "try again" — ``RateLimited``,
``QueueFull`` or ``Overloaded`` (HTTP 429, 503), or ``Unavailable`` carrying a ``Retry-After``
(a server that refused it, not one that did not answer) — is sent again after a wait: the
``Retry-After`` the error carries when it is longer, else an exponential backoff. A batch is
all or none, so sending it again cannot enqueue a message twice. The retries of one batch are
bounded by a number of tries and by the time since its first try; past either, the last
refusal is raised. Any other error (an unknown queue, a key without the ``produce`` scope, a
server that cannot be reached) stops at once: the messages before the failing batch are
enqueued, as ``on_progress`` reported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol

import msgspec

from sqew import errors, models
from sqew.client.arguments import each_message_in

BATCH_SIZE = 500
KEEP_FAILED = 1000

# Refusals of one message of a batch: sending the batch message by message isolates it.
_PER_MESSAGE = (errors.ValidationError, errors.PayloadTooLarge, errors.InvalidRequest)
_BATCH_INDEX = re.compile(r"^message \d+: ")


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """When and how long ``enqueue_many`` sends a refused batch again.

    Attributes:
        max_attempts: tries of one batch, the first included (1: never retry).
        max_elapsed_s: seconds from a batch's first try after which it is not tried again
            (a wait that would end later is not begun).
        initial_delay_s: the wait before the first retry; it doubles at each retry...
        max_delay_s: ... up to this (a longer ``Retry-After`` is still honoured).
        jitter: up to this fraction is added to a backoff at random, so that many writers
            refused at once do not come back at once.
        retry_on: the errors that say "try again"; ``Unavailable`` is retried only when it
            carries a ``Retry-After`` (without one, the server may not have answered at all).
    """

    max_attempts: int = 10
    max_elapsed_s: float = 120.0
    initial_delay_s: float = 0.5
    max_delay_s: float = 30.0
    jitter: float = 0.1
    retry_on: tuple[type[errors.SqewError], ...] = (
        errors.RateLimited, errors.QueueFull, errors.Overloaded, errors.Unavailable)

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.max_elapsed_s < 0 or self.initial_delay_s < 0 \
                or self.max_delay_s < 0 or self.jitter < 0:
            raise errors.ValidationError(
                "retry: max_attempts must be at least 1, and the times and jitter not negative")

    def retries(self, exc: errors.SqewError) -> bool:
        """Whether ``exc`` says to send the same batch again."""
        if not isinstance(exc, self.retry_on):
            return False
        return not isinstance(exc, errors.Unavailable) or exc.retry_after is not None

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """The wait before retry number ``retry`` (1 for the first)."""
        backoff = min(self.max_delay_s, self.initial_delay_s * 2.0 ** (retry - 1))
        backoff *= 1 + self.jitter * rng.random()
        return max(backoff, retry_after or 0.0)


class Failure(msgspec.Struct, frozen=True):
    """A message that was not enqueued: its index in the input and the error's code and
    message (``message <i>:`` left out: ``index`` says which)."""

    index: int
    code: str
    message: str


class EnqueueSummary(msgspec.Struct):
    """What ``enqueue_many`` did.

    Attributes:
        enqueued: messages newly enqueued.
        duplicates: messages answered as duplicates (an ``idempotency_key`` seen within the
            queue's ``dedup_window_ms``): not enqueued again.
        failed: the messages not enqueued, by index (the first ``keep_failed`` of them).
        failed_total: how many were not enqueued.
        retries: refused tries that were waited out and sent again.
    """

    enqueued: int = 0
    duplicates: int = 0
    failed: list[Failure] = msgspec.field(default_factory=list)
    failed_total: int = 0
    retries: int = 0


class Progress(NamedTuple):
    """Messages settled at once (one batch enqueued, or one message failed), handed to
    ``on_progress``.

    Attributes:
        indexes: the messages' indexes in the input, ascending.
        results: for an enqueued batch, one per message as ``enqueue_batch`` reports them
            (its id, and whether it was a duplicate); empty for a failed message.
        failure: the one message that was not enqueued, and why; else None.
        summary: the totals so far (a copy).
    """

    indexes: list[int]
    results: list[models.EnqueueResult]
    failure: Failure | None
    summary: EnqueueSummary


class Sender(Protocol):
    """What a run needs of its client (every ``sqew.Client`` is one)."""

    max_json_depth: int

    def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]: ...


Hold = Callable[[list[int]], contextlib.AbstractContextManager[object]]
"""A block around each send of the messages of these indexes, its count and its progress."""


class BulkEnqueue:
    """One ``enqueue_many`` run (see the module docstring and ``Client.enqueue_many``).

    Args:
        hold: entered around each send, its count and its ``on_progress`` (the CLI holds
            Ctrl-C back there, so that its summary is exact).
        sleep, clock, rng: how to wait, measure time and draw jitter.
    """

    def __init__(
        self, client: Sender, queue: str, *, batch_size: int = BATCH_SIZE,
        on_progress: Callable[[Progress], None] | None = None,
        retry: RetryPolicy | None = None, skip_invalid: bool = False,
        keep_failed: int = KEEP_FAILED, hold: Hold | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None,
    ) -> None:
        if not 1 <= batch_size <= models.MAX_BATCH_ENQUEUE:
            raise errors.ValidationError(
                f"batch_size must be between 1 and {models.MAX_BATCH_ENQUEUE}",
                details=[{"field": "batch_size", "message": "out of range"}])
        self.client, self.queue, self.batch_size = client, queue, batch_size
        self.on_progress = on_progress
        self.retry = retry or RetryPolicy()
        self.skip_invalid, self.keep_failed = skip_invalid, keep_failed
        self.hold: Hold = hold or (lambda indexes: contextlib.nullcontext())
        self.sleep, self.clock, self.rng = sleep, clock, rng or random.Random()
        self.summary = EnqueueSummary()

    def run(self, messages: Iterable[Mapping[str, Any]]) -> EnqueueSummary:
        """Enqueue every valid message of ``messages``; the summary."""
        for batch in self._batches(messages):
            self._flush(batch)
        return self.summary

    def _batches(
        self, messages: Iterable[Mapping[str, Any]]
    ) -> Iterator[list[tuple[int, models.MessageIn]]]:
        """Valid messages in batches of at most ``batch_size``, with their indexes; the
        invalid ones of a batch's worth are failed before it is sent."""
        depth = self.client.max_json_depth
        pending: list[tuple[int, Mapping[str, Any]]] = []
        for index, message in enumerate(messages):
            pending.append((index, message))
            if len(pending) == self.batch_size:
                yield from self._valid(pending, depth)
                pending = []
        if pending:
            yield from self._valid(pending, depth)

    def _valid(
        self, pending: list[tuple[int, Mapping[str, Any]]], depth: int
    ) -> Iterator[list[tuple[int, models.MessageIn]]]:
        checked = each_message_in([m for _, m in pending], max_json_depth=depth)
        good: list[tuple[int, models.MessageIn]] = []
        for (index, _), message in zip(pending, checked, strict=True):
            if isinstance(message, errors.SqewError):
                self._fail(index, message)
            else:
                good.append((index, message))
        if good:
            yield good

    def _flush(self, batch: list[tuple[int, models.MessageIn]]) -> None:
        """Send ``batch``; refused for one message's sake, send it message by message."""
        try:
            self._send(batch)
        except _PER_MESSAGE as exc:
            if len(batch) == 1:
                self._fail(batch[0][0], exc)
                return
            for item in batch:
                self._flush([item])

    def _send(self, batch: list[tuple[int, models.MessageIn]]) -> None:
        """Enqueue one batch and count it, sending it again while it is refused with "try
        again" (``RetryPolicy``)."""
        indexes = [i for i, _ in batch]
        messages = [m for _, m in batch]
        first_try = self.clock()
        tries = 0
        while True:
            tries += 1
            try:
                with self.hold(indexes):
                    results = self.client._enqueue_checked(self.queue, messages)
                    self._settled(indexes, results, None)
                return
            except errors.SqewError as exc:
                if not self.retry.retries(exc):
                    raise
                wait = self.retry.delay(tries, exc.retry_after, self.rng)
                elapsed = self.clock() - first_try
                if tries >= self.retry.max_attempts or elapsed + wait > self.retry.max_elapsed_s:
                    raise type(exc)(
                        f"{exc.message} (gave up after {tries} tries in {elapsed:.1f} s)",
                        details=exc.details, retry_after=exc.retry_after) from exc
            self.summary.retries += 1
            self.sleep(wait)

    def _fail(self, index: int, exc: errors.SqewError) -> None:
        reason = _BATCH_INDEX.sub("", exc.message)
        if not self.skip_invalid:
            raise type(exc)(f"message {index}: {reason}", details=exc.details) from None
        self._settled([index], [], Failure(index, exc.code, reason))

    def _settled(
        self, indexes: list[int], results: list[models.EnqueueResult], failure: Failure | None
    ) -> None:
        summary = self.summary
        if failure is not None:
            summary.failed_total += 1
            if len(summary.failed) < self.keep_failed:
                summary.failed.append(failure)
        duplicates = sum(1 for r in results if r.duplicate)
        summary.duplicates += duplicates
        summary.enqueued += len(results) - duplicates
        if self.on_progress is not None:
            snapshot = msgspec.structs.replace(summary, failed=summary.failed.copy())
            self.on_progress(Progress(indexes, results, failure, snapshot))
