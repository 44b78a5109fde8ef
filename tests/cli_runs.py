"""Run the ``sqew`` command line from a test: as a process forked by the fork server
(``forkserver.py``), or, with ``SQEW_TEST_FORKSERVER=0``, by starting the installed binary.

``run`` is what every test helper that runs a short ``sqew`` command calls
(``tests/cli/cli_support.py`` and the server tests' ``cli`` helpers); ``start`` starts one that
goes on beside the test (the server tests' ``sqew serve``). Tests about how a process starts
(signals during its imports) start the binary themselves.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

TIMEOUT_S = 60  # per run; a hung command fails its test instead of the suite


def sqew_binary() -> str:
    """The installed console script (the venv's, next to this interpreter, if not on PATH)."""
    beside = Path(sys.executable).parent / "sqew"
    return str(beside) if beside.exists() else (shutil.which("sqew") or str(beside))


def forking() -> bool:
    """Whether runs are forked by the fork server (not under ``SQEW_TEST_FORKSERVER=0``)."""
    return os.environ.get("SQEW_TEST_FORKSERVER", "1") != "0"


def environment(**extra: str) -> dict[str, str]:
    """This process's environment without any ``SQEW_*`` variable, plus ``extra``: what a
    test's command starts from, so the suite's own settings never leak into it."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("SQEW_")}, **extra}


User = tuple[int, int]
"""Another user a fork-server run is made (uid, gid; no supplementary groups): what file modes
let it do is what the test is about. (The binary as another user needs an interpreter that
user may run: ``tests/another_user.py``.)"""


def run(argv: Sequence[str], *, cwd: Path | str, env: dict[str, str] | None = None,
        stdin: bytes | None = None, user: User | None = None) -> tuple[int, bytes, bytes]:
    """Run ``sqew argv`` in ``cwd`` with exactly the environment ``env`` (default:
    ``environment()``) and ``stdin`` (empty if None), as ``user`` if given; its exit status
    (negative: the signal that ended it), stdout and stderr. A run still going after
    ``TIMEOUT_S`` is killed by its PID (``subprocess.TimeoutExpired``)."""
    env = environment() if env is None else env
    if not forking():
        if user is not None:
            raise ValueError("a run as another user is a fork-server run (see User)")
        proc = subprocess.run([sqew_binary(), *argv], input=stdin or b"", capture_output=True,
                              cwd=cwd, env=env, timeout=TIMEOUT_S, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    return fork_server().run(argv, cwd=cwd, env=env, stdin=stdin, user=user)


def completed(argv: Sequence[str], *, cwd: Path | str, env: dict[str, str] | None = None,
              stdin: str | None = None,
              user: User | None = None) -> subprocess.CompletedProcess[str]:
    """``run`` with text in and out, as ``subprocess.run(..., text=True)`` returns it."""
    returncode, out, err = run(argv, cwd=cwd, env=env,
                               stdin=None if stdin is None else stdin.encode(), user=user)
    return subprocess.CompletedProcess([sqew_binary(), *argv], returncode,
                                       out.decode(errors="replace"),
                                       err.decode(errors="replace"))


class ForkServer:
    """The test process's fork server (``forkserver.py`` in a subprocess), started on first
    use, stopped by its PID when the test process exits. Its stdin is a pipe this process
    never writes to: if the test process dies without stopping it, the server reads the
    end of that pipe and exits."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="sqew-forkserver-"))
        self.socket = str(self.dir / "socket")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("forkserver.py")), self.socket],
            env=environment(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=foreground,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if ready != b"ready\n":
            self.stop()
            raise RuntimeError(f"the CLI fork server did not start: {ready!r}")
        atexit.register(self.stop)

    def run(self, argv: Sequence[str], *, cwd: Path | str, env: dict[str, str],
            stdin: bytes | None, user: User | None = None) -> tuple[int, bytes, bytes]:
        """Run ``sqew argv`` (as ``user`` if given); its exit status, stdout and stderr. A run
        still going after ``TIMEOUT_S`` is killed by its PID and raises
        ``subprocess.TimeoutExpired``."""
        with contextlib.ExitStack() as stack:
            files = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(3)]
            files[0].write(stdin or b"")
            files[0].seek(0)
            proc = ForkedRun([sqew_binary(), *argv],
                             self._request(argv, cwd, env, [f.fileno() for f in files], user))
            try:
                returncode = proc.wait(TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(TIMEOUT_S)  # its status: the connection is then closed
                raise
            for f in files[1:]:
                f.seek(0)  # the run wrote through its own descriptor of the same file
            return returncode, files[1].read(), files[2].read()

    def start(self, argv: Sequence[str], *, cwd: Path | str | None,
              env: dict[str, str], stdout: IO[Any] | None = None,
              stderr: IO[Any] | None = None, stdin: int | None = None,
              text: bool = True) -> ForkedRun:
        """Start ``sqew argv`` and return at once; it runs until it exits, as a
        ``subprocess.Popen`` of the binary does. Its stdin is empty, or a pipe the returned
        run's ``stdin`` writes to when ``stdin`` is ``subprocess.PIPE``; stdout and stderr are
        pipes (text, or bytes when ``text`` is false), or the open files ``stdout`` and
        ``stderr``."""
        piped = stdin == subprocess.PIPE
        in_r, in_w = os.pipe() if piped else (os.open(os.devnull, os.O_RDONLY), -1)
        out_r, out_w = os.pipe() if stdout is None else (-1, os.dup(stdout.fileno()))
        err_r, err_w = os.pipe() if stderr is None else (-1, os.dup(stderr.fileno()))
        try:
            conn = self._request(argv, cwd or os.getcwd(), env, [in_r, out_w, err_w])
        except BaseException:
            for fd in (in_w, out_r, err_r):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, err_w):  # the run has its own: its end is the pipes' end
                os.close(fd)
        mode = "r" if text else "rb"
        return ForkedRun([sqew_binary(), *argv], conn,
                         open(out_r, mode) if out_r >= 0 else None,
                         open(err_r, mode) if err_r >= 0 else None,
                         open(in_w, "wb") if in_w >= 0 else None)

    def _request(self, argv: Sequence[str], cwd: Path | str, env: dict[str, str],
                 fds: list[int], user: User | None = None) -> socket.socket:
        """Ask for a run of ``sqew argv`` with ``fds`` as its stdin, stdout and stderr (as
        ``user`` if given); the connection its PID and then its exit status come on
        (``ForkedRun`` reads them)."""
        request = json.dumps({"binary": sqew_binary(), "argv": list(argv), "cwd": str(cwd),
                              "env": env, "user": user}).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(TIMEOUT_S)
            conn.connect(self.socket)
            socket.send_fds(conn, [struct.pack("!I", len(request))], fds)
            conn.sendall(request)
        except BaseException:
            conn.close()
            raise
        return conn

    def stop(self) -> None:
        """End the server by its PID (runs in progress finish on their own)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(TIMEOUT_S)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ForkedRun:
    """A run the fork server started, seen as a ``subprocess.Popen`` of the binary is:
    ``pid``, ``stdin``, ``stdout`` and ``stderr`` (pipes, from ``ForkServer.start``),
    ``poll``, ``wait``, ``communicate``, ``send_signal``, ``kill``, ``returncode``
    (negative: the signal that ended it). The run is not this process's child: its exit
    status comes from the fork server, which waits for it."""

    def __init__(self, args: list[str], conn: socket.socket, stdout: IO[Any] | None = None,
                 stderr: IO[Any] | None = None, stdin: IO[bytes] | None = None) -> None:
        self.args = args
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._conn = conn
        self._received = b""
        self._readers: list[threading.Thread] | None = None
        self._said: dict[int, Any] = {}
        pid = self._line(TIMEOUT_S)
        if pid is None:
            conn.close()
            raise RuntimeError("the fork server did not start the run")
        self.pid = int(pid)

    def poll(self) -> int | None:
        """The exit status if the run has ended, else None."""
        return self._status(0)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the run to end; its exit status.

        Raises:
            subprocess.TimeoutExpired: it still runs after ``timeout`` seconds.
        """
        status = self._status(timeout)
        if status is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return status

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Close stdin, read stdout and stderr to their end and wait for the run to exit;
        what they said (None for one that is not a pipe), as ``Popen.communicate``, which
        may be called again after a timeout.

        Raises:
            subprocess.TimeoutExpired: the streams or the run did not end in ``timeout``.
        """
        if self.stdin is not None and not self.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.stdin.close()
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._readers is None:  # one reader a stream, kept across calls
            self._readers = [threading.Thread(target=self._drain, args=(s,), daemon=True)
                             for s in (self.stdout, self.stderr) if s is not None]
            for reader in self._readers:
                reader.start()
        for reader in self._readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return (None if self.stdout is None else self._said.get(id(self.stdout)),
                None if self.stderr is None else self._said.get(id(self.stderr)))

    def _drain(self, stream: IO[Any]) -> None:
        with contextlib.suppress(OSError, ValueError):  # closed under it: the test has ended
            self._said[id(stream)] = stream.read()
            stream.close()  # read to its end, as Popen.communicate leaves it

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the run, unless it has ended (as ``Popen.send_signal``)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def _status(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            line = self._line(timeout)
            if line is not None:
                self.returncode = int(line)
                self._conn.close()
        return self.returncode

    def _line(self, timeout: float | None) -> bytes | None:
        """The fork server's next line, or None if none came within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._received:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._conn], [], [], left)[0]:
                return None
            chunk = self._conn.recv(64)
            if not chunk:
                raise RuntimeError(f"the fork server went away during run {self.args}")
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return line


Started = ForkedRun | subprocess.Popen[Any]
"""What ``start`` returns: a run of the fork server, or of the binary."""


_server: ForkServer | None = None
_starting = threading.Lock()


def start(argv: Sequence[str], *, cwd: Path | str | None, env: dict[str, str] | None = None,
          binary: bool = False, stdin: int | None = None, text: bool = True,
          log: IO[Any] | None = None) -> Started:
    """Start ``sqew argv`` in ``cwd`` with exactly the environment ``env`` (default:
    ``environment()``), stdin empty (or a pipe: ``stdin=subprocess.PIPE``), and stdout and
    stderr pipes (text, or bytes when ``text`` is false) or both into the open file ``log``,
    in a foreground job's signal state (``foreground``); it runs until it exits or is stopped
    by its PID. Forked by the fork server (a run gets SIGTERM if the test process goes first),
    or started as the binary when ``binary`` says so (or ``SQEW_TEST_FORKSERVER=0``)."""
    env = environment() if env is None else env
    if binary or not forking():
        return subprocess.Popen([sqew_binary(), *argv], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL if stdin is None else stdin,
                                stdout=subprocess.PIPE if log is None else log,
                                stderr=subprocess.PIPE if log is None else subprocess.STDOUT,
                                text=text, preexec_fn=foreground)
    return fork_server().start(argv, cwd=cwd, env=env, stdin=stdin, text=text, stdout=log,
                               stderr=log)


def fork_server() -> ForkServer:
    """This test process's ``ForkServer`` (one, though tests run commands from threads)."""
    global _server
    with _starting:
        if _server is None:
            _server = ForkServer()
        return _server


def foreground() -> None:
    """In the forked child (``preexec_fn``): SIGINT and SIGTERM at their default, as a
    terminal gives them to the command it runs in the foreground.

    A process inherits an *ignored* signal across exec, and sqew, like any Unix program, leaves
    ignored what it was started ignoring: a test suite started as a background job (``pytest
    &`` in a script ignores SIGINT) would otherwise see every Ctrl-C test's command ignore it.
    """
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
