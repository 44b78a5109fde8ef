"""The order of argon2 verifications in a process (``sqew.server.verifications``), with
verifications that finish when the test says: deterministic where the HTTP tests of
``test_auth_guessing.py`` can only count.

- a clean verification waits for those running, never for the suspect ones waiting;
- beyond the suspect ones that may wait, one more is refused at once; a clean one never is;
- a waiting verification that is cancelled leaves no slot taken.
"""

from __future__ import annotations

import asyncio

import pytest

from sqew import errors
from sqew.server.metrics import Metrics
from sqew.server.verifications import Verifications


class Run:
    """Verifications that each finish when released, in the order they started."""

    def __init__(self, gate: Verifications) -> None:
        self.gate = gate
        self.started: list[str] = []
        self._release: dict[str, asyncio.Event] = {}

    def verify(self, name: str, *, suspect: bool) -> asyncio.Task[bool]:
        release = self._release[name] = asyncio.Event()

        async def check() -> bool:
            self.started.append(name)
            await release.wait()
            return name.startswith("valid")

        return asyncio.get_running_loop().create_task(self.gate.verify(check, suspect=suspect))

    async def finish(self, name: str) -> None:
        self._release[name].set()
        await settle()


async def settle() -> None:
    """Let every task that can run, run (a few loop turns)."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_clean_verification_goes_before_the_suspect_ones_waiting() -> None:
    async def main() -> None:
        run = Run(Verifications(Metrics(enabled=False), slots=2, suspects_waiting=10))
        tasks = [run.verify(f"wrong{i}", suspect=i > 0) for i in range(6)]
        await settle()
        assert run.started == ["wrong0", "wrong1"]  # two slots
        valid = run.verify("valid", suspect=False)
        await settle()
        await run.finish("wrong0")
        assert run.started == ["wrong0", "wrong1", "valid"]  # ahead of wrong2..wrong5
        await run.finish("valid")
        assert await valid is True
        await run.finish("wrong1")
        for i in range(2, 6):
            await run.finish(f"wrong{i}")
        assert run.started[3:] == ["wrong2", "wrong3", "wrong4", "wrong5"]  # then in order
        assert [await t for t in tasks] == [False] * 6

    asyncio.run(main())


def test_suspect_ones_beyond_the_waiting_room_are_refused_and_clean_ones_never() -> None:
    async def main() -> None:
        run = Run(Verifications(Metrics(enabled=False), slots=1, suspects_waiting=2))
        running = run.verify("wrong0", suspect=True)
        waiting = [run.verify(f"wrong{i}", suspect=True) for i in (1, 2)]
        await settle()
        with pytest.raises(errors.RateLimited) as refused:
            await run.gate.verify(lambda: asyncio.sleep(0, True), suspect=True)
        assert refused.value.retry_after == 1
        clean = run.verify("valid", suspect=False)  # waits, first in line
        await settle()
        for name in ("wrong0", "valid", "wrong1", "wrong2"):
            await run.finish(name)
        assert run.started == ["wrong0", "valid", "wrong1", "wrong2"]
        assert await clean is True
        assert [await t for t in (running, *waiting)] == [False] * 3

    asyncio.run(main())


def test_a_cancelled_waiting_verification_leaves_no_slot_taken() -> None:
    async def main() -> None:
        run = Run(Verifications(Metrics(enabled=False), slots=1, suspects_waiting=5))
        first = run.verify("wrong0", suspect=False)
        gone = run.verify("wrong1", suspect=True)
        await settle()
        gone.cancel()
        await settle()
        await run.finish("wrong0")
        assert await first is False
        later = run.verify("valid", suspect=False)
        await settle()
        assert run.started == ["wrong0", "valid"]
        await run.finish("valid")
        assert await later is True

    asyncio.run(main())
