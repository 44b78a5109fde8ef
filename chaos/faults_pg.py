"""The PostgreSQL scenarios beyond a restart: an outage of seconds, the ``LISTEN`` connections
ended alone, several ``sqew serve`` replicas killed in turn, and a TCP proxy that delays,
drops, resets and blackholes the connections to the database (``chaos.proxy``).

Each counts its faults in ``run.faults``; what it measures besides the oracle's rules goes
into ``run.notes``, and an answer sqew must never give (a 500, another code than
``Unavailable``, an answer without the error envelope, a server that did not recover by
itself) into a note that starts with ``WRONG_ANSWER`` (``wrong_answers`` finds them).
"""

from __future__ import annotations

import time
from typing import Any

from chaos import probes
from chaos.journal import read_all
from chaos.proxy import Proxy
from chaos.run import GRACE_S, Run

WRONG_ANSWER = "wrong answer"
RECOVER_S = 30.0
"""How long after PostgreSQL is back every kind of call must succeed again (no restart)."""
SHOWN = 5
_KINDS = {"readyz": "/readyz", "http": "HTTP enqueues", "client": "Client enqueues"}
LISTENER = "sqew-listen"
"""The ``application_name`` of sqew's ``LISTEN`` connection (docs/postgres.md)."""


def wrong_answers(notes: list[str]) -> list[str]:
    """The notes that report an answer sqew must not give."""
    return [n for n in notes if n.startswith(WRONG_ANSWER)]


def _report_wrong(run: Run, probe: probes.Probe) -> None:
    for a in probe.wrong()[:SHOWN]:
        run.notes.append(f"{WRONG_ANSWER}: {a.kind} at +{a.t0 - run.until:.1f} s: {a.outcome}")


def pg_outage(run: Run) -> None:
    """PostgreSQL stopped (``pg_ctl stop -m fast``) and left down 1 to 4 s while the workload and
    the probes keep calling, then started again on the same port: meanwhile every answer must
    be ``Unavailable`` (503 with the envelope) and ``/readyz`` not ready; once it is back,
    every kind of call must succeed again without restarting anything."""
    assert run.pg is not None
    server = run.pg.server
    probe = probes.Probe([s.url for s in run.servers], run.via or run.target).start()
    outages: list[tuple[float, float]] = []  # from the stop's start to the start's
    stopped: list[tuple[float, float]] = []  # from the stop's end (PostgreSQL gone)
    recovery: list[float] = []
    try:
        while run.pause(0.5, 1.2) and time.time() < run.until:
            down_s = min(run.rng.uniform(1.0, 4.0), max(1.0, run.fault_deadline - time.time()))
            down = time.time()
            server.stop("fast")
            gone = time.time()
            run.faults += 1
            time.sleep(down_s)
            up = time.time()
            server.start()
            outages.append((down, up))
            stopped.append((gone, up))
            took = probe.recovered(time.time(), time.time() + RECOVER_S)
            if took is None:
                run.notes.append(f"{WRONG_ANSWER}: not every kind of call succeeded "
                                 f"{RECOVER_S:g} s after PostgreSQL was back")
            else:
                recovery.append(took)
    finally:
        probe.stop()
        probe.save(run.directory / "probes.ndjson")
    during = probe.during(outages)
    run.notes.append(f"{len(outages)} outages ({sum(hi - lo for lo, hi in stopped):.1f} s "
                     "down); calls sent from each stop's start to the start's:")
    for kind in ("readyz", "http", "client"):
        sent = [(a, inside) for a, inside in during if a.kind == kind]
        by: dict[str, int] = {}
        for a, inside in sent:
            label = a.outcome if inside or a.outcome != "ok" else "ok once back"
            by[label] = by.get(label, 0) + 1
        slowest = max((a.t1 - a.t0 for a, _ in sent if a.outcome != "ok"), default=0.0)
        run.notes.append(f"  {_KINDS[kind]}: {len(sent)} sent: "
                         + ", ".join(f"{v} {k}" for k, v in sorted(by.items()))
                         + f" (the slowest refusal in {slowest:.1f} s)")
    if recovery:
        run.notes.append(f"every kind of call succeeded again within {max(recovery):.1f} s "
                         "of PostgreSQL being back (no restart)")
    said_ready = [a for a, inside in probe.during(stopped)
                  if a.kind == "readyz" and a.outcome == "ok" and inside]
    if said_ready:
        run.notes.append(f"{WRONG_ANSWER}: /readyz said ready {len(said_ready)} times while "
                         "PostgreSQL was down")
    if not all(s.running() for s in run.servers):
        run.notes.append(f"{WRONG_ANSWER}: sqew serve exited during an outage")
    _report_wrong(run, probe)


def _terminate_listeners(run: Run) -> int:
    """``pg_terminate_backend`` of every ``LISTEN`` session of the run's database."""
    assert run.pg is not None
    with run.pg.server.connect() as conn:
        (n,) = conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = %s AND pid <> pg_backend_pid()",
            (run.pg.name, LISTENER)).fetchone()
    return int(n)


def _wakeup_note(run: Run) -> None:
    """Wait for the workload to stop, then count the missed wake-ups in its journals."""
    for slot in run.slots:
        slot.finish(run.until + GRACE_S)
    w = probes.missed_wakeups(read_all(run.directory / "journals"))
    run.notes.append(
        f"long polls: {w.long_polls}, {w.empty} came back empty after their whole wait; of "
        f"those, {w.ready_throughout} while a message of their queue was ready throughout "
        f"and {w.ready_during} while one was ready at least {probes.LATE_S:g} s before the "
        "end (missed wake-ups)")


def pg_listen(run: Run) -> None:
    """``pg_terminate_backend`` of the ``LISTEN`` sessions alone (``application_name``
    ``sqew-listen``: each Client's and the server's), again and again, while consumers long
    poll; then the missed wake-ups are counted."""
    ended = 0

    def terminate() -> None:
        nonlocal ended
        n = _terminate_listeners(run)
        ended += n
        run.faults += 1 if n else 0

    wake = probes.WakeProbe(run.server.url, run.via or run.target).start()
    try:
        while run.pause(0.1, 0.4) and time.time() < run.until:
            wake.trial(terminate)
    finally:
        wake.stop()
    run.notes.append(f"{ended} LISTEN sessions terminated")
    slowest = max(wake.woken, default=0.0)
    run.notes.append(
        f"wake probes (a long poll through one process, killed LISTEN sessions, then a "
        f"message through another): {len(wake.woken)} woken (the slowest {slowest:.2f} s "
        f"after the enqueue), {wake.missed} came back empty after their whole wait")
    _wakeup_note(run)


def kill_replica(run: Run) -> None:
    """``kill -9`` one of several ``sqew serve`` replicas on the database (the HTTP workload
    spreads its calls over them), then start it again on its port."""
    while run.pause(0.8, 1.6):
        victim = run.rng.choice(run.servers)
        victim.kill()
        run.faults += 1
        victim.start()
    _wakeup_note(run)


class ProxyFaults:
    """The ``pg-proxy`` scenario: ``prepare`` puts a ``chaos.proxy.Proxy`` between PostgreSQL
    and the replicas and Clients of the run (the oracle reads the database directly),
    ``inject`` breaks the connections through it."""

    def __init__(self) -> None:
        self._proxies: dict[int, Proxy] = {}

    def prepare(self, run: Run) -> None:
        """Start the proxy; the servers and the workload's Clients connect through it."""
        assert run.pg is not None
        proxy = Proxy(run.pg.server.port).start()
        self._proxies[id(run)] = proxy
        run.cleanups.append(lambda: self._close(run))
        run.via = run.pg.url.replace(f":{run.pg.server.port}/", f":{proxy.port}/", 1)
        for server in run.servers:
            server.db = run.via

    def _close(self, run: Run) -> None:
        proxy = self._proxies.pop(id(run), None)
        if proxy is not None:
            proxy.close()

    def inject(self, run: Run) -> None:
        """At random moments, each kind in turn: reset (RST) or close (FIN) about half the
        connections, forward nothing for 0.3 to 2 s, or hold every chunk 100 ms to 2 s for a
        while."""
        proxy = self._proxies[id(run)]
        counts = {"reset": 0, "drop": 0, "blackhole": 0, "delay": 0}
        cut = 0
        while run.pause(0.3, 1.0) and time.time() < run.until:
            # each kind in turn (a reset first: the short form has time for one or two)
            kind = list(counts)[run.faults % len(counts)]
            left = max(0.3, run.fault_deadline - time.time())
            if kind == "delay":
                proxy.delay(run.rng.uniform(0.1, 2.0), min(left, run.rng.uniform(0.5, 2.0)))
            elif kind == "blackhole":
                proxy.blackhole(min(left, run.rng.uniform(0.3, 2.0)))
            else:
                n = (proxy.drop if kind == "drop" else proxy.reset)(run.rng)
                if not n:
                    continue
                cut += n
            counts[kind] += 1
            run.faults += 1
        shown = ", ".join(f"{v} {k}" for k, v in counts.items())
        run.notes.append(f"proxy faults: {shown} ({cut} connections cut; "
                         f"{proxy.accepted} accepted in all)")


def scenarios() -> list[Any]:
    """The scenarios of this module (``chaos.scenarios.Scenario``s)."""
    from chaos.scenarios import Scenario

    proxied = ProxyFaults()
    return [
        Scenario("pg-outage", "PostgreSQL stopped 1-4 s under load, then started; answers "
                 "and /readyz probed meanwhile", pg_outage, backend="postgres"),
        Scenario("pg-listen", "pg_terminate_backend of the LISTEN sessions alone, "
                 "repeatedly, during long polls", pg_listen, backend="postgres"),
        Scenario("replicas", "kill -9 one of 2 sqew serve replicas on one PostgreSQL "
                 "database, restarted", kill_replica, backend="postgres", replicas=2),
        Scenario("pg-proxy", "a TCP proxy to PostgreSQL delays, drops, resets and "
                 "blackholes connections (2 replicas)", proxied.inject, backend="postgres",
                 replicas=2, prepare=proxied.prepare),
    ]
