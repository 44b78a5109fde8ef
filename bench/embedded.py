"""Embedded benchmark: sqew's Client on a SQLite file against raw ``sqlite3``
and against the Python queues a user would pick instead (persist-queue, litequeue).

Both sides do the same work on the same table shape (sqew's ``messages`` table and its indexes,
created from ``sqew.backends.schema``), in WAL mode with ``synchronous=NORMAL``, with 200-byte
JSON payloads:

- single enqueue: one message, one commit;
- batch enqueue: 1000 messages in one transaction;
- poll+ack of 1: lease one ready message (raw: ``UPDATE … WHERE id IN (SELECT … LIMIT 1)
  RETURNING`` on the claim index), commit; delete it by id and token, commit;
- poll+ack of 10: the same ten at a time (sqew: ``poll(batch=10)`` + ``ack_batch``);
- depth: sqew's poll+ack of 1 with 1,000,000 ready messages against 1,000.

The peers (``bench.embedded_peers``: persist-queue's ``SQLiteAckQueue``, litequeue's
``LiteQueue``, at the same durability) take part in the single enqueue and the poll+ack of 1,
on their own tables. In every round each side's poll+ack of 1 takes exactly the messages its
single enqueue put, so all four start it from the same state (that many ready messages, one
at a time, none consumed yet) and drain it.

The machine is shared and noisy, so the sides run in rounds whose order changes every round
(sqew, raw, …, then reversed, then rotated) and each figure is the median of its rounds;
ratios compare medians of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import sqew
from bench.embedded_peers import PEERS, LiteQueuePeer, PersistQueue, versions
from sqew.backends.schema import metadata

PAYLOAD: dict[str, Any] = {"kind": "order", "data": "x" * 174}
PAYLOAD_TEXT = json.dumps(PAYLOAD, separators=(",", ":"))
assert len(PAYLOAD_TEXT.encode()) == 200, len(PAYLOAD_TEXT.encode())


@dataclass
class Sizes:
    """How much work one round does (and how many rounds)."""

    rounds: int
    single: int  # single enqueues per round and side
    batches: int  # batches of 1000 per round and side
    cycles: int  # messages polled and acked one at a time per round and side (= single)
    cycles10: int  # messages polled and acked ten at a time per round and side
    deep: int  # ready messages in the deep queue

    @classmethod
    def for_mode(cls, quick: bool) -> Sizes:
        """Full run (a few minutes, mostly filling 1M messages) or ``--quick`` (under a minute)."""
        if quick:
            return cls(rounds=5, single=1000, batches=10, cycles=1000, cycles10=5000,
                       deep=100_000)
        return cls(rounds=9, single=5000, batches=30, cycles=5000, cycles10=10_000,
                   deep=1_000_000)


class Side(Protocol):
    """What every side of a round does (sqew, raw, each peer)."""

    def single(self, n: int) -> None: ...
    def poll_ack(self, cycles: int, batch: int) -> None: ...
    def close(self) -> None: ...


# --- raw sqlite3 ------------------------------------------------------------------------------
class Raw:
    """Hand-written sqlite3 doing what sqew does, on sqew's own table shape."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        messages = metadata.tables["messages"]
        from sqlalchemy.dialects import sqlite
        from sqlalchemy.schema import CreateIndex, CreateTable

        dialect = sqlite.dialect()
        # The same columns and indexes; no foreign key (raw code has no queues table).
        ddl = str(CreateTable(messages).compile(dialect=dialect))
        ddl = ddl.split(", \n\tCONSTRAINT fk_")[0] + "\n)" if "CONSTRAINT fk_" in ddl else ddl
        self.conn.execute(ddl)
        for index in messages.indexes:
            self.conn.execute(str(CreateIndex(index).compile(dialect=dialect)))
        self.now = int(time.time() * 1000)

    _INSERT = (
        "INSERT INTO messages (queue_id, payload, priority, attributes, attempts, enqueued_at, "
        "available_at, expires_at, lifo) VALUES (1, ?, 0, NULL, 0, ?, ?, ?, 0)"
    )
    _CLAIM = (
        "UPDATE messages SET lease_expires_at = :until, token = lower(hex(randomblob(16))), "
        "attempts = attempts + 1 WHERE id IN (SELECT id FROM messages WHERE queue_id = 1 "
        "AND lease_expires_at IS NULL AND lifo = 0 AND available_at <= :now "
        "AND +expires_at > :now ORDER BY priority DESC, available_at, id LIMIT :n) "
        "RETURNING id, token, payload"
    )

    def _row(self, payload: Any) -> tuple[str, int, int, int]:
        # Like sqew, raw code takes the payload as a Python value and stores its JSON text.
        now = int(time.time() * 1000)
        return (json.dumps(payload, separators=(",", ":")), now, now, now + 345_600_000)

    def single(self, n: int) -> None:
        c = self.conn
        for _ in range(n):
            c.execute("BEGIN IMMEDIATE")
            c.execute(self._INSERT, self._row(PAYLOAD))
            c.execute("COMMIT")

    def batch(self, batches: int) -> None:
        c = self.conn
        for _ in range(batches):
            c.execute("BEGIN IMMEDIATE")
            c.executemany(self._INSERT, [self._row(PAYLOAD) for _ in range(1000)])
            c.execute("COMMIT")

    def batch_text(self, batches: int) -> None:
        """Batch enqueue with the payload's JSON text made once: SQLite's own ceiling."""
        c = self.conn
        for _ in range(batches):
            now = int(time.time() * 1000)
            row = (PAYLOAD_TEXT, now, now, now + 345_600_000)
            c.execute("BEGIN IMMEDIATE")
            c.executemany(self._INSERT, [row] * 1000)
            c.execute("COMMIT")

    def poll_ack(self, cycles: int, batch: int) -> None:
        c = self.conn
        for _ in range(cycles // batch):
            now = int(time.time() * 1000)
            c.execute("BEGIN IMMEDIATE")
            params = {"until": now + 30_000, "now": now, "n": batch}
            rows = c.execute(self._CLAIM, params).fetchall()
            c.execute("COMMIT")
            msgs = [(i, t, json.loads(p)) for i, t, p in rows]
            c.execute("BEGIN IMMEDIATE")
            for msg_id, token, _ in msgs:
                c.execute("DELETE FROM messages WHERE id = ? AND queue_id = 1 AND token = ?",
                          (msg_id, token))
            c.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


# --- sqew -------------------------------------------------------------------------------------
class Sqew:
    """sqew's embedded Client doing the same work."""

    def __init__(self, client: sqew.Client, queue: str = "bench") -> None:
        self.client = client
        self.queue = queue

    @classmethod
    def create(cls, path: Path, queue: str = "bench") -> Sqew:
        """A client on a new database file at ``path``, with the (default) queue created."""
        client = _client(path)
        client.create_queue(queue)
        return cls(client, queue)

    def single(self, n: int) -> None:
        enqueue, q = self.client.enqueue, self.queue
        for _ in range(n):
            enqueue(q, PAYLOAD)

    def batch(self, batches: int) -> None:
        items = [{"payload": PAYLOAD} for _ in range(1000)]
        for _ in range(batches):
            self.client.enqueue_batch(self.queue, items)

    def poll_ack(self, cycles: int, batch: int) -> None:
        c, q = self.client, self.queue
        if batch == 1:
            for _ in range(cycles):
                (m,) = c.poll(q)
                c.ack(q, m.id, m.token)
        else:
            for _ in range(cycles // batch):
                got = c.poll(q, batch=batch)
                c.ack_batch(q, [(m.id, m.token) for m in got])

    def close(self) -> None:
        self.client.close()


def _rate(count: int, fn: Callable[..., None], *args: int) -> float:
    """Messages per second of ``fn(*args)``, which handles ``count`` messages."""
    start = time.perf_counter()
    fn(*args)
    return count / (time.perf_counter() - start)


def _client(path: Path) -> sqew.Client:
    # sqew.Client(target) dispatches in __new__ to LocalClient; mypy sees an abstract class.
    return sqew.Client(path)  # type: ignore[abstract]


def _fill(client: sqew.Client, queue: str, count: int) -> None:
    items = [{"payload": PAYLOAD} for _ in range(1000)]
    for start in range(0, count, 1000):
        client.enqueue_batch(queue, items[: min(1000, count - start)])


def run(quick: bool = False, out: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every measurement; returns the medians and ratios (messages per second)."""
    sizes = Sizes.for_mode(quick)
    load_before, started, cpu_started = os.getloadavg()[0], time.perf_counter(), time.process_time()
    results: dict[str, dict[str, list[float]]] = {}

    def record(name: str, side: str, value: float) -> None:
        results.setdefault(name, {}).setdefault(side, []).append(value)

    with tempfile.TemporaryDirectory(prefix="sqew-bench-") as tmp:
        base = Path(tmp)
        for r in range(sizes.rounds):
            out(f"round {r + 1}/{sizes.rounds}")
            # Fresh files each round, so every side starts from the same state.
            sides: list[tuple[str, Side]] = _order([
                ("sqew", Sqew.create(base / f"s{r}.db")), ("raw", Raw(base / f"r{r}.db")),
                ("persist-queue", PersistQueue(base / f"p{r}", PAYLOAD)),
                ("litequeue", LiteQueuePeer(base / f"l{r}.db", PAYLOAD)),
            ], r)
            for side, impl in sides:
                record("single enqueue", side, _rate(sizes.single, impl.single, sizes.single))
            # Each side takes back, one at a time, exactly the messages it just put.
            for side, impl in sides:
                record("poll+ack (1)", side,
                       _rate(sizes.cycles, impl.poll_ack, sizes.cycles, 1))
            core = [(side, impl) for side, impl in sides if isinstance(impl, Sqew | Raw)]
            for side, impl in core:
                assert isinstance(impl, Sqew | Raw)
                record("batch enqueue (1000)", side,
                       _rate(sizes.batches * 1000, impl.batch, sizes.batches))
                if isinstance(impl, Raw):  # for information, not a target
                    record("batch enqueue (1000)", "raw, pre-encoded",
                           _rate(sizes.batches * 1000, impl.batch_text, sizes.batches))
            for side, impl in core:
                record("poll+ack (10)", side,
                       _rate(sizes.cycles10, impl.poll_ack, sizes.cycles10, 10))
            for _, impl in sides:
                impl.close()
            for f in base.iterdir():
                if f.is_dir():  # persist-queue's directory
                    shutil.rmtree(f)
                else:
                    f.unlink()

        out(f"depth: filling {sizes.deep:,} ready messages")
        shallow, deep = _client(base / "shallow.db"), _client(base / "deep.db")
        for c in (shallow, deep):
            c.create_queue("bench")
        _fill(deep, "bench", sizes.deep)
        for r in range(sizes.rounds):
            # Top the shallow queue up (untimed) so every round starts at 1,000 + one round's
            # cycles and ends at 1,000; the deep one loses only a round's cycles out of 1M.
            shallow_depth = shallow.stats("bench").ready
            _fill(shallow, "bench", 1000 + sizes.cycles - shallow_depth)
            pair = [("1k ready", shallow), ("deep ready", deep)]
            if r % 2:
                pair.reverse()
            for side, client in pair:
                impl = Sqew(client)
                record("poll+ack (1) by depth", side,
                       _rate(sizes.cycles, impl.poll_ack, sizes.cycles, 1))
        shallow.close()
        deep.close()

    medians = {name: {side: statistics.median(v) for side, v in sides_.items()}
               for name, sides_ in results.items()}
    return {"machine": machine(load_before, started, cpu_started), "sizes": vars(sizes),
            "medians": medians, "rounds": results, "targets": targets(medians),
            "peers": peers(medians, results)}


def _order(sides: list[tuple[str, Side]], r: int) -> list[tuple[str, Side]]:
    """Round ``r``'s order: rotated by one every two rounds, reversed in odd rounds.

    Over eight rounds every side runs in every position, and sqew runs before raw about as
    often as after (the host's speed drifts within a round too).
    """
    k = (r // 2) % len(sides)
    rotated = sides[k:] + sides[:k]
    return rotated[::-1] if r % 2 else rotated


PEER_MEASURES = ("single enqueue", "poll+ack (1)")


def peers(
    medians: dict[str, dict[str, float]], rounds: dict[str, dict[str, list[float]]]
) -> dict[str, dict[str, float]]:
    """Per measure run by the peers: each side's median (msg/s) and sqew's ratio to each peer.

    ``sqew/<peer>`` divides the medians (what the targets use); ``sqew/<peer> by round`` is
    the median of the ratios within each round, less swayed by the host's speed changing
    between rounds (for reading, not a target).
    """
    out: dict[str, dict[str, float]] = {}
    for name in PEER_MEASURES:
        m, r = medians[name], rounds[name]
        row = {"sqew": m["sqew"]} | {peer: m[peer] for peer in PEERS}
        row |= {f"sqew/{peer}": round(m["sqew"] / m[peer], 2) for peer in PEERS}
        row |= {f"sqew/{peer} by round": round(statistics.median(
            s / p for s, p in zip(r["sqew"], r[peer], strict=True)), 2) for peer in PEERS}
        out[name] = row
    return out


def machine(load_before: float, started: float, cpu_started: float) -> dict[str, Any]:
    """Where and under what load the figures were taken (the machine is shared)."""
    wall = time.perf_counter() - started
    return {
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version, "sqew": sqew.__version__, **versions(),
        "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
        "wall_s": round(wall, 1),
        # below 1.0 means other processes took the CPU from the benchmark
        "cpu_share": round((time.process_time() - cpu_started) / wall, 2),
    }


TARGETS = [
    ("single enqueue", "sqew", "raw", 0.4),
    ("batch enqueue (1000)", "sqew", "raw", 0.6),
    ("poll+ack (1)", "sqew", "raw", 0.4),
    ("poll+ack (10)", "sqew", "raw", 0.4),
    ("poll+ack (1) by depth", "deep ready", "1k ready", 0.8),
    # against the embedded peers at the same durability
    ("single enqueue", "sqew", "litequeue", 0.8),
    ("poll+ack (1)", "sqew", "persist-queue", 1.0),
    ("poll+ack (1)", "sqew", "litequeue", 1.0),
]


def targets(medians: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """Each target with its measured ratio and whether it is met."""
    out = []
    for name, num, den, goal in TARGETS:
        ratio = medians[name][num] / medians[name][den]
        out.append({"measure": name, "ratio": f"{num}/{den}", "value": round(ratio, 2),
                    "target": goal, "pass": ratio >= goal})
    return out


def table(result: dict[str, Any]) -> str:
    """The results as a Markdown table."""
    med = result["medians"]
    deep = result["sizes"]["deep"]
    lines = ["| measure | sqew (msg/s) | raw sqlite3 (msg/s) | sqew/raw | target | |",
             "|---|---:|---:|---:|---:|---|"]
    for t in result["targets"]:
        m = med[t["measure"]]
        if t["ratio"].split("/")[1] in PEERS:
            continue  # in peers_table
        if t["measure"].endswith("by depth"):
            lines.append(
                f"| poll+ack (1), {deep:,} vs ~1,000 ready | {m['deep ready']:,.0f} vs "
                f"{m['1k ready']:,.0f} | | {t['value']:.2f} (deep/1k) | ≥ {t['target']} | "
                f"{'PASS' if t['pass'] else 'FAIL'} |"
            )
        else:
            lines.append(
                f"| {t['measure']} | {m['sqew']:,.0f} | {m['raw']:,.0f} | {t['value']:.2f} | "
                f"≥ {t['target']} | {'PASS' if t['pass'] else 'FAIL'} |"
            )
            if "raw, pre-encoded" in m:
                lines.append(
                    f"| (batch, raw given the payload's JSON text) | {m['sqew']:,.0f} | "
                    f"{m['raw, pre-encoded']:,.0f} | {m['sqew'] / m['raw, pre-encoded']:.2f} "
                    "| info | |"
                )
    return "\n".join(lines)


def peers_table(result: dict[str, Any]) -> str:
    """sqew against the embedded peers, as a Markdown table (with the peers' targets)."""
    lines = ["| measure | sqew (msg/s) | persist-queue (msg/s) | litequeue (msg/s) | "
             "sqew/persist-queue (by round) | sqew/litequeue (by round) | targets |",
             "|---|---:|---:|---:|---:|---:|---|"]
    labels = {"single enqueue": "single enqueue (put)",
              "poll+ack (1)": "get+ack of 1 (sqew: poll+ack)"}
    for name, row in result["peers"].items():
        goals = [f"{t['ratio']} ≥ {t['target']} {'PASS' if t['pass'] else 'FAIL'}"
                 for t in result["targets"]
                 if t["measure"] == name and t["ratio"].split("/")[1] in PEERS]
        lines.append(
            f"| {labels[name]} | {row['sqew']:,.0f} | {row['persist-queue']:,.0f} | "
            f"{row['litequeue']:,.0f} | {row['sqew/persist-queue']:.2f} "
            f"({row['sqew/persist-queue by round']:.2f}) | {row['sqew/litequeue']:.2f} "
            f"({row['sqew/litequeue by round']:.2f}) | {'; '.join(goals) or 'info'} |"
        )
    return "\n".join(lines)


def rounds_table(result: dict[str, Any]) -> str:
    """Every round's figure, as a Markdown table (to see the noise behind the medians)."""
    lines = ["| measure | side | rounds (msg/s) |", "|---|---|---|"]
    for name, sides in result["rounds"].items():
        for i, (side, values) in enumerate(sides.items()):
            lines.append(f"| {name if i == 0 else ''} | {side} | "
                         f"{', '.join(f'{v:,.0f}' for v in values)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench embedded [--quick] [--json FILE]``; exit 1 if a target is missed."""
    parser = argparse.ArgumentParser(prog="scripts/bench embedded", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, 100k deep queue")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    # Options meant for other suites (``scripts/bench --duration 2``) are passed to every suite.
    args, other = parser.parse_known_args(argv)
    if other:
        print(f"embedded: ignoring options of other suites: {' '.join(other)}", flush=True)
    result = run(args.quick, out=lambda s: print(s, flush=True))
    m = result["machine"]
    print()
    print(f"{m['cpus']} cores, Python {m['python']}, SQLite {m['sqlite']}, sqew {m['sqew']}, "
          f"persist-queue {m['persist-queue']}, litequeue {m['litequeue']}; "
          f"load average {m['load_before']} before, {m['load_after']} after; {m['wall_s']} s, "
          f"CPU share {m['cpu_share']}")
    print()
    print(table(result))
    print()
    print(peers_table(result))
    print()
    print(rounds_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if all(t["pass"] for t in result["targets"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
