"""``scripts/chaos soak --minutes N [--backend sqlite|postgres] --plots DIR``: a fixed-rate
mixed load for a long time, sampled, plotted, and judged flat or not.

The load (``chaos.soak_load``): processes of ``sqew.Client``, half over HTTP to a ``sqew
serve`` on the database, half on the database itself (the file, or the PostgreSQL URL), each
at a fixed rate of cycles (enqueue, poll, ack / nack / extend). Every ``sample_s`` seconds the
run samples the server's RSS (its process and its children), the clients' RSS (summed), the
database's size (the SQLite file and its ``-wal``; ``pg_database_size`` on PostgreSQL), the
queue's depths, and the p50 / p99 latency of each operation over the window since the last
sample. It writes ``soak-<backend>.csv`` (one row a sample), ``soak-<backend>.json`` (start
and end values and each series' verdict) and ``soak-<backend>-<figure>.png`` (the series over
time) into the plots directory.

A series is **flat** when the mean of its last fifth exceeds the mean of its first fifth by
no more than ``TOLERANCE`` (relative), or by less than its absolute floor: it is a report,
not a timing assertion.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

import sqew
from chaos import pg
from chaos.procs import ROOT, Server, kill_tree

CLIENTS = 4  # half over HTTP, half on the database
RATE = 10.0  # cycles per second per client
SAMPLE_S = 5.0
TOLERANCE = 0.25
OPS = ("enqueue", "poll", "ack", "nack", "extend")
FLOORS = {"rss_mb": 10.0, "size_mb": 1.0, "ms": 2.0, "depth": 50.0}
"""Growth below these (absolute) is flat whatever its ratio: noise of a small quantity."""
START_S = 60.0


@dataclass
class Load:
    """The processes of the run and the latency files they append to."""

    server: Server
    clients: list[subprocess.Popen[str]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    offsets: dict[Path, int] = field(default_factory=dict)

    def timings(self) -> dict[str, list[float]]:
        """Each operation's latencies (ms) appended since the last call."""
        got: dict[str, list[float]] = {op: [] for op in (*OPS, "error")}
        for path in self.files:
            with contextlib.suppress(FileNotFoundError), path.open("rb") as f:
                f.seek(self.offsets.get(path, 0))
                data = f.read()
                complete = data.rfind(b"\n") + 1
                self.offsets[path] = self.offsets.get(path, 0) + complete
            for line in data[:complete].decode().splitlines():
                op, _, ms = line.split(",")
                got[op].append(float(ms))
        return got

    def stop(self) -> None:
        for proc in self.clients:
            kill_tree(proc)
            if proc.stdout is not None:
                proc.stdout.close()
        self.server.kill()


def rss_mb(pids: list[int]) -> float:
    """The resident memory of these processes and their children, in MB."""
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            for p in [proc, *proc.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    total += p.memory_info().rss
    return total / 2**20


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank), or None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sizes(backend: str, db: str) -> tuple[float, float]:
    """The database's size and its WAL's (SQLite; 0 on PostgreSQL), in MB."""
    if backend == "postgres":
        import psycopg

        with psycopg.connect(db.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return (row[0] if row else 0) / 2**20, 0.0
    path = Path(db)
    wal = Path(f"{db}-wal")
    size = path.stat().st_size if path.exists() else 0
    return size / 2**20, (wal.stat().st_size if wal.exists() else 0) / 2**20


def start(base: Path, backend: str, db: str, until: float, rate: float, clients: int) -> Load:
    """The server and the load processes, each started and ready."""
    server = Server(db, base / "serve.log")
    server.start()
    load = Load(server)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQEW_")}
    env["PYTHONPATH"] = str(ROOT)
    for i in range(clients):
        target = server.url if i % 2 == 0 else db
        out = base / f"client-{i}.csv"
        load.files.append(out)
        with (base / f"client-{i}.log").open("a") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "chaos.soak_load", "--target", target, "--rate",
                 str(rate), "--until", str(until), "--out", str(out), "--seed", str(i)],
                stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=base)
        load.clients.append(proc)
    for proc in load.clients:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            load.stop()
            raise RuntimeError(f"a soak client did not start: see {base}")
    return load


def sample(load: Load, backend: str, db: str, client: sqew.Client, began: float) -> dict[str, Any]:
    """One row: the time since the start, memory, sizes, depths, latencies of the window."""
    size, wal = sizes(backend, db)
    stats = client.stats("soak")
    row: dict[str, Any] = {
        "t_s": round(time.time() - began, 1),
        "server_rss_mb": round(rss_mb([load.server.proc.pid] if load.server.proc else []), 1),
        "clients_rss_mb": round(rss_mb([p.pid for p in load.clients]), 1),
        "db_mb": round(size, 3), "wal_mb": None if backend == "postgres" else round(wal, 3),
        "ready": stats.ready, "leased": stats.leased, "delayed": stats.delayed,
        "dlq": stats.dlq,
        "clients_alive": sum(p.poll() is None for p in load.clients),
    }
    timings = load.timings()
    row["errors"] = len(timings.pop("error"))
    for op, values in timings.items():
        row[f"{op}_n"] = len(values)
        for q, name in ((0.5, "p50"), (0.99, "p99")):
            value = percentile(values, q)
            row[f"{op}_{name}_ms"] = None if value is None else round(value, 2)
    return row


def verdicts(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each series' start (mean of the first fifth), end (of the last fifth), and whether it
    stayed flat."""
    series = ["server_rss_mb", "clients_rss_mb", "db_mb", "wal_mb", "ready",
              *(f"{op}_p99_ms" for op in OPS)]
    out = {}
    for name in series:
        values = [r[name] for r in rows if r.get(name) is not None]
        if not values:
            continue
        fifth = max(1, len(values) // 5)
        first, last = values[:fifth], values[-fifth:]
        a, b = statistics.fmean(first), statistics.fmean(last)
        floor = (FLOORS["rss_mb"] if "rss" in name else FLOORS["ms"] if name.endswith("_ms")
                 else FLOORS["depth"] if name == "ready" else FLOORS["size_mb"])
        grew = b - a
        flat = grew <= floor or grew <= TOLERANCE * abs(a)
        out[name] = {"start": round(a, 3), "end": round(b, 3), "flat": flat}
    return out


def run(base: Path, minutes: float, backend: str, plots: Path | None,
        sample_s: float = SAMPLE_S, rate: float = RATE, clients: int = CLIENTS) -> int:
    """The soak; 0 when every series stayed flat, 1 otherwise (the figures say which)."""
    base.mkdir(parents=True, exist_ok=True)
    out_dir = plots or base
    out_dir.mkdir(parents=True, exist_ok=True)
    pg_server, database = None, None
    if backend == "postgres":
        if (reason := pg.unavailable()) is not None:
            print(f"error: PostgreSQL cannot run here: {reason}", file=sys.stderr)
            return 2
        pg_server = pg.start_server()
        database = pg.Database(pg_server)
        db = database.url
    else:
        db = str(base / "soak.db")
    try:
        with sqew.Client(db) as setup:  # type: ignore[abstract]
            setup.create_queue("soak", visibility_ms=30_000)
        rows = soak(base, backend, db, minutes * 60, sample_s, rate, clients)
    finally:
        if pg_server is not None:
            pg_server.stop()
            pg_server.destroy()
    judged = verdicts(rows)
    write(out_dir, backend, rows, judged, minutes)
    print(f"== soak {backend}: {minutes:g} min, {len(rows)} samples, files in {out_dir}")
    for name, v in judged.items():
        print(f"  {name:<18} start {v['start']:>10.3f}  end {v['end']:>10.3f}  "
              f"{'flat' if v['flat'] else 'GREW'}")
    return 0 if all(v["flat"] for v in judged.values()) else 1


def soak(base: Path, backend: str, db: str, seconds: float, sample_s: float, rate: float,
         clients: int) -> list[dict[str, Any]]:
    """Run the load for ``seconds`` after it started, sampling; the rows."""
    rows: list[dict[str, Any]] = []
    until = time.time() + START_S + seconds  # the clients' bound; the run stops them sooner
    load = start(base, backend, db, until, rate, clients)
    try:
        with sqew.Client(db) as client:  # type: ignore[abstract]
            began = time.time()
            load.timings()  # what came before the start of the first window
            end = began + seconds
            while time.time() < end:
                time.sleep(min(sample_s, max(0.0, end - time.time())))
                rows.append(sample(load, backend, db, client, began))
    finally:
        load.stop()
    return rows


def write(out_dir: Path, backend: str, rows: list[dict[str, Any]],
          judged: dict[str, dict[str, Any]], minutes: float) -> None:
    """The CSV, the JSON summary and the plots."""
    from chaos import soak_plot

    name = f"soak-{backend}"
    with (out_dir / f"{name}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["t_s"])
        writer.writeheader()
        writer.writerows(rows)
    summary = {"backend": backend, "minutes": minutes, "samples": len(rows),
               "clients": CLIENTS, "tolerance": TOLERANCE, "series": judged}
    (out_dir / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    soak_plot.plot(out_dir, name, rows)
