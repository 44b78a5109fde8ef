"""The targets the contract suite and the state machine run over: ``backend x client``.

A *target* is one way of reaching a store: a client kind (``local``: a LocalClient in this
process; ``http``: an HttpClient to a real server on 127.0.0.1; ``async-local``,
``async-http``: the same through ``sqew.AsyncClient``, ``tests/async_support.py``) on a
backend (``sqlite``: a SQLite file; ``postgres``: a database on the PostgreSQL server the
tests start, see ``tests/pg_support.py``). ``TARGETS`` lists them; ``tests/conftest.py``
parametrizes the contract fixtures over it and ``tests/test_state_machine.py`` runs its
machine once per entry.
Nothing else names a target, so a new one is one entry in ``TARGETS``.

What an entry provides (``TargetSpec``):

* ``id``: ``<client>-<backend>``, the test id (``local-postgres``).
* ``store``: a ``StoreFactory``: given an empty directory of this test, create a fresh, empty
  store and return its ``Store`` (the database URL both ``LocalClient(url)`` and a server's
  ``Settings.db`` accept, the SQLite file when there is one, and a ``drop`` that removes the
  store after the test). It raises ``pytest.skip`` when the backend is unavailable here (no
  PostgreSQL server, say). One factory serves both client kinds: ``local-postgres`` and
  ``http-postgres`` are ``TargetSpec("local-postgres", postgres, local)`` and
  ``TargetSpec("http-postgres", postgres, http)`` once a ``postgres`` store factory exists
  (e.g. a database cloned from a migrated template, dropped after).
* ``client``: a ``ClientKind`` (``local`` or ``http`` below): opens the client under test on
  a store with a given clock and ``reap_interval_ms``.
* ``marks``: pytest marks of the entry's tests (``postgres``: select or leave out with
  ``-m``); parametrize with ``[spec.param for spec in TARGETS]``.

The clock: tests move time with ``clock.advance(ms)`` instead of sleeping, so the clock a
client kind is given must be the one the *service* reads: ``local`` builds the service with
it, ``http`` runs the server in-process (uvicorn in a thread, still real HTTP on a socket)
with the clock injected. The server's reaper timer is off (it fires on the wall clock, so it
would reap at a moment the test does not choose); as in an embedded client, a poll reaps
first once ``reap_interval_ms`` of the service's clock has passed since the last reap.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import functools
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec
import pytest
import uvicorn

import sqew
from sqew.core.clock import Clock, ManualClock, system_clock
from sqew.core.service import QueueService
from sqew.settings import Settings, from_mapping

SERVER_START_S = 15


# --- what a test gets --------------------------------------------------------------------------
@dataclass
class Target:
    """One client on one store, and the clock the store's service reads.

    Attributes:
        name: the target id (``local-sqlite``, …).
        client: the client under test.
        clock: the service's clock: a ``ManualClock`` when the test asked for one.
        connect: opens another client on the same store, reading time from the given clock
            (concurrency tests: a second consumer, a producer in another thread).
        url: the store's database URL: ``sqew.LocalClient(url)`` is another process's view of
            it (its own service and waiter, no wake-ups shared with the client's).
        sqlite_path: the SQLite file behind the store, when there is one (row-level checks).
        service: the service the client reaches (in this process for both client kinds).
    """

    name: str
    client: sqew.Client
    clock: Clock
    connect: Callable[[Clock], sqew.Client]
    url: str = ""
    sqlite_path: Path | None = None
    service: QueueService | None = None
    rng: random.Random = field(default_factory=random.Random)
    open_with_key: Callable[[str], sqew.Client] | None = None
    """Opens another client of the target's kind presenting an API key (None: the target
    needs no key, being a database)."""
    stops_slowly: bool = False
    """Closing takes tenths of a second, mostly waiting (a server's graceful stop, a
    PostgreSQL store's drop): a caller that need not see it done may ``close_soon``."""
    _cleanups: list[Callable[[], None]] = field(default_factory=list)

    @property
    def manual(self) -> ManualClock:
        """The clock as a ManualClock; skips the test when time cannot be moved here."""
        if not isinstance(self.clock, ManualClock):
            pytest.skip(f"{self.name}: the service clock cannot be moved from the test")
        return self.clock

    def seed_jitter(self, seed: int) -> None:
        """Make the service's backoff jitter a function of ``seed``, so a run is repeatable
        (hypothesis replays and shrinks examples; unseeded jitter would make them flaky)."""
        self.rng.seed(seed)  # the rng the client kind gave the service

    def close(self) -> None:
        """Close the client and everything opened for it, newest first."""
        for cleanup in reversed(self._cleanups):
            with contextlib.suppress(Exception):
                cleanup()

    def close_soon(self, then: Callable[[], None] = lambda: None) -> None:
        """``close`` then ``then``, in another thread if it ``stops_slowly``, so the next
        test starts meanwhile (its store and port are its own); ``wait_closed`` waits for
        them all."""

        def close() -> None:
            self.close()
            then()

        if not self.stops_slowly:
            close()
            return
        closing = _closing.submit(close)
        with _closing_mutex:
            _unclosed.add(closing)
        closing.add_done_callback(_unclosed.discard)


_closing = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="target-close")
_closing_mutex = threading.Lock()
_unclosed: set[concurrent.futures.Future[None]] = set()


def wait_closed() -> None:
    """Wait until every target given to ``close_soon`` so far is closed (its server stopped,
    its store dropped): before a test that looks at the whole process (its threads, its
    garbage collector), and at the end of the session."""
    with _closing_mutex:
        pending = list(_unclosed)
    concurrent.futures.wait(pending)


# --- backends: fresh stores --------------------------------------------------------------------
@dataclass(frozen=True)
class Store:
    """A fresh, empty store.

    Attributes:
        url: what ``LocalClient(url)`` and a server's ``Settings.db`` accept.
        sqlite_path: the SQLite file, when the store is one.
        drop: removes the store after the test (its clients are closed by then).
    """

    url: str
    sqlite_path: Path | None = None
    drop: Callable[[], None] = lambda: None
    drops_slowly: bool = False
    """``drop`` takes tenths of a second (ending sessions, emptying the database)."""


StoreFactory = Callable[[Path], Store]
"""Creates a fresh store, given an empty directory of the test (``pytest.skip`` if the backend
is unavailable)."""


def sqlite(directory: Path) -> Store:
    """A SQLite file ``directory/q.db``: a copy of an empty database that this process
    migrated once (``_sqlite_template``), as a PostgreSQL store is a clone of a migrated
    template; the directory is the test's, removed with it. (Creating and migrating a file
    is tested where it is the subject: ``tests/engine/test_migrations.py``.)"""
    path = directory / "q.db"
    shutil.copyfile(_sqlite_template(), path)
    path.chmod(0o600)  # as sqew creates its files
    return Store(str(path), sqlite_path=path)


@functools.cache
def _sqlite_template() -> Path:
    """An empty, migrated, closed SQLite database of this process (made on first use)."""
    path = Path(tempfile.mkdtemp(prefix="sqew-template-")) / "template.db"
    sqew.LocalClient(str(path)).close()
    atexit.register(shutil.rmtree, path.parent, True)
    return path


def postgres(directory: Path) -> Store:
    """A fresh PostgreSQL database cloned from the migrated template on this process's server
    (``tests/pg_support.py``), dropped after the test. Skips without sqew's PostgreSQL backend
    or a server here (fails instead under ``SQEW_REQUIRE_POSTGRES``)."""
    import pg_support

    cluster = pg_support.cluster()
    name = cluster.new_database()
    return Store(cluster.url(name), drop=lambda: cluster.drop(name), drops_slowly=True)


# --- clients -----------------------------------------------------------------------------------
class ClientKind(Protocol):
    """Opens the client under test on ``store``, the service reading ``clock``."""

    def __call__(
        self, name: str, store: Store, clock: Clock, *, reap_interval_ms: int
    ) -> Target: ...


def local(name: str, store: Store, clock: Clock, *, reap_interval_ms: int) -> Target:
    """A LocalClient on the store: the service runs in this process, on ``clock``."""

    def connect(other_clock: Clock) -> sqew.Client:
        extra = sqew.LocalClient(store.url, clock=other_clock, reap_interval_ms=reap_interval_ms)
        target._cleanups.append(extra.close)
        return extra

    rng = random.Random()
    client = sqew.LocalClient(store.url, clock=clock, reap_interval_ms=reap_interval_ms,
                              rng=rng)
    target = Target(name, client, clock, connect, url=store.url,
                    sqlite_path=store.sqlite_path, service=client.service, rng=rng)
    target._cleanups.append(client.close)
    return target


def http(name: str, store: Store, clock: Clock, *, reap_interval_ms: int) -> Target:
    """An HttpClient to a real server (uvicorn in a thread, on 127.0.0.1) on the store,
    ``clock`` injected into its service, its reaper timer off."""
    # Settings refuses reap_interval_ms=0 from users (a timer firing without pause); with the
    # timer off it means what it means to a LocalClient: every poll reaps first.
    settings = msgspec.structs.replace(server_settings(store.url),
                                       reap_interval_ms=reap_interval_ms)
    rng = random.Random()
    server = ServerThread(settings, clock, reaper_timer=False, rng=rng)

    def connect(other_clock: Clock) -> sqew.Client:
        # One service, one clock: another client of the same server reads the server's.
        extra = sqew.Client(server.url)
        target._cleanups.append(extra.close)
        return extra

    client = sqew.Client(server.url)
    target = Target(name, client, clock, connect, url=store.url,
                    sqlite_path=store.sqlite_path, service=server.app.state.runtime.service,
                    rng=rng, stops_slowly=True,
                    open_with_key=lambda key: sqew.Client(server.url, api_key=key))
    target._cleanups.extend([server.stop, client.close])
    return target


def async_local(name: str, store: Store, clock: Clock, *, reap_interval_ms: int) -> Target:
    """A ``sqew.AsyncClient`` on the store, run on a loop of its own (``tests/async_support``)."""
    import async_support

    return async_support.local(name, store, clock, reap_interval_ms=reap_interval_ms)


def async_http(name: str, store: Store, clock: Clock, *, reap_interval_ms: int) -> Target:
    """A ``sqew.AsyncClient`` to a real server on the store (``tests/async_support``)."""
    import async_support

    return async_support.http(name, store, clock, reap_interval_ms=reap_interval_ms)


# --- the list ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TargetSpec:
    """One entry of ``TARGETS``: a client kind on a backend (see the module docstring)."""

    id: str
    store: StoreFactory
    client: ClientKind
    marks: tuple[pytest.MarkDecorator, ...] = ()
    files: tuple[str, ...] = ()
    """The contract files the entry runs (empty: all of them), for an entry that adds little
    beyond others (``tests/conftest.py`` leaves the rest out)."""

    def runs(self, file: str) -> bool:
        """Whether this entry runs the contract tests of ``file`` (a test module's name)."""
        return not self.files or file in self.files

    @property
    def param(self) -> object:
        """This entry as a ``pytest.param`` (its id and marks) for ``parametrize``."""
        return pytest.param(self, id=self.id, marks=self.marks)

    def open(self, directory: Path, clock: Clock, *, reap_interval_ms: int = 1000) -> Target:
        """A fresh store in ``directory`` and the client under test on it; ``close()`` the
        target to stop everything and drop the store."""
        store = self.store(directory)
        try:
            target = self.client(self.id, store, clock, reap_interval_ms=reap_interval_ms)
        except BaseException:
            store.drop()
            raise
        target._cleanups.insert(0, store.drop)
        target.stops_slowly = target.stops_slowly or store.drops_slowly
        return target


MEETING_FILES = ("test_long_poll.py", "test_ack_nack.py", "test_enqueue_many.py")
"""The contract files a target runs whose client and store each run every file elsewhere: where
a client kind and a backend meet (long polls, leases, batches)."""

TARGETS: tuple[TargetSpec, ...] = (
    TargetSpec("local-sqlite", sqlite, local),
    TargetSpec("http-sqlite", sqlite, http),
    TargetSpec("local-postgres", postgres, local, marks=(pytest.mark.postgres,)),
    TargetSpec("http-postgres", postgres, http, marks=(pytest.mark.postgres,)),
    TargetSpec("async-local-sqlite", sqlite, async_local),
    TargetSpec("async-http-sqlite", sqlite, async_http),
    # Its client is async-local-sqlite's and its store local-postgres's, each run on every
    # file: a few files check that they meet (waits on the store's notifications, leases,
    # batches).
    TargetSpec("async-local-postgres", postgres, async_local, marks=(pytest.mark.postgres,),
               files=MEETING_FILES),
    # Its client is async-http-sqlite's and its server http-postgres's: the same few files.
    TargetSpec("async-http-postgres", postgres, async_http, marks=(pytest.mark.postgres,),
               files=MEETING_FILES),
)
SYNC_TARGETS = tuple(spec for spec in TARGETS if not spec.id.startswith("async-"))
"""The targets whose client is a ``sqew.Client`` itself: what runs on top of a Client (the
Worker, the relay) is tested on these (the async targets' facade is the tests' own)."""


# --- the in-process server ---------------------------------------------------------------------
class ServerThread:
    """A real uvicorn server of ``create_app(settings, clock=clock)`` in a thread, on 127.0.0.1
    and a free port. Real HTTP; the service reads the test's clock.

    Args:
        settings: the server's settings.
        clock: the service's clock.
        reaper_timer: run the reaper on its wall-clock timer (as ``sqew serve`` does). Off,
            only polls reap (every ``reap_interval_ms`` of the service's clock), so a test on
            a ManualClock decides when that happens.
    """

    def __init__(
        self, settings: Settings, clock: Clock = system_clock, *, reaper_timer: bool = True,
        rng: random.Random | None = None, tracer_provider: Any = None,
    ) -> None:
        from sqew.server import runner
        from sqew.server.app import shape

        self._shape = shape(settings, tracer_provider)
        self._given_back = False
        self.app = _apps.take(self._shape, settings, clock=clock, rng=rng,
                              reaper_timer=reaper_timer, tracer_provider=tracer_provider)
        self.sock = runner.bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = _PromptServer(runner.uvicorn_config(settings, app=self.app))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + SERVER_START_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the test server did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        """Stop serving (graceful: running requests finish) and close the socket."""
        self.server.exit_now()
        self.thread.join(SERVER_START_S)
        self.sock.close()
        if not self.thread.is_alive():  # its lifespan has ended: the app may serve again
            _apps.give_back(self)


class _Apps:
    """The apps of the servers this process has stopped, to be served again.

    Building an app's routes costs a tenth of a second of CPU, most of a test server's start,
    and the suite starts thousands: ``create_app(reuse=...)`` gives a stopped app a new
    runtime (service, store, clock, keys, metrics) and keeps its routes. An app is handed to
    one server at a time, and only after its last server's lifespan ended."""

    def __init__(self) -> None:
        self._free: dict[Any, list[Any]] = {}
        self._mutex = threading.Lock()

    def take(self, built_for: Any, settings: Settings, **kwargs: Any) -> Any:
        """An app for ``settings`` (whose ``shape`` is ``built_for``): a stopped one of that
        shape given a new runtime, or a new one."""
        from sqew.server.app import create_app

        with self._mutex:
            free = self._free.get(built_for)
            app = free.pop() if free else None
        if app is not None:
            try:
                return create_app(settings, reuse=app, **kwargs)
            except ValueError:  # serving again after all: never shared, a new app instead
                pass
        return create_app(settings, **kwargs)

    def give_back(self, server: ServerThread) -> None:
        """The app of ``server``, which has stopped, may be taken again. Once, however often
        (and from however many threads) ``stop`` is called: by a second call, a later server
        may be serving it."""
        with self._mutex:
            if not server._given_back:
                server._given_back = True
                self._free.setdefault(server._shape, []).append(server.app)


_apps = _Apps()


class _PromptServer(uvicorn.Server):
    """uvicorn's server, which notices a stop at once instead of at its next tick.

    uvicorn's main loop looks at ``should_exit`` every 0.1 s; hundreds of servers a run
    would each wait half a tick on average for nothing. This loop waits for the tick *or*
    ``exit_now``, and ticks as uvicorn's does otherwise.
    """

    _loop: asyncio.AbstractEventLoop | None = None
    _exit: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._exit = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    def exit_now(self) -> None:
        """Stop serving (from any thread): ``should_exit``, seen without waiting a tick."""
        self.should_exit = True
        loop, event = self._loop, self._exit
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: it has exited
                loop.call_soon_threadsafe(event.set)


def server_settings(db: Path | str, **extra: object) -> Settings:
    """Settings for a test server on ``db`` (quiet logs, a free port)."""
    return from_mapping({"db": str(db), "port": 0, "log_level": "warning", **extra})
