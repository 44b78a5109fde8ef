"""The server settings, declared once: ``Settings``.

``Settings`` is frozen and passed in (``create_app(settings)``, ``run(settings)``); nothing reads
the environment behind the caller's back. ``sqew.settings.load`` does the layering once, at the
edge (``sqew.settings.layering``). Each setting ``x`` has the environment variable ``SQEW_X``,
the TOML key ``x`` (or ``x`` with dashes) and the ``sqew serve`` option ``--x`` (with dashes),
all generated from the field (``sqew.settings.fields``): a new field needs its type, default and
an entry in the ``Attributes:`` section below, nothing else. ``SQEW_CONFIG`` names a TOML file
when no ``--config`` is given.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from sqew import jsonlimits

ENV_PREFIX = "SQEW_"
CONFIG_ENV = "SQEW_CONFIG"

Port = Annotated[int, Meta(ge=0, le=65535)]
Positive = Annotated[int, Meta(ge=1)]
PositiveSeconds = Annotated[float, Meta(gt=0)]
LogLevel = Literal["critical", "error", "warning", "info", "debug"]
LogFormat = Literal["auto", "json", "text"]


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Everything ``sqew serve`` can be told.

    Attributes:
        db: database file path or URL.
        host: interface to listen on.
        port: TCP port (0 picks a free one).
        workers: server processes sharing the database.
        durability: ``normal`` (process-crash safe) or ``full`` (power-loss safe).
        max_body_bytes: request bodies above this are refused with 413 while streaming.
        max_json_depth: JSON nested deeper than this (1-256) is a 400 ValidationError: a
            payload counts its own levels (``[[1]]`` is 2 deep); a request body may add the
            levels of its fixed shape around it (``sqew.jsonlimits``). Decoders recurse per
            level, so JSON readers in every client stay clear of Python's recursion limit.
        threads: threads running database calls per process.
        group_commit: run concurrent writes in shared transactions, on the event loop (one
            committer per process; see ``sqew.core.group_commit``).
        graceful_timeout_s: how long in-flight requests may run after SIGINT/SIGTERM.
        reap_interval_ms: how often the reaper runs, in the one process per database that
            leads it; the others check as often (at least every second) whether it is gone.
        log_level: server log level.
        log_format: ``json`` (one JSON object per line), ``text`` (for people), or ``auto``:
            text when stderr is a terminal, JSON otherwise. Logs go to stderr.
        access_log: log one line per request (at info level on the ``sqew.access`` logger:
            method, route, status, duration, queue, request id, key id).
        trace_sql: log every SQL statement at debug level on the ``sqew.sql`` logger.
        header_timeout_s: a connection must complete a request's headers within this many
            seconds of opening (a TLS handshake included) or of the end of the previous
            response, however it trickles them; else it is answered 408 (if it sent any)
            and closed.
        body_timeout_s: a request body must arrive in full within this many seconds of its
            headers (a trickling or never-ending chunked body is cut off: 408 and closed).
        keep_alive_timeout_s: a connection with no request under way is closed after this
            many seconds without a byte (uvicorn's ``timeout_keep_alive``).
        max_header_bytes: a request line and headers longer than this are refused (431, or
            414 when the URL is what is long) and the connection closed.
        max_connections: open connections per server process, counted from the TCP
            connection on (a TLS handshake under way included); a new one beyond it closes
            the connection idle the longest (no request under way), or is itself closed when
            every connection is busy. Kept below the process's file-descriptor limit.
        max_waiting_polls: long polls (``wait_ms`` > 0) in progress per server process; one
            more is answered at once with 503 ``Overloaded`` and ``Retry-After``.
        tls_cert: PEM certificate (chain) file: serve HTTPS (with ``tls_key``).
        tls_key: PEM private key file of ``tls_cert``.
        require_auth: demand an API key on every endpoint but /healthz and /readyz even while
            no key exists (without it, keys are enforced as soon as one exists).
        metrics_auth: /metrics needs an admin key (off: /metrics is open).
        insecure: let ``sqew serve`` listen beyond loopback with no key and ``require_auth``
            off, i.e. open to anyone who can reach it (it refuses to start otherwise).
        auth_cache_size: verified keys kept in each process's cache (a key missing from it
            costs one argon2 verification, tens of ms of one thread).
        auth_failures_per_minute: failed key attempts a client address (an IPv6 /64) may make
            per minute and process before it is answered 429 ``RateLimited`` (its right key
            too), and wrong secrets a key id may get before it is (unless cached); 0: no
            limit.
        metrics: count requests, database transactions, long polls, duplicates and
            rejections for /metrics (off: /metrics shows only what it reads from the database
            at scrape time: the queues' depths and counters).
        overload_pending_writes: backpressure (``sqew.core.pressure``): a server process
            refuses enqueues with 503 ``Overloaded`` and ``Retry-After`` while more write
            operations than this wait for its group commit; 0: not this measure. Polls, acks,
            nacks and extends are never refused. It accepts enqueues again once every measure
            is below half its threshold.
        overload_wal_bytes: backpressure: refuse enqueues while the database's write log not
            yet copied into it (SQLite's WAL) holds more bytes than this; 0: not this measure.
        overload_commit_ms: backpressure: refuse enqueues while a group commit's transaction
            (waiting for the write lock included) takes longer than this on a moving average
            (about the last second); 0: not this measure.
        canary_interval_s: run the canary every this many seconds in each server process: a
            synthetic message enqueued to ``_canary``, taken and acked, its enqueue-to-ack
            time in ``sqew_canary_latency_seconds`` and failed rounds in
            ``sqew_canary_failures_total`` (docs/operations.md); 0: off.
        canary_replica: the ``replica`` label of the canary's metrics (empty: the host
            name); give each replica on one database its own.
        sqs_account_id: the AWS account id (12 digits) in the SQS endpoint's queue URLs and
            ARNs (docs/sqs.md).
        sqs_region: the AWS region in the SQS endpoint's queue ARNs.
    """

    db: str = "sqew.db"
    host: str = "127.0.0.1"
    port: Port = 8888
    workers: Positive = 1
    durability: Literal["normal", "full"] = "normal"
    max_body_bytes: Positive = 16 * 1024 * 1024
    max_json_depth: Annotated[int, Meta(ge=1, le=jsonlimits.MAX_DEPTH)] = (
        jsonlimits.DEFAULT_MAX_DEPTH
    )
    threads: Positive = 32
    group_commit: bool = True
    graceful_timeout_s: Annotated[float, Meta(ge=0)] = 10.0
    reap_interval_ms: Positive = 1000
    log_level: LogLevel = "info"
    log_format: LogFormat = "auto"
    access_log: bool = False
    trace_sql: bool = False
    # Limits against slow and idle clients (sqew.server.protocols) and long polls.
    header_timeout_s: PositiveSeconds = 10.0
    body_timeout_s: PositiveSeconds = 30.0
    keep_alive_timeout_s: PositiveSeconds = 5.0
    max_header_bytes: Annotated[int, Meta(ge=1024)] = 32 * 1024
    max_connections: Positive = 10_000
    max_waiting_polls: Positive = 5_000
    # HTTPS with uvicorn's own TLS: both or neither.
    tls_cert: str | None = None
    tls_key: str | None = None
    require_auth: bool = False
    metrics_auth: bool = False
    insecure: bool = False
    auth_cache_size: Positive = 10_000
    auth_failures_per_minute: Annotated[int, Meta(ge=0)] = 30
    # Metrics
    metrics: bool = True
    # Backpressure and background work
    overload_pending_writes: Annotated[int, Meta(ge=0)] = 4096
    overload_wal_bytes: Annotated[int, Meta(ge=0)] = 1024 * 1024 * 1024
    overload_commit_ms: Annotated[int, Meta(ge=0)] = 1000
    # The canary (sqew.server.canary)
    canary_interval_s: Annotated[float, Meta(ge=0, le=86_400)] = 0.0
    canary_replica: Annotated[str, Meta(max_length=128)] = ""
    # The SQS endpoint (docs/sqs.md)
    sqs_account_id: Annotated[str, Meta(pattern=r"^[0-9]{12}$")] = "123456789012"
    sqs_region: Annotated[str, Meta(pattern=r"^[a-z]{2}(-[a-z0-9]+){1,3}$")] = "us-east-1"
