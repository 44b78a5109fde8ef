"""``./scripts/serve`` as a new user runs it: on a fresh copy of the project, with no venv.

It must set up ``.venv`` with sqew alone (none of the test extra's tools), start serving and
answer ``/healthz``. Slow: it installs sqew's dependencies into a new venv.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP_S = 900  # a new venv and sqew's dependencies, on a shared machine
STOP_S = 15


def fresh_copy(dest: Path) -> Path:
    """The working tree's files as a clone would have them (tracked and new, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
        check=True, capture_output=True, timeout=60,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():  # (a tracked file deleted in the working tree is not copied)
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The first line ``proc`` prints on stdout ('' if none in time)."""
    got: list[str] = []
    stdout = proc.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: got.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return got[0].strip() if got else ""


def kill_tree(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` and whatever it started, by PID."""
    children: list[psutil.Process] = []
    with contextlib.suppress(psutil.NoSuchProcess):
        children = psutil.Process(proc.pid).children(recursive=True)
    for p in [psutil.Process(proc.pid), *children] if proc.poll() is None else children:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    proc.wait(STOP_S)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.mark.slow
def test_serve_on_a_fresh_copy_installs_sqew_alone_and_answers_healthz(tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "sqew")
    here = str(Path(sys.executable).parent)  # the test venv stays out of the user's PATH
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != here)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SQEW_", "VIRTUAL_ENV", "PYTHON"))}
    with (tmp_path / "stderr.txt").open("w") as stderr:
        proc = subprocess.Popen(["./scripts/serve", "--port", "0"], cwd=copy,
                                env={**env, "PATH": path}, stdout=subprocess.PIPE,
                                stderr=stderr, text=True)
        try:
            line = first_line(proc, SETUP_S)
            assert line.startswith("sqew serving on http://127.0.0.1:"), (
                line, (tmp_path / "stderr.txt").read_text()[-3000:])
            url = line.split("serving on ", 1)[1].split()[0]
            assert httpx.get(f"{url}/healthz", timeout=30).json() == {"status": "ok"}
            assert (copy / "sqew.db").is_file()  # the default database, in the copy
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(STOP_S) == 0
        finally:
            kill_tree(proc)
    venv_python = copy / ".venv" / "bin" / "python"
    tools = subprocess.run(
        [str(venv_python), "-c", "import importlib.util as u; print([m for m in ("
         "'pytest', 'hypothesis', 'schemathesis', 'mypy', 'ruff', 'psutil') if u.find_spec(m)])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()
    assert tools == "[]"  # serving installs no test tool
    assert sorted(p.name for p in (copy / ".venv").glob(".sqew-installed*")) == [
        ".sqew-installed"]
