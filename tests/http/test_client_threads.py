"""Threads sharing one HTTP ``Client`` from the start of a process never crash it.

msgspec builds a Struct's type information on its first use; two threads doing that at once
crashed the process with a segmentation fault (eight threads sharing a fresh ``Client``: rarely
on a quiet machine, more often on a busy one). sqew builds it at import
(``sqew.models.typeinfo``). The check: a process that has imported sqew's client but decoded
nothing forks children; in each, eight threads sharing one ``Client`` make their first calls at
the same moment (half poll, half enqueue), with the interpreter switching threads every
microsecond, so that an unbuilt type is built by several threads at once. No child may die of a
signal.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqew

CHILDREN = 20
THREADS = 8

FORKING = f"""
import os, sys, threading
import sqew.client.http  # imported: from here on, only the children use the models
url = sys.argv[1]
died = []
for child in range({CHILDREN}):
    pid = os.fork()
    if pid == 0:
        client = sqew.Client(url)
        start = threading.Barrier({THREADS})
        def work(i):
            start.wait()
            if i % 2:
                assert client.poll("q", batch=2)
            else:
                client.enqueue("q", {{"child": child, "thread": i}}, attributes={{"k": "v"}})
        threads = [threading.Thread(target=work, args=(i,)) for i in range({THREADS})]
        sys.setswitchinterval(1e-6)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or os.WEXITSTATUS(status):
        died.append(status)
print(len(died), died[:5])
"""


def test_threads_sharing_a_fresh_client_never_crash_the_process(
    start_server: Callable[..., Any], tmp_path: Path
) -> None:
    server = start_server(db=str(tmp_path / "w.db"))
    with sqew.Client(server.url) as client:
        client.create_queue("q")
        client.enqueue_batch("q", [{"payload": n} for n in range(CHILDREN * THREADS)])
    run = subprocess.run([sys.executable, "-c", FORKING, server.url], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split(" ", 1)[0] == "0", (run.stdout, run.stderr[-3000:])
