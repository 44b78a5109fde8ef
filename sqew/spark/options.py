"""The ``sqew`` data source's options: parsed and checked once, on the driver.

Pure Python (no pyspark import), so the rules are testable without a Spark session and the
executors receive a small picklable ``SourceOptions`` rather than Spark's option map.

Spark passes option names case-insensitively; they are matched here without regard to case
and every error names the option as documented (``maxMessagesPerBatch``, not its lower case).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from sqew import errors, models
from sqew.client.base import Client
from sqew.core import rules

SOURCES = ("queue", "dlq", "archive")
"""What a snapshot read covers (docs/spark.md, ``source``): the queue's messages, its DLQ's, or the
archive of its acked messages."""

DEFAULT_MAX_MESSAGES_PER_BATCH = 1000
MAX_MESSAGES_PER_BATCH = 100_000
DEFAULT_VISIBILITY_MS = 60_000
DEFAULT_WRITE_BATCH = 1000
MAX_WRITE_BATCH = 1000  # models.MAX_BATCH_ENQUEUE: one enqueue_batch call
EXTEND_CHUNK = 1000  # models.MAX_BATCH_ENQUEUE: leases extended by one extend_leases call
KEEP_ALIVE_MS_PER_CALL = 100
"""What one keep-alive call (``extend_leases`` of up to ``EXTEND_CHUNK`` leases) is allowed to
take when options are checked: a round trip to a busy server included."""
KEEP_ALIVE_PASSES = 3
"""Keep-alive passes a lease outlasts: every lease of a batch is extended at least every
``visibilityMs / KEEP_ALIVE_PASSES`` (``sqew.spark.stream``)."""

KNOWN = {
    "db": "db",
    "url": "url",
    "api_key": "api_key",
    "apikey": "api_key",
    "queue": "queue",
    "source": "source",
    "maxmessagesperbatch": "maxMessagesPerBatch",
    "visibilityms": "visibilityMs",
    "numpartitions": "numPartitions",
    "batchsize": "batchSize",
    "writeid": "writeId",
    "path": "path",  # Spark passes load(path)/save(path) as the option "path": refused below
}


def option_error(name: str, message: str) -> errors.ValidationError:
    """A ValidationError naming the option (``option 'queue': …``)."""
    return errors.ValidationError(
        f"option '{name}': {message}", details=[{"field": name, "message": message}]
    )


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    """The checked options of one read, write or stream.

    Attributes:
        db: a database file path or URL (``sqlite:///…``, ``postgresql+psycopg://…``), or None.
        url: a server's base URL, or None; exactly one of ``db`` and ``url`` is set.
        api_key: the key sent to a server (``url`` only).
        queue: the queue written, read or consumed.
        source: ``queue``, ``dlq`` or ``archive`` (snapshot reads).
        max_messages_per_batch: the most messages one streaming micro-batch leases.
        visibility_ms: the lease length of a streaming poll (kept alive while a batch runs).
        num_partitions: the snapshot's partitions (None: by size).
        batch_size: messages per ``enqueue_batch`` call of the writer (1 to 1000).
        write_id: the prefix of derived idempotency keys (None: a fresh one per write).
    """

    queue: str
    db: str | None = None
    url: str | None = None
    api_key: str | None = None
    source: str = "queue"
    max_messages_per_batch: int = DEFAULT_MAX_MESSAGES_PER_BATCH
    visibility_ms: int = DEFAULT_VISIBILITY_MS
    num_partitions: int | None = None
    batch_size: int = DEFAULT_WRITE_BATCH
    write_id: str | None = None

    def client(self) -> Client:
        """A new client for this source's database or server (the caller closes it)."""
        if self.url is not None:
            from sqew.client.http import HttpClient

            return HttpClient(self.url, api_key=self.api_key)
        from sqew.client.local import LocalClient

        assert self.db is not None
        return LocalClient(self.db)

    @property
    def target(self) -> str:
        """The database or server, for messages (never the API key)."""
        return self.url if self.url is not None else str(self.db)


def _int(name: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise option_error(name, f"must be an integer, not {text!r}") from None
    if not low <= value <= high:
        raise option_error(name, f"must be between {low} and {high}, not {value}")
    return value


def parse(options: Mapping[str, Any]) -> SourceOptions:
    """Check the data source's options (as Spark passes them) and return them typed.

    Raises:
        sqew.errors.ValidationError: an unknown option, a missing ``queue``, neither or both of
            ``db`` and ``url``, ``api_key`` without ``url``, a value out of range; the message
            starts ``option '<name>':``.
    """
    given: dict[str, str] = {}
    for key, value in options.items():
        name = KNOWN.get(str(key).lower())
        if name is None:
            raise option_error(
                str(key), "unknown option of the sqew data source (known: "
                + ", ".join(sorted(set(KNOWN.values()) - {"path"})) + ")")
        given[name] = "" if value is None else str(value)
    if "path" in given:
        raise option_error("path", "the sqew data source takes no path: give the queue with "
                           ".option('queue', ...) and the database with 'db' or 'url'")
    queue = given.get("queue", "").strip()
    if not queue:
        raise option_error("queue", "required: the queue to write, read or consume")
    if not rules.is_queue_name(queue):
        raise option_error("queue", f"{queue!r} is not a queue name "
                           f"({models.PATTERN_HINTS[models.QUEUE_NAME_PATTERN]}; or a DLQ's, "
                           "the name and '.dlq')")
    db, url = given.get("db", "").strip() or None, given.get("url", "").strip() or None
    if db is None and url is None:
        raise option_error("db", "give 'db' (a database file or URL) or 'url' (a sqew server)")
    if db is not None and url is not None:
        raise option_error("url", "give either 'db' or 'url', not both")
    if url is not None and not url.startswith(("http://", "https://")):
        raise option_error("url", f"must be an http:// or https:// URL, not {url!r} "
                           "(a database file or URL goes in 'db')")
    if db is not None and db.startswith(("http://", "https://")):
        raise option_error("db", "is a server URL: give it as 'url'")
    api_key = given.get("api_key") or None
    if api_key is not None and url is None:
        raise option_error("api_key", "only a server ('url') takes an API key")
    source = given.get("source", "queue").strip().lower()
    if source not in SOURCES:
        raise option_error("source", f"must be one of {', '.join(SOURCES)}, not {source!r}")
    num_partitions = None
    if given.get("numPartitions"):
        num_partitions = _int("numPartitions", given["numPartitions"], 1, 10_000)
    write_id = given.get("writeId") or None
    if write_id is not None and not re.fullmatch(r"[!-~]{1,64}", write_id):
        raise option_error("writeId", "must be 1 to 64 printable ASCII characters, no spaces")
    max_messages = _int("maxMessagesPerBatch",
                        given.get("maxMessagesPerBatch", str(DEFAULT_MAX_MESSAGES_PER_BATCH)),
                        1, MAX_MESSAGES_PER_BATCH)
    visibility_ms = _int("visibilityMs", given.get("visibilityMs", str(DEFAULT_VISIBILITY_MS)),
                         1000, 43_200_000)
    _check_keep_alive(max_messages, visibility_ms)
    return SourceOptions(
        queue=queue,
        db=db,
        url=url,
        api_key=api_key,
        source=source,
        max_messages_per_batch=max_messages,
        visibility_ms=visibility_ms,
        num_partitions=num_partitions,
        batch_size=_int("batchSize", given.get("batchSize", str(DEFAULT_WRITE_BATCH)),
                        1, MAX_WRITE_BATCH),
        write_id=write_id,
    )


def keep_alive_calls(held: int) -> int:
    """The ``extend_leases`` calls of one keep-alive pass over ``held`` leases."""
    return -(-held // EXTEND_CHUNK)


def _check_keep_alive(max_messages: int, visibility_ms: int) -> None:
    """Refuse a stream whose batch's leases a keep-alive could not renew in time: a pass over
    ``max_messages`` leases has to fit ``KEEP_ALIVE_PASSES`` times in a lease."""
    calls = keep_alive_calls(max_messages)
    least = KEEP_ALIVE_PASSES * calls * KEEP_ALIVE_MS_PER_CALL
    if visibility_ms < least:
        most = visibility_ms // (KEEP_ALIVE_PASSES * KEEP_ALIVE_MS_PER_CALL) * EXTEND_CHUNK
        raise option_error("visibilityMs", (
            f"{visibility_ms} ms is too short to keep the leases of a batch alive: "
            f"maxMessagesPerBatch {max_messages} takes {calls} keep-alive calls of up to "
            f"{EXTEND_CHUNK} leases, which must fit {KEEP_ALIVE_PASSES} times in a lease at up "
            f"to {KEEP_ALIVE_MS_PER_CALL} ms a call: give visibilityMs of at least {least}, or "
            f"maxMessagesPerBatch of at most {most}"))
