"""A real PostgreSQL server of this process's own: initdb, start on a free port, stop by PID.

Used by the test suite (``tests/targets.py``'s ``postgres`` store factory, the replica and
fault tests) and by ``bench/postgres.py``; it needs only the standard library (psycopg for
``connect``). The binaries come from ``pg_config --bindir`` (Debian's PostgreSQL 15:
``/usr/lib/postgresql/15/bin``).

``initdb`` and ``postgres`` refuse to run as root, and CI runs as root: then every server
command runs as the existing ``postgres`` user (``runuser -u postgres --``) and the server's
directory belongs to that user. The directory is a fresh one under the system temp dir (not
pytest's, whose ``pytest-of-root`` is closed to other users); it holds the data directory,
the log and the unix socket (``-k``). The server listens on 127.0.0.1 and a free port, trust
authentication, superuser ``postgres``.

``PgServer.start`` returns once ``pg_ctl start -w`` saw the server accept connections and
``pg_isready`` agrees; ``stop`` is ``pg_ctl stop -m fast``, then SIGQUIT and SIGKILL to the
postmaster's PID (from ``postmaster.pid``) if that did not end it, and removes the directory.
Every started server is also stopped by an ``atexit`` hook, so a test run that fails still
leaves none behind (a run killed outright cannot; its servers' directories are under
``sqew-pg-*`` in the temp dir).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

START_S = 60  # pg_ctl's own wait for the server to accept connections
STOP_S = 30
RUN_AS = "postgres"  # the OS user the server runs as when we are root

# Settings for throwaway test databases: durability is not what the tests are about (a crash
# of the test server loses nothing anyone needs), and fsync on a shared 2-core box is slow.
FAST = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class PostgresUnavailable(RuntimeError):
    """PostgreSQL cannot be run here (no binaries, no ``postgres`` user as root, no psycopg)."""


@functools.cache
def bindir() -> Path:
    """The directory of ``initdb``, ``pg_ctl`` and ``postgres``: ``$SQEW_PG_BINDIR``, else
    ``pg_config --bindir``, else the newest ``/usr/lib/postgresql/*/bin``. Found once per
    process: every PostgreSQL test asks (``unavailable_reason``), and Debian's ``pg_config``
    is a shell script that runs three programs.

    Raises:
        PostgresUnavailable: none of them has ``initdb``.
    """
    candidates: list[Path] = []
    if os.environ.get("SQEW_PG_BINDIR"):
        candidates.append(Path(os.environ["SQEW_PG_BINDIR"]))
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 timeout=10, check=True).stdout.strip()
            candidates.append(Path(out))
    candidates.extend(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True))
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    raise PostgresUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl) in pg_config --bindir or "
        "/usr/lib/postgresql/*/bin: install Debian's postgresql-15"
    )


def unavailable_reason() -> str | None:
    """Why a server cannot be started here, or None when it can (binaries, user, psycopg)."""
    try:
        bindir()
    except PostgresUnavailable as exc:
        return str(exc)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(RUN_AS)
        except KeyError:
            return f"running as root and there is no '{RUN_AS}' user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and there is no runuser to run PostgreSQL as 'postgres'"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (the postgres extra: SQEW_EXTRAS=test,postgres)"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PgServer:
    """One PostgreSQL server in a temp dir of its own (see the module docstring).

    Args:
        settings: ``-c name=value`` server settings on top of the defaults (e.g. ``FAST``).
        prefix: the temp dir's name prefix.
    """

    def __init__(self, settings: dict[str, str] | None = None, *,
                 prefix: str = "sqew-pg-") -> None:
        self.bin = bindir()
        self.settings = {"listen_addresses": "127.0.0.1", "max_connections": "200",
                         **(settings or {})}
        self.as_root = os.geteuid() == 0
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = 0
        self.running = False
        self._lock = threading.Lock()
        if self.as_root:
            self.dir.chmod(0o700)
            entry = pwd.getpwnam(RUN_AS)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)

    # --- running its commands --------------------------------------------------------------
    def _cmd(self, program: str, *args: str) -> list[str]:
        argv = [str(self.bin / program), *args]
        return ["runuser", "-u", RUN_AS, "--", *argv] if self.as_root else argv

    def _run(self, program: str, *args: str, timeout: float = START_S) -> str:
        proc = subprocess.run(self._cmd(program, *args), capture_output=True, text=True,
                              timeout=timeout, check=False, cwd=self.dir,
                              stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args)} failed ({proc.returncode}): "
                               f"{proc.stdout[-1500:]}{proc.stderr[-1500:]}{self._log_tail()}")
        return proc.stdout

    def _log_tail(self) -> str:
        try:
            return "\nserver log: " + self.log.read_text(errors="replace")[-1500:]
        except OSError:
            return ""

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> PgServer:
        """initdb (the first time), then start on a free port; returns once it accepts
        connections. Registers the ``atexit`` stop."""
        with self._lock:
            if not (self.data / "PG_VERSION").exists():
                self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
                          "-E", "UTF8", "--locale=C", "--no-sync")
            self._start()
        _started.add(self)
        return self

    def _start(self) -> None:
        self.port = self.port or free_port()
        options = [f"-p {self.port}", f"-k {self.dir}"]
        options += [f"-c {name}={value}" for name, value in self.settings.items()]
        # -w: pg_ctl waits until the server accepts connections (it reads the readiness the
        # postmaster writes into postmaster.pid), failing after -t seconds.
        self._run("pg_ctl", "start", "-D", str(self.data), "-l", str(self.log), "-w",
                  "-t", str(START_S), "-o", " ".join(options))
        self.running = True
        self._run("pg_isready", "-h", str(self.dir), "-p", str(self.port), "-t", str(START_S))

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``pg_ctl stop -m fast``, or ``immediate``: a crash, recovered from
        the WAL at the next start; by PID if that fails); the data stays for a later
        ``start`` (on the same port). Idempotent."""
        with self._lock:
            if not self.running:
                return
            pid = self.postmaster_pid()
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired, OSError):
                self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w",
                          "-t", str(STOP_S), timeout=STOP_S + 5)
            # pg_ctl returns when postmaster.pid is gone, a moment before the process is.
            if pid is not None and not _gone(pid, STOP_S / 2):
                _kill(pid)
            self.running = False

    def restart(self) -> None:
        """Stop, then start again on the same port (a database outage, for fault tests)."""
        self.stop()
        with self._lock:
            self._start()

    def destroy(self) -> None:
        """Stop the server and remove its directory (data, log, socket)."""
        self.stop()
        _started.discard(self)
        shutil.rmtree(self.dir, ignore_errors=True)

    def postmaster_pid(self) -> int | None:
        """The running postmaster's PID (``postmaster.pid``'s first line), if there is one."""
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    # --- reaching it -------------------------------------------------------------------------
    def url(self, dbname: str = "postgres", *, driver: str = "postgresql+psycopg") -> str:
        """The database URL sqew takes (``--db``): TCP to 127.0.0.1."""
        return f"{driver}://postgres@127.0.0.1:{self.port}/{dbname}"

    def conninfo(self, dbname: str = "postgres") -> str:
        """A libpq connection string for psycopg (TCP to 127.0.0.1, like ``url``)."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def connect(self, dbname: str = "postgres", **kwargs: Any) -> Any:
        """A psycopg connection (autocommit unless told otherwise)."""
        import psycopg

        kwargs.setdefault("autocommit", True)
        return psycopg.connect(self.conninfo(dbname), **kwargs)

    def create_database(self, name: str, template: str | None = None) -> None:
        """``CREATE DATABASE name [TEMPLATE template]`` (names are ours: plain identifiers).

        A clone copies the template's files (``STRATEGY FILE_COPY``) rather than logging
        each block: half the time for a small database, and with ``fsync`` off the
        checkpoint it needs is cheap."""
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}"'
                         + (f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""))

    def drop_database(self, name: str) -> None:
        """``DROP DATABASE IF EXISTS name WITH (FORCE)``: its leftover sessions are ended."""
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _gone(pid: int, within_s: float) -> bool:
    """Whether process ``pid`` has exited, waiting up to ``within_s`` for it (no child of
    ours, so it cannot be waited for: its PID is polled)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # not ours to signal: it exists
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _kill(pid: int) -> None:
    """End a postmaster by PID: SIGQUIT (immediate shutdown, children too), then SIGKILL."""
    for sig in (signal.SIGQUIT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if _gone(pid, STOP_S / 2):
            return


_started: set[PgServer] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_started):
        with contextlib.suppress(Exception):
            server.destroy()
