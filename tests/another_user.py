"""Running sqew as a user whom file modes stop (stdlib only; the chaos harness loads it too,
``chaos.suite.from_tests``).

Root writes any file whatever its mode, so a test of a read-only database runs its reader as
``nobody`` when the suite runs as root, else as this very user (whom ``chmod a-w`` stops
already). That user must be able to run Python: the interpreter of this process if everyone
may read it, else the system's Python of the same version (this machine's may live under a
private ``/root``), with the checkout and this environment's packages on its path.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

ACCOUNT = "nobody"
"""The unprivileged user the readers run as when the suite runs as root."""
CHECKOUT = Path(__file__).resolve().parents[1]
SQEW_MAIN = "import sys; from sqew.cli import main; sys.argv[0] = 'sqew'; main()"


@dataclass(frozen=True)
class Reader:
    """Another user (``uid``/``gid``; None: this process's own) and how it runs Python."""

    uid: int | None
    gid: int | None
    python: str
    env: dict[str, str] = field(default_factory=dict)
    """The environment its processes need (``PYTHONPATH``: the checkout, the packages)."""

    @property
    def sqew(self) -> list[str]:
        """The ``sqew`` command as this user: the argv its arguments follow."""
        return [self.python, "-c", SQEW_MAIN]

    @property
    def user(self) -> tuple[int, int] | None:
        """(uid, gid) to run as, or None: this process's own user."""
        return None if self.uid is None or self.gid is None else (self.uid, self.gid)

    def popen(self) -> dict[str, object]:
        """``subprocess.Popen``'s arguments that start a process as this user."""
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def become(self) -> None:
        """Make this process (a fresh child, before it opens anything) this user."""
        if self.uid is None or self.gid is None:
            return
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)


def _everyone_reads(path: Path) -> bool:
    """Whether every directory above ``path`` lets anyone through, and ``path`` read."""
    path = path.resolve()
    for folder in path.parents:
        if not folder.stat().st_mode & stat.S_IXOTH:
            return False
    return bool(path.stat().st_mode & stat.S_IROTH)


def _python() -> str | None:
    """A Python of this version everyone may run: this one, or the system's."""
    if _everyone_reads(Path(sys.executable)) and _everyone_reads(Path(sys.base_prefix)):
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = shutil.which(version, path="/usr/bin:/usr/local/bin")
    if found is not None and _everyone_reads(Path(found)):
        return found
    return None


def reader() -> Reader | str:
    """How to run sqew as a user file modes stop, or why it cannot be done here."""
    if os.geteuid() != 0:
        return Reader(None, None, sys.executable)
    try:
        account = pwd.getpwnam(ACCOUNT)
    except KeyError:
        return f"there is no user {ACCOUNT!r} to run the workload as"
    python = _python()
    if python is None:
        return (f"no Python {sys.version_info.major}.{sys.version_info.minor} that "
                f"{ACCOUNT!r} may run")
    path = os.pathsep.join([str(CHECKOUT), sysconfig.get_paths()["purelib"]])
    return Reader(account.pw_uid, account.pw_gid, python,
                  {"PYTHONPATH": path, "HOME": "/nonexistent"})
