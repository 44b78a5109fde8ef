"""The ``close-fd`` scenario's fault inside a workload process: another part of the process
opens and closes the database's files beside sqew's live connections.

Kept apart from the scenario (``chaos.faults_file``) so that a workload process imports
nothing more of the harness for it.
"""

from __future__ import annotations

import random
import signal
import threading
import time

FD_SIGNAL = signal.SIGUSR1
"""What the harness sends a workload process to make its closer thread act once."""
SIDE_FILES = ("", "-wal", "-shm")
"""The database file and the SQLite files beside it that the closer opens and closes."""


def install(db: str, seed: int) -> None:
    """In a workload process that opens ``db`` itself: on ``FD_SIGNAL``, a thread of this
    process opens the database file, its ``-wal`` and its ``-shm`` (some of them), reads a
    little and closes them, a few milliseconds later (beside the engine's connections and
    their threads, at whatever moment they are in). POSIX locks belong to the process: any
    ``close()`` of a descriptor of the file drops all the process's locks on it, SQLite's
    included."""
    wanted = threading.Event()
    rng = random.Random(seed)

    def run() -> None:
        while True:
            wanted.wait()
            wanted.clear()
            time.sleep(rng.uniform(0.0, 0.03))
            for suffix in rng.sample(SIDE_FILES, rng.randint(1, len(SIDE_FILES))):
                try:
                    with open(db + suffix, "rb") as f:
                        f.read(rng.choice((0, 100, 4096)))
                except OSError:
                    pass  # (no -wal at this moment)

    threading.Thread(target=run, name="chaos-fd-closer", daemon=True).start()
    signal.signal(FD_SIGNAL, lambda *_: wanted.set())
