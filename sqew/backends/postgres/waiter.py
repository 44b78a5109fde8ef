"""PostgreSQL's waiter: in-process wakes, plus ``LISTEN`` for other processes' commits.

A committing transaction that may make messages ready sends ``NOTIFY sqew, '<origin>
<queue>'`` (``PostgresTx.notify``); PostgreSQL delivers it at commit, once per distinct payload
of a transaction, to every listening connection. Each process has ONE listening connection,
opened by the first long poll that waits, on a thread of its own that sleeps in ``select``
until a notification (or its stop signal) arrives; it then bumps the named queues'
generations, which wakes their waits on whatever loop they are. A thousand waiting polls cost
a thousand futures and one connection.

Notifications of this process's own commits are skipped (their waits were woken in-process at
the commit). Until the listening connection is up, and while it is down, notifications are
lost: when it is (back) up, every wait in progress is woken once, and so is every wait whose
mark was taken before (the mark carries the connection's epoch). A spurious wake costs a
claim; a missed one would cost a whole ``wait_ms``. Nothing here blocks the caller: the first
mark only starts the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import selectors
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from sqew.backends.postgres.connection import CHANNEL, CONNECT_TIMEOUT_S
from sqew.backends.wakeups import InProcessWaiter, wake

RECONNECT_S = 1.0
"""Pause between attempts to open the listening connection again."""
HEALTH_CHECK_S = 30.0
"""An idle listening connection is checked this often (a dead peer sends no FIN)."""
log = logging.getLogger("sqew.postgres")


class PostgresWaiter(InProcessWaiter):
    """Args:
        connect: opens a new connection (autocommit mode).
        origin: this process's mark on its own notifications (skipped here).
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], origin: str) -> None:
        super().__init__()
        self._connect = connect
        self._origin = origin
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()
        self._epoch = 0  # moves each time the listening connection is (back) up
        self._listening = threading.Event()
        self._stop_r, self._stop_w = os.pipe()
        self._pipe_open = True

    def until_listening(self, timeout_s: float) -> bool:
        """Observability: block until the listening connection is up (before it, commits of
        other processes wake nothing here; a poll still finds their messages when it claims or
        its wait times out); False if ``timeout_s`` passed first."""
        return self._listening.wait(timeout_s)

    def _external_mark(self, queue: str) -> object:
        if self._thread is None:
            with self._start:
                if self._thread is None and not self.closed:
                    self._thread = threading.Thread(
                        target=self._run, name="sqew-listen", daemon=True
                    )
                    self._thread.start()
        return self._epoch

    def _watch(
        self, loop: asyncio.AbstractEventLoop, queue: str, mark: object,
        future: asyncio.Future[None],
    ) -> None:
        # Marked before the connection was (back) up: a notification may have been missed.
        if mark != self._epoch:
            wake(future)

    def close(self) -> None:
        super().close()
        # The stop pipe is written and closed once: close is called again (a server drains,
        # then closes), and by then its numbers may be another thread's descriptors.
        with self._start:
            if not self._pipe_open:
                return
            with contextlib.suppress(OSError):
                os.write(self._stop_w, b"x")
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(CONNECT_TIMEOUT_S + 1)
        if thread is None or not thread.is_alive():
            with self._start:
                pipe, self._pipe_open = self._pipe_open, False
            if pipe:
                for fd in (self._stop_r, self._stop_w):
                    with contextlib.suppress(OSError):
                        os.close(fd)

    # --- the listening thread -------------------------------------------------------------------
    def _run(self) -> None:
        while not self.closed:
            conn: psycopg.Connection[Any] | None = None
            try:
                conn = self._connect()
                conn.execute(f"LISTEN {CHANNEL}")
                # Whatever was sent while nobody listened is lost: wake every wait once.
                self._wake_all()
                self._listening.set()
                self._listen(conn)
            except Exception:
                log.warning("listening for other processes' commits failed; retrying",
                            exc_info=True)
            finally:
                self._listening.clear()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
            if self._stopped(RECONNECT_S):
                return

    def _listen(self, conn: psycopg.Connection[Any]) -> None:
        """Deliver notifications until stopped; raises when the connection is lost."""
        sock = conn.pgconn.socket
        # A selector, not select.select: a server raises its descriptor limit and may hold
        # thousands of connections, and select() refuses descriptors of 1024 and above.
        with selectors.DefaultSelector() as selector:
            selector.register(sock, selectors.EVENT_READ)
            selector.register(self._stop_r, selectors.EVENT_READ)
            self._deliver(conn, selector)

    def _deliver(self, conn: psycopg.Connection[Any], selector: selectors.BaseSelector) -> None:
        while True:
            ready = {key.fileobj for key, _ in selector.select(HEALTH_CHECK_S)}
            if self._stop_r in ready or self.closed:
                return
            if not ready:
                conn.execute("SELECT 1")  # raises on a dead connection
            queues: set[str] = set()
            for note in conn.notifies(timeout=0):
                origin, _, queue = note.payload.partition(" ")
                if origin != self._origin:
                    queues.add(queue)
            if queues:
                self.changed(queues)

    def _wake_all(self) -> None:
        self._epoch += 1  # first: a wait registered after the snapshot below sees it moved
        with self._lock:
            waited = list(self._waits)
        if waited:
            self.changed(waited)

    def _stopped(self, timeout_s: float) -> bool:
        if self.closed:
            return True
        with selectors.DefaultSelector() as selector:
            selector.register(self._stop_r, selectors.EVENT_READ)
            ready = selector.select(timeout_s)
        return bool(ready) or self.closed
