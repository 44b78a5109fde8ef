"""Journals: one append-only NDJSON file per workload process, one line per operation the
process saw acknowledged (and, for acks and nacks, one line of intent before the call).

A line is written, flushed and ``os.fsync``ed before the process starts its next operation,
so a ``kill -9`` never loses a line the process got to write; it may leave the last line
half-written, and the reader ignores a last line that does not parse. Times are
``time.time()`` seconds: every process of a run is on one machine, with one clock.

Record kinds (the ``op`` field), each with ``t0`` (the call was sent) and ``t1`` (its answer
was read) unless said otherwise:

- ``enqueue``: ``queue``, ``key`` (idempotency key), ``id``, ``duplicate``, ``digest`` (of
  the payload sent, ``payload_digest``).
- ``poll``: ``queue``, ``messages``: ``[{id, token, attempts, lease_expires_at}]``
  (``lease_expires_at`` in epoch ms as the server said it).
- ``poll-empty``: ``queue``, ``wait_ms``: a long poll that leased nothing (an empty poll that
  did not wait is not journalled).
- ``ack-intent`` / ``nack-intent``: ``queue``, ``id``, ``token``, ``t0`` only: written before
  the call, so a process killed during it leaves a trace that the call may have happened.
- ``ack`` / ``nack`` / ``extend``: ``queue``, ``id``, ``token``, ``outcome`` (``ok``, an error
  code such as ``LeaseLost``, or ``unknown`` when no answer came); ``extend`` adds ``ms`` and,
  when ``ok``, ``lease_expires_at``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

Record = dict[str, Any]
"""One journal line, decoded."""

OK = "ok"
UNKNOWN = "unknown"
"""The outcome of a call whose answer never came (a transport error, a killed command)."""


def payload_digest(payload: Any) -> str:
    """A short digest of a JSON value, independent of its key order and spacing."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Journal:
    """The append-only journal of one process: ``write`` returns once the line is on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] = path.open("a", encoding="utf-8")

    def write(self, record: Record) -> None:
        """Append ``record`` as one line; flushed and fsynced before returning."""
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file (every line is already on disk)."""
        self._file.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read(path: Path) -> list[Record]:
    """The records of one journal; a last line cut short by a kill is left out.

    Raises:
        ValueError: a line other than the last does not parse (the journal is damaged: lines
            are whole before the next one starts).
    """
    lines = path.read_text(encoding="utf-8").split("\n")
    records: list[Record] = []
    for n, line in enumerate(lines):
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines) - 1:  # the last line, with no newline after it: cut short
                continue
            raise ValueError(f"{path}:{n + 1}: damaged journal line {line[:80]!r}") from None
    return records


def read_all(directory: Path) -> dict[str, list[Record]]:
    """Every journal (``*.ndjson``) of a run directory, by process name (the file's stem)."""
    return {p.stem: read(p) for p in sorted(directory.glob("*.ndjson"))}


def of_kind(journals: dict[str, list[Record]], *ops: str) -> Iterator[tuple[str, Record]]:
    """``(process, record)`` for each record whose ``op`` is one of ``ops``."""
    for name, records in journals.items():
        for record in records:
            if record.get("op") in ops:
                yield name, record
