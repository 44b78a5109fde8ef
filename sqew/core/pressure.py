"""Backpressure: when writes back up, a server refuses enqueues (503 ``Overloaded``) instead of
queueing them without bound, while polls, acks, nacks and extends go on so consumers can drain.

Three measures, each against a threshold (0 turns it off):

- ``pending_writes``: operations waiting for the group commit when a group ends (its backlog);
- ``wal_bytes``: the database's write log not yet copied into it (SQLite's WAL backlog, as the
  checkpointer last saw it: a reader holding an old snapshot, or a checkpoint that cannot
  keep up, makes it grow);
- ``commit_ms``: a moving average of a group's transaction time, waiting for the write lock
  included (the database, or another process holding the lock, is slow).

The group committer updates the state after each group (``Pressure.observe``); a request reads
one flag, with no measurement of its own. Hysteresis keeps it from flapping: the state turns on
when a measure passes its threshold and off only when every measure is below
``CLEAR_RATIO`` of its threshold, and not before ``RETRY_AFTER_S`` (what refused callers were
told to wait) has passed. While enqueues are refused, a server's timer commits empty
groups (``QueueService.probe``) so that the measures are taken again even when nothing else
writes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import NamedTuple

CLEAR_RATIO = 0.5
"""The state turns off once every measure is below this fraction of its threshold."""
AVERAGE_S = 0.5
"""Time constant of the commit-time average: a sample weighs by the time since the last one,
so the average follows the last second or so whether groups come every 0.1 ms or every 1 s."""
RETRY_AFTER_S = 1.0
"""What a refused enqueue is told to wait (``Retry-After``)."""


class Thresholds(NamedTuple):
    """When enqueues are refused (a measure past its threshold; 0: that measure is off)."""

    pending_writes: int = 0
    wal_bytes: int = 0
    commit_ms: int = 0


class Pressure:
    """The overload state of one process's group commit.

    Attributes:
        overloaded: enqueues are refused now.
        reasons: the measures past their threshold when the state turned on.
        pending: operations waiting when the last group ended.
        backlog: the write log's bytes not copied yet (last seen).
        commit_s: moving average of a group's transaction time, in seconds.
    """

    def __init__(
        self, limits: Thresholds, *, monotonic: Callable[[], float] = time.monotonic,
        on_change: Callable[[Pressure], None] | None = None,
    ) -> None:
        self.limits = limits
        self.overloaded = False
        self.reasons: tuple[str, ...] = ()
        self.pending = 0
        self.backlog = 0
        self.commit_s = 0.0
        self.on_change = on_change
        self._monotonic = monotonic
        self._last: float | None = None
        self._since = 0.0  # when the state last turned on

    def observe(self, pending: int, commit_s: float, backlog: int | None) -> None:
        """A group ended: ``pending`` operations wait, its transaction took ``commit_s``."""
        now = self._monotonic()
        if self._last is None:
            self.commit_s = commit_s
        else:
            weight = 1.0 - math.exp(-max(0.0, now - self._last) / AVERAGE_S)
            self.commit_s += (commit_s - self.commit_s) * weight
        self._last = now
        self.pending = pending
        if backlog is not None:
            self.backlog = backlog
        over = self._over(1.0)
        if self.overloaded:
            if now - self._since >= RETRY_AFTER_S and not self._over(CLEAR_RATIO):
                self._set(False, ())
        elif over:
            self._since = now
            self._set(True, over)

    def _over(self, ratio: float) -> tuple[str, ...]:
        """The measures at or past ``ratio`` of their (non-zero) threshold."""
        lim = self.limits
        measures = (("pending_writes", self.pending, lim.pending_writes),
                    ("wal_bytes", self.backlog, lim.wal_bytes),
                    ("commit_ms", self.commit_s * 1000, lim.commit_ms))
        return tuple(name for name, value, limit in measures
                     if limit and value >= limit * ratio)

    def _set(self, overloaded: bool, reasons: tuple[str, ...]) -> None:
        self.overloaded, self.reasons = overloaded, reasons
        if self.on_change is not None:
            self.on_change(self)

    def describe(self) -> str:
        """Why enqueues are refused, for the error message."""
        words = {"pending_writes": "writes waiting to commit", "wal_bytes": "the write log",
                 "commit_ms": "commit time"}
        return ", ".join(words[r] for r in self.reasons) or "writes backing up"
