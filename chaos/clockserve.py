"""A sqew server whose clock the harness steps: ``python -m chaos.clockserve --db DB --port N``.

The product has no way to shift a server's time (no variable, no option: nothing a user could
trip). The ``clock-step`` scenario needs one, so it serves sqew from a process of its own,
built as ``sqew serve`` builds its single worker: settings resolved the same way
(``sqew.settings.load``, ``SQEW_*`` variables and ``--db``/``--port`` as flags), the public app
factory (``create_app``) with an injected clock, the same uvicorn configuration
(``runner.uvicorn_config``) on a socket bound like ``sqew serve``'s (``runner.bind``), and the
same ``sqew serving on …`` line once it listens.

Its clock is the wall clock plus an offset. The harness writes ``offset MS`` lines to the
process's stdin; a thread applies each at once and answers ``offset MS`` on stdout, so the
harness knows the moment of each step within the time between its write and that answer
(``ClockServer.step``).
"""

from __future__ import annotations

import argparse
import logging.config
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import uvicorn

from chaos.procs import START_S, Server, child_env
from sqew.core.clock import system_clock
from sqew.server import logs, runner
from sqew.server.app import create_app
from sqew.settings import load


class OffsetClock:
    """The wall clock (epoch ms) plus ``offset_ms``, which the harness sets."""

    def __init__(self) -> None:
        self.offset_ms = 0

    def __call__(self) -> int:
        return system_clock() + self.offset_ms


def _follow(clock: OffsetClock) -> None:
    """Apply each ``offset MS`` line of stdin, and say so on stdout."""
    for line in sys.stdin:
        word, _, value = line.partition(" ")
        if word == "offset":
            clock.offset_ms = int(value)
            sys.stdout.write(f"offset {clock.offset_ms}\n")
            sys.stdout.flush()


def main(argv: list[str]) -> int:
    """Serve until SIGINT/SIGTERM, with a clock stepped through stdin."""
    p = argparse.ArgumentParser(prog="python -m chaos.clockserve")
    p.add_argument("--db", required=True)
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args(argv)
    settings = load(db=args.db, port=args.port)
    log_config = logs.config(settings, root=True)
    logging.config.dictConfig(log_config)
    clock = OffsetClock()
    app = create_app(settings, clock=clock)
    sock = runner.bind(settings.host, settings.port)
    config = runner.uvicorn_config(settings, app, log_config=log_config)
    sys.stdout.write(f"sqew serving on http://{settings.host}:{settings.port} "
                     f"(db: {settings.db})\n")
    sys.stdout.flush()
    threading.Thread(target=_follow, args=(clock,), daemon=True).start()
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0


@dataclass
class Step:
    """One step of the server's clock: from ``before`` to ``after`` (offsets, ms), made at a
    moment between ``sent`` and ``seen`` (epoch seconds of the harness)."""

    sent: float
    seen: float
    before: int
    after: int


@dataclass
class ClockServer(Server):
    """``python -m chaos.clockserve`` in place of ``sqew serve``; ``step`` moves its clock and
    ``steps`` keeps the timeline."""

    steps: list[Step] = field(default_factory=list)
    offset_ms: int = 0

    def launch(self) -> None:
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "chaos.clockserve", "--db", self.db, "--port",
                 str(self.port)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                env=child_env(), cwd=self.log.parent)

    def step(self, offset_ms: int) -> None:
        """Set the clock's offset and return once the server said it applied it.

        Raises:
            RuntimeError: the server did not say so (within ``START_S``): the timeline the
                oracle needs is unknown from then on.
        """
        assert self.proc is not None and self.proc.stdin is not None
        stdout = self.proc.stdout
        assert stdout is not None
        sent = time.time()
        try:
            self.proc.stdin.write(f"offset {offset_ms}\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise RuntimeError(f"the clock server is gone: {exc}") from exc
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_S)
        if not got or got[0].strip() != f"offset {offset_ms}":
            raise RuntimeError(f"the clock server did not apply offset {offset_ms}: {got}")
        self.steps.append(Step(sent, time.time(), self.offset_ms, offset_ms))
        self.offset_ms = offset_ms

    def kill(self) -> None:
        super().kill()
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
