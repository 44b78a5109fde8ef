"""The HTTP part of ``bench/postgres.py``: ``sqew serve`` on its database under wrk.

``replicas``: one replica against two on one database, and the wake-up of a long poll across
replicas. ``sides``: a server per side (``sqew``, or ``sqew-without-<VARIANT>``: a server that
turns the variant off before it starts, ``bench/pg_variants.py``), each on a database of its
own, the sides taking turns under the same wrk load.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import server as http_bench
from bench.postgres_sides import PAYLOAD, QUEUE, WITHOUT, fill, turn_order

if TYPE_CHECKING:
    from bench.postgres import Database, Record, Sizes

HTTP_CONNS = 16
CASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    f"http enqueue ({HTTP_CONNS} connections)": ("enqueue", "enqueue.lua", (QUEUE,)),
    f"http poll(10)+ack ({HTTP_CONNS} connections)": ("poll+ack", "pollack.lua", (QUEUE, "10")),
}
"""The cases ``sides`` measures, by name: wrk's workload, script and its arguments. In a
server, concurrent requests are merged (the group commit): its claims and acks are of many
messages, its enqueues of several requests' messages."""
SERVE_WITHOUT = ("import sys; from bench import pg_variants; "
                 "pg_variants.disable(sys.argv[1]); from sqew.cli import main; main(sys.argv[2:])")
"""``python -c`` code: ``sqew`` (its arguments after the variant's name) with a variant off."""


def replicas(db: Database, sizes: Sizes, out: Callable[[str], None]) -> dict[str, Any]:
    """``sqew serve`` on one database: 1 replica vs 2, enqueue and poll(10)+ack under wrk."""
    http_bench.wrk_version()
    db.clone("http_run", "sqew_tpl")
    url = db.server.url("http_run")
    bench = http_bench.Bench(sizes.http_s, sizes.rounds)
    logs = Path(tempfile.mkdtemp(prefix="sqew-bench-pg-logs-"))
    got: dict[str, Any] = {}
    workloads = [("enqueue", "enqueue.lua", (QUEUE,)), ("poll+ack", "pollack.lua", (QUEUE, "10"))]
    with _replicas(url, logs, 2) as servers:
        _top_up(url, 20_000)  # for the warm-up's polls
        for srv in servers:
            bench.warm(srv, [(script, args) for _, script, args in workloads])
        for _ in range(sizes.rounds):
            for workload, script, args in workloads:
                for replicas in (1, 2):
                    label = f"{replicas} replica{'s' if replicas > 1 else ''}"
                    if workload == "poll+ack":  # never polled empty: topped up, untimed
                        _top_up(url, int(HTTP_READY_PER_S * sizes.http_s))
                    before = db.wal()
                    runs = _wrk_at_once(bench, servers[:replicas], label, workload, script,
                                        args)
                    msgs = sum(r.items_ps * sizes.http_s for r in runs)
                    rate = sum(r.items_ps for r in runs)
                    cell = got.setdefault(f"{workload}|{label}", {"rates": [], "wal": [],
                                                                  "valid": True})
                    cell["rates"].append(rate)
                    cell["wal"].append((db.wal() - before) / msgs if msgs else 0.0)
                    cell["valid"] = cell["valid"] and all(r.valid for r in runs)
                    out(f"  http {workload:<9} {label:<10} {rate:9,.0f} msg/s")
        wake = _wake_latency(servers[0].url, servers[1].url, 5 if sizes.rounds == 1 else 20)
        out(f"  wake-up across replicas: median {statistics.median(wake):.1f} ms, "
            f"max {max(wake):.1f} ms")
    db.server.drop_database("http_run")
    shutil.rmtree(logs, ignore_errors=True)  # (kept when the run failed: what went wrong)
    cells = {k: {"msgs_s": statistics.median(v["rates"]), "wal": statistics.median(v["wal"]),
                 "valid": v["valid"]} for k, v in got.items()}
    return {"cells": cells, "wake_ms": wake}


HTTP_READY_PER_S = 40_000
"""Ready messages per second of a poll+ack run kept in the queue before it (above the
fastest rate seen: a run that polls the queue empty is not valid)."""


def _top_up(url: str, ready: int) -> None:
    """Enqueue what ``ready`` ready messages lack (batches of 100)."""
    import sqew

    with sqew.Client(url) as client:  # type: ignore[abstract]
        missing = ready - client.stats(QUEUE).ready
    if missing > 0:
        fill("sqew", url, missing)


def _wake_latency(url_a: str, url_b: str, samples: int) -> list[float]:
    """Milliseconds from sending an enqueue to replica B until a long poll waiting on replica
    A returns with it (B commits, PostgreSQL notifies A's listening connection, A claims)."""
    import sqew

    got: list[float] = []
    with sqew.Client(url_a) as a, sqew.Client(url_b) as b:  # type: ignore[abstract]
        a.create_queue("wake")
        for _ in range(samples):
            returned: list[float] = []
            waiting = threading.Thread(target=lambda into=returned: (
                a.poll("wake", wait_ms=20_000), into.append(time.monotonic())))
            waiting.start()
            time.sleep(0.3)  # the poll parks (a bench may sleep; the tests wait for events)
            sent = time.monotonic()
            b.enqueue("wake", PAYLOAD)
            waiting.join(30)
            got.append((returned[0] - sent) * 1000)
    return got


@contextmanager
def _replicas(url: str, logs: Path, n: int) -> Iterator[list[http_bench.Server]]:
    started: list[http_bench.Server] = []
    try:
        for i in range(n):
            started.append(http_bench.sqew_server(f"replica{i + 1}", url, logs))  # type: ignore[arg-type]
        yield started
    finally:
        for srv in started:
            srv.stop()


def _wrk_at_once(bench: http_bench.Bench, servers: list[http_bench.Server], label: str,
                 workload: str, script: str, args: tuple[str, ...]) -> list[http_bench.Run]:
    """wrk against each server at the same time, the connections split between them."""
    runs: list[http_bench.Run] = []
    conns = HTTP_CONNS // len(servers)

    def one(srv: http_bench.Server) -> None:
        runs.append(bench.wrk(srv, f"{label} {srv.label}", workload, script, conns, *args))

    threads = [threading.Thread(target=one, args=(srv,)) for srv in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(runs) != len(servers):
        raise RuntimeError(f"a wrk run against {label} failed")
    return runs



def serve_side(side: str, url: str, logs: Path) -> http_bench.Server:
    """``sqew serve`` (one worker: one process) on ``url`` as ``side`` runs it."""
    if not side.startswith(WITHOUT):
        return http_bench.sqew_server(side, url, logs)  # type: ignore[arg-type]
    serve = [sys.executable, "-c", SERVE_WITHOUT, side[len(WITHOUT):], "serve"]
    return http_bench.sqew_server(side, url, logs, serve=serve)  # type: ignore[arg-type]


def sides(db: Database, sizes: Sizes, cases: dict[str, list[str]], record: Record,
          out: Callable[[str], None]) -> None:
    """Each case of ``CASES`` named in ``cases`` with its sides: a server per side on a
    fresh clone of the sqew template, wrk at ``HTTP_CONNS`` connections against one server at
    a time, the sides taking turns, in ``sizes.rounds`` rounds; recorded like the Client's."""
    http_bench.wrk_version()
    every = list(dict.fromkeys(side for names in cases.values() for side in names))
    urls: dict[str, str] = {}
    for i, side in enumerate(every):
        db.clone(f"http_{i}", "sqew_tpl")
        urls[side] = db.server.url(f"http_{i}")
    bench = http_bench.Bench(sizes.http_s, sizes.rounds)
    logs = Path(tempfile.mkdtemp(prefix="sqew-bench-pg-logs-"))
    with ExitStack() as stack:
        servers: dict[str, http_bench.Server] = {}
        for side in every:
            servers[side] = serve_side(side, urls[side], logs)
            stack.callback(servers[side].stop)
            _top_up(urls[side], 20_000)  # for the warm-up's polls
            bench.warm(servers[side], [CASES[name][1:] for name, names in cases.items()
                                       if side in names])
        for r in range(sizes.rounds):
            for name, names in cases.items():
                workload, script, args = CASES[name]
                for side in turn_order(names, r):
                    if workload == "poll+ack":  # never polled empty: topped up, untimed
                        _top_up(urls[side], int(HTTP_READY_PER_S * sizes.http_s))
                    before = db.wal()
                    run = bench.wrk(servers[side], side, workload, script, HTTP_CONNS, *args)
                    msgs = max(1, int(run.items_ps * sizes.http_s))
                    record(name, side, run.items_ps, db.wal() - before, msgs)
                    if not run.valid:
                        out(f"  {name} {side}: the run is not valid (wrk's line above)")
    for i in range(len(every)):
        db.server.drop_database(f"http_{i}")
    shutil.rmtree(logs, ignore_errors=True)  # (kept when the run failed: what went wrong)


def replicas_table(http: dict[str, Any]) -> list[str]:
    """``replicas``' results: a Markdown table and the wake-up's line."""
    lines = [f"| sqew serve over HTTP ({HTTP_CONNS} connections in all) | msg/s | WAL B/msg | "
             "valid |", "|---|---:|---:|---|"]
    for key, cell in http["cells"].items():
        workload, label = key.split("|")
        lines.append(f"| {workload}, {label} | {cell['msgs_s']:,.0f} | {cell['wal']:,.0f} "
                     f"| {'yes' if cell['valid'] else 'NO'} |")
    wake = http["wake_ms"]
    return [*lines, "", f"Long poll on replica 1 woken by an enqueue on replica 2 (from sending "
            f"the enqueue to the poll's answer, {len(wake)} samples): median "
            f"{statistics.median(wake):.1f} ms, max {max(wake):.1f} ms."]
