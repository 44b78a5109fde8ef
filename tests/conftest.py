"""Shared fixtures: a ``client`` for every target the contract runs against.

The contract suite (``tests/contract``) is written once against ``sqew.Client`` and runs over
``targets.TARGETS`` (``backend x client``: ``local-sqlite``, ``http-sqlite``,
``local-postgres``, ``http-postgres``, and the same four through ``sqew.AsyncClient``,
``async-local-sqlite`` …; see ``tests/targets.py`` for what a new entry provides;
``tests/pg_support.py`` for the PostgreSQL server the tests start). Every test gets a fresh
store; tests move time with ``clock.advance(ms)`` on the ManualClock the service reads.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Bytecode caching on, for this process and every process the tests start (``sqew`` runs,
# servers, Spark's Python workers, spawned consumers), into a directory of its own under the
# system temp dir, never the source tree: with ``PYTHONDONTWRITEBYTECODE`` set (as some
# sandboxes and CI images do), each of them would compile sqew's modules again, about half
# the cost of a short ``sqew`` command.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX",
                      str(Path(tempfile.gettempdir()) / f"sqew-tests-pycache-{os.getuid()}"))
sys.dont_write_bytecode = False
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]

import httpx  # noqa: E402
import pg_support  # noqa: E402
import pytest  # noqa: E402
from targets import (  # noqa: E402
    TARGETS,
    ServerThread,
    Target,
    TargetSpec,
    server_settings,
    wait_closed,
)

import sqew  # noqa: E402
from sqew.client import tls  # noqa: E402
from sqew.core.clock import Clock, ManualClock, system_clock  # noqa: E402


def _shared_tls_context(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` (an httpx transport's ``__init__``) given sqew's shared default TLS context
    (``sqew.client.tls.default_context``) where it would build its own.

    httpx builds a context for every client it makes, loading certifi's CA bundle: about
    40 ms of CPU, most of a short ``httpx.get``. The tests make about a thousand clients of
    their own (``httpx.get``, ``httpx.Client``), nearly all to ``http://`` servers here;
    they share one context instead, built the same way, as sqew's own clients share it. A
    test that passes ``verify`` gets what it passed."""

    @functools.wraps(init)
    def shared(self: Any, verify: Any = True, *args: Any, **kwargs: Any) -> None:
        init(self, tls.default_context() if verify is True else verify, *args, **kwargs)

    return shared


httpx.HTTPTransport.__init__ = _shared_tls_context(  # type: ignore[method-assign]
    httpx.HTTPTransport.__init__)
httpx.AsyncHTTPTransport.__init__ = _shared_tls_context(  # type: ignore[method-assign]
    httpx.AsyncHTTPTransport.__init__)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze the garbage collector's view of everything imported and collected so far.

    A server started in this process (``ServerThread``, hundreds of them) tunes the collector
    for serving with a full collection and a freeze, unless the process has frozen already
    (``sqew.server.gc_tuning``): here that collection would scan the whole test process each
    time, a quarter of a second per server."""
    gc.collect()
    gc.freeze()


ONE_WORKER = {"tests/spark/": "spark", "tests/chaos/test_scenarios.py": "chaos"}
"""Tests that share one worker under ``pytest -n N --dist loadgroup`` (``./scripts/test``),
by the start of their node id: the Spark tests, since a Python process starts its JVM once,
and each worker that ran Spark tests would start one (seconds of both cores, taken from the
other workers), and a module's session is started again on every worker that runs one of its
tests; the chaos scenarios, each of which loads the machine, one after another."""


def one_worker_group(nodeid: str) -> str | None:
    """The ``ONE_WORKER`` group of a test, if it is in one."""
    for start, group in ONE_WORKER.items():
        if nodeid.startswith(start):
            return group
    return None


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``, grouping by ``ONE_WORKER``. (xdist's own groups, the
    ``xdist_group`` mark, are lost under pytest 9: xdist renames a test by setting an attribute
    that pytest 9 no longer reads, so every test stays a group of its own.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return one_worker_group(nodeid) or nodeid

    return Grouped(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the tests a target does not run (``TargetSpec.files``); then collect the
    longest work first: the Spark group (one worker runs all of it), then the
    tests marked ``slow`` and the state machines. ``pytest -n N --dist loadgroup`` hands out
    work in collection order, so the long poles start while the other workers run the many
    short tests, instead of one worker running them alone at the end. The short tests' files
    are mixed (``mixed``)."""

    def rank(item: pytest.Item) -> int:
        if one_worker_group(item.nodeid) is not None:
            return 0
        if item.get_closest_marker("slow") is not None or "state_machine" in item.nodeid:
            return 1
        return 2

    kept, left_out = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        spec = callspec.params.get("target_spec") if callspec is not None else None
        runs = not isinstance(spec, TargetSpec) or spec.runs(item.path.name)
        (kept if runs else left_out).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    items.sort(key=rank)  # stable: the order within each rank is kept
    first_short = next((i for i, item in enumerate(items) if rank(item) == 2), len(items))
    items[first_short:] = mixed(items[first_short:])


def mixed(items: list[pytest.Item]) -> list[pytest.Item]:
    """The short tests in an order that mixes their files: first those that share a fixture
    wider than a test (a module's server: run together, set up once per worker), in order;
    then the others, each file's spread evenly over the rest of the run.

    Tests of one file tend to wait alike: a file of long polls, lease expiries or rate-limit
    windows, handed out in order, has every worker waiting at once while the CPU idles.
    Spread out, a worker's neighbours run other files' tests meanwhile."""
    shared: list[pytest.Item] = []
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        if any(d[-1].scope not in ("function", "session") for d in defs if d):
            shared.append(item)
        else:
            by_file.setdefault(item.nodeid.split("::")[0], []).append(item)
    # The i-th of a file's n tests at (i + 1/2) / n of the way: every file runs all along.
    spread = sorted((((i + 0.5) / len(tests), item)
                     for tests in by_file.values() for i, item in enumerate(tests)),
                    key=lambda placed: placed[0])
    return shared + [item for _, item in spread]


@pytest.fixture(scope="session", autouse=True)
def _postgres_stops() -> Iterator[None]:
    """Stops this process's PostgreSQL server (if a test started one) when the session ends,
    however the tests went (``pg_support``; an ``atexit`` hook backs this up)."""
    yield
    wait_closed()  # their PostgreSQL databases dropped before the server stops
    pg_support.shutdown()


@pytest.fixture(params=[spec.param for spec in TARGETS])
def target_spec(request: pytest.FixtureRequest) -> TargetSpec:
    """The current entry of ``TARGETS`` (the parameter the contract tests run over)."""
    spec: TargetSpec = request.param
    return spec


@pytest.fixture
def make_target(
    target_spec: TargetSpec, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[Clock], Target]]:
    """Opens more targets of the current kind, each on a fresh store, with a chosen clock."""
    made: list[Target] = []

    def make(clock: Clock) -> Target:
        made.append(target_spec.open(tmp_path_factory.mktemp("store"), clock))
        return made[-1]

    yield make
    for t in reversed(made):
        t.close_soon()


@pytest.fixture
def target(make_target: Callable[[Clock], Target]) -> Target:
    """The target under test with a ManualClock where the factory can inject one."""
    return make_target(ManualClock())


@pytest.fixture
def client(target: Target) -> sqew.Client:
    """The client under test (see ``target``)."""
    return target.client


@pytest.fixture
def clock(target: Target) -> ManualClock:
    """The service's ManualClock: ``clock.advance(ms)`` moves time for the client under test."""
    return target.manual


@pytest.fixture
def realtime_target(make_target: Callable[[Clock], Target]) -> Target:
    """A target of the current kind on the system clock (long polls across threads)."""
    return make_target(system_clock)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh SQLite file path (not created) for tests that work on files directly."""
    return tmp_path / "q.db"


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., ServerThread]]:
    """Starts real servers in threads: ``start_server(clock=..., **settings)``; all stopped after.

    The database defaults to ``tmp_path/server.db``.
    """
    started: list[ServerThread] = []

    def start(clock: Clock = system_clock, **settings: object) -> ServerThread:
        settings.setdefault("db", str(tmp_path / "server.db"))
        db = Path(str(settings.pop("db")))
        started.append(ServerThread(server_settings(db, **settings), clock))
        return started[-1]

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """One real server (thread, system clock) shared by a module's tests."""
    server = ServerThread(server_settings(tmp_path_factory.mktemp("server") / "m.db"))
    yield server
    server.stop()
