"""A fork server for the CLI tests: each ``sqew`` run is a new process forked from one that has
already imported the CLI, instead of a new interpreter importing it all again.

Most of a short ``sqew`` command's time is its imports (typer, rich, SQLAlchemy, alembic,
httpx: about half a second of CPU), and the CLI tests run about a thousand of them. Chromium's
zygote and Mercurial's chg solve the same problem the same way. A run is still a process of
its own: it gets the test's argv, environment, working directory and stdin/stdout/stderr,
runs the console script's ``sqew.cli:main`` and leaves as the interpreter does (threads joined,
atexit handlers, garbage collected, streams flushed: see ``_become``), and the test gets its
exit status, negative when a signal ended it, as from ``subprocess``.

What differs from starting the binary: the import of sqew happened earlier, with the fork
server's environment, and the modules are not torn down at exit. sqew reads its environment
when a command runs, never at import (but for prometheus-client's multiprocess mode: a
``sqew serve --workers N`` starts the binary), and the tests that are about starting a
process (signals during its imports, the quick start) start the real binary. A run may be
made another user (the request's ``user``), as ``subprocess`` makes one.
``SQEW_TEST_FORKSERVER=0`` makes every run start the binary.

Protocol, one connection per run: the test sends a length-prefixed JSON request with three
descriptors (stdin, stdout, stderr) attached; the server answers with the run's PID (a line),
then, when it has ended, its exit status (a line). The run is the server's own child (one fork
of the server's heap per run), its end seen through a pidfd. A run that the test waits for has
files as stdout and stderr (``run``); one that goes on beside the test (``sqew serve``), pipes
or a log file (``start``).

Run as ``python forkserver.py SOCKET`` with a pipe as stdin; it serves until that pipe ends
(the test process closed it, or died) or until it is killed by its PID; its runs still going
then get SIGTERM.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import json
import os
import select
import selectors
import signal
import socket
import struct
import sys
from collections.abc import Iterator
from typing import Any

HEADER = struct.Struct("!I")
MAX_REQUEST = 1 << 20
RECEIVE_S = 10


def preload() -> None:
    """Import every sqew module a command may load (all but the Spark ones and the
    ``python -m`` scripts), and what the libraries import on first use: typer's parameter
    adapters, rich's emoji table, httpx's transport."""
    import importlib
    import pkgutil

    import sqew

    for module in pkgutil.walk_packages(sqew.__path__, "sqew."):
        if not module.name.startswith("sqew.spark") and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    for name in ("typer._adapters", "rich._emoji_codes", "httpx", "httpcore", "h11", "certifi",
                 "encodings.idna"):
        importlib.import_module(name)
    from sqew.cli import app

    app.click_command()  # built from every command's signature: once, here


def serve(path: str) -> None:
    """Accept runs on the Unix socket ``path`` until stdin ends; each is a child of this
    process, whose end is seen through a pidfd and reported on its connection."""
    preload()
    # Without this, a run's first full collection (and its exit) would write to every object
    # the imports made, copying each page of the shared heap: as much CPU as the imports.
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ)
    events.register(sys.stdin, selectors.EVENT_READ)
    runs: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> the run's PID, its connection
    while True:
        for key, _ in events.select():
            if key.fileobj is sys.stdin:
                return  # the test process has gone: so do we, and our runs (SIGTERM)
            if key.fileobj is listener:
                conn, _ = listener.accept()
                _start(conn, listener, events, runs)
            else:
                _report(key.fd, events, runs)


def _start(conn: socket.socket, listener: socket.socket, events: selectors.BaseSelector,
           runs: dict[int, tuple[int, socket.socket]]) -> None:
    """Read one request from ``conn``, fork the run and send its PID; ``_report`` sends its
    exit status. (One fork per run: a fork of this process's heap costs ~9 ms of CPU.)"""
    try:
        conn.settimeout(RECEIVE_S)  # the tests' client sends its request as it connects
        request, fds = _receive(conn)
    except (OSError, ValueError):
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:  # the run: nothing of the server's stays open in it
        die_with(server)
        events.close()
        listener.close()
        for pidfd, (_, other) in runs.items():
            os.close(pidfd)
            other.close()
        conn.close()
        try:
            _become(request, fds, server)  # never returns, but if it cannot become the run:
        except BaseException:  # (its working directory, its user) said on its stderr
            sys.excepthook(*sys.exc_info())
        os._exit(126)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)  # (readable once the run has ended, even if it already has)
    runs[pidfd] = (pid, conn)
    events.register(pidfd, selectors.EVENT_READ)
    with contextlib.suppress(OSError):  # a client that went away gets nothing
        conn.sendall(f"{pid}\n".encode())


def _report(pidfd: int, events: selectors.BaseSelector,
            runs: dict[int, tuple[int, socket.socket]]) -> None:
    """The run of ``pidfd`` has ended: reap it and send its exit status."""
    events.unregister(pidfd)
    os.close(pidfd)
    pid, conn = runs.pop(pidfd)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):
        conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    conn.close()


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
PR_SET_PDEATHSIG = 1


def die_with(parent: int) -> None:
    """In a child just forked: SIGTERM when its parent (PID ``parent``) exits (Linux). A run
    of the fork server, which exits when the test process has gone, and a server a test
    starts (``cli_support.Server``) never outlive the run of the tests."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it exited before that took effect
            os._exit(128 + signal.SIGTERM)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """A request and its three descriptors (ValueError: not one)."""
    head, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    try:
        if len(head) != HEADER.size or len(fds) != 3:
            raise ValueError("not a request")
        (size,) = HEADER.unpack(head)
        if size > MAX_REQUEST:
            raise ValueError("too large a request")
        body = b""
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise ValueError("a request cut short")
            body += chunk
        return json.loads(body), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


_frozen = False
"""Whether ``run_forked`` froze this process's objects (asked of ``gc.get_freeze_count`` at
every run, it would walk them all each time)."""


def run_forked(argv: list[str], *, timeout: float) -> tuple[int, bytes, bytes] | None:
    """Run ``sqew argv`` in a child forked from this process, with this process's working
    directory and environment and an empty stdin; its exit status, stdout and stderr, or
    None if it still ran after ``timeout`` seconds (it is then killed by its PID).

    What the chaos harness's command-line workload calls: a process that has preloaded
    (``preload``) and runs no other thread. The run is a process of its own, this one's
    child: a ``kill -9`` or ``SIGSTOP`` of this process's tree reaches it too."""
    global _frozen
    if not _frozen:  # once (see ``serve``): the imports, not later garbage
        gc.freeze()
        _frozen = True
    sys.stdout.flush()  # what this process printed is not the run's output
    sys.stderr.flush()
    with open(os.devnull, "rb") as stdin, _memory_file() as out, _memory_file() as err:
        pid = os.fork()
        if pid == 0:
            atexit._clear()  # this process's exit handlers are not the run's
            _become({"cwd": os.getcwd(), "env": dict(os.environ), "binary": "sqew",
                     "argv": argv}, [os.dup(stdin.fileno()), os.dup(out), os.dup(err)])
        status = _wait(pid, timeout)
        if status is None:
            return None
        return status, _contents(out), _contents(err)


@contextlib.contextmanager
def _memory_file() -> Iterator[int]:
    """A file without a name, in memory: its descriptor, closed on leaving."""
    fd = os.memfd_create("sqew-run")
    try:
        yield fd
    finally:
        os.close(fd)


def _contents(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)  # the run wrote through its own descriptor of it
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _wait(pid: int, timeout: float) -> int | None:
    """The exit status of the child ``pid`` (negative: the signal that ended it), or None
    if it still ran after ``timeout`` seconds: it is then killed and reaped."""
    pidfd = os.pidfd_open(pid)
    try:
        ended, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ended:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return None
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _become(request: dict[str, Any], fds: list[int], parent: int | None = None) -> None:
    """Turn this process into ``sqew ARGV`` as the request describes it (its streams, user,
    working directory, environment), run it, and exit.

    Never returns. The exit is the interpreter's, but for its last step: the command's
    ``SystemExit`` (or exception) is reported as the interpreter reports it; non-daemon
    threads are joined, ``atexit`` handlers run, what has become garbage is collected (its
    finalizers run: files and connections the run left open are closed) and the standard
    streams flushed, in the interpreter's order. Then ``os._exit``, without tearing down
    the modules the server imported: the run's own objects are gone by then, and tearing
    down the rest would write to every page of the heap the fork shares, a tenth of a second
    of CPU a run, more than most commands take.

    ``parent`` (the fork server): a run made another user gets SIGTERM when it exits, as
    every run does (``die_with``), which the change of user would otherwise have cleared.
    """
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    if request.get("user") is not None:  # another user, as ``subprocess`` makes one
        uid, gid = request["user"]
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if parent is not None:  # (a change of user clears the parent-death signal)
            die_with(parent)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if os.environ.get("PYTHONFAULTHANDLER"):  # what the interpreter does with it at startup
        import faulthandler

        faulthandler.enable()
    sys.argv = [request["binary"], *request["argv"]]
    from sqew.cli import main

    try:
        main()
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc)
    except BaseException:  # as the interpreter: the traceback on stderr, status 1
        sys.excepthook(*sys.exc_info())
        status = 1
    _shutdown(status)


def _exit_status(exc: SystemExit) -> int:
    """The status the interpreter exits with for ``exc`` (printing its message if any)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _shutdown(status: int) -> None:
    """What the interpreter does after the main module ends, then ``os._exit(status)``."""
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            if stream is sys.stdout:
                status = 120  # as the interpreter: stdout could not be flushed at exit
    os._exit(status)


if __name__ == "__main__":
    serve(sys.argv[1])
