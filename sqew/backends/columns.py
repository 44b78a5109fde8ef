"""The column lists of the statements, declared once.

The row types of ``rows`` name the columns a statement reads or writes, in the order of the
tables of ``schema`` (which checks, when it is imported, that they agree: SQLAlchemy is not
loaded to run a statement). Every ``INSERT INTO messages`` and every copy into ``archive``
takes its column list from here.
"""

from __future__ import annotations

from sqew.backends.rows import MessageRow, NewMessage

MESSAGE = ", ".join(MessageRow._fields)
"""The columns a message is read as (``MessageRow``)."""

INSERTED: tuple[str, ...] = NewMessage._fields
"""The columns of ``messages`` an enqueue sets (``NewMessage``); ``attempts`` starts at 0 and
the lease's columns are empty."""

INSERT_MESSAGES = f"INSERT INTO messages ({', '.join(INSERTED)}, attempts)"
"""The head of every insert of new messages: its values are ``INSERTED``'s, then 0."""

ARCHIVED = ("id", "queue_id", "payload", "priority", "attributes", "attempts", "enqueued_at",
            "last_error", "traceparent", "tracestate")
"""The columns of a message that its archive keeps (besides ``acked_at``, when it was acked),
in the order of the ``archive`` table."""

INSERT_ARCHIVE = f"INSERT INTO archive ({', '.join(ARCHIVED)}, acked_at)"
"""The head of every copy into the archive: its values are ``ARCHIVED``'s, then the time of
the ack."""
