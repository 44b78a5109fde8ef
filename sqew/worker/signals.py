"""SIGINT and SIGTERM as a Worker's ``stop()`` while it runs on the main thread.

The first signal stops polling and lets the handlers under way finish; a second stops waiting
for them. The handlers in place before are put back when the worker returns. A signal that was
ignored stays ignored (a shell starts a background job with SIGINT ignored, so that a Ctrl-C
meant for the foreground does not reach it), and signals are left alone off the main thread
(only it may set handlers) or when the caller asks.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

log = logging.getLogger("sqew.worker")

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stopping_on_signals(stop: Callable[[], None], enabled: bool = True) -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM call ``stop`` (see the module's docstring)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    seen = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal seen
        seen += 1
        name = signal.Signals(signum).name
        if seen == 1:
            log.info("%s: stopping (draining the messages under way)", name)
        else:
            log.warning("%s again: no longer waiting for the messages under way", name)
        stop()

    previous = {}
    for signum in SIGNALS:
        current = signal.getsignal(signum)
        if current is not signal.SIG_IGN:
            previous[signum] = current
            signal.signal(signum, on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
