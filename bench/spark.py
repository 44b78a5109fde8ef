"""Spark benchmark: the ``sqew`` PySpark data source against the CLI's bulk paths.

``scripts/bench spark [--quick] [--json FILE]`` (or ``python -m bench.spark``). One NDJSON file of
N messages with 200-byte JSON payloads (1,000,000; ``--quick``: 100,000) is moved four ways, via
a database file and via a server (``sqew serve`` on the same kind of file, a subprocess on
127.0.0.1), each into a fresh queue:

- write, Spark: ``spark.read.text(ndjson)`` as the ``payload`` column, then
  ``df.write.format("sqew")…save()`` (Spark ``local[2]``, 2 partitions);
- write, CLI: ``sqew message enqueue --queue q --file ndjson`` (batches of 1000, one process);
- read, Spark: the snapshot read (``spark.read.format("sqew")…load()``) of the whole queue,
  every column materialised (``write.format("noop")``);
- read, CLI: ``sqew queue export --name q --out file`` (every message as an NDJSON envelope).

Each figure is messages per second of wall time, the Spark session and JVM already started
(a cluster keeps them; the CLI's own start-up, ~0.3 s, is inside its figure). Ratios compare
Spark to the CLI in the same run. Targets via the file: write ≥ 50,000 msgs/s, snapshot read
≥ 100,000 msgs/s. Exit status 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqew
from bench.server import BIN, serving, sqew_server

PAYLOAD_PAD = 200 - len('{"kind":"order","n":"0000000","data":""}')
TARGETS = {("file", "spark write"): 50_000.0, ("file", "spark read"): 100_000.0}


def write_ndjson(path: Path, n: int) -> None:
    """``n`` lines, each a 200-byte JSON object (the message's payload)."""
    pad = "x" * PAYLOAD_PAD
    with path.open("w") as f:
        for i in range(n):
            line = f'{{"kind":"order","n":"{i:07d}","data":"{pad}"}}'
            f.write(line + "\n")
    with path.open() as f:
        assert len(f.readline().rstrip("\n").encode()) == 200


def spark_session(tmp: Path) -> Any:
    from pyspark.sql import SparkSession

    import sqew.spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("sqew-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g")
             .config("spark.local.dir", str(tmp / "spark-local"))
             .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sqew.spark.register(spark)
    return spark


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cli(*args: str) -> None:
    subprocess.run([str(BIN / "sqew"), *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def count(target: dict[str, str], queue: str) -> int:
    with sqew.Client(target["db"] if "db" in target else target["url"]) as c:
        s = c.stats(queue)
        return s.ready + s.delayed + s.leased


def warm_up(spark: Any, target: dict[str, str]) -> None:
    """A small write and read first: Spark starts its Python workers (and they import sqew)
    on the first job of each kind, a cost a long-running cluster has already paid."""
    with sqew.Client(target.get("db") or target["url"]) as c:
        c.create_queue("warm_q")
    spark.range(2000).selectExpr("to_json(named_struct('n', id)) AS payload").repartition(2) \
        .write.format("sqew").options(**target).option("queue", "warm_q").mode("append").save()
    spark.read.format("sqew").options(**target).option("queue", "warm_q").load() \
        .write.format("noop").mode("overwrite").save()


def run_target(spark: Any, name: str, target: dict[str, str], ndjson: Path, n: int,
               tmp: Path) -> dict[str, float]:
    """The four measurements on one target (``{"db": path}`` or ``{"url": url}``)."""
    where = ["--db", target["db"]] if "db" in target else ["--url", target["url"]]
    with sqew.Client(target.get("db") or target["url"]) as c:
        c.create_queue("spark_q")
        c.create_queue("cli_q")
    warm_up(spark, target)
    secs: dict[str, float] = {}
    df = spark.read.text(str(ndjson)).withColumnRenamed("value", "payload").repartition(2)
    df = df.cache()
    df.count()  # the input is in memory: the figure is the sink's
    secs["spark write"] = timed(lambda: df.write.format("sqew").options(**target)
                                .option("queue", "spark_q").mode("append").save())
    df.unpersist()
    secs["cli write"] = timed(lambda: cli(*where, "message", "enqueue", "--queue", "cli_q",
                                          "--file", str(ndjson)))
    for queue in ("spark_q", "cli_q"):
        got = count(target, queue)
        assert got == n, f"{name}: {queue} holds {got} messages, not {n}"
    secs["spark read"] = timed(lambda: spark.read.format("sqew").options(**target)
                               .option("queue", "spark_q").load()
                               .write.format("noop").mode("overwrite").save())
    out = tmp / f"export-{name}.ndjson"
    secs["cli read"] = timed(lambda: cli(*where, "queue", "export", "--name", "cli_q",
                                         "--out", str(out)))
    with out.open() as f:
        lines = sum(1 for _ in f)
    assert lines == n, f"{name}: the export has {lines} lines, not {n}"
    return {k: n / v for k, v in secs.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table; exit 1 if a target is missed."""
    parser = argparse.ArgumentParser(prog="bench spark", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 messages, not 1,000,000")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    n = 100_000 if args.quick else 1_000_000
    tmp = Path(tempfile.mkdtemp(prefix="sqew-bench-spark-"))
    try:
        ndjson = tmp / "in.ndjson"
        write_ndjson(ndjson, n)
        spark = spark_session(tmp)
        try:
            results = {"file": run_target(spark, "file", {"db": str(tmp / "file.db")},
                                          ndjson, n, tmp)}
            srv_db = tmp / "server.db"
            with serving(lambda: sqew_server("sqew serve", srv_db, tmp)) as srv:
                results["server"] = run_target(spark, "server", {"url": srv.url}, ndjson, n,
                                               tmp)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report(results, n, args.json)


def report(results: dict[str, dict[str, float]], n: int, json_path: str | None) -> int:
    print(f"\n{n:,} messages of 200 bytes, Spark local[2]; "
          f"{platform.machine()}, {os.cpu_count()} cores\n")
    print(f"{'via':<8}{'path':<14}{'msgs/s':>12}{'vs CLI':>9}{'target':>10}")
    missed = []
    for via, figures in results.items():
        for op in ("write", "read"):
            for side in ("spark", "cli"):
                rate = figures[f"{side} {op}"]
                ratio = f"{rate / figures[f'cli {op}']:.2f}" if side == "spark" else ""
                target = TARGETS.get((via, f"{side} {op}"))
                mark = f"≥ {target:,.0f}" if target else ""
                if target and rate < target:
                    missed.append(f"{via} {side} {op}: {rate:,.0f} < {target:,.0f}")
                print(f"{via:<8}{side + ' ' + op:<14}{rate:>12,.0f}{ratio:>9}{mark:>10}")
    if json_path:
        Path(json_path).write_text(json.dumps({"messages": n, "results": results}, indent=2))
    for line in missed:
        print(f"target missed: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
