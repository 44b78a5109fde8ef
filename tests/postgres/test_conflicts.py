"""A transaction PostgreSQL aborts for a deadlock runs again, alone (``DirectWriter``) or as
a whole group (``GroupWriter``): the caller sees its result, not an error; past
``CONFLICT_ATTEMPTS`` it would see ``Unavailable``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest

import sqew
from sqew.backends import open_backend
from sqew.backends.base import Tx
from sqew.core.service import QueueService
from sqew.core.writer import CONFLICT_ATTEMPTS, Op

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


def run_in_group(url: str, op: Op[int]) -> int:
    """``op`` through a server's group commit (on a loop of its own, statements offloaded)."""

    async def main() -> int:
        service = QueueService(open_backend(url), group_commit=True, offload=asyncio.to_thread)
        try:
            return await service._writer.write(op)
        finally:
            await service.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("writer", ["direct", "group"])
def test_a_write_aborted_by_a_deadlock_runs_again_and_commits(
    tmp_path: Path, writer: str
) -> None:
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
            def run() -> None:
                if writer == "direct":
                    outcome["result"] = client.service._direct.run(op)
                else:
                    outcome["result"] = run_in_group(store.url, op)

            thread = threading.Thread(target=run)
            thread.start()
            pg_support.until_a_lock_wait(watch, "the write")  # it holds a and waits for b
            # Now b's holder wants a: a cycle. PostgreSQL aborts the op's transaction, whose
            # second run then waits for this one to commit.
            other.execute("UPDATE queues SET acked_total = acked_total + 10 WHERE name = 'a'")
            other.execute("COMMIT")
            thread.join(30)
            assert not thread.is_alive()
        # Aborted once at least, then committed once. (On a loaded machine the second run can
        # take ``a`` before the other session's waiting update does: a second cycle, aborted
        # too, and a third run; each is within ``CONFLICT_ATTEMPTS``.)
        assert outcome["result"] == op.runs and 2 <= op.runs <= CONFLICT_ATTEMPTS
        assert [client.stats(q).acked_total for q in ("a", "b")] == [11, 11]
    finally:
        client.close()
        store.drop()
