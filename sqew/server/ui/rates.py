"""The dashboard's rate charts: a small ring of samples of each queue's own counters.

The queue rows keep lifetime counters (``enqueued_total``, ``acked_total``); a rate is the
difference of two readings over the time between them. Each server process keeps the last
``SAMPLES`` readings per queue in memory, taken when a dashboard page reads the stats and at
least ``EVERY_S`` after the last one (the overview refreshes itself, so the chart fills while
someone watches; nothing is sampled while nobody does). A restart starts the rings afresh.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqew import models

SAMPLES = 60
EVERY_S = 5.0


@dataclass
class _Ring:
    at: deque[float] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    enqueued: deque[int] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    acked: deque[int] = field(default_factory=lambda: deque(maxlen=SAMPLES))


class Rates:
    """Per-queue rings of (time, enqueued_total, acked_total) readings."""

    def __init__(self) -> None:
        self._rings: dict[str, _Ring] = {}
        self._last = 0.0

    def sample(self, stats: Sequence[models.Stats], now: float | None = None) -> None:
        """Keep a reading of every queue in ``stats``, unless the last is under ``EVERY_S``
        old; queues no longer listed are forgotten."""
        now = time.monotonic() if now is None else now
        if self._last and now - self._last < EVERY_S:
            return
        self._last = now
        seen = {s.queue for s in stats}
        for gone in [q for q in self._rings if q not in seen]:
            del self._rings[gone]
        for s in stats:
            ring = self._rings.setdefault(s.queue, _Ring())
            ring.at.append(now)
            ring.enqueued.append(s.enqueued_total)
            ring.acked.append(s.acked_total)

    def per_second(self, queue: str, which: str) -> list[float]:
        """The queue's rate (``enqueued`` or ``acked``) between consecutive readings."""
        ring = self._rings.get(queue)
        if ring is None:
            return []
        values: deque[int] = getattr(ring, which)
        at = list(ring.at)
        counts = list(values)
        return [max(counts[i] - counts[i - 1], 0) / max(at[i] - at[i - 1], 1e-3)
                for i in range(1, len(counts))]


def sparkline(values: Sequence[float], width: int = 120, height: int = 24) -> str:
    """An inline SVG polyline of ``values`` (numbers only: nothing user-supplied)."""
    if len(values) < 2:
        return (f'<svg class="spark" width="{width}" height="{height}" role="img" '
                'aria-label="not enough samples yet"></svg>')
    top = max(max(values), 1e-9)
    step = width / (len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - 1 - (v / top) * (height - 2):.1f}"
                      for i, v in enumerate(values))
    return (f'<svg class="spark" width="{width}" height="{height}" role="img" '
            f'aria-label="last {values[-1]:.2f}/s, peak {top:.2f}/s">'
            f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" '
            f'points="{points}"/></svg>')
