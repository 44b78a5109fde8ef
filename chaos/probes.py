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
        logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
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
