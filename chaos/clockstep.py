"""``clock-step``: the server's clock steps backward and forward while the workload runs.

The server is ``chaos.clockserve`` (sqew's app with a clock the harness steps), with a
consumer of the contended queue of its own besides the workload's; the consumers on the file
and the command line keep the real clock. sqew judges a lease's end, a delayed
message's readiness and a backoff by the clock of the service that decides (the one that
polls, reaps or settles): two processes whose clocks disagree disagree about when a lease
ends, and that is not a broken lease. What must hold:

- **one holder by the taker's clock**: a poll answered by the server never takes a lease
  that has not ended by the server's clock; a poll on the file never takes one that has not
  ended by the real clock (``lease_check``). Each lease's end is mapped to the real moment the
  taker's clock reaches its ``lease_expires_at``, with the offset timeline the harness
  journals (``Timeline``); the other lease rules are the usual ones.
- **no time stored beyond the step**: no lease ends, and no message becomes ready, further
  ahead of the real clock than the largest offset the server's clock had, plus the longest
  lease or delay the workload asks for (``check_stored``): a backward step never makes a
  lease last, or a delayed message wait, longer than the step.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterable

from chaos import leases
from chaos.clockserve import ClockServer, Step
from chaos.journal import OK, Record
from chaos.leases import SLACK_S, Held, Violation
from chaos.procs import Slot
from chaos.run import CONTENDED, Run

MAX_STEP_S = 30.0
"""The server's clock is kept within this of the real clock (a step moves it at most this
far); no further than the run is long (the short form: its 3 s), since the oracle waits for
the last lease to end by the real clock."""
AHEAD_MS = 1000 + 1000
"""How far past its clock's now a row's time may lie: the longest lease (``visibility_ms``
or an extend: 1 s), or the longest delay (a nack's 200 ms or a backoff's 400 ms), plus the
time between the offset's change and the file's reading."""


class Timeline:
    """The server's offset (ms) over real time, from the steps the harness made: while a step
    was in flight (between its write and the server's answer) the larger of its two offsets,
    so that a lease's end by the server's clock is never put later than it may have been."""

    def __init__(self, steps: list[Step]) -> None:
        self.segments: list[tuple[float, int]] = [(-math.inf, 0)]
        for s in steps:
            self.segments += [(s.sent, max(s.before, s.after)), (s.seen, s.after)]

    def reaches(self, at_ms: int, after: float) -> float:
        """The first real moment (epoch s), not before ``after``, at which the server's clock
        may have read ``at_ms``."""
        bounds = [*self.segments[1:], (math.inf, 0)]
        for (start, offset), (end, _) in zip(self.segments, bounds, strict=True):
            low = max(start, after)
            if low >= end:
                continue
            moment = max(low, (at_ms - offset) / 1000)
            if moment < end:
                return moment
        return math.inf


def on_server(process: str) -> bool:
    """Whether a journal's process polls through the server (its clock judges its polls)."""
    return process.startswith("consumer-http")


def server_view(journals: dict[str, list[Record]], timeline: Timeline
                ) -> dict[str, list[Record]]:
    """``journals`` with every ``lease_expires_at`` replaced by the real moment (ms) the
    server's clock reaches it, after the call that got it was sent."""
    out = copy.deepcopy(journals)
    for records in out.values():
        for r in records:
            if r.get("op") == "poll":
                for m in r["messages"]:
                    m["lease_expires_at"] = timeline.reaches(m["lease_expires_at"], r["t0"]) * 1000
            elif r.get("op") == "extend" and r.get("outcome") == OK:
                r["lease_expires_at"] = timeline.reaches(r["lease_expires_at"], r["t0"]) * 1000
    return out


def lease_check(server: ClockServer) -> Callable[[dict[str, list[Record]]], list[Violation]]:
    """The lease rules with each poll judged by its taker's clock (see the module)."""

    def check(journals: dict[str, list[Record]]) -> list[Violation]:
        real = leases.leases_of(journals)
        mapped = leases.leases_of(server_view(journals, Timeline(server.steps)))
        groups: dict[tuple[str, int], list[tuple[Held, Held]]] = defaultdict(list)
        for r, m in zip(real, mapped, strict=True):
            groups[(r.queue, r.id)].append((r, m))
        found: list[Violation] = []
        for group in groups.values():
            found += _overlaps(group)
            found += leases._same_attempts([r for r, _ in group])
        by_message = {k: [r for r, _ in g] for k, g in groups.items()}
        found += leases._stale_settles(journals, by_message)
        found += leases._acked_twice(journals)
        return found

    return check


def _overlaps(group: list[tuple[Held, Held]]) -> Iterable[Violation]:
    for a_real, a_server in group:
        for b, _ in group:
            if b.token == a_real.token:
                continue
            a = a_server if on_server(b.process) else a_real
            clock = "the server's" if on_server(b.process) else "the real"
            for start, end in a.certain:
                if b.poll_t0 >= start and b.poll_t1 <= end - SLACK_S:
                    yield Violation("held-by-two", (
                        f"message {a.queue}/{a.id}: {b.process} polled it (token {b.token}, "
                        f"sent {b.poll_t0:.3f}, answered {b.poll_t1:.3f}) while {a.process} "
                        f"held it (token {a.token}) from {start:.3f} to {end:.3f} by "
                        f"{clock} clock"))
                    break


def check_stored(run: Run, ahead_ms: int) -> None:
    """Add a violation to ``run`` if a lease ends, or a message becomes ready, more than
    ``ahead_ms`` past the real clock now."""
    now = int(time.time() * 1000)
    with contextlib.closing(sqlite3.connect(f"file:{run.db}?mode=ro", uri=True,
                                            timeout=30)) as db:
        lease, ready = db.execute(
            "SELECT max(lease_expires_at), max(available_at) FROM messages").fetchone()
    for what, at in (("a lease ends", lease), ("a message becomes ready", ready)):
        if at is not None and at - now > ahead_ms:
            run.violations.append(Violation("held-too-long", (
                f"{what} {(at - now) / 1000:.3f} s from now, more than the {ahead_ms} ms "
                "the server's clock and the workload allow")))


def setup(run: Run) -> None:
    """The run's server is a ``ClockServer``, and its oracle judges polls by their clocks."""
    server = ClockServer(run.target, run.directory / "server.log")
    run.server, run.servers = server, [server]
    run.lease_check = lease_check(server)


def clock_step(run: Run) -> None:
    """Step the server's clock by up to ``MAX_STEP_S`` (no further than the run is long)
    backward or forward, at random moments; the offset stays within that of the real clock.
    Each step is journalled (``clock.ndjson``) and the file's times checked after it; the
    last step brings the clock back."""
    server = run.server
    assert isinstance(server, ClockServer)
    # A consumer of the contended queue through the server: leases then pass between two
    # consumers that share the server's clock, as well as to and from the file's.
    extra = Slot("consumer", "http", "consumer-http-race", run.directory / "journals",
                 ["--target", server.url, "--queues", CONTENDED, "--contended", CONTENDED,
                  "--pace", "0.01"])
    run.slots.append(extra)
    run.restart(extra)
    limit = int(min(MAX_STEP_S, run.seconds) * 1000)
    widest = 0
    with (run.directory / "clock.ndjson").open("a") as journal:
        def step(offset: int) -> None:
            nonlocal widest
            server.step(offset)
            widest = max(widest, offset)
            s = server.steps[-1]
            journal.write(json.dumps(s.__dict__) + "\n")
            journal.flush()
            run.faults += 1

        while run.pause(0.3, 0.9):
            delta = run.rng.choice((-1, 1)) * run.rng.randint(limit // 10, limit)
            step(max(-limit, min(limit, server.offset_ms + delta)))
            check_stored(run, widest + AHEAD_MS)
        step(0)
    check_stored(run, widest + AHEAD_MS)
    run.notes.append(f"server clock offsets (s): "
                     f"{', '.join(f'{s.after / 1000:+.1f}' for s in server.steps)}")
