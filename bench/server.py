"""Server benchmark: sqew's REST server under wrk, beside its own /healthz and moto.

``scripts/bench server [--quick]`` (or ``python -m bench.server``). Every server is a subprocess
on a free 127.0.0.1 port, stopped by its PID; the load generator is wrk (Debian's package) with
the Lua scripts in ``bench/lua/``, a separate process. Workloads, at 1, 16 and 64 connections:

* ``healthz``: GET /healthz, the framework's ceiling (same server, same worker count);
* ``enqueue``: POST one ~200-byte message; ``batch100``: POST 100 of them in one request;
* ``enqueue hmac`` (16 connections, sqew alone): the same enqueue to a queue with an
  ``hmac_secret``, each request carrying its ``X-Sqew-Signature``, right after the unsigned one
  in each round; the ``hmac`` section runs that pair alone, in more rounds;
* ``poll+ack``: poll(batch 10), then ack what came back, on each connection, on a queue filled
  with enough ready messages that it never runs dry;
* ``cycle``: poll(10), ack, enqueue the same number again: the depth stays where it was, which
  is how poll+ack is compared at 1,000 vs 1,000,000 ready messages, and with moto;
* moto (``bench/peers.py``): SendMessage, and ReceiveMessage(10) + DeleteMessageBatch
  (``sqs-send``, ``sqs-recv+del``, ``sqs-cycle``), SQS JSON protocol.
* ``auth``: enqueue and poll+ack at 16 connections with an API key sent and
  enforced, against the same on a server with no key (auth off), in interleaved rounds.
* ``metrics``: enqueue and poll+ack at 16 connections with metrics on (the
  default) against the same with the setting ``metrics`` off, in interleaved rounds; and the
  time a scrape of ``/metrics`` takes on a database of 1,000 queues (2,000 with their DLQs).
* ``tracing``: enqueue and poll+ack at 16 connections on a server that traces
  (every request, operation and transaction a span, through the SDK's batch processor to an
  in-process exporter that drops them: ``bench/traced_serve.py``) against the same with
  tracing off, in interleaved rounds.

Runs whose ratios matter are interleaved (healthz, enqueue, batch, poll+ack, then again) and
the median of the rounds is reported. A run with a non-2xx answer, a socket error, a failed
ack or an empty poll is marked invalid, and so is every target that uses it. The report
(Markdown) goes to stdout, the raw results to ``--json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import hmac
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil

HERE = Path(__file__).resolve().parent
LUA = HERE / "lua"
ROOT = HERE.parent
BIN = Path(sys.executable).parent
CONNS = (1, 16, 64)
QUEUE = "q"  # the poll+ack queue, prefilled
ENQ_QUEUE = "bench"  # the enqueue queue
HMAC_QUEUE = "bench-hmac"  # the signed enqueue queue
HMAC_SECRET = "bench-hmac-secret-0123456789"
SIGNED = "<X-Sqew-Signature>"
"""A wrk script argument replaced by a fresh signature of enqueue.lua's body at each run."""
SQS_BODY_NOTE = "the same payload as sqew's, as the MessageBody string"


def payload_text() -> str:
    """The ~200-byte JSON payload, read from bench/lua/common.lua (one source of truth)."""
    text = (LUA / "common.lua").read_text()
    block = text[text.index("PAYLOAD ="):].split("\n\n")[0]
    return "".join(re.findall(r"'([^']*)'", block))


def signature_now() -> str:
    """``X-Sqew-Signature`` of enqueue.lua's body for ``HMAC_QUEUE``, timed now: valid for the
    next 300 s (docs/rest.md), longer than a wrk run. Computed here from the documented
    formula: wrk's LuaJIT has no HMAC, and doing SHA-256 in Lua per request would load the
    machine's two cores with the load generator's work, not the server's."""
    body = ('{"payload":' + payload_text() + "}").encode()
    t = int(time.time())
    mac = hmac.new(HMAC_SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def live(args: tuple[str, ...]) -> list[str]:
    """Script arguments with ``SIGNED`` replaced by a signature of now."""
    return [signature_now() if a == SIGNED else a for a in args]


# --- results ------------------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    """One wrk run."""

    server: str
    workload: str
    conns: int
    threads: int
    rps: float  # HTTP requests per second
    items_ps: float  # messages per second (enqueued, acked or deleted) where that applies
    p50_ms: float
    p99_ms: float
    requests: int
    bad: int = 0  # non-2xx answers
    errors: int = 0  # failed items (an ack not "acked", a failed batch entry)
    empty: int = 0  # polls that found nothing
    socket_errors: int = 0
    wrk_cpu: float = 0.0  # cores used by wrk
    server_cpu: float = 0.0  # cores used by the server's processes
    other_cpu: float = 0.0  # cores used by everything else on the machine (noise)
    depth: int | None = None  # ready messages at the start, where that matters
    note: str = ""

    @property
    def rps_per_cpu(self) -> float:
        """Requests per second of the server's CPU: less sensitive than ``rps`` to other work
        taking cores from the server on a shared machine."""
        return self.rps / self.server_cpu if self.server_cpu else 0.0

    @property
    def valid(self) -> bool:
        """Whether the run measured what it claims (no errors, never ran dry)."""
        return not (self.bad or self.errors or self.empty or self.socket_errors) and bool(
            self.requests
        )


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip()).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def parse_wrk(out: str) -> dict[str, Any]:
    """The numbers of a wrk --latency report and of the scripts' BENCH line."""
    got: dict[str, Any] = {}
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", out)
    if m is None:
        raise RuntimeError(f"unreadable wrk output:\n{out}")
    got["requests"] = int(m.group(1))
    got["seconds"] = _ms(m.group(2) + m.group(3)) / 1000
    got["rps"] = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    for pct in ("50", "99"):
        lat = re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M)
        got[f"p{pct}"] = _ms(lat.group(1)) if lat else float("nan")
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    got["socket_errors"] = sum(map(int, sock.groups())) if sock else 0
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    bench = re.search(r"^BENCH bad=(\d+) errors=(\d+) items=(\d+) empty=(\d+) first=(.*)$", out,
                      re.M)
    if bench is None:
        raise RuntimeError(f"the Lua script printed no BENCH line:\n{out}")
    got["bad"] = max(int(bench.group(1)), int(non2xx.group(1)) if non2xx else 0)
    got["errors"], got["items"], got["empty"] = map(int, bench.group(2, 3, 4))
    got["first"] = bench.group(5).strip()
    return got


# --- servers ------------------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A server subprocess on 127.0.0.1:<port>, in its own session, stopped by its PID."""

    def __init__(self, label: str, cmd: list[str], *, env: dict[str, str], port: int,
                 ready_path: str, logdir: Path) -> None:
        self.label = label
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = logdir / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', label)}.log"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         cwd=ROOT)
        self._wait_ready(ready_path)
        self.ps = psutil.Process(self.proc.pid)

    def _wait_ready(self, path: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited ({self.proc.returncode}):\n"
                                   + self.log.read_text()[-3000:])
            try:
                httpx.get(self.url + path, timeout=2.0)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.label} did not answer within {timeout:.0f} s")

    def cpu_seconds(self) -> float:
        """CPU time used so far by the server and its worker processes."""
        total = 0.0
        for p in [self.ps, *self.ps.children(recursive=True)]:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
        return total

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL to its session (it and its workers) if it lingers."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@contextmanager
def serving(server_factory: Callable[[], Server]) -> Iterator[Server]:
    """Start a server, yield it, always stop it."""
    server = server_factory()
    try:
        yield server
    finally:
        server.stop()


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SQEW_LOG_LEVEL": "warning", "SQEW_ACCESS_LOG": "false"})
    env.update(extra)
    return env


def sqew_server(label: str, db: Path, logdir: Path, *, durability: str = "normal",
                workers: int = 1, asgi: str = "uvicorn",
                settings: dict[str, str] | None = None, traced: bool = False,
                sampled: float = 1.0, serve: list[str] | None = None) -> Server:
    """``sqew serve`` (uvicorn) or granian over ``sqew.server.app:app_from_env`` on ``db``;
    ``settings`` as ``SQEW_*`` variables (uvicorn only); ``traced``: with tracing on
    (``bench/traced_serve.py``, one worker), recording the share ``sampled`` of the requests
    (the SDK's ``parentbased_traceidratio`` sampler); ``serve``: the command that stands for
    ``sqew serve`` (uvicorn only; ``bench/postgres_http.py``'s sqew with a variant off)."""
    port = free_port()
    if asgi == "uvicorn":
        serve = serve or ([sys.executable, "-m", "bench.traced_serve"] if traced
                          else [str(BIN / "sqew"), "serve"])
        cmd = [*serve, "--db", str(db), "--port", str(port),
               "--durability", durability, "--workers", str(workers)]
        extra = {f"SQEW_{k.upper()}": v for k, v in (settings or {}).items()}
        if traced:
            extra.update(OTEL_TRACES_SAMPLER="parentbased_traceidratio",
                         OTEL_TRACES_SAMPLER_ARG=str(sampled))
        env = _env(**extra)
    else:
        cmd = [str(BIN / "granian"), "--interface", "asgi", "--factory", "--host", "127.0.0.1",
               "--port", str(port), "--workers", str(workers), "--log-level", "warning",
               "--no-access-log", "sqew.server.app:app_from_env"]
        env = _env(SQEW_DB=str(db), SQEW_DURABILITY=durability, SQEW_WORKERS=str(workers))
    return Server(label, cmd, env=env, port=port, ready_path="/healthz", logdir=logdir)


def moto_server(logdir: Path, queues: dict[str, int]) -> Server:
    """moto's SQS server with ``queues`` (name -> depth) filled first (see bench/peers.py)."""
    port = free_port()
    cmd = [sys.executable, str(HERE / "peers.py"), "moto", "--port", str(port),
           "--body", payload_text()]
    for name, depth in queues.items():
        cmd += ["--queue", f"{name}={depth}"]
    return Server("moto", cmd, env=_env(), port=port, ready_path="/moto-api/", logdir=logdir)


def moto_queue_url(server: Server, name: str) -> str:
    """The QueueUrl moto gives ``name`` (GetQueueUrl over the JSON protocol)."""
    r = httpx.post(server.url + "/", timeout=30, content=json.dumps({"QueueName": name}),
                   headers={"X-Amz-Target": "AmazonSQS.GetQueueUrl",
                            "Content-Type": "application/x-amz-json-1.0",
                            "Authorization": "AWS4-HMAC-SHA256 Credential=test/20240101/"
                            "us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0"})
    r.raise_for_status()
    return str(r.json()["QueueUrl"])


# --- databases ----------------------------------------------------------------------------------
def prefill(path: Path, depths: dict[str, int],
            settings: dict[str, dict[str, Any]] | None = None) -> float:
    """Create ``path`` with the queues ``depths`` (name -> ready messages), with ``settings``
    (name -> queue settings) where given; returns seconds."""
    import sqew

    started = time.monotonic()
    payload = json.loads(payload_text())
    client = sqew.Client(str(path))
    try:
        for name, depth in depths.items():
            client.create_queue(name, **(settings or {}).get(name, {}))
            left = depth
            while left > 0:
                n = min(left, 1000)
                client.enqueue_batch(name, [{"payload": payload}] * n)
                left -= n
    finally:
        client.close()
    return time.monotonic() - started


def copy_db(src: Path, dst: Path) -> Path:
    """Copy a closed SQLite database (and its WAL, if one was left)."""
    shutil.copyfile(src, dst)
    for suffix in ("-wal",):
        if Path(str(src) + suffix).exists():
            shutil.copyfile(str(src) + suffix, str(dst) + suffix)
    return dst


# --- wrk ----------------------------------------------------------------------------------------
def wrk_version() -> str:
    """wrk's version line, or raise with how to install it."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk (scripts/bench does it)")
    out = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
    return " ".join((out.stdout or out.stderr).split()[:2])


class Bench:
    """Runs wrk against servers and keeps every result."""

    def __init__(self, duration: float, rounds: int) -> None:
        self.duration = duration
        self.rounds = rounds
        self.runs: list[Run] = []
        self.scrapes_ms: list[float] = []  # GET /metrics with SCRAPE_QUEUES queues: wall time
        self.scrapes_cpu_ms: list[float] = []  # and the server's CPU time

    def wrk(self, server: Server, label: str, workload: str, script: str, conns: int,
            *args: str, threads: int | None = None, depth: int | None = None,
            seconds: float | None = None) -> Run:
        """One wrk run of ``script`` at ``conns`` connections; recorded and returned."""
        threads = threads or min(2, conns)
        seconds = seconds or self.duration
        cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds:g}s", "--latency",
               "--timeout", "30s", "-s", str(LUA / script), server.url, "--", *live(args)]
        before_wrk = resource.getrusage(resource.RUSAGE_CHILDREN)
        before_srv = server.cpu_seconds()
        before_all = _busy_seconds()
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              timeout=seconds + 120)
        wall = time.monotonic() - started
        after_wrk = resource.getrusage(resource.RUSAGE_CHILDREN)
        srv_cpu = (server.cpu_seconds() - before_srv) / wall
        all_cpu = (_busy_seconds() - before_all) / wall
        wrk_cpu = (after_wrk.ru_utime + after_wrk.ru_stime - before_wrk.ru_utime
                   - before_wrk.ru_stime) / wall
        if proc.returncode != 0:
            raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr}{proc.stdout}")
        got = parse_wrk(proc.stdout)
        run = Run(server=label, workload=workload, conns=conns, threads=threads, rps=got["rps"],
                  items_ps=got["items"] / got["seconds"] if got["seconds"] else 0.0,
                  p50_ms=got["p50"], p99_ms=got["p99"], requests=got["requests"],
                  bad=got["bad"], errors=got["errors"], empty=got["empty"],
                  socket_errors=got["socket_errors"], wrk_cpu=wrk_cpu, server_cpu=srv_cpu,
                  other_cpu=max(0.0, all_cpu - srv_cpu - wrk_cpu), depth=depth,
                  note=got["first"])
        self.runs.append(run)
        flag = "" if run.valid else "  INVALID " + _why(run)
        print(f"  {label:<16} {workload:<13} c={conns:<3} t={threads} {run.rps:9.0f} req/s "
              f"{run.items_ps:9.0f} msg/s p50 {run.p50_ms:7.2f} ms p99 {run.p99_ms:8.2f} ms "
              f"cpu srv {srv_cpu:.2f} wrk {wrk_cpu:.2f} other {run.other_cpu:.2f}{flag}",
              file=sys.stderr, flush=True)
        return run

    def warm(self, server: Server, scripts: list[tuple[str, tuple[str, ...]]]) -> None:
        """Run each script for 1 s at 16 connections, unrecorded: a fresh server's first second
        (imports finishing, statement caches, a full garbage collection) is not its speed."""
        for script, args in scripts:
            subprocess.run(["wrk", "-t2", "-c16", "-d1s", "--timeout", "30s", "-s",
                            str(LUA / script), server.url, "--", *live(args)],
                           capture_output=True, check=False, timeout=120)

    def select(self, server: str, workload: str, conns: int, threads: int | None = None
               ) -> list[Run]:
        """The recorded runs of one cell."""
        return [r for r in self.runs if r.server == server and r.workload == workload
                and r.conns == conns and (threads is None or r.threads == threads)]


def _busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores, all processes)."""
    t = psutil.cpu_times()
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0))


def _why(run: Run) -> str:
    parts = [f"{n} {k}" for k, n in (("non-2xx", run.bad), ("failed items", run.errors),
                                     ("empty polls", run.empty),
                                     ("socket errors", run.socket_errors)) if n]
    if not run.requests:
        parts.append("no requests")
    return ", ".join(parts) + (f" (first: {run.note[:80]})" if run.note else "")


# --- the plan -----------------------------------------------------------------------------------
SQEW_WORKLOADS: list[tuple[str, str, tuple[str, ...]]] = [
    ("healthz", "healthz.lua", ()),
    ("enqueue", "enqueue.lua", (ENQ_QUEUE,)),
    ("batch100", "batch.lua", (ENQ_QUEUE, "100")),
    ("poll+ack", "pollack.lua", (QUEUE, "10")),
]
FAST_WORKLOADS = SQEW_WORKLOADS[:2]
HMAC_WORKLOAD: tuple[str, str, tuple[str, ...]] = (
    "enqueue hmac", "enqueue.lua", (HMAC_QUEUE, SIGNED))
HMAC_CONNS = 16
"""The signed enqueue runs beside the unsigned one (right after it, in every round) at 16
connections on the default server: their ratio is a target."""


SECTIONS = ("sqew", "granian", "depth", "moto", "hmac", "auth", "metrics", "tracing")
HMAC_ROUNDS = 5
"""Rounds of the ``hmac`` section's pair (unsigned enqueue, signed enqueue) at least."""


@dataclasses.dataclass
class Plan:
    """How big a run is."""

    duration: float
    rounds: int
    deep: int  # the deep queue (and the prefill of the poll+ack queue)
    sections: frozenset[str]  # of SECTIONS


def run_all(plan: Plan, work: Path) -> Bench:
    """Every measurement of the report, in order."""
    bench = Bench(plan.duration, plan.rounds)
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    template = work / "deep.db"
    if plan.sections & {"sqew", "granian", "depth", "auth", "metrics", "tracing"}:
        secs = prefill(template, {QUEUE: plan.deep, ENQ_QUEUE: 0, HMAC_QUEUE: 0},
                       {HMAC_QUEUE: {"hmac_secret": HMAC_SECRET}})
        print(f"prefilled {plan.deep:,} messages in {secs:.1f} s", file=sys.stderr)

    if "sqew" in plan.sections:
        configs = [("sqew", {}), ("sqew full", {"durability": "full"}),
                   ("sqew w2", {"workers": 2})]
        for label, opts in configs:
            db = copy_db(template, work / f"{label.replace(' ', '-')}.db")
            with serving(lambda label=label, db=db, opts=opts: sqew_server(
                    label, db, logs, **opts)) as srv:
                signed = {HMAC_CONNS: [HMAC_WORKLOAD]} if label == "sqew" else {}
                _interleave(bench, srv, label, SQEW_WORKLOADS, CONNS, plan.deep, signed)
                if label == "sqew":
                    _wrk_threads(bench, srv, plan)
    if "hmac" in plan.sections:
        _hmac(bench, plan, work, logs)
    if "granian" in plan.sections:
        for label, workers, conns in (("granian", 1, CONNS), ("granian w2", 2, (16, 64))):
            db = copy_db(template, work / f"{label.replace(' ', '-')}.db")
            with serving(lambda label=label, db=db, w=workers: sqew_server(
                    label, db, logs, workers=w, asgi="granian")) as srv:
                _interleave(bench, srv, label, FAST_WORKLOADS, conns, plan.deep)
    if "depth" in plan.sections:
        _depth(bench, plan, work, logs, template)
    if "moto" in plan.sections:
        _moto(bench, plan, logs)
    if "auth" in plan.sections:
        _auth(bench, work, logs, template, plan.deep)
    if "metrics" in plan.sections:
        _metrics(bench, work, logs, template, plan.deep)
        _scrape(bench, work, logs, 5 if plan.duration < 3 else 20)
    if "tracing" in plan.sections:
        _tracing(bench, work, logs, template, plan.deep)
    return bench


Workload = tuple[str, str, tuple[str, ...]]


def _interleave(bench: Bench, srv: Server, label: str, workloads: list[Workload],
                conns: tuple[int, ...], deep: int,
                extra: dict[int, list[Workload]] | None = None,
                rounds: int | None = None) -> None:
    """Every workload at each of ``conns``, interleaved round by round (``rounds``, default
    the bench's); ``extra`` adds workloads at some connection counts, each right after the
    unsigned enqueue."""
    extra = extra or {}
    bench.warm(srv, [(script, args) for _, script, args in
                     [*workloads, *(w for ws in extra.values() for w in ws)]])
    for c in conns:
        plan = list(workloads)
        if c in extra:
            at = next((i + 1 for i, w in enumerate(plan) if w[0] == "enqueue"), len(plan))
            plan[at:at] = extra[c]
        for _ in range(rounds or bench.rounds):
            for workload, script, args in plan:
                depth = deep if workload == "poll+ack" else None
                bench.wrk(srv, label, workload, script, c, *args, depth=depth)


def _hmac(bench: Bench, plan: Plan, work: Path, logs: Path) -> None:
    """The signed/unsigned enqueue pair alone, on a server of its own (label ``sqew hmac``),
    in more rounds than the rest: the ratio of two runs is at the mercy of whatever else this
    shared machine runs meanwhile, and more pairs steady the medians."""
    db = work / "hmac.db"
    prefill(db, {ENQ_QUEUE: 0, HMAC_QUEUE: 0}, {HMAC_QUEUE: {"hmac_secret": HMAC_SECRET}})
    label = "sqew hmac"
    pair = [SQEW_WORKLOADS[1], HMAC_WORKLOAD]
    with serving(lambda: sqew_server(label, db, logs)) as srv:
        _interleave(bench, srv, label, pair, (HMAC_CONNS,), 0,
                    rounds=max(plan.rounds, HMAC_ROUNDS))


def _wrk_threads(bench: Bench, srv: Server, plan: Plan) -> None:
    """Is wrk the bottleneck? healthz with one wrk thread vs two, interleaved."""
    for c in (16, 64):
        for _ in range(plan.rounds):
            for t in (1, 2):
                bench.wrk(srv, "sqew", f"healthz -t{t}", "healthz.lua", c, threads=t)


DEPTHS = (1_000, 4_000)


def _depth(bench: Bench, plan: Plan, work: Path, logs: Path, template: Path) -> None:
    """sqew at a held depth: the poll(10)+ack+enqueue cycle at 1k, 4k and deep ready messages
    (16 connections, for the deep/1k target; 1 connection, beside moto), then single enqueues
    (after the cycles: they grow the queue).

    One server per depth, all started first, and the 16-connection rounds interleaved across
    them: the deep/1k ratio compares runs minutes apart otherwise, and this shared machine's
    speed drifts more than that over minutes.
    """
    with ExitStack() as stack:
        servers: list[tuple[int, str, Server]] = []
        for depth in (*DEPTHS, plan.deep):
            db = work / f"depth-{depth}.db"
            if depth == plan.deep:
                copy_db(template, db)
            else:
                prefill(db, {QUEUE: depth})
            label = f"sqew d={_k(depth)}"
            srv = stack.enter_context(
                serving(lambda label=label, db=db: sqew_server(label, db, logs)))
            bench.warm(srv, [("healthz.lua", ()), ("pollack.lua", (QUEUE, "10", "refill"))])
            servers.append((depth, label, srv))
        for _ in range(bench.rounds):
            for depth, label, srv in servers:
                bench.wrk(srv, label, "cycle", "pollack.lua", 16, QUEUE, "10", "refill",
                          depth=depth)
        for depth, label, srv in servers:
            if depth in DEPTHS and "moto" in plan.sections:
                bench.wrk(srv, label, "cycle", "pollack.lua", 1, QUEUE, "10", "refill",
                          depth=depth)
                for c in (1, 16):
                    bench.wrk(srv, label, "enqueue", "enqueue.lua", c, QUEUE, depth=depth)


AUTH_WORKLOADS: list[tuple[str, str, tuple[str, ...]]] = [
    ("enqueue", "enqueue.lua", (ENQ_QUEUE,)),
    ("poll+ack", "pollack.lua", (QUEUE, "10")),
]


def _auth(bench: Bench, work: Path, logs: Path, template: Path, deep: int) -> None:
    """Authenticated enqueue and poll+ack against the same with auth off, at 16 connections.

    Two servers on copies of the prefilled database, both started first and their rounds
    interleaved: "sqew auth off" (no key: open) and "sqew auth on" (an admin key in the
    database, sent with every request; wrk's Lua reads it from SQEW_BENCH_KEY).
    """
    with ExitStack() as stack:
        servers: list[tuple[str, Server, str | None]] = []
        for label, keyed in (("sqew auth off", False), ("sqew auth on", True)):
            db = copy_db(template, work / f"{label.replace(' ', '-')}.db")
            key = _mint_admin_key(db) if keyed else None
            srv = stack.enter_context(serving(lambda label=label, db=db: sqew_server(
                label, db, logs)))
            with _bench_key(key):
                bench.warm(srv, [(script, args) for _, script, args in AUTH_WORKLOADS])
            servers.append((label, srv, key))
        for _ in range(bench.rounds):
            for label, srv, key in servers:
                with _bench_key(key):
                    for workload, script, args in AUTH_WORKLOADS:
                        depth = deep if workload == "poll+ack" else None
                        bench.wrk(srv, label, workload, script, 16, *args, depth=depth)


TRACING_SERVERS = (("sqew tracing off", False, 1.0), ("sqew tracing on", True, 1.0),
                   ("sqew tracing 10%", True, 0.1))
TRACING_BOUNDS = {"sqew tracing on": None, "sqew tracing 10%": 0.9}
"""The bound on a sampled server (≤ 10 % slower); recording every request is reported
without one (docs/operations.md, "Traces": what a recorded span costs)."""


def _tracing(bench: Bench, work: Path, logs: Path, template: Path, deep: int) -> None:
    """Enqueue and poll+ack at 16 connections with tracing on against tracing off.

    Servers on copies of the prefilled database, all started first and their rounds
    interleaved: "sqew tracing off" (``sqew serve``, no OTEL_* variables: no tracing code
    runs), "sqew tracing on" (``bench/traced_serve.py``: every request recorded, each with
    its server, operation and transaction spans) and "sqew tracing 10%" (the same with one
    request in ten sampled, as a busy production server would trace).
    """
    with ExitStack() as stack:
        servers: list[tuple[str, Server]] = []
        for label, traced, sampled in TRACING_SERVERS:
            db = copy_db(template, work / f"{label.replace(' ', '-')}.db")
            srv = stack.enter_context(serving(
                lambda label=label, db=db, traced=traced, sampled=sampled: sqew_server(
                    label, db, logs, traced=traced, sampled=sampled)))
            bench.warm(srv, [(script, args) for _, script, args in AUTH_WORKLOADS])
            servers.append((label, srv))
        _interleaved(bench, servers, deep)


def _interleaved(bench: Bench, servers: list[tuple[str, Server]], deep: int) -> None:
    """``AUTH_WORKLOADS`` at 16 connections on each server in turn, ``bench.rounds`` times
    (rounds interleaved, so a slower moment of the machine falls on every server alike)."""
    for _ in range(bench.rounds):
        for label, srv in servers:
            for workload, script, args in AUTH_WORKLOADS:
                depth = deep if workload == "poll+ack" else None
                bench.wrk(srv, label, workload, script, 16, *args, depth=depth)


def _mint_admin_key(db: Path) -> str:
    """A new admin key in ``db`` (as ``sqew keys create --scope admin`` on the file)."""
    from sqew import models
    from sqew.backends import open_backend
    from sqew.core.service import QueueService
    from sqew.core.writer import run_sync

    service = QueueService(open_backend(str(db)))
    try:
        return run_sync(service.create_key(models.KeyCreate(scopes=["admin"]))).key
    finally:
        service.close()


@contextmanager
def _bench_key(key: str | None) -> Iterator[None]:
    """wrk runs started inside send ``key`` (``SQEW_BENCH_KEY``, read by bench/lua/common.lua)."""
    if key is None:
        yield
        return
    os.environ["SQEW_BENCH_KEY"] = key
    try:
        yield
    finally:
        del os.environ["SQEW_BENCH_KEY"]


def _metrics(bench: Bench, work: Path, logs: Path, template: Path, deep: int) -> None:
    """Enqueue and poll+ack at 16 connections with metrics on against the same with the
    setting ``metrics`` off, on copies of the prefilled database, both servers started first
    and their rounds interleaved (as ``_auth``)."""
    with ExitStack() as stack:
        servers: list[tuple[str, Server]] = []
        for label, on in (("sqew metrics off", "false"), ("sqew metrics on", "true")):
            db = copy_db(template, work / f"{label.replace(' ', '-')}.db")
            srv = stack.enter_context(serving(lambda label=label, db=db, on=on: sqew_server(
                label, db, logs, settings={"metrics": on})))
            bench.warm(srv, [(script, args) for _, script, args in AUTH_WORKLOADS])
            servers.append((label, srv))
        _interleaved(bench, servers, deep)


SCRAPE_QUEUES = 1_000
SCRAPE_DEPTH = 10
"""The scrape's database: 1,000 queues (and their DLQs) of 10 messages each."""


def _scrape(bench: Bench, work: Path, logs: Path, count: int) -> None:
    """``count`` scrapes of /metrics, one after another, on a database of ``SCRAPE_QUEUES``
    queues: the wall time of each, as a Prometheus server would see it."""
    db = work / "scrape.db"
    secs = prefill(db, {f"m{i:04d}": SCRAPE_DEPTH for i in range(SCRAPE_QUEUES)})
    print(f"prefilled {SCRAPE_QUEUES:,} queues in {secs:.1f} s", file=sys.stderr)
    with serving(lambda: sqew_server("sqew scrape", db, logs)) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as http:
        http.get("/metrics").raise_for_status()  # warm: the first read opens connections
        for _ in range(count):
            cpu = srv.cpu_seconds()
            started = time.perf_counter()
            response = http.get("/metrics")
            bench.scrapes_ms.append((time.perf_counter() - started) * 1000)
            bench.scrapes_cpu_ms.append((srv.cpu_seconds() - cpu) * 1000)
            response.raise_for_status()
            queues = response.text.count("\nsqew_queue_ready{")
            if queues != 2 * SCRAPE_QUEUES:
                raise RuntimeError(f"/metrics showed {queues} queues, not {2 * SCRAPE_QUEUES}")
    print(f"  scrape /metrics, {SCRAPE_QUEUES:,} queues: median "
          f"{statistics.median(bench.scrapes_ms):.1f} ms, max {max(bench.scrapes_ms):.1f} ms, "
          f"server CPU median {statistics.median(bench.scrapes_cpu_ms):.1f} ms "
          f"({len(response.content):,} bytes)", file=sys.stderr, flush=True)


def moto_runs(plan: Plan) -> list[tuple[str, str, str, int, int, float]]:
    """(label, workload, script, connections, depth, seconds) of every moto run.

    moto answers one request at a time (the GIL) and a ReceiveMessage costs ~0.9 s at a depth
    of 1,000 and ~3.5 s at 4,000, so 16 concurrent receives are answered only after ~15 s:
    receive runs get long windows, and 64 concurrent receives (a minute before the first
    answer) are not run. Its throughput does not grow with connections anyway.
    """
    quick = plan.duration < 3
    runs = [("moto", "sqs-send", "sqs_send.lua", c, 1000, 2.0 if quick else 5.0)
            for c in CONNS]
    runs.append(("moto", "sqs-recv+del", "sqs_receive.lua", 1, 1000, 5.0 if quick else 10.0))
    if not quick:
        runs.append(("moto", "sqs-recv+del", "sqs_receive.lua", 16, 1000, 30.0))
    for d in DEPTHS:
        seconds = (4.0 if quick else 10.0) * (1.5 if d > 1000 else 1.0)
        runs.append((f"moto d={_k(d)}", "cycle", "sqs_receive.lua", 1, d, seconds))
        runs.append((f"moto d={_k(d)}", "enqueue", "sqs_send.lua", 1, d, 2.0 if quick else 5.0))
    return runs


def _moto(bench: Bench, plan: Plan, logs: Path) -> None:
    """Each moto run on a fresh moto process whose queue holds exactly its depth (a run leaves
    requests in flight that moto would go on working through, and depths change)."""
    for label, workload, script, conns, depth, seconds in moto_runs(plan):
        with serving(lambda depth=depth: moto_server(logs, {"bench": depth})) as srv:
            url = moto_queue_url(srv, "bench")
            args = (url,) if script == "sqs_send.lua" else (
                (url, "10", "refill") if workload == "cycle" else (url, "10"))
            bench.wrk(srv, label, workload, script, conns, *args, depth=depth, seconds=seconds)


def _k(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else (
        f"{n // 1000}k" if n % 1000 == 0 else str(n))


# --- the report ---------------------------------------------------------------------------------
@dataclasses.dataclass
class Cell:
    """The median of a cell's rounds."""

    runs: list[Run]

    @property
    def valid(self) -> bool:
        return bool(self.runs) and all(r.valid for r in self.runs)

    def med(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs) if self.runs else 0.0


def cell(bench: Bench, server: str, workload: str, conns: int, threads: int | None = None
         ) -> Cell:
    """The runs of one (server, workload, connections) cell."""
    return Cell(bench.select(server, workload, conns, threads))


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def table(bench: Bench) -> list[str]:
    """The Markdown table of every cell (median of its rounds)."""
    lines = ["| server | workload | conns | req/s | msg/s | p50 ms | p99 ms | srv CPU | "
             "wrk CPU | other CPU | runs | valid |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    seen: list[tuple[str, str, int]] = []
    for r in bench.runs:
        key = (r.server, r.workload, r.conns)
        if key not in seen:
            seen.append(key)
    for server, workload, conns in seen:
        c = cell(bench, server, workload, conns)
        msgs = c.med("items_ps")
        lines.append(
            f"| {server} | {workload} | {conns} | {_num(c.med('rps'))} | "
            f"{_num(msgs) if msgs else '-'} | {c.med('p50_ms'):.2f} | {c.med('p99_ms'):.2f} | "
            f"{c.med('server_cpu'):.2f} | {c.med('wrk_cpu'):.2f} | {c.med('other_cpu'):.2f} | "
            f"{len(c.runs)} | "
            f"{'yes' if c.valid else 'NO: ' + '; '.join(_why(r) for r in c.runs if not r.valid)}"
            " |")
    return lines


@dataclasses.dataclass
class Check:
    """One target: a measured value against a bound."""

    name: str
    value: float
    bound: float | None  # None: reported, no target
    higher_is_better: bool
    valid: bool
    unit: str = ""
    ran: bool = True

    @property
    def verdict(self) -> str:
        if not self.ran:
            return "not run"
        if not self.valid:
            return "INVALID"
        if self.bound is None:
            return "-"
        ok = self.value >= self.bound if self.higher_is_better else self.value < self.bound
        return "PASS" if ok else "FAIL"


def ratio(name: str, num: Cell, den: Cell, bound: float | None, attr: str = "rps") -> Check:
    """``num / den`` of the medians of ``attr``."""
    d = den.med(attr)
    return Check(name, num.med(attr) / d if d else float("nan"), bound, True,
                 num.valid and den.valid, ran=bool(num.runs and den.runs))


def _on_off(bench: Bench, on_server: str, off_server: str, on: str, off: str,
            bound: float | None) -> list[Check]:
    """Enqueue and poll+ack at 16 connections on a server with a feature against one without:
    the throughput ratio (``bound``: its target) and the server CPU per request."""
    out: list[Check] = []
    for workload in ("enqueue", "poll+ack"):
        with_it = cell(bench, on_server, workload, 16)
        if with_it.runs:
            without = cell(bench, off_server, workload, 16)
            out.append(ratio(f"{on} / {off}: {workload}, c=16", with_it, without, bound))
            out.append(_cpu_per_request_ratio(f"{off} / {on}: server CPU per request, "
                                              f"{workload}, c=16", without, with_it))
    return out


def checks(bench: Bench, deep: int) -> list[Check]:
    """Every target, computed from the runs."""
    out: list[Check] = []
    for server in ("sqew", "sqew full", "sqew w2"):
        h = cell(bench, server, "healthz", 1)
        # A keep-alive request that waits for a delayed ACK (~40 ms: Nagle's algorithm on a
        # socket without TCP_NODELAY) makes every ratio below meaningless: check first.
        out.append(Check(f"sanity, {server}: healthz p50 at c=1 (no ~40 ms stall)",
                         h.med("p50_ms"), 5.0, False, h.valid, " ms", ran=bool(h.runs)))
    for server, bound in (("sqew", 0.65), ("sqew full", 0.55)):
        for c in (16, 64):
            out.append(ratio(f"{server}: enqueue / healthz, c={c}",
                             cell(bench, server, "enqueue", c), cell(bench, server, "healthz", c),
                             bound))
    for server, bound in (("sqew", 0.4), ("sqew full", None)):
        for c in (16, 64):
            out.append(ratio(f"{server}: poll+ack / healthz (requests/s), c={c}",
                             cell(bench, server, "poll+ack", c),
                             cell(bench, server, "healthz", c), bound))
    for server in ("sqew", "sqew hmac"):
        signed, unsigned = (cell(bench, server, w, HMAC_CONNS)
                            for w in (HMAC_WORKLOAD[0], "enqueue"))
        if signed.runs:
            out.append(ratio(f"{server}: HMAC-signed enqueue / unsigned enqueue, "
                             f"c={HMAC_CONNS}", signed, unsigned, 0.85))
            out.append(ratio(f"{server}: the same, requests per server CPU-second",
                             signed, unsigned, None, "rps_per_cpu"))
    for server, bound in (("sqew", 10.0), ("sqew full", None)):
        e = cell(bench, server, "enqueue", 16)
        out.append(Check(f"{server}: p99 enqueue latency, c=16", e.med("p99_ms"), bound, False,
                         e.valid, " ms", ran=bool(e.runs)))
    for workload in ("enqueue", "healthz"):
        for c in (16, 64):
            out.append(ratio(f"workers 2 / workers 1: {workload}, c={c}",
                             cell(bench, "sqew w2", workload, c), cell(bench, "sqew", workload, c),
                             1.4))
    out.append(ratio(f"poll+ack (cycle) {_k(deep)} ready / 1k ready, msg/s, c=16",
                     cell(bench, f"sqew d={_k(deep)}", "cycle", 16),
                     cell(bench, "sqew d=1k", "cycle", 16), 0.8 if deep >= 1_000_000 else None,
                     "items_ps"))
    for d in DEPTHS:
        for workload, what in (("cycle", "poll+ack+enqueue cycle"), ("enqueue", "single enqueue")):
            moto = cell(bench, f"moto d={_k(d)}", workload, 1)
            if moto.runs:
                out.append(ratio(f"sqew / moto at depth {_k(d)}: {what}, msg/s, c=1",
                                 cell(bench, f"sqew d={_k(d)}", workload, 1), moto, None,
                                 "items_ps"))
    moto_1k = cell(bench, "moto", "sqs-send", 16)
    if moto_1k.runs:
        out.append(ratio("sqew / moto at depth 1k: single enqueue, msg/s, c=16",
                         cell(bench, "sqew d=1k", "enqueue", 16), moto_1k, None, "items_ps"))
    for c in CONNS:
        for mine, theirs, what in (("enqueue", "sqs-send", "enqueue / SendMessage"),
                                   ("poll+ack", "sqs-recv+del", "poll+ack / Receive+Delete")):
            moto = cell(bench, "moto", theirs, c)
            if moto.runs:
                out.append(ratio(f"sqew (queue {_k(deep)} deep) / moto (1k deep): {what}, "
                                 f"msg/s, c={c}", cell(bench, "sqew", mine, c), moto, None,
                                 "items_ps"))
    for c in CONNS:
        for workload in ("healthz", "enqueue"):
            g = cell(bench, "granian", workload, c)
            if g.runs:
                out.append(ratio(f"granian / uvicorn: {workload}, c={c}", g,
                                 cell(bench, "sqew", workload, c), None))
    for c in (16, 64):
        for workload in ("healthz", "enqueue"):
            g = cell(bench, "granian w2", workload, c)
            if g.runs:
                out.append(ratio(f"granian w2 / uvicorn w2: {workload}, c={c}", g,
                                 cell(bench, "sqew w2", workload, c), None))
    out += _on_off(bench, "sqew auth on", "sqew auth off", "auth on", "auth off", 0.9)
    out += _on_off(bench, "sqew metrics on", "sqew metrics off", "metrics on", "metrics off",
                   0.9)
    if bench.scrapes_ms:
        out.append(Check(f"scrape /metrics with {SCRAPE_QUEUES:,} queues (median)",
                         statistics.median(bench.scrapes_ms), 100.0, False, True, " ms"))
        out.append(Check("the same, server CPU time (median; less sensitive to other work "
                         "on the machine)", statistics.median(bench.scrapes_cpu_ms), None,
                         False, True, " ms"))
    for server, bound in TRACING_BOUNDS.items():
        out += _on_off(bench, server, "sqew tracing off", server.removeprefix("sqew "),
                       "tracing off", bound)
    for c in (16, 64):
        out.append(ratio(f"wrk -t1 / -t2 on healthz, c={c}",
                         cell(bench, "sqew", "healthz -t1", c),
                         cell(bench, "sqew", "healthz -t2", c), None))
    return out


def _cpu_per_request_ratio(name: str, num: Cell, den: Cell) -> Check:
    """``num / den`` of the medians of server CPU seconds per request (info: on this shared
    machine it moves less than throughput does when other work takes the cores)."""
    def per_request(c: Cell) -> float:
        return statistics.median(r.server_cpu / r.rps for r in c.runs if r.rps) if c.runs else 0.0
    d = per_request(den)
    return Check(name, per_request(num) / d if d else float("nan"), None, True,
                 num.valid and den.valid, ran=bool(num.runs and den.runs))


_PROBE = """
import importlib.util, os, sqew
print(os.path.dirname(sqew.__file__))
print(",".join(m for m in ("httptools", "uvloop") if importlib.util.find_spec(m)) or "-")
"""


def environment() -> list[str]:
    """What was measured on what (the sqew the servers import, with their environment)."""

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              check=False).stdout.strip()

    with tempfile.TemporaryDirectory() as neutral:  # as the `sqew` script: no cwd on the path
        probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                               check=True, cwd=neutral, env=_env()).stdout.split()
    where, extras = Path(probe[0]), probe[1]
    if where == ROOT / "sqew":
        dirty = git("status", "--porcelain", "sqew")
        source = f"sqew {git('rev-parse', '--short', 'HEAD')}" + (
            " + uncommitted changes in sqew/" if dirty else "")
    else:
        source = f"sqew from {where} (not this repository's sqew/: PYTHONPATH)"
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())
    return [
        f"- machine: {os.cpu_count()} cores ({cpu}), Linux {platform.release()}, shared with "
        f"the load generator: {wrk_version()}",
        f"- {source}; Python {platform.python_version()}; uvicorn {version('uvicorn')} "
        f"(httptools/uvloop importable: {extras}), granian {version('granian')}, "
        f"litestar {version('litestar')}, moto {version('moto')}",
    ]


def report(bench: Bench, plan: Plan, elapsed: float, found: list[Check]) -> str:
    """The Markdown report: environment, table, targets."""
    lines = [f"Run of {time.strftime('%Y-%m-%d %H:%M')}, {elapsed / 60:.1f} min, "
             f"{plan.duration:g} s per wrk run, {plan.rounds} interleaved round(s), "
             f"deep queue {plan.deep:,} messages.", "", *environment(), "", *table(bench), "",
             "| target | measured | bound | verdict |", "|---|--:|--:|---|"]
    for ch in (c for c in found if c.ran):
        bound = "-" if ch.bound is None else (
            f"{'≥' if ch.higher_is_better else '<'} {ch.bound:g}{ch.unit}")
        lines.append(f"| {ch.name} | {ch.value:.3g}{ch.unit} | {bound} | {ch.verdict} |")
    invalid = [r for r in bench.runs if not r.valid]
    lines += ["", f"{len(invalid)} invalid run(s) of {len(bench.runs)}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.server [--quick] [--json PATH]``."""
    parser = argparse.ArgumentParser(prog="bench server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1 s runs, one round, 100k deep queue (about 2 minutes)")
    parser.add_argument("--duration", type=float, help="seconds per wrk run (default 3)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 2)")
    parser.add_argument("--deep", type=int, help="messages in the deep queue (default 1M)")
    parser.add_argument("--only", action="append", choices=SECTIONS,
                        help="run only this part (repeatable; default: all)")
    parser.add_argument("--no-granian", action="store_true", help="skip granian")
    parser.add_argument("--json", type=Path, help="also write every run as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    plan = Plan(duration=args.duration or (1.0 if args.quick else 3.0),
                rounds=args.rounds or (1 if args.quick else 2),
                deep=args.deep or (100_000 if args.quick else 1_000_000),
                sections=frozenset(args.only or SECTIONS) - (
                    {"granian"} if args.no_granian or not importlib.util.find_spec("granian")
                    else set()))
    wrk_version()
    if not args.no_granian and not importlib.util.find_spec("granian"):
        print("granian is not installed (pip install granian): its runs are skipped",
              file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="sqew-bench-server-"))
    started = time.monotonic()
    try:
        bench = run_all(plan, work)
    finally:
        if args.keep:
            print(f"work directory kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    found = checks(bench, plan.deep)
    sys.stdout.write(report(bench, plan, time.monotonic() - started, found))
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in bench.runs], indent=1))
    missed = [c for c in found if c.ran and c.bound is not None and c.verdict != "PASS"]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
