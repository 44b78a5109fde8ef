"""``message enqueue --file``'s signal guard when a second signal cuts a batch short.

The first signal is held until the batch being committed is counted; a second one stops the
run at once, and the batch may or may not have been committed: the summary must say so, not
claim the lines after the last counted one were not enqueued. There is no moment to see from
outside a ``sqew`` process at which its batch is being committed, so this runs the CLI's
enqueuer in this process, on a real database, with real signals sent to this process while
its commit waits for the write lock another connection holds.
"""

from __future__ import annotations

import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqew import LocalClient
from sqew.cli.bulk import FileEnqueuer, InterruptGuard

WAIT_S = 30


def _inside(thread: threading.Thread, function: str) -> bool:
    """Whether ``function`` is on the stack of ``thread`` now."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def _signal_while_committing(guard: InterruptGuard, blocker: sqlite3.Connection) -> None:
    """Once the main thread is in its batch's commit (held by ``blocker``'s write lock), send
    this process SIGINT then SIGTERM, then let the commit go on."""
    main = threading.main_thread()
    deadline = time.monotonic() + WAIT_S
    try:
        while not _inside(main, "_enqueue_checked"):
            assert time.monotonic() < deadline, "the batch was never sent"
            time.sleep(0.001)
        if signal.getsignal(signal.SIGTERM) == guard._on_signal:  # never SIGTERM pytest
            signal.raise_signal(signal.SIGINT)  # held until the batch is counted ...
            signal.raise_signal(signal.SIGTERM)  # ... but a second signal stops at once
    finally:
        blocker.execute("ROLLBACK")


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signal handlers are the main thread's")
def test_a_second_signal_during_a_commit_leaves_its_lines_in_doubt(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    client = LocalClient(db)
    client.create_queue("q")
    blocker = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    guard = InterruptGuard()
    enqueuer = FileEnqueuer(client, "q", batch_size=10, guard=guard)
    helper: list[threading.Thread] = []
    # As in a sqew started from a terminal: SIGINT is not ignored (an xdist worker ignores it,
    # and the guard leaves an ignored signal ignored).
    interrupt = signal.signal(signal.SIGINT, signal.default_int_handler)

    def lines() -> Iterator[bytes]:
        for number in range(1, 26):
            if number == 11:  # the first batch is committed: block the second one's commit
                blocker.execute("BEGIN IMMEDIATE")
                helper.append(threading.Thread(
                    target=_signal_while_committing, args=(guard, blocker), daemon=True))
                helper[0].start()
            yield b"%d\n" % number

    try:
        with pytest.raises(KeyboardInterrupt), guard.installed():
            enqueuer.run(lines())
        helper[0].join(WAIT_S)
        enqueuer.interrupted()
        assert enqueuer.summary.to_json() == {
            "enqueued": 10, "duplicates": 0, "failed": [], "interrupted": True,
            "last_committed_line": 10, "lines_in_doubt": [11, 20]}
        assert guard.signum == signal.SIGINT  # the first signal: the exit status is 130
    finally:
        signal.signal(signal.SIGINT, interrupt)
        if blocker.in_transaction:
            blocker.execute("ROLLBACK")
        blocker.close()
        client.close()
    with LocalClient(db) as check:
        assert check.stats("q").enqueued_total in (10, 20)  # in doubt: either is true
