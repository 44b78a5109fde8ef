"""Background work in exactly one process per database: with ``--workers 2``, with two servers
on one file and with the embedded Client beside a server, one process reaps; when it dies, a
follower takes over; expired messages and ended last leases go on time whoever leads.

Observed from outside: ``/readyz``'s ``reaper_leader``, the leader's and followers' log lines
(each with its pid), and queue stats that only a reaper run changes (a server's reads never
reap)."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

import sqew
from sqew.core.clock import ManualClock, system_clock

from .support import START_S, STOP_S, Served, serve

FAST = {"SQEW_REAP_INTERVAL_MS": "100", "SQEW_LOG_LEVEL": "debug"}  # (followers log at debug)
LEADS = re.compile(r"this process \(pid (\d+)\) leads the reaper")
FOLLOWS = re.compile(r"pid (\d+) follows")


def until(predicate: Callable[[], bool], what: str, timeout: float = START_S) -> None:
    """Check ``predicate`` every 20 ms until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def leads(server: Served) -> bool:
    answer = httpx.get(f"{server.url}/readyz", timeout=10)
    assert answer.status_code == 200, answer.text
    return bool(answer.json()["reaper_leader"])


def pids(pattern: re.Pattern[str], server: Served) -> list[int]:
    return [int(m.group(1)) for m in pattern.finditer(server.log.text())]


def metric(server: Served, name: str, **labels: str) -> float:
    """A sample of the server's /metrics (0 when absent: a labelled counter never moved)."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def expiring(url: str, queue: str) -> tuple[int, int]:
    """A queue (max_attempts 1) with a message that expires in 1 s and one whose only
    lease ends in 300 ms; their ids."""
    with httpx.Client(base_url=url, timeout=10) as http:
        assert http.post("/queues", json={"name": queue, "max_attempts": 1}).status_code == 201
        leased = http.post(f"/queues/{queue}/messages", json={"payload": "leased"}).json()
        polled = http.post(f"/queues/{queue}/poll", params={"visibility_ms": 300}).json()
        assert [m["id"] for m in polled["messages"]] == [leased["message_id"]]
        gone = http.post(f"/queues/{queue}/messages", json={"payload": "x", "ttl_ms": 1000})
        return gone.json()["message_id"], leased["message_id"]


def reaped(url: str, queue: str) -> bool:
    """Whether a reaper run removed the expired message and dead-lettered the other (a stats
    read in a server reaps nothing itself)."""
    stats = httpx.get(f"{url}/queues/{queue}/stats", timeout=10).json()
    return bool(stats["expired_total"] == 1 and stats["dlq"] == 1
                and stats["dead_lettered_total"] == 1)


def test_two_servers_on_one_file_one_reaps_and_the_other_takes_over(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with serve(db, env=FAST) as a, serve(db, env=FAST) as b:
        until(lambda: leads(a) or leads(b), "a leader")
        leader, follower = (a, b) if leads(a) else (b, a)
        until(lambda: bool(pids(FOLLOWS, follower)), "the follower to tick")
        assert not leads(follower)
        assert pids(LEADS, leader) == [leader.proc.pid] and pids(LEADS, follower) == []
        expiring(leader.url, "before")
        until(lambda: reaped(follower.url, "before"), "the leader to reap")
        assert metric(leader, "sqew_reaper_leader") == 1
        assert metric(follower, "sqew_reaper_leader") == 0
        assert metric(leader, "sqew_reaper_removed_total", kind="expired") == 1
        assert metric(leader, "sqew_reaper_removed_total", kind="dead_lettered") == 1
        assert metric(follower, "sqew_reaper_runs_total") == 0

        leader.proc.kill()  # SIGKILL: no release; the lock goes with the process
        leader.proc.wait(STOP_S)
        until(lambda: leads(follower), "the follower to take over")
        assert pids(LEADS, follower) == [follower.proc.pid]
        gone, dead = expiring(follower.url, "after")
        until(lambda: reaped(follower.url, "after"), "the new leader to reap")
        dlq = httpx.get(f"{follower.url}/queues/after/dlq", timeout=10).json()["messages"]
        assert [(m["id"], m["last_error"]) for m in dlq] == [(dead, "lease expired")]
        scan = httpx.get(f"{follower.url}/queues/after/messages", timeout=10).json()
        assert gone not in {m["id"] for m in scan["messages"]}
        assert follower.stop(signal.SIGTERM) == 0
        assert "Traceback" not in follower.stderr()


def test_workers_2_one_worker_reaps_and_another_takes_over(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with serve(db, "--workers", "2", env=FAST) as server:
        until(lambda: bool(pids(LEADS, server)), "a worker to lead")
        (first,) = pids(LEADS, server)
        until(lambda: any(p != first for p in pids(FOLLOWS, server)), "the other to tick")
        workers = {c.pid for c in psutil.Process(server.proc.pid).children(recursive=True)}
        assert first in workers
        assert pids(LEADS, server) == [first]  # the follower ticked and did not lead
        expiring(server.url, "before")
        until(lambda: reaped(server.url, "before"), "the leader to reap")

        psutil.Process(first).kill()
        until(lambda: len(pids(LEADS, server)) == 2, "another worker to take over")
        second = pids(LEADS, server)[1]
        assert second != first
        expiring(server.url, "after")
        until(lambda: reaped(server.url, "after"), "the new leader to reap")
        assert server.stop(signal.SIGTERM) == 0
        log = server.stderr()
        assert "Traceback" not in log
        assert f"released the reaper's lead (pid {second})" in log


def test_the_embedded_client_leaves_reaping_to_a_running_server(tmp_path: Path) -> None:
    """The CLI and the embedded Client reap only when no server leads; an expired message is
    never delivered either way."""
    db = tmp_path / "q.db"
    # Ahead of the server's clock, so that the server's own reap never sees the message expired.
    clock = ManualClock(start_ms=system_clock() + 10**9)
    local = sqew.LocalClient(str(db), clock=clock, reap_interval_ms=0)
    try:
        local.create_queue("q")
        local.enqueue("q", "soon gone", ttl_ms=1000)
        # A server that reaps once when it takes the lead, then not for ten minutes.
        with serve(db, env={"SQEW_REAP_INTERVAL_MS": "600000"}) as server:
            until(lambda: leads(server), "the server to lead")
            clock.advance(1000)
            assert local.poll("q") == []  # expired: never delivered, reaped or not
            assert local.stats("q").expired_total == 0  # the lead is the server's: no reap
            assert server.stop(signal.SIGTERM) == 0  # releases the lead
        assert local.poll("q") == []
        assert local.stats("q").expired_total == 1  # nobody leads: the client reaps
    finally:
        local.close()
