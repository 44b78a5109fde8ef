"""The SQLite waiter: another process's commit wakes a long poll even when the watcher ticked
between the poll's claim and its wait (the moment a server's poll awaits its group commit)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import sqew
from sqew.backends import open_backend


def test_a_commit_seen_by_a_tick_before_the_wait_still_wakes_it(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    other = sqew.Client(str(db))  # another process's writes: its own connection, no wake-up
    other.create_queue("a")
    other.create_queue("b")
    backend = open_backend(db)
    waiter = backend.waiter()

    async def main() -> bool:
        # A wait on another queue keeps this loop's watcher ticking.
        keeper = asyncio.ensure_future(waiter.wait("a", waiter.mark("a"), 30))
        await asyncio.sleep(0.1)
        mark = waiter.mark("b")  # a poll of b marks, then its claim finds nothing...
        other.enqueue("b", {"x": 1})  # ...another process commits to b...
        await asyncio.sleep(0.15)  # ...and the watcher ticks before the poll waits
        try:
            await asyncio.wait_for(waiter.wait("b", mark, 30), 10)
            return True
        except TimeoutError:
            return False
        finally:
            keeper.cancel()

    try:
        assert asyncio.run(main()), "the wait slept through a commit made before it began"
    finally:
        waiter.close()
        backend.close()
        other.close()
