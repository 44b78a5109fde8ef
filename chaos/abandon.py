"""Clients that leave the server mid-request: ``cancel-merged`` and ``disconnect``.

Requests go out on raw sockets (``http.client`` would read what these clients do not), from
threads of the harness, which journals what they were answered (``abandon.1.ndjson``, a
journal like a workload process's) so that the oracle checks it with the rest:

- ``cancel-merged``: bursts of enqueues and polls sent at once (a barrier), so that the server
  merges them into group commits with each other and the workload's; about half the clients
  close the connection (some with a reset) a few milliseconds after sending, before any
  answer. An enqueue whose answer never came is journalled as an intent only (it may or may
  not exist); an answered one must not be lost; up to ``ACKED`` leases of the answered polls
  are acked in a second burst, cut the same way (an ack cut is ``unknown``). Every answer
  read must be a normal one (2xx; the backpressure refusal ``Overloaded``; ``LeaseLost`` or
  ``MessageNotFound`` for an ack).
- ``disconnect``: polls of large batches (of the workload's queues, or of ``bulk``'s 4 kB
  messages: an answer larger than the sockets' buffers) whose client reads part of the
  answer and closes (half of them with ``SO_LINGER`` 0: a reset), and long polls on an
  empty queue abandoned
  mid-wait. The server must stay healthy: ready, no 5xx counted by ``/metrics``, long polls
  waiting back to the workload's own, and its TCP connections back to the workload's.

In both, leases given to answers nobody read must end when they say (``check_stored``).
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import struct
import threading
import time
import urllib.request
from typing import Any

import psutil

import sqew
from chaos import workload
from chaos.clockstep import check_stored
from chaos.journal import OK, UNKNOWN, Journal, Record, payload_digest
from chaos.leases import Violation
from chaos.run import PRODUCED, QUEUES, Run

BURST = 24
"""Clients of one burst of ``cancel-merged``."""
ACKED = 4
"""Leases of a burst's answered polls that are acked (the others are abandoned: they
expire, as a consumer's do)."""
AHEAD_MS = 1000 + 1000
"""The longest lease the workload and the bursts ask for (1 s), plus reading time."""
NORMAL_REFUSALS = frozenset({"Overloaded"})
IDLE = "idle"
"""A queue nothing is enqueued to: a long poll there waits until its ``wait_ms``."""
BULK = "bulk"
"""A queue of large messages nobody consumes: a poll of 100 of them answers some 400 kB, more
than the sockets' buffers, so a client that leaves cuts the server's answer mid-write."""
BULK_COUNT, BULK_BYTES = 300, 4000
CONN_SLACK = 4
"""TCP connections the server may have more at the end than at the start: the workload's
HTTP clients (two processes) open another now and then."""


def _request(port: int, method: str, path: str, body: Any = None) -> bytes:
    data = b"" if body is None else json.dumps(body).encode()
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
    return head.encode() + data


def _answer(sock: socket.socket) -> tuple[int, Any]:
    """Read one HTTP response (``Content-Length`` framed, as sqew answers): status, JSON."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the answer's head")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next((int(v) for k, _, v in (h.partition(":") for h in lines[1:])
                   if k.lower() == "content-length"), 0)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the answer's end")
        rest += chunk
    return status, json.loads(rest) if rest else None


def _close(sock: socket.socket, reset: bool) -> None:
    if reset:  # SO_LINGER 0: close sends a reset, not a FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Client(threading.Thread):
    """One client of a burst: sends its request when the barrier opens; ``cut`` ones close
    after ``cut_s`` without reading; the others keep the answer."""

    def __init__(self, port: int, barrier: threading.Barrier, call: dict[str, Any],
                 cut_s: float | None, reset: bool) -> None:
        super().__init__(daemon=True)
        self.port, self.barrier, self.call = port, barrier, call
        self.cut_s, self.reset = cut_s, reset
        self.t0 = self.t1 = 0.0
        self.status: int | None = None
        self.body: Any = None
        self.error: str | None = None

    def run(self) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        except OSError as exc:
            self.error = f"connect: {exc}"
            with contextlib.suppress(threading.BrokenBarrierError):
                self.barrier.wait()
            return
        try:
            self.barrier.wait()
            self.t0 = time.time()
            sock.sendall(_request(self.port, *self.call["http"]))
            if self.cut_s is not None:
                time.sleep(self.cut_s)
                return
            self.status, self.body = _answer(sock)
            self.t1 = time.time()
        except (OSError, ValueError, threading.BrokenBarrierError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            _close(sock, self.reset)


def _calls(rng: random.Random, serial: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(BURST):
        if rng.random() < 0.5:
            queue, key = rng.choice(PRODUCED), f"abandon-{serial}-{i}"
            payload = workload.payload_for(key)
            out.append({"op": "enqueue", "queue": queue, "key": key, "payload": payload,
                        "http": ("POST", f"/queues/{queue}/messages",
                                 {"payload": payload, "idempotency_key": key})})
        else:
            # A long poll waits outside the merged claims; cut, its claim is cancelled
            # (given back if it ran in a group meanwhile).
            queue = rng.choice(list(QUEUES))
            batch, wait_ms = rng.choice((1, 2, 4)), rng.choice((0, 0, 300))
            out.append({"op": "poll", "queue": queue, "wait_ms": wait_ms,
                        "http": ("POST", f"/queues/{queue}/poll?batch={batch}"
                                         f"&wait_ms={wait_ms}")})
    return out


SETTLE_REFUSALS = frozenset({"LeaseLost", "MessageNotFound"})
"""Refusals of an ack that are normal answers (the lease had ended and was taken, or the
message is gone)."""


def _code(c: _Client) -> str | None:
    return c.body.get("error", {}).get("code") if isinstance(c.body, dict) else None


def _bad(c: _Client) -> str | None:
    """What is wrong with a kept answer (None: a normal one)."""
    if c.error is not None:
        return c.error
    if c.status in (200, 201):
        return None
    normal = NORMAL_REFUSALS | (SETTLE_REFUSALS if c.call["op"] == "ack" else frozenset())
    return None if _code(c) in normal else f"HTTP {c.status}: {c.body}"


def _fire(run: Run, calls: list[dict[str, Any]]) -> list[_Client]:
    """Send ``calls`` at once (a barrier), about half of them cut before their answer (a
    third of those with a reset); wait for every client."""
    barrier = threading.Barrier(len(calls))
    clients = []
    for call in calls:
        cut = run.rng.random() < 0.5
        clients.append(_Client(run.server.port, barrier, call,
                               run.rng.uniform(0.0, 0.05) if cut else None,
                               cut and run.rng.random() < 0.3))
    for c in clients:
        c.start()
    for c in clients:
        c.join(60)
    return clients


def _kept(run: Run, clients: list[_Client]) -> list[_Client]:
    """The clients that read their answer, a violation added for each abnormal one."""
    out = []
    for c in clients:
        if c.cut_s is not None:
            continue
        wrong = _bad(c)
        if wrong is not None:
            run.violations.append(Violation("bad-answer", (
                f"{c.call['op']} of {c.call['queue']} in a burst with cancelled requests: "
                f"{wrong}")))
        else:
            out.append(c)
    return out


def _burst(run: Run, journal: Journal, serial: int) -> int:
    """One burst of enqueues and polls, then one of acks of what the polls leased; how many
    clients left before their answer."""
    clients = _fire(run, _calls(run.rng, serial))
    for c in clients:
        call = c.call
        if c.cut_s is not None and call["op"] == "enqueue":
            journal.write({"op": "enqueue-intent", "queue": call["queue"], "key": call["key"],
                           "digest": payload_digest(call["payload"]), "outcome": UNKNOWN,
                           "t0": c.t0})
    polled: list[tuple[str, Record]] = []
    for c in _kept(run, clients):
        call = c.call
        if c.status not in (200, 201):
            continue
        if call["op"] == "enqueue":
            journal.write({"op": "enqueue", "queue": call["queue"], "key": call["key"],
                           "id": c.body["message_id"], "duplicate": c.body["duplicate"],
                           "digest": payload_digest(call["payload"]), "t0": c.t0, "t1": c.t1})
        elif c.body["messages"]:
            leases = [{k: m[k] for k in ("id", "token", "attempts", "lease_expires_at")}
                      for m in c.body["messages"]]
            journal.write({"op": "poll", "queue": call["queue"], "messages": leases,
                           "wait_ms": call["wait_ms"], "t0": c.t0, "t1": c.t1})
            polled += [(call["queue"], lease) for lease in leases]
    return sum(1 for c in clients if c.cut_s is not None and c.t0) + _acks(run, journal, polled)


def _acks(run: Run, journal: Journal, polled: list[tuple[str, Record]]) -> int:
    """Ack up to ``ACKED`` of the leases at once (the others are left to expire), about half
    of the acks cut before their answer (``unknown``); how many were cut."""
    if not polled:
        return 0
    calls: list[dict[str, Any]] = [{"op": "ack", "queue": q, "lease": lease,
              "http": ("POST", f"/queues/{q}/ack", {"id": lease["id"], "token": lease["token"]})}
             for q, lease in polled[:ACKED]]
    now = time.time()
    for call in calls:  # the intents before the calls
        journal.write({"op": "ack-intent", "queue": call["queue"], "id": call["lease"]["id"],
                       "token": call["lease"]["token"], "t0": now})
    clients = _fire(run, calls)
    kept = {id(c) for c in _kept(run, clients)}
    for c in clients:
        lease = c.call["lease"]
        if c.cut_s is not None or id(c) not in kept:
            outcome, t1 = UNKNOWN, time.time()
        else:
            outcome, t1 = (OK if c.status == 200 else str(_code(c))), c.t1
        journal.write({"op": "ack", "queue": c.call["queue"], "id": lease["id"],
                       "token": lease["token"], "t0": c.t0 or now, "outcome": outcome, "t1": t1})
    return sum(1 for c in clients if c.cut_s is not None and c.t0)


def cancel_merged(run: Run) -> None:
    """Bursts of concurrent enqueues and polls, half of them cut before their answer."""
    serial, before = 0, _metrics(run)
    with Journal(run.directory / "journals" / "abandon.1.ndjson") as journal:
        while run.pause(0.2, 0.6):
            run.faults += _burst(run, journal, serial)
            serial += 1
    check_stored(run, AHEAD_MS)
    after = _metrics(run)
    _no_errors(run, before, after)
    groups = max(1.0, after["groups"] - before["groups"])
    run.notes.append(f"{serial} bursts of {BURST} requests; {run.faults} cut before their "
                     f"answer; {(after['grouped'] - before['grouped']) / groups:.1f} "
                     "operations per group commit meanwhile")


def _no_errors(run: Run, before: dict[str, float], after: dict[str, float]) -> None:
    """A violation if the server answered anyone (the workload's clients too) a 5xx other
    than 503 meanwhile."""
    if after["5xx"] > before["5xx"]:
        run.violations.append(Violation("unhealthy", (
            f"{after['5xx'] - before['5xx']:g} answers with a 5xx status (not 503)")))


# --- disconnect ---------------------------------------------------------------------------------
def _metrics(run: Run) -> dict[str, float]:
    """``/metrics``' answers with a 5xx status other than 503 (which backpressure and the
    shutdown answer on purpose) and long polls waiting."""
    with urllib.request.urlopen(f"{run.server.url}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    out = {"5xx": 0.0, "waiting": 0.0, "groups": 0.0, "grouped": 0.0}
    for line in text.splitlines():
        if line.startswith("sqew_group_commit_batch_size_count"):
            out["groups"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("sqew_group_commit_batch_size_sum"):
            out["grouped"] += float(line.rsplit(" ", 1)[1])
        if line.startswith("sqew_http_requests_total{") and 'status="5' in line \
                and 'status="503"' not in line:
            out["5xx"] += float(line.rsplit(" ", 1)[1])
        if line.startswith("sqew_long_polls_waiting"):
            out["waiting"] += float(line.rsplit(" ", 1)[1])
    return out


def _server_process(run: Run) -> psutil.Process:
    assert run.server.proc is not None
    return psutil.Process(run.server.proc.pid)


def _connections(proc: psutil.Process) -> int:
    """The server's TCP connections (not its listening socket)."""
    return sum(1 for c in proc.net_connections(kind="tcp") if c.status != psutil.CONN_LISTEN)


def _leave(run: Run) -> None:
    """One client that leaves: mid-answer of a large batch, or mid-wait of a long poll."""
    port = run.server.port
    reset = run.rng.random() < 0.5
    with contextlib.ExitStack() as stack:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        stack.callback(_close, sock, reset)
        if run.rng.random() < 0.5:
            queue = run.rng.choice((BULK, *PRODUCED))
            sock.sendall(_request(port, "POST", f"/queues/{queue}/poll?batch=100"))
            sock.recv(run.rng.choice((1, 64, 512)))  # part of the answer, then gone
        else:
            sock.sendall(_request(port, "POST", f"/queues/{IDLE}/poll?batch=4&wait_ms=5000"))
            time.sleep(run.rng.uniform(0.02, 0.3))


def disconnect(run: Run) -> None:
    """Clients leaving mid-answer and mid-wait, several at once; then the server's health."""
    with sqew.Client(run.target) as client:  # type: ignore[abstract]
        client.create_queue(IDLE)
        client.create_queue(BULK, visibility_ms=500, max_attempts=1000)
        client.enqueue_batch(BULK, [{"payload": {"i": i, "body": "b" * BULK_BYTES}}
                                    for i in range(BULK_COUNT)])
    proc = _server_process(run)
    fds0, rss0, before = proc.num_fds(), proc.memory_info().rss, _metrics(run)
    conns0 = _connections(proc)
    while run.pause(0.2, 0.5):
        leaving = [threading.Thread(target=_leave, args=(run,), daemon=True)
                   for _ in range(run.rng.randint(2, 6))]
        for t in leaving:
            t.start()
        for t in leaving:
            t.join(60)
        run.faults += len(leaving)
    deadline = time.time() + 5
    while True:  # the server lets go of what the clients left (bounded)
        after, fds, conns = _metrics(run), proc.num_fds(), _connections(proc)
        settled = after["waiting"] <= 1 and conns <= conns0 + CONN_SLACK
        if settled or time.time() > deadline:
            break
        time.sleep(0.1)
    rss = proc.memory_info().rss
    run.notes.append(f"server TCP connections {conns0} -> {conns}, open descriptors "
                     f"{fds0} -> {fds}, RSS {rss0 >> 20} -> "
                     f"{rss >> 20} MiB, 5xx answers {before['5xx']:g} -> {after['5xx']:g}, "
                     f"long polls waiting {after['waiting']:g}")
    _no_errors(run, before, after)
    problems = []
    if not settled:
        problems.append(f"{after['waiting']:g} long polls still waiting, {conns} TCP "
                        f"connections (from {conns0})")
    with urllib.request.urlopen(f"{run.server.url}/readyz", timeout=30) as answer:
        if answer.status != 200:
            problems.append(f"/readyz answered {answer.status}")
    run.violations += [Violation("unhealthy", p) for p in problems]
    check_stored(run, AHEAD_MS)
    with sqew.Client(run.target) as client:  # type: ignore[abstract]
        stats = client.stats(BULK)
    kept = stats.ready + stats.delayed + stats.leased
    if kept != BULK_COUNT:
        run.violations.append(Violation("lost", (
            f"{BULK} holds {kept} messages, not the {BULK_COUNT} enqueued (none is consumed)")))
