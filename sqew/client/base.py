"""The Client contract (docs/rest.md, "From Python"): one method per REST endpoint, typed
results, SqewError on failure; and what is built on them for every client (``enqueue_many``,
``export``).

``LocalClient`` (a database file or URL, in-process) and ``HttpClient`` (a server) both satisfy
it, so the CLI, the Spark data source and the tests are written once against this protocol.
"""

from __future__ import annotations

import abc
import importlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from sqew import jsonlimits, models
from sqew.client import bulk
from sqew.client.streams import MessageStream
from sqew.client.validation import validation_error as validation_error  # re-exported

# Where ``Client(target)`` finds each implementation, imported by name on first use (as the
# ``sqew`` package finds its exports): the contract does not depend on its implementations,
# a file never loads the HTTP client and a URL never loads the database drivers.
_URL_CLIENT = ("sqew.client.http", "HttpClient")
_FILE_CLIENT = ("sqew.client.local", "LocalClient")


class Client(abc.ABC):
    """What every sqew client offers. Methods raise ``sqew.errors.SqewError`` subclasses.

    ``Client(target)`` picks the implementation: an ``http://``/``https://`` URL gives an
    ``HttpClient``; a file path, ``sqlite:///…`` or database URL gives a ``LocalClient``.
    ``Client(target, hmac_secret=...)`` signs every enqueue to a server (a queue with an
    ``hmac_secret`` requires it); on a file it is accepted and nothing is checked (the file's
    owner is trusted). ``sqew.verify_signature`` checks a leased message's ``signature``.

    Attributes:
        max_json_depth: the deepest payload this client enqueues (``sqew.jsonlimits``): the
            default on a database; for a server, the most any server allows, as the server
            applies its own ``max_json_depth``.
    """

    max_json_depth: int = jsonlimits.DEFAULT_MAX_DEPTH

    def __new__(
        cls, target: str | os.PathLike[str] = "sqew.db", *args: Any, **kwargs: Any
    ) -> Client:
        if cls is Client:
            url = os.fspath(target).startswith(("http://", "https://"))
            module, name = _URL_CLIENT if url else _FILE_CLIENT
            cls = getattr(importlib.import_module(module), name)
        return super().__new__(cls)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def create_queue(self, name: str, **settings: Any) -> models.Queue:
        """Create queue ``name`` (and its DLQ ``name.dlq``) with optional settings."""
        raise NotImplementedError

    @abc.abstractmethod
    def list_queues(self) -> list[models.Queue]:
        """All queues, DLQs included, by name."""
        raise NotImplementedError

    @abc.abstractmethod
    def get_queue(self, name: str) -> models.Queue:
        """One queue with its ``stats``."""
        raise NotImplementedError

    @abc.abstractmethod
    def update_queue(self, name: str, **settings: Any) -> models.Queue:
        """Change settings of a queue; returns the updated queue."""
        raise NotImplementedError

    @abc.abstractmethod
    def pause_queue(self, name: str) -> models.Queue:
        """Pause delivery: enqueues go on, polls return nothing (long polls wait) until
        ``resume_queue``; returns the queue (``paused`` true). Pausing twice is harmless."""
        raise NotImplementedError

    @abc.abstractmethod
    def resume_queue(self, name: str) -> models.Queue:
        """Resume a paused queue's delivery (waiting long polls get its messages); returns the
        queue (``paused`` false). Resuming a queue that is not paused is harmless."""
        raise NotImplementedError

    @abc.abstractmethod
    def delete_queue(self, name: str) -> None:
        """Remove a queue, its DLQ and their messages."""
        raise NotImplementedError

    @abc.abstractmethod
    def enqueue(
        self,
        queue: str,
        payload: Any,
        *,
        priority: int | None = None,
        delay_ms: int | None = None,
        ttl_ms: int | None = None,
        idempotency_key: str | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> models.EnqueueResult:
        """Enqueue one message whose payload is any JSON-serialisable value."""
        raise NotImplementedError

    @abc.abstractmethod
    def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> list[models.EnqueueResult]:
        """Enqueue up to 1000 messages (dicts with ``payload`` and optional fields), all or none."""
        raise NotImplementedError

    @abc.abstractmethod
    def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        """Enqueue messages already validated (``sqew.client.arguments``), all or none."""
        raise NotImplementedError

    def enqueue_many(
        self,
        queue: str,
        messages: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = bulk.BATCH_SIZE,
        on_progress: Callable[[bulk.Progress], None] | None = None,
        retry: bulk.RetryPolicy | None = None,
        skip_invalid: bool = False,
        keep_failed: int = bulk.KEEP_FAILED,
    ) -> bulk.EnqueueSummary:
        """Enqueue any number of messages in batches, waiting out refusals that say "try
        again" (``sqew.client.bulk``).

        ``messages`` (read lazily, so any iterable, however long) are mappings as in
        ``enqueue_batch``. Each batch is all or none; the call as a whole is not.

        Args:
            queue: the queue's name.
            messages: the messages, each with ``payload`` and optional fields.
            batch_size: messages per request (1 to 1000).
            on_progress: called with a ``bulk.Progress`` each time messages are settled: a
                batch enqueued (with its results) or a message failed.
            retry: when and how long a refused batch is sent again (default
                ``bulk.RetryPolicy()``: up to 10 tries within 120 s per batch, backoff from
                0.5 s doubling to at most 30 s, ``Retry-After`` honoured).
            skip_invalid: a message that is not valid, or that the queue refuses on its own
                (too large, say), is recorded in the summary's ``failed`` and the rest go
                on; False: it raises, naming it (``message <index>: …``), with the batches
                before its own enqueued.
            keep_failed: failures kept in the summary's ``failed`` (all are counted).

        Returns:
            The counts: enqueued, duplicates, failed, retries.

        Raises:
            sqew.errors.SqewError: an error that does not say "try again" (``QueueNotFound``,
                ``Forbidden``, ``Unavailable`` with no ``Retry-After``…), a refusal still
                repeated when the retry policy's bounds are reached, or (``skip_invalid``
                False) an invalid message; the batches before it are enqueued.
        """
        return bulk.BulkEnqueue(
            self, queue, batch_size=batch_size, on_progress=on_progress, retry=retry,
            skip_invalid=skip_invalid, keep_failed=keep_failed).run(messages)

    @abc.abstractmethod
    def poll(
        self,
        queue: str,
        *,
        batch: int = 1,
        wait_ms: int = 0,
        visibility_ms: int | None = None,
        order: str = "priority",
    ) -> list[models.LeasedMessage]:
        """Lease up to ``batch`` ready messages, waiting up to ``wait_ms`` for one to arrive;
        ``order="shuffle"`` leases random ready messages instead of the head of the queue."""
        raise NotImplementedError

    @abc.abstractmethod
    def stream(
        self, queue: str, *, max_in_flight: int = models.DEFAULT_STREAM_IN_FLIGHT,
        visibility_ms: int | None = None,
    ) -> MessageStream:
        """Iterate the queue's messages, each leased as it becomes ready, never more than
        ``max_in_flight`` of them unacknowledged (ack or nack to free a slot; a lease that
        ends frees one too). Over HTTP it reads the server's event stream; on a database it
        runs long polls. Closing it (``close()``, or use it in ``with``) gives back the
        leases it still holds: ready again at once, their attempts not counted."""
        raise NotImplementedError

    @abc.abstractmethod
    def ack(self, queue: str, id: int, token: str) -> models.ItemResult:
        """Acknowledge one message; raises LeaseLost / MessageNotFound on failure."""
        raise NotImplementedError

    @abc.abstractmethod
    def ack_batch(self, queue: str, acks: Iterable[tuple[int, str]]) -> list[models.ItemResult]:
        """Acknowledge many ``(id, token)`` pairs; per-item statuses, never raises per item."""
        raise NotImplementedError

    @abc.abstractmethod
    def nack(
        self,
        queue: str,
        id: int,
        token: str,
        *,
        delay_ms: int | None = None,
        error: str | None = None,
        dead_letter: bool = False,
    ) -> models.ItemResult:
        """Release a lease for a retry (or dead-letter it at ``max_attempts``); with
        ``dead_letter``, move it to the DLQ at once with ``error`` (a permanent failure)."""
        raise NotImplementedError

    @abc.abstractmethod
    def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> list[models.ItemResult]:
        """Nack many (dicts with ``id``, ``token``, optional ``delay_ms``, ``error``,
        ``dead_letter``)."""
        raise NotImplementedError

    @abc.abstractmethod
    def extend_lease(self, queue: str, id: int, token: str, ms: int) -> models.LeaseExtended:
        """Set the lease of a held message to expire ``ms`` from now."""
        raise NotImplementedError

    @abc.abstractmethod
    def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> list[models.ItemResult]:
        """Extend many held leases at once, each ``(id, token, ms)`` (up to 1000): per item
        ``extended`` with its ``lease_expires_at``, ``lease_lost`` or ``not_found``; never
        raises per item. The keep-alive of a consumer holding many messages."""
        raise NotImplementedError

    @abc.abstractmethod
    def stats(self, queue: str) -> models.Stats:
        """Depths and counters of a queue."""
        raise NotImplementedError

    @abc.abstractmethod
    def peek(self, queue: str, *, limit: int = 10) -> list[models.Message]:
        """The next ready messages, without leasing them."""
        raise NotImplementedError

    @abc.abstractmethod
    def get_message(self, queue: str, id: int) -> models.Message:
        """One message by id."""
        raise NotImplementedError

    @abc.abstractmethod
    def remove_message(self, queue: str, id: int) -> None:
        """Delete one message by id."""
        raise NotImplementedError

    @abc.abstractmethod
    def purge(self, queue: str) -> int:
        """Delete every message of a queue; returns how many."""
        raise NotImplementedError

    @abc.abstractmethod
    def dlq_list(
        self, queue: str, *, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        """Messages in the queue's DLQ, by id, after ``after_id``."""
        raise NotImplementedError

    @abc.abstractmethod
    def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> models.ScanPage:
        """One page of the queue's messages by id, ``after_id < id <= max_id``, each with its
        ``state``, without leasing or changing anything.

        ``source``: ``queue`` (every message, leased ones included), ``dlq`` or ``archive``
        (acked messages kept when the queue's ``archive`` is on). ``next_after_id`` is the
        ``after_id`` of the next page, None after the last.
        """
        raise NotImplementedError

    def export(
        self, queue: str, *, source: str = "queue", batch: int = 1000
    ) -> Iterator[models.ScannedMessage]:
        """Every message of ``source`` by id, a page (``batch`` messages) at a time.

        The highest id is fixed by the first page, so an export of a queue that keeps growing
        still ends: messages enqueued after it started are not included; messages removed
        meanwhile may be.
        """
        page = self.scan(queue, source=source, limit=batch)
        max_id = page.high_water_id  # fixed by the first page
        while True:
            yield from page.messages
            if page.next_after_id is None or not isinstance(max_id, int):
                return
            page = self.scan(queue, source=source, after_id=page.next_after_id,
                             max_id=max_id, limit=batch)

    @abc.abstractmethod
    def dlq_requeue(
        self, queue: str, ids: Iterable[int] | None = None
    ) -> models.Requeued:
        """Move DLQ messages (all, or ``ids``) back to the queue with attempts reset.

        As many move as the queue's ``max_depth`` admits, the smallest ids first:
        ``.requeued`` says how many moved, ``.left`` how many stay in the DLQ for want of
        room. A DLQ message a consumer holds a live lease on stays until that lease ends; an
        expired one never moves.
        """
        raise NotImplementedError

    @abc.abstractmethod
    def dlq_purge(self, queue: str) -> int:
        """Delete every message of the queue's DLQ."""
        raise NotImplementedError

    @abc.abstractmethod
    def compact(self, queue: str) -> int:
        """Remove expired messages and tombstones, then let the database reclaim space."""
        raise NotImplementedError

    @abc.abstractmethod
    def create_key(
        self, scopes: Iterable[str], *, name: str | None = None, queue: str | None = None,
        sqs: bool = False,
    ) -> models.KeyCreated:
        """Mint an API key with ``scopes`` (``produce``, ``consume``, ``admin``), optionally
        named and bound to one queue (and its DLQ).

        The answer's ``key`` is the only time the key itself is seen: only its hash is stored.
        ``sqs``: an SQS access key instead (docs/sqs.md, "Authentication"): ``id`` is its
        access key id and ``key`` its secret access key, for an AWS SDK's SigV4 signatures.
        ``scopes`` is a list of scope names (a single name may be given as a string).

        Raises:
            sqew.errors.ValidationError: no scopes, an unknown or repeated scope, a bad name.
            sqew.errors.QueueNotFound: ``queue`` does not exist.
        """
        raise NotImplementedError

    @abc.abstractmethod
    def list_keys(self) -> list[models.ApiKey]:
        """Every API key, oldest first: id, name, queue, scopes, times (never a key or its
        hash)."""
        raise NotImplementedError

    @abc.abstractmethod
    def revoke_key(self, id: str) -> None:
        """Remove the API key with this id; raises ``NotFound`` if there is none."""
        raise NotImplementedError

    @abc.abstractmethod
    def health(self) -> models.Health:
        """``{"status": "ok"}`` when the database answers."""
        raise NotImplementedError

    @abc.abstractmethod
    def metrics(self) -> str:
        """Metrics in the Prometheus text format: a server's ``/metrics``; on a database, the
        queues' depths and counters read from it (docs/operations.md)."""
        raise NotImplementedError

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""
        raise NotImplementedError
