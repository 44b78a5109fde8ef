"""A transaction PostgreSQL aborts for a deadlock runs again (``DirectWriter``): the caller
sees its result, not an error; past ``CONFLICT_ATTEMPTS`` it would see ``Unavailable``."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import sqew
from sqew.backends.base import Tx
from sqew.core.writer import Op

pytestmark = pytest.mark.postgres


class LockTwoQueues(Op[int]):
    """Locks queue ``a``'s row, then ``b``'s (the order another transaction reverses)."""

    def __init__(self) -> None:
        self.runs = 0

    def run(self, tx: Tx, now: int) -> int:
        self.runs += 1
        tx.add_counters_by_name("a", acked_total=1)
        tx.add_counters_by_name("b", acked_total=1)
        return self.runs


def test_a_write_aborted_by_a_deadlock_runs_again_and_commits(tmp_path: Path) -> None:
    import pg_support
    import targets

    store = targets.postgres(tmp_path)
    client = sqew.LocalClient(store.url)
    server = pg_support.cluster().server
    dbname = store.url.rsplit("/", 1)[1]
    outcome: dict[str, Any] = {}
    try:
        client.create_queue("a")
        client.create_queue("b")
        op = LockTwoQueues()
        with contextlib.closing(server.connect(dbname)) as other, \
                contextlib.closing(server.connect(dbname)) as watch:
            # Only the op's session looks for the deadlock (after the default 1 s): it is the
            # one aborted.
            other.execute("SET deadlock_timeout = '60s'")
            other.execute("BEGIN")
            other.execute("UPDATE queues SET acked_total = acked_total + 10 WHERE name = 'b'")
            writer = threading.Thread(
                target=lambda: outcome.setdefault("result", client.service._direct.run(op)))
            writer.start()
            deadline = time.monotonic() + 20
            while watch.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone() \
                    == (0,):  # the op holds a and waits for b
                assert time.monotonic() < deadline, "the write never waited for the lock"
                time.sleep(0.01)
            # Now b's holder wants a: a cycle. PostgreSQL aborts the op's transaction, whose
            # second run then waits for this one to commit.
            other.execute("UPDATE queues SET acked_total = acked_total + 10 WHERE name = 'a'")
            other.execute("COMMIT")
            writer.join(30)
            assert not writer.is_alive()
        assert outcome["result"] == 2 and op.runs == 2
        assert [client.stats(q).acked_total for q in ("a", "b")] == [11, 11]
    finally:
        client.close()
        store.drop()
