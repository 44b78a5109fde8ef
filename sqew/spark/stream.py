"""Streaming read: ``spark.readStream.format("sqew")`` consumes a queue at least once
(docs/spark.md).

Why PySpark's *simple* stream reader: consuming a queue means leasing, and a lease is acked with
the token the poll returned. ``SimpleDataSourceStreamReader.read(start)`` and ``commit(end)``
both run in one long-lived Python process on the driver, so the reader that leased a batch
holds its tokens and acks them when Spark commits that batch — nothing secret goes into the
checkpoint's offsets. With the partitioned ``DataSourceStreamReader`` the executors would
poll, and the driver's ``commit`` would have no tokens to ack (or the offsets would have to
carry every token). The cost: one process leases every message (fine for the queue's own
rates; a snapshot read is the parallel path for bulk).

Offsets are ``{"batch": n}``, a counter of non-empty micro-batches. ``read(start)`` leases up
to ``maxMessagesPerBatch`` messages (polls of at most 100) and returns them with the end offset
``n + 1``. A daemon thread keeps the leases of every batch not yet acked (from its first poll
on) alive, so a slow or large batch does not lose them: a pass extends them all in calls of up
to 1000 (``Client.extend_leases``), and passes follow each other so that every lease is renewed
about every ``visibilityMs / 3``, sooner by as long as a pass takes (``options`` refuses a
``visibilityMs`` too short for ``maxMessagesPerBatch``; a pass that takes longer than a third
of a lease is logged).

When to ack: Spark calls ``commit(end)`` on a source only while it constructs the *next* batch
(MicroBatchExecution commits batch N-1's offsets after logging batch N), so on a queue that has
gone quiet the last batch would stay leased for ever. But Spark asks for the next offset
(``read(start)``) only after the batch ending at ``start`` has run and been written to the
checkpoint's commit log, one batch at a time; so ``read(start)`` first acks every batch up to
``start``, and ``commit(end)`` does the same for whatever is left. (Not safe with the
experimental ``asyncProgressTrackingEnabled``, which plans ahead of the commit log: unsupported.)

Restarting from a checkpoint: a batch whose offset was logged but not committed is replayed by
Spark with ``readBetweenOffsets(start, end)``, on an executor, after the process that leased it
is gone. Its messages cannot be read back from the queue (they are still leased by the dead
reader), so the replay is empty and they come back in a later batch once their leases expire
(``visibilityMs``): at-least-once, and a message written to the sink before the stop appears
twice (de-duplicate by ``id``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import SimpleDataSourceStreamReader

from sqew import models, payloads
from sqew.client.base import Client
from sqew.spark.options import EXTEND_CHUNK, KEEP_ALIVE_PASSES, SourceOptions

log = logging.getLogger("sqew.spark")

POLL_BATCH = models.MAX_POLL_BATCH


def leased_row(m: models.LeasedMessage) -> tuple[Any, ...]:
    """A leased message as a row of ``schema.MESSAGE_SCHEMA``."""
    return (m.id, m.queue, "leased", payloads.text_of(m), m.priority, m.attributes,
            m.attempts, m.enqueued_at, m.available_at, m.expires_at, m.last_error)


class SqewStreamReader(SimpleDataSourceStreamReader):
    """Leases micro-batches on the driver and acks each when Spark commits it."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client: Client | None = None
        self._lock = threading.Lock()
        self._pending: dict[int, list[tuple[int, str]]] = {}  # batch → its (id, token)
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Pickled to an executor for readBetweenOffsets: the options are all it needs.
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    def _connect(self) -> Client:
        if self._client is None:
            self._client = self.options.client()
            self._client.get_queue(self.options.queue)  # QueueNotFound now, by name
            self._heartbeat = threading.Thread(
                target=self._keep_alive, name="sqew-spark-leases", daemon=True)
            self._heartbeat.start()
        return self._client

    def initialOffset(self) -> dict[str, int]:
        """A new query starts at batch 0 (a queue has no position to start from)."""
        self._connect()
        return {"batch": 0}

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        """Lease up to ``maxMessagesPerBatch`` ready messages; none: the offset stays."""
        client = self._connect()
        number = int(start["batch"])
        self._ack_through(number)  # batches up to start are in the sink's commit log
        end = number + 1
        wanted = self.options.max_messages_per_batch
        leased: list[models.LeasedMessage] = []
        held: list[tuple[int, str]] = []
        with self._lock:
            self._pending[end] = held  # kept alive while the polls go on, not only after
        while len(leased) < wanted:
            got = client.poll(self.options.queue, batch=min(POLL_BATCH, wanted - len(leased)),
                              visibility_ms=self.options.visibility_ms)
            leased.extend(got)
            with self._lock:
                held.extend((m.id, m.token) for m in got)
            if len(got) < POLL_BATCH:
                break
        if not leased:
            with self._lock:
                del self._pending[end]
            return iter(()), start
        return iter([leased_row(m) for m in leased]), {"batch": end}

    def readBetweenOffsets(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> Iterator[tuple[Any, ...]]:
        """Replay of an uncommitted batch after a restart: empty (see the module's note)."""
        if json.dumps(start) != json.dumps(end):
            log.warning("sqew stream on queue %s: batch %s was leased before a restart; its "
                        "messages are redelivered once their leases expire",
                        self.options.queue, end.get("batch"))
        return iter(())

    def commit(self, end: dict[str, Any]) -> None:
        """Spark has processed every batch up to ``end``: ack their messages."""
        self._ack_through(int(end["batch"]))

    def _ack_through(self, number: int) -> None:
        with self._lock:
            done = [b for b in self._pending if b <= number]
            acks = [pair for b in sorted(done) for pair in self._pending.pop(b)]
        if not acks:
            return
        client = self._connect()
        lost = 0
        for i in range(0, len(acks), models.MAX_BATCH_ENQUEUE):
            results = client.ack_batch(self.options.queue, acks[i:i + models.MAX_BATCH_ENQUEUE])
            lost += sum(1 for r in results if r.status != "acked")
        if lost:
            # The lease expired and someone else leased it (or it was removed): it will be (or
            # was) delivered again — at-least-once, as promised.
            log.warning("sqew stream on queue %s: %d of %d acks of batch %d failed "
                        "(leases lost); those messages are delivered again",
                        self.options.queue, lost, len(acks), number)

    def _keep_alive(self) -> None:
        """Extend the held leases every ``visibilityMs / 3``, less the time a pass took."""
        period = self.options.visibility_ms / 1000 / KEEP_ALIVE_PASSES
        wait = period
        while not self._stop.wait(wait):
            started = time.monotonic()
            held = self._extend_held()
            took = time.monotonic() - started
            wait = max(0.0, period - took)
            if took > period:
                log.warning("sqew stream on queue %s: extending %d leases took %.1f s, more "
                            "than a third of visibilityMs (%d ms): raise visibilityMs or lower "
                            "maxMessagesPerBatch, or leases may be lost", self.options.queue,
                            held, took, self.options.visibility_ms)

    def _extend_held(self) -> int:
        """One keep-alive pass: every lease of a batch not yet acked extended by
        ``visibilityMs``, in calls of up to 1000. How many there were."""
        with self._lock:
            held = [pair for pairs in self._pending.values() for pair in pairs]
        client = self._client
        if client is None or not held:
            return 0
        ms = self.options.visibility_ms
        lost: set[tuple[int, str]] = set()
        for i in range(0, len(held), EXTEND_CHUNK):
            chunk = held[i:i + EXTEND_CHUNK]
            try:
                results = client.extend_leases(self.options.queue,
                                               [(id, token, ms) for id, token in chunk])
            except Exception as exc:  # the database or server away: the next pass tries again
                if not self._stop.is_set():  # (stopping: the client is closed under it)
                    log.warning("sqew stream on queue %s: extending leases failed: %s",
                                self.options.queue, exc)
                return len(held)
            # (not_found: acked meanwhile, after this pass read what was held)
            lost.update(pair for pair, r in zip(chunk, results, strict=True)
                        if r.status == "lease_lost")
        if lost:  # extended no more, acked never: said once
            with self._lock:
                for pairs in self._pending.values():
                    pairs[:] = [pair for pair in pairs if pair not in lost]
            log.warning("sqew stream on queue %s: %d leases were lost before their batch was "
                        "acked; those messages are delivered again", self.options.queue,
                        len(lost))
        return len(held)

    def stop(self) -> None:
        """Stop extending leases (uncommitted ones expire and are redelivered)."""
        self._stop.set()
        if self._client is not None:
            self._client.close()
            self._client = None
