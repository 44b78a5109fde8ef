"""The rows the ``sqew`` source reads (snapshot and stream): one per message.

Times are integers, milliseconds since the epoch, as in the REST API (docs/rest.md); turn them into
timestamps in Spark with ``timestamp_millis(col)``. ``payload`` is the message's JSON text
(parse it with ``from_json``); ``state`` is ready, delayed or leased for ``source=queue``
(``leased`` for every streamed row), or what the scan reports for a DLQ or the archive.
"""

from __future__ import annotations

import pyarrow as pa

MESSAGE_SCHEMA = (
    "id LONG, queue STRING, state STRING, payload STRING, priority INT, "
    "attributes MAP<STRING, STRING>, attempts INT, enqueued_at LONG, available_at LONG, "
    "expires_at LONG, last_error STRING"
)
"""The schema of a read, as a Spark DDL string (``DataSource.schema``)."""

ARROW_ATTRIBUTES = pa.map_(pa.string(), pa.string())
ARROW_SCHEMA = pa.schema([
    ("id", pa.int64()), ("queue", pa.string()), ("state", pa.string()),
    ("payload", pa.string()), ("priority", pa.int32()), ("attributes", ARROW_ATTRIBUTES),
    ("attempts", pa.int32()), ("enqueued_at", pa.int64()), ("available_at", pa.int64()),
    ("expires_at", pa.int64()), ("last_error", pa.string()),
])
"""``MESSAGE_SCHEMA`` in Arrow: the batches the snapshot reader yields."""
