"""Where a single enqueue's time goes: sqew's ``Client.enqueue`` against litequeue's ``put``.

``python -m bench.profile_enqueue [-n N]`` prints, for one message of the benchmark's 200-byte
payload:

1. the SQL statements each side runs per call (sqlite3's trace callback), for the enqueue and
   for a get+ack;
2. microseconds per call of each side, unprofiled (median of ``--repeat`` interleaved runs
   of ``N`` calls): the process's CPU time (user + system, so the ``write`` of the WAL counts;
   on a shared host it is far steadier than the wall clock) and the wall clock; with the WAL
   pages each call writes (the WAL's growth with automatic
   checkpoints off); beside them sqew's statements replayed on a sqew connection (same
   schema, same pragmas), each step timed: what the SQL itself costs, ``BEGIN IMMEDIATE``
   and ``COMMIT`` included, with and without the counters ``UPDATE`` and its ``RETURNING``;
3. a cProfile of ``N`` sqew enqueues: the functions with the most own time, in µs per enqueue
   (cProfile's own overhead inflates Python-heavy functions: compare with 2).

A tool for work on the enqueue's speed; it changes nothing and asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqew
from bench.embedded import PAYLOAD, Raw
from bench.embedded_peers import LiteQueuePeer, PersistQueue
from sqew.backends.base import QueueRow
from sqew.client.arguments import message_in


def _client(path: Path) -> sqew.Client:
    client = sqew.Client(path)  # type: ignore[abstract]
    client.create_queue("bench")
    return client


def _sqew_conn(client: sqew.Client) -> Any:
    # The calling thread's connection of the embedded client (LocalClient → SqliteBackend).
    return client.service.backend._conn()  # type: ignore[attr-defined]


def statements(base: Path) -> dict[str, dict[str, list[str]]]:
    """The statements each side runs for one enqueue, one get (poll) and one ack."""
    out: dict[str, dict[str, list[str]]] = {}
    seen: list[str] = []

    def capture(fn: Callable[[], Any]) -> list[str]:
        seen.clear()
        fn()
        # Long texts (payloads, column lists) shortened; the statement's shape is what matters.
        return [" ".join(s.split())[:150] for s in seen]

    client = _client(base / "trace-sqew.db")
    _sqew_conn(client).set_trace_callback(seen.append)
    client.enqueue("bench", PAYLOAD)
    client.poll("bench")  # the first poll reaps (once a second): not the steady state
    client.enqueue("bench", PAYLOAD)
    row: dict[str, list[str]] = {"enqueue": capture(lambda: client.enqueue("bench", PAYLOAD))}
    got: list[Any] = []
    row["get"] = capture(lambda: got.extend(client.poll("bench")))
    row["ack"] = capture(lambda: client.ack("bench", got[0].id, got[0].token))
    out["sqew"] = row
    client.close()

    lq = LiteQueuePeer(base / "trace-lq.db", PAYLOAD)
    lq.conn.set_trace_callback(seen.append)
    row = {"enqueue": capture(lambda: lq.single(1))}
    msgs: list[Any] = []
    row["get"] = capture(lambda: msgs.append(lq.queue.pop()))
    row["ack"] = capture(lambda: lq.queue.done(msgs[0].message_id))
    out["litequeue"] = row
    lq.close()

    pq = PersistQueue(base / "trace-pq", PAYLOAD)
    pq.conn.set_trace_callback(seen.append)
    row = {"enqueue": capture(lambda: pq.single(1))}
    items: list[Any] = []
    row["get"] = capture(lambda: items.append(pq.queue.get(block=False)))
    row["ack"] = capture(lambda: pq.queue.ack(items[0]))
    out["persist-queue"] = row
    pq.close()
    return out


class Variant:
    """One way to put one message, run ``k`` times by ``run(k)``; ``parts`` times its steps."""

    def __init__(self, name: str, conn: Any, run: Callable[[Variant, int], None]) -> None:
        self.name, self.conn, self._run = name, conn, run
        self.parts: dict[str, list[float]] = {}  # step → µs per call, one per repetition
        self._spent: dict[str, float] = {}
        self.times: list[float] = []  # µs per call (wall clock), one per repetition
        self.cpu: list[float] = []  # µs of this process's CPU time per call (user + system)
        self.frames: list[float] = []  # WAL frames (pages) written per call

    def add(self, part: str, seconds: float) -> None:
        self._spent[part] = self._spent.get(part, 0.0) + seconds

    def measure(self, k: int, wal: Path) -> None:
        """Run ``k`` calls; record µs per call and the WAL's growth in pages per call."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        start, cpu = time.perf_counter(), time.process_time()
        self._run(self, k)
        self.times.append((time.perf_counter() - start) / k * 1e6)
        self.cpu.append((time.process_time() - cpu) / k * 1e6)
        for part, spent in self._spent.items():
            self.parts.setdefault(part, []).append(spent / k * 1e6)
        self._spent.clear()
        page = self.conn.execute("PRAGMA page_size").fetchone()[0]
        self.frames.append(wal.stat().st_size / (page + 24) / k)  # 24: a frame's header


def _replay(conn: Any, counters: list[str], text: str) -> Callable[[Variant, int], None]:
    """sqew's enqueue statements run alone on ``conn``, each step timed."""
    insert = (
        "INSERT INTO messages (queue_id, payload, priority, attributes, attempts, enqueued_at, "
        "available_at, expires_at, lifo) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?)"
    )

    def run(v: Variant, k: int) -> None:
        clock = time.perf_counter
        for _ in range(k):
            now = int(time.time() * 1000)
            t0 = clock()
            conn.execute("BEGIN IMMEDIATE")
            t1 = clock()
            for sql in counters:
                conn.execute(sql, {"n": 1, "name": "bench"}).fetchone()
            t2 = clock()
            conn.execute(insert, (1, text, 0, None, now, now, now + 345_600_000, 0))
            t3 = clock()
            conn.execute("COMMIT")
            t4 = clock()
            v.add("BEGIN IMMEDIATE", t1 - t0)
            v.add("queue row + counters", t2 - t1)
            v.add("INSERT", t3 - t2)
            v.add("COMMIT", t4 - t3)

    return run


def variants(base: Path) -> list[tuple[Variant, Path, Callable[[], None]]]:
    """Every variant with its database's WAL file and how to close it."""
    text = json.dumps(PAYLOAD, separators=(",", ":"))
    out: list[tuple[Variant, Path, Callable[[], None]]] = []

    def sqew_file(name: str) -> tuple[sqew.Client, Any, Path]:
        path = base / f"{name}.db"
        client = _client(path)
        conn = _sqew_conn(client)
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the WAL's growth counts pages written
        return client, conn, Path(f"{path}-wal")

    client, conn, wal = sqew_file("v-sqew")

    def sqew_enqueue(v: Variant, k: int, enqueue: Any = client.enqueue) -> None:
        for _ in range(k):
            enqueue("bench", PAYLOAD)

    out.append((Variant("sqew Client.enqueue", conn, sqew_enqueue), wal, client.close))
    client2, conn2, wal2 = sqew_file("v-service")
    message = message_in(PAYLOAD)

    def service_enqueue(
        v: Variant, k: int, enqueue: Any = client2.service.enqueue,  # type: ignore[attr-defined]
    ) -> None:
        for _ in range(k):
            enqueue("bench", [message])

    out.append((Variant("sqew QueueService.enqueue, message validated once before",
                        conn2, service_enqueue), wal2, client2.close))
    counters = ("UPDATE queues SET depth = depth + :n, enqueued_total = enqueued_total + :n "
                "WHERE name = :name")
    columns = ", ".join(QueueRow._fields)
    for name, sql in [
        ("sqew's SQL replayed (UPDATE … RETURNING all 24 columns)",
         [f"{counters} RETURNING {columns}"]),
        ("sqew's SQL replayed, UPDATE … RETURNING id", [f"{counters} RETURNING id"]),
        ("sqew's SQL replayed, UPDATE without RETURNING", [counters]),
        ("sqew's SQL replayed, no counters UPDATE (nor queue row)", []),
    ]:
        c, cn, w = sqew_file(f"v-{len(out)}")
        out.append((Variant(name, cn, _replay(cn, sql, text)), w, c.close))

    lq = LiteQueuePeer(base / "v-lq.db", PAYLOAD)
    lq.conn.execute("PRAGMA wal_autocheckpoint=0")
    out.append((Variant("litequeue put (json.dumps + INSERT autocommit)", lq.conn,
                        lambda v, k: lq.single(k)), base / "v-lq.db-wal", lq.close))
    pq = PersistQueue(base / "v-pq", PAYLOAD)
    pq.conn.execute("PRAGMA wal_autocheckpoint=0")
    out.append((Variant("persist-queue put", pq.conn, lambda v, k: pq.single(k)),
                base / "v-pq" / "data.db-wal", pq.close))
    raw = Raw(base / "v-raw.db")
    raw.conn.execute("PRAGMA wal_autocheckpoint=0")
    out.append((Variant("raw sqlite3 on sqew's messages table (no queues row)", raw.conn,
                        lambda v, k: raw.single(k)), base / "v-raw.db-wal", raw.close))
    return out


def per_call(base: Path, n: int, repeat: int) -> list[Variant]:
    """Each variant ``repeat`` times ``n`` calls, interleaved (the machine is shared)."""
    vs = variants(base)
    for r in range(repeat):
        for v, wal, _ in vs if r % 2 == 0 else vs[::-1]:
            v.measure(n, wal)
    for _, _, close in vs:
        close()
    return [v for v, _, _ in vs]


def validation(n: int, repeat: int) -> float:
    """µs per ``message_in(payload)``: the client's validation (msgspec encode + convert)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            message_in(PAYLOAD)
        times.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(times)


def profile(base: Path, n: int, top: int) -> str:
    """cProfile of ``n`` sqew enqueues: own time (tottime) per enqueue, top functions."""
    client = _client(base / "prof-sqew.db")
    for _ in range(200):  # warm: statement cache, first reap
        client.enqueue("bench", PAYLOAD)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        client.enqueue("bench", PAYLOAD)
    prof.disable()
    client.close()
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, func), (_cc, calls, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(file).name}:{line}({func})" if line else func
        rows.append((tt, ct, calls, where))
    total = sum(r[0] for r in rows)
    lines = [f"cProfile, {n} enqueues: {total / n * 1e6:.1f} µs per enqueue under the profiler",
             "| own µs/enqueue | cum µs/enqueue | calls/enqueue | function |",
             "|---:|---:|---:|---|"]
    for tt, ct, calls, where in sorted(rows, reverse=True)[:top]:
        lines.append(f"| {tt / n * 1e6:.2f} | {ct / n * 1e6:.2f} | {calls / n:.1f} | {where} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the statements, the per-call times, the SQL split and the profile."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=5000, help="calls per measurement")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--top", type=int, default=30, help="functions in the profile")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sqew-prof-") as tmp:
        base = Path(tmp)
        for side, ops in statements(base).items():
            for op, stmts in ops.items():
                print(f"{side} {op}: {len(stmts)} statements")
                for s in stmts:
                    print(f"    {s}")
        print()
        print("| variant | CPU µs per call | wall µs per call | WAL pages per call | "
              "timed steps (wall), µs per call |")
        print("|---|---:|---:|---:|---|")
        for v in per_call(base, args.n, args.repeat):
            steps = ", ".join(f"{k} {statistics.median(t):.1f}" for k, t in v.parts.items())
            print(f"| {v.name} | {statistics.median(v.cpu):.1f} | "
                  f"{statistics.median(v.times):.1f} | "
                  f"{statistics.median(v.frames):.2f} | {steps} |")
        print()
        print(f"sqew's client validation alone, message_in(payload): "
              f"{validation(args.n, args.repeat):.1f} µs per call")
        print()
        print(profile(base, args.n, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
