"""The metrics directory of a ``--workers N`` server: its own while it runs, removed when it
stops, and removed by the next server to start if it was killed outright.

Every worker process writes its metrics to files ``<kind>_<pid>.db`` in one directory
(prometheus-client's multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR``), under the temp
directory. A server killed with ``kill -9`` cannot remove it, and its workers, orphaned, may go
on serving and writing there. So the directory's name says whose it is:
``sqew-metrics-<pid>.<pid namespace>-<random>``, the server process and its PID namespace (two
containers sharing /tmp number their processes apart). A server removes, when it starts, the
directories it can tell are stale: its user's, of its PID namespace, whose server process and
every worker process named by its files are gone. Any other is left alone: another user's, a
live server's, one still in use by orphaned workers, one whose name says no owner.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator

from sqew.server.metrics import MULTIPROC_ENV

PREFIX = "sqew-metrics-"
_OWNED = re.compile(rf"^{PREFIX}(\d+)\.(\d+)-")
_WORKER_FILE = re.compile(r"_(\d+)\.db$")  # prometheus-client's `<kind>_<pid>.db`
log = logging.getLogger("sqew.server")


@contextlib.contextmanager
def metrics_dir() -> Iterator[str]:
    """A fresh ``PROMETHEUS_MULTIPROC_DIR`` for the workers of one server, removed after;
    the stale ones of servers killed outright are removed first (``remove_stale``).

    Every worker process writes its metrics there (the variable is set before the workers
    import the library: they are spawned), and the worker answering a scrape sums them all
    (``sqew.server.metrics``). A directory of the server's own: files left by another run
    would be added in.
    """
    parent = tempfile.gettempdir()
    remove_stale(parent)
    path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}.{_pid_namespace()}-", dir=parent)
    previous = os.environ.get(MULTIPROC_ENV)
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        if previous is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous
        shutil.rmtree(path, ignore_errors=True)


def remove_stale(parent: str) -> list[str]:
    """Remove the metrics directories in ``parent`` whose processes are all gone.

    Returns:
        The directories removed.
    """
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed: list[str] = []
    namespace = _pid_namespace()
    for name in names:
        owned = _OWNED.match(name)
        if owned is None or int(owned[2]) != namespace:
            continue
        path = os.path.join(parent, name)
        if _ours(path) and not _in_use(path, int(owned[1])):
            shutil.rmtree(path, ignore_errors=True)
            log.info("removed the metrics directory %s of a server that is gone", path)
            removed.append(path)
    return removed


def _ours(path: str) -> bool:
    """A directory (not a link to one) of this process's user."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def _in_use(path: str, server: int) -> bool:
    """Whether the server process or a worker process of the directory may still run."""
    try:
        files = os.listdir(path)
    except OSError:
        return True
    workers = {int(m[1]) for m in map(_WORKER_FILE.search, files) if m is not None}
    return any(_alive(pid) for pid in {server, *workers})


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (whoever's it is: a reused PID counts as alive)."""
    if pid <= 0:  # not a process: os.kill would signal a process group
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM), or unknown: leave the directory be
        return True
    return True


def _pid_namespace() -> int:
    """This process's PID namespace (the inode of /proc/self/ns/pid), 0 where there is none."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0
