"""``sqew.AsyncClient`` where asyncio itself is the subject (the contract suite runs every
semantic test on it through ``tests/async_support.py``): which client a target gives, calls
under way together on one loop, long polls that hold no database thread, the one loop a
local client serves, and over HTTP the key, HMAC signing and the transport's errors."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from targets import ServerThread, server_settings

import sqew
from sqew.client.async_http import AsyncHttpClient
from sqew.client.async_local import AsyncLocalClient

SECRET = "s" * 32
WAIT_MS = 10_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """One real server (thread, system clock) shared by the module's tests."""
    srv = ServerThread(server_settings(tmp_path_factory.mktemp("server") / "a.db"))
    yield srv
    srv.stop()


def test_the_target_picks_the_client(tmp_path: Path, server: ServerThread) -> None:
    async def main() -> None:
        async with sqew.AsyncClient(tmp_path / "a.db") as local, \
                sqew.AsyncClient(server.url) as remote:
            assert isinstance(local, AsyncLocalClient) and isinstance(local, sqew.AsyncClient)
            assert isinstance(remote, AsyncHttpClient)
            assert (await local.health()).status == (await remote.health()).status == "ok"

    asyncio.run(main())


def test_waiting_polls_hold_no_database_thread(tmp_path: Path) -> None:
    # One database thread and twenty polls waiting at once: were a waiting poll to hold a
    # thread, the read (on the database thread) could not run until the polls timed out.
    async def main() -> list[list[int]]:
        async with sqew.AsyncClient(tmp_path / "a.db", threads=1) as client:
            await client.create_queue("q")
            polls = [asyncio.create_task(client.poll("q", wait_ms=WAIT_MS)) for _ in range(20)]
            for _ in range(5):  # every poll claims (nothing) and waits
                await asyncio.sleep(0)
            stats = await asyncio.wait_for(client.stats("q"), WAIT_MS / 1000 / 2)
            assert stats.ready == 0 and not any(p.done() for p in polls)
            ids = [(await client.enqueue("q", n)).message_id for n in range(20)]
            got = await asyncio.wait_for(asyncio.gather(*polls), WAIT_MS / 1000 / 2)
            assert sorted(m.id for batch in got for m in batch) == ids
            return [[m.id for m in batch] for batch in got]

    assert all(len(batch) == 1 for batch in asyncio.run(main()))


def test_concurrent_enqueues_on_a_file_all_commit(tmp_path: Path) -> None:
    async def main() -> None:
        async with sqew.AsyncClient(tmp_path / "a.db") as client:
            await client.create_queue("q")
            results = await asyncio.gather(*(client.enqueue("q", n) for n in range(200)))
            assert len({r.message_id for r in results}) == 200
            assert (await client.stats("q")).ready == 200

    asyncio.run(main())
    with sqew.Client(tmp_path / "a.db") as client:  # committed: another client sees them
        assert client.stats("q").ready == 200


def test_a_local_client_serves_the_loop_of_its_first_call(tmp_path: Path) -> None:
    client = sqew.AsyncClient(tmp_path / "a.db")
    asyncio.run(client.create_queue("q"))
    with pytest.raises(RuntimeError, match="event loop of its first call"):
        asyncio.run(client.list_queues())
    with pytest.raises(sqew.errors.ValidationError, match="threads"):
        sqew.AsyncClient(tmp_path / "b.db", threads=0)


def test_a_missing_file_is_unavailable_without_create(tmp_path: Path) -> None:
    with pytest.raises(sqew.errors.Unavailable):
        sqew.AsyncClient(tmp_path / "nope.db", create=False)


def test_enqueues_over_http_are_signed_and_keys_are_sent(
    start_server: Callable[..., ServerThread],
) -> None:
    url = start_server().url  # its own: once a key exists, every call needs one

    async def main() -> None:
        async with sqew.AsyncClient(url) as anyone:
            await anyone.create_queue("signed", hmac_secret=SECRET)
            key = (await anyone.create_key(["produce", "consume"], name="worker")).key
            with pytest.raises(sqew.errors.Unauthorized):
                await anyone.list_queues()
        async with sqew.AsyncClient(url, api_key=key) as unsigned:
            with pytest.raises(sqew.errors.InvalidSignature):
                await unsigned.enqueue("signed", {"n": 1})
            with pytest.raises(sqew.errors.Forbidden):
                await unsigned.create_queue("nope")
        async with sqew.AsyncClient(url, api_key=key, hmac_secret=SECRET) as signer:
            await signer.enqueue("signed", {"n": 1})
            await signer.enqueue_batch("signed", [{"payload": {"n": 2}}])
            got = await signer.poll("signed", batch=2)
        assert [m.payload for m in got] == [{"n": 1}, {"n": 2}]
        assert all(sqew.verify_signature(m, SECRET) for m in got)

    asyncio.run(main())


def test_transport_failures_are_sqew_errors() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"

    async def main() -> None:
        async with sqew.AsyncClient(closed) as client:
            with pytest.raises(sqew.errors.Unavailable, match="cannot reach server"):
                await client.health()
        with pytest.raises(sqew.errors.ValidationError, match="API key"):
            sqew.AsyncClient(closed, api_key="sqew_x\n_y z")

    asyncio.run(main())
