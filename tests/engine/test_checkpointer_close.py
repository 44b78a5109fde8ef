"""A write session's checkpointer stops when closed, whenever the close comes.

A close that came just after the checkpointer's pause for gathering commits ended, before it
cleared its wake-up for the pass, had its wake-up cleared with the commits': the thread then
waited for a next commit that never came, and ``close`` (joining it) waited with it, for ever:
an ``AsyncClient``'s ``aclose`` blocked its event loop, a ``Client.close`` its caller. The
window is microseconds wide; here the close is made to land in it every time.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import sqew
from sqew.backends.sqlite import checkpoint

CLOSE_S = 10


class CloseWhenThePauseEnds(threading.Event):
    """The checkpointer's stop event: when its gathering pause ends without a stop, ``close``
    is called (in another thread) and has set the stop and the wake-up before the
    checkpointer goes on."""

    def __init__(self, checkpointer: checkpoint.Checkpointer) -> None:
        super().__init__()
        self.checkpointer = checkpointer
        self.closer: threading.Thread | None = None

    def wait(self, timeout: float | None = None) -> bool:
        stopped = super().wait(timeout)
        if timeout == checkpoint.CHECKPOINT_INTERVAL_S and not stopped and self.closer is None:
            closer = threading.Thread(target=self.checkpointer.close, daemon=True)
            closer.start()
            self.closer = closer  # (started: the test joins it once it sees it)
            deadline = time.monotonic() + CLOSE_S
            # close() sets the stop, then the wake-up, then joins the thread
            while not (self.is_set() and self.checkpointer._dirty.is_set()):
                assert time.monotonic() < deadline
                time.sleep(0.001)
        return stopped


def test_a_close_right_after_the_pause_stops_the_thread(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with sqew.Client(db) as client:
        client.create_queue("q")
    checkpointer = checkpoint.Checkpointer(db, lambda: sqlite3.connect(db))
    stop = CloseWhenThePauseEnds(checkpointer)
    checkpointer._stopping = stop
    checkpointer.wrote()  # a commit: the thread pauses, then its pass begins
    deadline = time.monotonic() + CLOSE_S
    while stop.closer is None:
        assert time.monotonic() < deadline, "the checkpointer never paused"
        time.sleep(0.005)
    stop.closer.join(CLOSE_S)
    assert not stop.closer.is_alive(), "close() is still waiting for the checkpointer"
