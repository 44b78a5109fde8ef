"""Local (``--db``) and remote (``--url``) mode print the same thing for the same session.

One scripted session of commands runs in each mode on a fresh store; ids, tokens and times are
replaced by stable names, and then stdout, stderr and exit status must be identical.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_support import Result, Sqew, serve

TIME_FIELDS = {"created_at", "enqueued_at", "available_at", "expires_at", "lease_expires_at",
               "oldest_ready_age_ms"}


def normalize(value: Any, names: dict[str, str]) -> Any:
    """Tokens → token-N (in order of appearance), times → "<time>"."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in TIME_FIELDS and v is not None:
                out[k] = "<time>"
            elif k == "token":
                out[k] = names.setdefault(v, f"token-{len(names)}")
            else:
                out[k] = normalize(v, names)
        return out
    if isinstance(value, list):
        return [normalize(v, names) for v in value]
    return value


def session(sqew: Sqew, tmp: Path) -> list[tuple[int, Any, str]]:
    """Run the script; each step's (exit status, normalized stdout, stderr)."""
    names: dict[str, str] = {}
    out: list[tuple[int, Any, str]] = []
    handles: list[str] = []

    def run(*args: str, stdin: str | None = None) -> Result:
        # Handles (id:token) of earlier polls are filled in at run time.
        real = [handles[int(a[1:])] if re.fullmatch(r"@\d+", a) else a for a in args]
        result = sqew.run("--json", *real, stdin=stdin)
        try:
            body: Any = normalize(json.loads(result.stdout), names) if result.stdout else None
        except json.JSONDecodeError:
            body = result.stdout
        out.append((result.returncode, body, result.stderr))
        if result.returncode == 0 and isinstance(body, dict) and "messages" in body:
            raw = json.loads(result.stdout)
            handles.extend(f"{m['id']}:{m['token']}" for m in raw["messages"] if "token" in m)
        return result

    ndjson = tmp / "in.ndjson"
    ndjson.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(1500))
                      + "not json\n" + '{"n": "last"}\n')
    run("queue", "add", "--name", "jobs", "--max-attempts", "2", "--visibility-ms", "60000")
    run("queue", "add", "--name", "jobs")  # QueueExists
    run("queue", "add", "--name", "bad name")  # ValidationError
    run("queue", "list")
    run("message", "enqueue", "--queue", "jobs", "--payload", '{"a": 1}', "--priority", "5",
        "--attr", "k=v", "--idempotency-key", "key-1")
    run("message", "enqueue", "--queue", "jobs", "--payload", '{"a": 1}',
        "--idempotency-key", "key-1")  # duplicate
    run("message", "enqueue", "--queue", "jobs", "--file", str(ndjson))
    run("message", "enqueue", "--queue", "nope", "--payload", "1")  # QueueNotFound
    run("queue", "show", "--name", "jobs")
    run("queue", "peek", "--name", "jobs", "--limit", "3")
    run("message", "get", "--queue", "jobs", "--batch", "2")  # handles 0, 1
    run("message", "poll", "--queue", "jobs", "--batch", "1", "--wait-ms", "100")  # handle 2
    run("message", "ack", "--queue", "jobs", "--ids", "@0")
    run("message", "ack", "--queue", "jobs", "--ids", "@0")  # already acked
    run("message", "extend-lease", "--queue", "jobs", "--id", "@1", "--ms", "5000")
    run("message", "nack", "--queue", "jobs", "--ids", "@1", "--delay-ms", "0",
        "--error", "boom")
    run("message", "get", "--queue", "jobs")  # handle 3: the nacked one, attempts 2
    run("message", "nack", "--queue", "jobs", "--ids", "@3", "--error", "again")  # → DLQ
    run("message", "peek", "--queue", "jobs", "--id", "2")
    run("message", "remove", "--queue", "jobs", "--id", "3")
    run("message", "peek", "--queue", "jobs", "--id", "3")  # MessageNotFound
    run("dlq", "list", "--queue", "jobs")
    run("dlq", "requeue", "--queue", "jobs")
    run("dlq", "purge", "--queue", "jobs")
    run("stats", "--queue", "jobs")
    run("queue", "update", "--name", "jobs", "--max-attempts", "9")
    run("queue", "compact", "--name", "jobs")
    run("queue", "purge", "--name", "jobs")
    run("queue", "rm", "--name", "jobs")
    run("queue", "list")
    return out


def test_json_output_is_the_same_locally_and_through_a_server(tmp_path: Path) -> None:
    (tmp_path / "local").mkdir()
    (tmp_path / "http").mkdir()
    local = session(Sqew(tmp_path / "local", tmp_path / "local" / "a.db"), tmp_path / "local")
    db = tmp_path / "http" / "b.db"
    with serve(db, tmp_path / "http") as url:
        remote = session(Sqew(tmp_path / "http", db, url), tmp_path / "http")
    assert len(local) == len(remote)
    for i, (a, b) in enumerate(zip(local, remote, strict=True)):
        assert a == b, f"step {i}: local {a!r} != http {b!r}"
    # The session did what it says: every kind of outcome appears.
    assert {code for code, _, _ in local} == {0, 1}
    assert any("QueueExists" in err for _, _, err in local)


@pytest.mark.local_only
def test_health_and_metrics(tmp_path: Path) -> None:
    runner = Sqew(tmp_path, tmp_path / "m.db")
    assert runner.ok("health").stdout.strip() == "ok"  # the database answers
    runner.fails("metrics", code="ValidationError")  # metrics need a server
    with serve(tmp_path / "m.db", tmp_path) as url:
        remote = Sqew(tmp_path, tmp_path / "m.db", url)
        assert remote.ok("health").stdout.strip() == "ok"
        assert remote.json("health") == {"status": "ok"}
        text = remote.ok("metrics").stdout
        assert "# TYPE sqew_build_info gauge" in text
    # The server is gone: a clean one-line error, no traceback.
    remote.fails("health", code="Unavailable")
