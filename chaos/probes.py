"""What the PostgreSQL scenarios measure besides the oracle's rules.

- ``Probe``: while a scenario runs, the harness itself calls sqew as a user would, on a queue
  of its own (``PROBE_QUEUE``, outside the oracle's): ``/readyz`` and an enqueue over HTTP on
  every server, and an enqueue through a ``sqew.Client`` in its process. Each answer is kept
  with its times, so that answers given while PostgreSQL was down can be told apart: there
  sqew must answer ``Unavailable`` (HTTP 503 with the error envelope), never a 500, another
  code or something that is not the envelope.
- ``missed_wakeups``: from the journals, the long polls that came back empty after waiting
  their whole ``wait_ms`` although their queue held a message that was ready meanwhile (a
  wake-up that never came).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqew
from chaos.journal import Record, of_kind
from sqew import errors

PROBE_QUEUE = "probe"
HTTP_TIMEOUT_S = 15.0
PAUSE_S = 0.1


@dataclass(frozen=True)
class Answer:
    """One probe call: ``kind`` (``readyz``, ``http``, ``client``), sent at ``t0``, answered at
    ``t1``; ``outcome`` is ``ok``, ``not-ready``, ``Unavailable`` or what was wrong with it."""

    kind: str
    t0: float
    t1: float
    outcome: str

    @property
    def fine(self) -> bool:
        """An answer sqew may give (ready or not, done or ``Unavailable``)."""
        return self.outcome in ("ok", "not-ready", "Unavailable")


def http(method: str, url: str, body: Any = None) -> tuple[int | None, Any]:
    """A request's status and JSON body (the raw text if it is not JSON); ``(None, reason)``
    when no answer came (refused, reset, timed out)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
            status, text = answer.status, answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode("utf-8", "replace")
    except OSError as exc:
        return None, str(exc)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def _envelope_code(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    ok = isinstance(code, str) and isinstance(error.get("message"), str)  # type: ignore[union-attr]
    return code if ok else None


def judge_http(status: int | None, body: Any, done: int) -> str:
    """``ok`` (``done``), ``Unavailable`` (503 with the envelope), ``no answer``, or what was
    wrong."""
    if status is None:
        return "no answer"
    if status == done:
        return "ok"
    code = _envelope_code(body)
    if status == 503 and code == "Unavailable":
        return "Unavailable"
    return f"HTTP {status} {code or 'without the error envelope'}: {str(body)[:200]}"


@dataclass
class Probe:
    """Calls sqew on its own threads until ``stop``; ``answers`` keeps every answer."""

    servers: list[str]
    target: str
    answers: list[Answer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Probe:
        """Create the probe queue (the database must be up) and start calling."""
        # (the pool's warnings about failed connections, in this process, would fill the
        # run's output while the database is down)
        self._pool_log = logging.getLogger("psycopg.pool")
        self._pool_level = self._pool_log.level
        self._pool_log.setLevel(logging.CRITICAL)
        self._client = sqew.Client(self.target)  # type: ignore[abstract]
        with contextlib.suppress(errors.QueueExists):
            self._client.create_queue(PROBE_QUEUE)
        self._threads = [threading.Thread(target=self._loop, args=(fn,), daemon=True)
                         for fn in (self._readyz, self._over_http, self._through_client)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop calling (bounded) and close the Client."""
        self._stop.set()
        for thread in self._threads:
            thread.join(HTTP_TIMEOUT_S + 10)
        with contextlib.suppress(Exception):
            self._client.close()
        self._pool_log.setLevel(self._pool_level)

    def save(self, path: Path) -> None:
        """Write every answer to ``path``, one JSON line each (kept with the run's files)."""
        path.write_text("".join(json.dumps(dataclasses.asdict(a)) + "\n"
                                for a in self.answers))

    def _loop(self, call: Any) -> None:
        while not self._stop.wait(PAUSE_S):
            call()

    def _keep(self, kind: str, t0: float, outcome: str) -> None:
        self.answers.append(Answer(kind, t0, time.time(), outcome))

    def _readyz(self) -> None:
        for url in self.servers:
            t0 = time.time()
            status, body = http("GET", f"{url}/readyz")
            outcome = judge_http(status, body, 200)
            self._keep("readyz", t0, "not-ready" if outcome == "Unavailable" else outcome)

    def _over_http(self) -> None:
        for url in self.servers:
            t0 = time.time()
            status, body = http("POST", f"{url}/queues/{PROBE_QUEUE}/messages", {"payload": 1})
            self._keep("http", t0, judge_http(status, body, 201))

    def _through_client(self) -> None:
        t0 = time.time()
        try:
            self._client.enqueue(PROBE_QUEUE, 1)
            outcome = "ok"
        except errors.SqewError as exc:
            outcome = exc.code if exc.code == "Unavailable" else f"{exc.code}: {exc}"
        except Exception as exc:  # not sqew's error: a traceback for the caller
            outcome = f"{type(exc).__name__}: {exc}"
        self._keep("client", t0, outcome)

    def recovered(self, since: float, deadline: float) -> float | None:
        """Wait until every kind of call sent after ``since`` was answered ``ok``; how long
        after ``since`` the last of them was, or None by ``deadline``."""
        while time.time() < deadline:
            done: dict[str, float] = {}
            for a in list(self.answers):
                if a.t0 >= since and a.outcome == "ok":
                    done.setdefault(a.kind, a.t1)
            if len(done) == 3:
                return max(done.values()) - since
            time.sleep(PAUSE_S)
        return None

    def during(self, spans: list[tuple[float, float]]) -> list[tuple[Answer, bool]]:
        """The calls sent inside one of ``spans``, each with whether its answer came inside
        it too."""
        out = []
        for a in self.answers:
            for lo, hi in spans:
                if lo <= a.t0 < hi:
                    out.append((a, a.t1 <= hi))
        return out

    def wrong(self) -> list[Answer]:
        """Answers sqew must not give, whenever they came."""
        return [a for a in self.answers if not a.fine and a.outcome != "no answer"]


@dataclass(frozen=True)
class Wakeups:
    """Long polls that came back empty after their whole wait: ``long_polls`` in all, of
    which ``ready_throughout`` while a message of their queue was ready from before they
    were sent to after they came back, and ``ready_during`` while one was ready at least
    ``LATE_S`` before they came back (a wake-up should have ended them)."""

    long_polls: int
    empty: int
    ready_throughout: int
    ready_during: int


LATE_S = 0.1


def missed_wakeups(journals: dict[str, list[Record]]) -> Wakeups:
    """``Wakeups`` of a run's journals. A message is ready from its first acknowledged
    enqueue's answer until the poll that first leased it was sent (never, if none did)."""
    enqueued: dict[tuple[str, int], float] = {}
    for _, r in of_kind(journals, "enqueue"):
        key = (r["queue"], r["id"])
        enqueued[key] = min(enqueued.get(key, r["t1"]), r["t1"])
    leased: dict[tuple[str, int], float] = {}
    long_polls = 0
    for _, r in of_kind(journals, "poll"):
        long_polls += 1 if r.get("wait_ms") else 0
        for m in r["messages"]:
            key = (r["queue"], m["id"])
            leased[key] = min(leased.get(key, r["t0"]), r["t0"])
    # per queue, by enqueue time: the latest first lease among messages enqueued so far
    by_queue: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for key, t in enqueued.items():
        by_queue[key[0]].append((t, leased.get(key, float("inf"))))
    times: dict[str, list[float]] = {}
    latest: dict[str, list[float]] = {}
    for queue, pairs in by_queue.items():
        pairs.sort()
        times[queue] = [t for t, _ in pairs]
        running, out = 0.0, []
        for _, until in pairs:
            running = max(running, until)
            out.append(running)
        latest[queue] = out
    empty = throughout = during = 0
    for _, r in of_kind(journals, "poll-empty"):
        long_polls += 1
        if r["t1"] - r["t0"] < r["wait_ms"] / 1000:
            continue
        empty += 1
        q = r["queue"]
        for t, counter in ((r["t0"], "throughout"), (r["t1"] - LATE_S, "during")):
            n = bisect.bisect_left(times.get(q, []), t)
            if n and latest[q][n - 1] > r["t1"]:
                if counter == "throughout":
                    throughout += 1
                else:
                    during += 1
    return Wakeups(long_polls, empty, throughout, during)


WAKE_QUEUE = "wake"
WAKE_WAIT_MS = 4000


@dataclass
class WakeProbe:
    """A long poll on an empty queue of its own (``WAKE_QUEUE``) through one process, and a
    message enqueued through another: only a ``NOTIFY`` can wake the poll. ``polls`` through
    ``sqew serve`` (``server``) answered by an enqueue of a Client in this process, and the
    other way round, in turn; each trial keeps how long after the enqueue's answer the poll
    came back, and whether it came back empty after its whole wait (a missed wake-up)."""

    server: str
    target: str
    woken: list[float] = field(default_factory=list)
    missed: int = 0

    def start(self) -> WakeProbe:
        """Open the two Clients and the queue (the database must be up)."""
        self._http = sqew.Client(  # type: ignore[abstract]
            self.server, timeout=HTTP_TIMEOUT_S + WAKE_WAIT_MS / 1000)
        self._local = sqew.Client(self.target)  # type: ignore[abstract]
        with contextlib.suppress(errors.QueueExists):
            self._local.create_queue(WAKE_QUEUE)
        self._turn = 0
        return self

    def trial(self, meanwhile: Any) -> None:
        """One long poll; ``meanwhile()`` is called while it waits (a fault), then a message
        is enqueued through the other process."""
        self._turn += 1
        poller, sender = ((self._http, self._local) if self._turn % 2
                          else (self._local, self._http))
        got: list[tuple[Any, float]] = []
        thread = threading.Thread(target=lambda: got.append((self._poll(poller), time.time())),
                                  daemon=True)
        thread.start()
        time.sleep(0.3)  # (parked by then, on an idle machine; if not, it claims at once)
        meanwhile()
        try:
            sender.enqueue(WAKE_QUEUE, self._turn)
        except errors.SqewError:
            thread.join(WAKE_WAIT_MS / 1000 + HTTP_TIMEOUT_S)
            return
        sent = time.time()
        thread.join(WAKE_WAIT_MS / 1000 + HTTP_TIMEOUT_S)
        if got and got[0][0] is not None:
            messages, back = got[0]
            if messages:
                self.woken.append(back - sent)
                with contextlib.suppress(errors.SqewError):
                    poller.ack(WAKE_QUEUE, messages[0].id, messages[0].token)
            elif back > sent:  # empty after its whole wait, the message ready meanwhile
                self.missed += 1
        self._drain()

    def _poll(self, client: Any) -> Any:
        try:
            return client.poll(WAKE_QUEUE, wait_ms=WAKE_WAIT_MS)
        except errors.SqewError:
            return None

    def _drain(self) -> None:
        with contextlib.suppress(errors.SqewError):
            for m in self._local.poll(WAKE_QUEUE, batch=10):
                self._local.ack(WAKE_QUEUE, m.id, m.token)

    def stop(self) -> None:
        """Close both Clients."""
        for client in (self._http, self._local):
            with contextlib.suppress(Exception):
                client.close()
