"""The garbage collector tuned while a process serves, and put back as it was after.

``GC_TUNING`` is the process's one tuning (the collector is per process); ``runner.serving``
adds its start and stop to an app's startup and shutdown hooks.
"""

from __future__ import annotations

import gc
import threading

from litestar import Litestar


class GcTuning:
    """The garbage collector tuned for serving, and put back as it was when serving ends.

    Everything built at startup lives as long as the server: frozen, the collector stops
    scanning it again and again (full collections of it were the p99 latency). A request
    allocates a few hundred objects, nearly all freed by reference counting: a young-generation
    collection every 700 allocations then finds almost nothing; one per 20,000 was 5-10 % more
    poll+ack throughput (docs/benchmarks.md).

    The collector is the process's: apps served at once in one process (tests) share one
    tuning, made by the first to start and undone by the last to stop. A freeze made by someone
    else before the process's first app started is left alone; whether there was one is looked
    at once, as ``gc.get_freeze_count`` walks every frozen object: in a test process that froze
    hundreds of thousands, ~30 ms at every server start.
    """

    THRESHOLD = 20_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._serving: set[int] = set()  # ids of the apps serving now
        self._threshold: tuple[int, int, int] | None = None
        self._frozen_before: bool | None = None  # by someone else, when the first app started

    def start(self, app: Litestar) -> None:
        """``app`` starts serving (a startup hook)."""
        with self._lock:
            first = not self._serving
            self._serving.add(id(app))
            if not first:
                return
            self._threshold = gc.get_threshold()
            if self._frozen_before is None:
                self._frozen_before = gc.get_freeze_count() > 0
            if not self._frozen_before:
                gc.collect()
                gc.freeze()
            gc.set_threshold(self.THRESHOLD, *self._threshold[1:])

    def stop(self, app: Litestar) -> None:
        """``app`` stops serving (a shutdown hook; also called when its startup failed)."""
        with self._lock:
            if id(app) not in self._serving:
                return
            self._serving.discard(id(app))
            if self._serving or self._threshold is None:
                return
            gc.set_threshold(*self._threshold)
            if not self._frozen_before:  # the freeze was this tuning's
                gc.unfreeze()
            self._threshold = None


GC_TUNING = GcTuning()
"""The process's one ``GcTuning`` (the collector is per process)."""
