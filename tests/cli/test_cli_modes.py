"""Local (``--db``) and remote (``--url``) mode: the same output for the same session, and what
only a server has (``health``/``metrics`` over HTTP, unreachable servers, ``SQEW_URL``).

The parity test runs one scripted session of commands in each mode on a fresh store; ids,
tokens and times are replaced by stable names, and then stdout, stderr and exit status of every
step must be identical.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cli_support import (
    Result,
    SharedServer,
    Sqew,
    assert_failed,
    assert_usage_error,
    serve,
)

import sqew as sqew_lib

TIME_FIELDS = {"created_at", "enqueued_at", "available_at", "expires_at", "lease_expires_at",
               "first_leased_at", "oldest_ready_age_ms"}
ID_FIELDS = {"id", "message_id"}


class Names:
    """Stable names for values that differ between stores: tokens and message ids."""

    def __init__(self) -> None:
        self.tokens: dict[str, str] = {}
        self.ids: dict[int, str] = {}

    def normalize(self, value: Any) -> Any:
        """Tokens → ``token-N``, ids → ``id-N`` (in order of appearance), times → ``<time>``."""
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k in TIME_FIELDS and v is not None:
                    out[k] = "<time>"
                elif k == "token":
                    out[k] = self.tokens.setdefault(v, f"token-{len(self.tokens)}")
                elif k in ID_FIELDS and isinstance(v, int):
                    out[k] = self.ids.setdefault(v, f"id-{len(self.ids)}")
                else:
                    out[k] = self.normalize(v)
            return out
        if isinstance(value, list):
            return [self.normalize(v) for v in value]
        return value


Step = tuple[int, Any, str]  # exit status, normalized stdout, stderr


def session(sqew: Sqew, ndjson: Path) -> list[Step]:
    """Run the script; each step's (exit status, normalized stdout, stderr).

    In arguments, ``@N`` stands for the ``id:token`` handle of the N-th leased message so far,
    ``#N`` for its id and ``$N`` for the id the N-th single enqueue returned. Steps run with
    ``--json`` unless they start with ``human``: those compare the human output as is (only
    steps whose human output shows no ids, tokens or times).
    """
    names = Names()
    out: list[Step] = []
    handles: list[tuple[int, str]] = []
    enqueued: list[int] = []

    def arg(a: str) -> str:
        def one(m: re.Match[str]) -> str:
            kind, n = m.group(1), int(m.group(2))
            if kind == "$":
                return str(enqueued[n])
            msg_id, token = handles[n]
            return f"{msg_id}:{token}" if kind == "@" else str(msg_id)

        return re.sub(r"([@#$])(\d+)", one, a)

    def run(*args: str, stdin: str | None = None) -> Result:
        human = args[0] == "human"
        real = [arg(a) for a in (args[1:] if human else args)]
        result = sqew.run(*real, stdin=stdin) if human else sqew.run("--json", *real, stdin=stdin)
        body: Any = result.stdout
        if not human and result.stdout:
            raw = json.loads(result.stdout)
            body = names.normalize(raw)
            if isinstance(raw, dict):
                handles.extend((m["id"], m["token"]) for m in raw.get("messages", ())
                               if "token" in m)
                if real[:2] == ["message", "enqueue"] and "message_id" in raw:
                    enqueued.append(raw["message_id"])
        out.append((result.returncode, body, result.stderr))
        return result

    run("queue", "add", "--name", "jobs", "--max-attempts", "2", "--visibility-ms", "60000")
    run("queue", "add", "--name", "jobs")  # QueueExists
    run("queue", "add", "--name", "small", "--max-payload-bytes", "16", "--max-depth", "2",
        "--order", "lifo")
    run("human", "queue", "list")
    run("message", "enqueue", "--queue", "jobs", "--payload", '{"a": 1}', "--priority", "5",
        "--attr", "k=v", "--idempotency-key", "key-1")  # $0
    run("message", "enqueue", "--queue", "jobs", "--payload", '{"a": 1}',
        "--idempotency-key", "key-1")  # duplicate: $1 == $0
    run("message", "enqueue", "--queue", "jobs", "--envelope", "--payload",
        '{"payload": {"b": 2}, "priority": 3, "attributes": {"x": "y"}}')  # $2
    run("message", "enqueue", "--queue", "jobs", "--file", str(ndjson))
    run("message", "enqueue", "--queue", "nope", "--payload", "1")  # QueueNotFound
    run("message", "enqueue", "--queue", "small", "--payload", '"too large for small"')
    run("message", "enqueue", "--queue", "small", "--file", "-",
        stdin="1\n2\n3\n")  # QueueFull at line 3 stops the run
    run("queue", "show", "--name", "jobs")
    run("queue", "peek", "--name", "small")
    run("message", "get", "--queue", "jobs", "--batch", "2")  # handles 0, 1
    run("message", "poll", "--queue", "jobs", "--batch", "1", "--wait-ms", "100")  # handle 2
    run("message", "ack", "--queue", "jobs", "--ids", "@0")
    run("message", "ack", "--queue", "jobs", "--ids", "@2,@0")  # acked + not_found: exit 1
    run("message", "extend-lease", "--queue", "jobs", "--id", "@1", "--ms", "5000")
    run("message", "extend-lease", "--queue", "jobs", "--id", "#1:stale", "--ms", "5000")
    run("message", "nack", "--queue", "jobs", "--ids", "@1", "--delay-ms", "0",
        "--error", "boom")
    run("message", "get", "--queue", "jobs")  # handle 3: the nacked one, attempts 2
    run("message", "nack", "--queue", "jobs", "--ids", "@3", "--error", "again")  # → DLQ
    run("message", "peek", "--queue", "jobs.dlq", "--id", "$2")
    run("message", "remove", "--queue", "jobs", "--id", "$2")  # it is in jobs.dlq now
    run("dlq", "list", "--queue", "jobs")
    run("dlq", "requeue", "--queue", "jobs", "--ids", "$2")
    run("dlq", "purge", "--queue", "jobs")
    run("stats", "--queue", "jobs")
    run("queue", "update", "--name", "jobs", "--backoff-base-ms", "10", "--backoff-max-ms", "5")
    run("queue", "compact", "--name", "jobs")
    run("queue", "purge", "--name", "jobs")
    run("queue", "requeue-dlq", "--name", "jobs")
    run("queue", "rm", "--name", "jobs.dlq")  # ValidationError
    run("human", "queue", "rm", "--name", "small")
    run("queue", "rm", "--name", "jobs")
    run("queue", "list")
    return out


def test_json_output_is_the_same_locally_and_through_a_server(tmp_path: Path) -> None:
    ndjson = tmp_path / "in.ndjson"
    ndjson.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(1200))
                      + "not json\n" + '{"n": "last"}\n')
    for mode in ("local", "http"):
        (tmp_path / mode).mkdir()
    with serve(tmp_path / "http" / "b.db", tmp_path / "http") as server, \
            ThreadPoolExecutor(2) as pool:
        # Two independent stores: the sessions may run side by side.
        local_run = pool.submit(
            session, Sqew(tmp_path / "local", tmp_path / "local" / "a.db"), ndjson)
        remote_run = pool.submit(
            session, Sqew(tmp_path / "http", server.db, server.url), ndjson)
        local, remote = local_run.result(), remote_run.result()
    assert len(local) == len(remote)
    for i, (a, b) in enumerate(zip(local, remote, strict=True)):
        assert a == b, f"step {i}: local {a!r} != http {b!r}"
    # The session did what it says: each kind of outcome appears, each error as one line.
    assert {code for code, _, _ in local} == {0, 1}
    errors = [err for code, _, err in local if code == 1]
    assert all(len(err.splitlines()) == 1 for err in errors), errors
    # one line each: the error envelope with --json, else ``error: <code>: <message>``
    codes = [json.loads(err)["error"]["code"] if err.startswith("{")
             else err.split(":", 2)[1].strip() for err in errors]
    assert all(err.startswith(('{"error":', "error: ")) for err in errors), errors
    for code in ("QueueExists", "ValidationError", "QueueNotFound", "MessageNotFound",
                 "LeaseLost", "PayloadTooLarge", "QueueFull"):
        assert code in codes, (code, errors)
    assert not (tmp_path / "local" / "sqew.db").exists()
    assert not (tmp_path / "http" / "sqew.db").exists()


def _many_lines(path: Path) -> int:
    """A 2,500-line envelope file: good lines, duplicates across batches, and bad lines the
    CLI refuses before sending (not JSON, unknown field, priority out of range, not UTF-8)."""
    lines: list[bytes] = []
    for i in range(1, 2501):
        if i in (7, 1999):
            lines.append(b"{not json")
        elif i == 640:
            lines.append(b'{"payload": 1, "unknown": true}')
        elif i == 1234:
            lines.append(b'{"payload": 1, "priority": 5000}')
        elif i == 2400:
            lines.append(b'{"payload": "caf\xff"}')
        elif i in (10, 1010, 2010):  # one key in three batches: two duplicates
            lines.append(b'{"payload": "dup", "idempotency_key": "dup-1"}')
        else:
            lines.append(json.dumps({"payload": {"i": i}, "priority": i % 3}).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    return len(lines)


def test_enqueue_file_of_thousands_of_lines_through_a_server_matches_local(
        local_sqew: Sqew, http_sqew: Sqew, cli_server: SharedServer, tmp_path: Path) -> None:
    path = tmp_path / "many.ndjson"
    total = _many_lines(path)
    q_local, q_http = local_sqew.name("bulk"), http_sqew.name("bulk")
    local_sqew.arrange(q_local).close()
    http_sqew.arrange(q_http).close()
    posts = ("POST", "/queues/{q}/messages", q_http)
    before = cli_server.server.requests(*posts)
    args = ("--json", "message", "enqueue", "--file", str(path), "--envelope", "--queue")
    with ThreadPoolExecutor(2) as pool:  # two stores: side by side
        local_run = pool.submit(local_sqew.run, *args, q_local)
        remote_run = pool.submit(http_sqew.run, *args, q_http)
        local, remote = local_run.result(), remote_run.result()
    assert_failed(local, "ValidationError")
    assert (remote.returncode, remote.stdout, remote.stderr) == (
        local.returncode, local.stdout, local.stderr)
    summary = remote.json()
    assert (summary["enqueued"], summary["duplicates"]) == (total - 5 - 2, 2)
    assert [f["line"] for f in summary["failed"]] == [7, 640, 1234, 1999, 2400]
    # Sent in batches (of 500 lines), not one request per line.
    sent = cli_server.server.requests(*posts) - before
    assert sent == 5, cli_server.server.log_text()[-2000:]  # 2,495 good lines
    with local_sqew.arrange() as a, http_sqew.arrange() as b:
        stats = [(s.ready, s.enqueued_total) for s in (a.stats(q_local), b.stats(q_http))]
    assert stats == [(total - 7, total - 7)] * 2


# --- only with a server -------------------------------------------------------------------------
def test_health_and_metrics_of_a_server(http_sqew: Sqew, local_sqew: Sqew) -> None:
    health, health_json, metrics, upgrade = http_sqew.many([
        ("health",), ("--json", "health"), ("metrics",), ("db", "upgrade")])
    assert (health.returncode, health.stdout, health.stderr) == (0, "ok\n", ""), str(health)
    assert (health_json.returncode, health_json.json()) == (0, {"status": "ok"})
    assert metrics.returncode == 0 and metrics.stderr == "", str(metrics)
    assert "# TYPE sqew_build_info gauge" in metrics.stdout
    assert_failed(upgrade, "ValidationError")  # a server upgrades its own database

    local_sqew.arrange().close()  # health checks a database; it creates none
    local_health, local_metrics = local_sqew.many([("health",), ("metrics",)])
    assert (local_health.returncode, local_health.stdout) == (0, "ok\n")  # the file answers
    assert local_metrics.returncode == 0 and local_metrics.stderr == "", str(local_metrics)
    assert "# TYPE sqew_build_info gauge" in local_metrics.stdout  # the file's queue metrics
    assert not (local_sqew.cwd / "sqew.db").exists()


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_server_is_one_error_line(local_sqew: Sqew) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    results = local_sqew.many([
        ("--url", url, "queue", "list"), ("--url", url, "health"),
        ("--json", "--url", url, "message", "enqueue", "--queue", "q", "--payload", "1"),
        ("--json", "--url", url, "message", "enqueue", "--queue", "q", "--file", "-"),
    ], use_db=False, stdin="1\n2\n")
    for result in results:
        assert_failed(result, "Unavailable")
        assert url in result.stderr
    # The file run says where it stopped, and its --json summary still prints.
    assert "stopped at line 1" in results[3].stderr
    assert results[3].json() == {"enqueued": 0, "duplicates": 0, "failed": []}
    assert not (local_sqew.cwd / "sqew.db").exists()


def test_url_from_the_environment_and_which_of_db_and_url_wins(
        http_sqew: Sqew, tmp_path: Path) -> None:
    q = http_sqew.name("env")
    url, other = http_sqew.url or "", tmp_path / "other.db"
    sqew_lib.LocalClient(other).close()  # a store on the file, to tell the two apart
    env = {"SQEW_URL": url, "SQEW_JSON": "1"}
    added = http_sqew.run("queue", "add", "--name", q, use_db=False, env=env)
    assert added.returncode == 0 and added.json()["name"] == q, str(added)
    from_env, after, db_flag, both_flags, bad_scheme, no_host, ack_syntax = http_sqew.many([
        ("queue", "show", "--name", q),  # SQEW_URL
        ("queue", "show", "--name", q, "--url", url),  # --url after the command
        ("queue", "list", "--db", str(other)),  # a --db given beats SQEW_URL
        ("--db", str(other), "--url", url, "queue", "list"),  # both given: usage error
        ("--url", "ftp://example.com", "queue", "list"),
        ("--url", "http://", "queue", "list"),
        ("--url", url, "message", "ack", "--queue", q, "--ids", "5"),
    ], use_db=False, env=env)
    # SQEW_URL and SQEW_DB both set: the server.
    both_env = http_sqew.run("queue", "show", "--name", q, use_db=False,
                             env={**env, "SQEW_DB": str(tmp_path / "unused.db")})
    for result in (from_env, after, both_env):
        assert result.returncode == 0 and result.json()["name"] == q, str(result)
    assert (db_flag.returncode, db_flag.json()) == (0, {"queues": []}), str(db_flag)
    for result in (both_flags, bad_scheme, no_host, ack_syntax):
        assert_usage_error(result)
    assert "not both" in both_flags.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["other.db"]


# --- the same error line in both modes ----------------------------------------------------------
def _huge_id() -> str:
    return str(2**64)


ERROR_CASES: list[tuple[str, Callable[[str], tuple[str, ...]]]] = [
    # Query and path parameters: the server words its range checks as the service does.
    ("batch out of range", lambda q: ("message", "get", "--queue", q, "--batch", "101")),
    ("wait_ms out of range", lambda q: ("message", "poll", "--queue", q, "--wait-ms", "20001")),
    ("visibility_ms out of range", lambda q: ("message", "poll", "--queue", q,
                                              "--visibility-ms", "-1")),
    ("peek limit out of range", lambda q: ("queue", "peek", "--name", q, "--limit", "0")),
    ("message id 0", lambda q: ("message", "peek", "--queue", q, "--id", "0")),
    ("message id beyond 64 bits", lambda q: ("message", "remove", "--queue", q,
                                             "--id", _huge_id())),
    # One ack or nack is validated as one item (not as a batch of one) in both modes.
    ("nack delay_ms negative", lambda q: ("message", "nack", "--queue", q, "--ids", "1:t",
                                          "--delay-ms", "-1")),
    ("ack of a 65-bit id", lambda q: ("message", "ack", "--queue", q, "--ids",
                                      f"{_huge_id()}:t")),
    ("extend-lease ms out of range", lambda q: ("message", "extend-lease", "--queue", q,
                                                "--id", "1:t", "--ms", "43200001")),
    ("max_depth beyond 64 bits", lambda q: ("queue", "update", "--name", q,
                                            "--max-depth", str(2**63))),
    # A name with '/' or a dot segment would change the URL path: no such queue, either way.
    ("queue name with a slash", lambda q: ("queue", "show", "--name", f"{q}/x")),
    ("queue name '.'", lambda q: ("queue", "show", "--name", ".")),
    ("queue name '..'", lambda q: ("stats", "--queue", "..")),
]


@pytest.mark.parametrize("case", [c for c, _ in ERROR_CASES])
def test_error_lines_are_the_same_in_both_modes(
        case: str, local_sqew: Sqew, http_sqew: Sqew) -> None:
    make = dict(ERROR_CASES)[case]
    code = "QueueNotFound" if "queue name" in case else "ValidationError"
    q_local, q_http = local_sqew.name("same"), http_sqew.name("same")
    local_sqew.arrange(q_local).close()
    http_sqew.arrange(q_http).close()
    local = local_sqew.run(*make(q_local))
    remote = http_sqew.run(*make(q_http))
    assert_failed(local, code)
    assert_failed(remote, code)
    assert local.stderr.replace(q_local, "<q>") == remote.stderr.replace(q_http, "<q>")
