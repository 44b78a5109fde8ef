"""``sqew keys create|list|revoke`` through the installed binary, on a file and over a server.

One scripted session runs in each mode, on a store of its own (never the shared server: a key
there would switch auth on for every other test); with ids, keys and times named stably, every
step's exit status, stdout and stderr must be the same. The keys it prints appear nowhere else:
not in the database files (only their argon2 hashes are), nor in the server's log. After the
first key, commands present it (``--api-key``): a server enforces keys once one exists, and a
local command ignores it.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cli_support import Result, Sqew, assert_failed, assert_usage_error, serve

import sqew as sqew_lib

KEY = re.compile(r"sqew_[0-9a-f]{16}_[A-Za-z0-9_-]{43}")
KEY_ID = re.compile(r"\b[0-9a-f]{16}\b")
# last_used_at too: a server records a key's use (the session presents its first key), the
# CLI on a file presents none.
TIMES = re.compile(r'"(created_at|last_used_at)":(?:\d+|null)|\d{4}-\d\d-\d\d \d\d:\d\d')
STORE_IT = "store this key now: it is never shown again (sqew keeps only its hash)\n"

Step = tuple[int, str, str]


class Session:
    """Runs steps in one mode, remembering every key printed and naming what varies."""

    def __init__(self, sqew: Sqew) -> None:
        self.sqew = sqew
        self.keys: list[str] = []
        self.results: list[Result] = []
        self.api_key: list[str] = []

    def run(self, *args: str) -> Result:
        result = self.sqew.run(*self.api_key, *args)
        self.keys.extend(KEY.findall(result.stdout))
        self.results.append(result)
        return result

    def steps(self) -> list[Step]:
        """Every step's (status, stdout, stderr), keys, ids and times replaced by names."""
        names: dict[str, str] = {}

        def name(found: re.Match[str]) -> str:
            return names.setdefault(found[0], f"<{len(names)}>")

        def stable(text: str) -> str:
            text = KEY_ID.sub(name, KEY.sub(name, text))
            text = TIMES.sub(lambda m: f'"{m[1]}":<t>' if m[1] else "<time>", text)
            # The table's "last used" cell (and so its width): a time over a server, "-" here.
            text = re.sub("─+", "─", re.sub(" +", " ", text))
            return re.sub(r"<time> (?:<time>|-) ", "<time> <used> ", text)

        return [(r.returncode, stable(r.stdout), stable(r.stderr)) for r in self.results]


def session(sqew: Sqew) -> Session:
    s = Session(sqew)
    assert s.run("--json", "keys", "list").json() == {"keys": []}
    assert s.run("keys", "list").stdout == "no API keys\n"

    first = s.run("--json", "keys", "create", "--name", "ops", "--scope", "admin")
    assert first.returncode == 0 and first.stderr == STORE_IT, str(first)
    admin = first.json()
    assert set(admin) == {"id", "key", "name", "queue", "scopes", "created_at", "last_used_at"}
    assert admin["key"].startswith(f"sqew_{admin['id']}_")
    s.api_key = ["--api-key", admin["key"]]

    s.run("--json", "queue", "add", "--name", "jobs")
    bound = s.run("keys", "create", "--queue", "jobs", "--scope", "produce", "-s", "consume")
    assert bound.returncode == 0, str(bound)
    assert KEY.fullmatch(bound.stdout.removesuffix("\n")), str(bound)  # the key alone: KEY=$(…)
    bound_id = bound.stdout.split("_")[1]
    assert bound.stderr == (f"created API key {bound_id}: scopes consume,produce on jobs\n"
                            + STORE_IT), str(bound)

    assert_failed(s.run("keys", "create", "--scope", "admin,admin"), "ValidationError")
    assert_failed(s.run("keys", "create", "--scope", "read"), "ValidationError")
    assert_failed(s.run("keys", "create", "--scope", "admin", "--name", ""), "ValidationError")
    assert_failed(s.run("keys", "create", "--queue", "nope", "--scope", "consume"),
                  "QueueNotFound")
    assert_usage_error(s.run("keys", "create", "--scope", "admin,"))
    assert_usage_error(s.run("keys", "create", "--name", "x"))  # --scope is required
    assert_usage_error(s.run("keys", "revoke"))  # --id is required

    listed = s.run("keys", "list", "--json").json()["keys"]  # global options go anywhere
    assert [k["id"] for k in listed] == [admin["id"], bound_id]
    table = s.run("keys", "list").stdout
    assert admin["id"] in table and bound_id in table and "all queues" in table

    assert s.run("keys", "revoke", "--id", bound_id).stdout == f"revoked API key {bound_id}\n"
    assert_failed(s.run("--json", "keys", "revoke", "--id", bound_id), "NotFound")
    pasted = s.run("keys", "revoke", "--id", admin["key"])  # the key where its id belongs
    assert_failed(pasted, "NotFound")
    assert admin["key"] not in pasted.stderr
    assert s.run("--json", "keys", "revoke", "--id", "0123456789abcdef").returncode == 1
    assert [k["id"] for k in s.run("--json", "keys", "list").json()["keys"]] == [admin["id"]]
    return s


def on_disk(db: Path) -> bytes:
    """The database file and its WAL/SHM companions, as bytes."""
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file())


def test_keys_commands_are_the_same_on_a_file_and_through_a_server(tmp_path: Path) -> None:
    for mode in ("local", "http"):
        (tmp_path / mode).mkdir()
    sqew_lib.LocalClient(tmp_path / "local" / "a.db").close()  # a store, as the server's
    with serve(tmp_path / "http" / "b.db", tmp_path / "http") as server, \
            ThreadPoolExecutor(2) as pool:
        local_run = pool.submit(session, Sqew(tmp_path / "local", tmp_path / "local" / "a.db"))
        remote_run = pool.submit(session, Sqew(tmp_path / "http", server.db, server.url))
        local, remote = local_run.result(), remote_run.result()
        server_log = server.log_text()
    for i, (a, b) in enumerate(zip(local.steps(), remote.steps(), strict=True)):
        assert a == b, f"step {i}: local {a!r} != http {b!r}"

    # The printed key is the only place a key appears: only hashes are stored, nothing logged.
    for run, db in ((local, tmp_path / "local" / "a.db"), (remote, tmp_path / "http" / "b.db")):
        assert len(run.keys) == 2
        stored = on_disk(db)
        assert stored.count(b"$argon2id$") >= 1
        for key in run.keys:
            secret = key[len("sqew_") + 17:]  # past "<id>_" (it may hold "_")
            assert key.encode() not in stored and secret.encode() not in stored
            assert secret not in server_log
    assert not (tmp_path / "local" / "sqew.db").exists()
    assert not (tmp_path / "http" / "sqew.db").exists()


def test_the_first_key_minted_on_the_file_is_the_servers(tmp_path: Path) -> None:
    # The owner's way in: mint an admin key on the database file, then serve it and use it.
    owner = Sqew(tmp_path, tmp_path / "owned.db")
    minted = owner.run("keys", "create", "--name", "first", "--scope", "admin")
    assert minted.returncode == 0 and minted.stderr.endswith(STORE_IT), str(minted)
    key = minted.stdout.strip()
    with serve(tmp_path / "owned.db", tmp_path) as server:
        remote = Sqew(tmp_path, server.db, server.url)
        listed = remote.json("--api-key", key, "keys", "list")["keys"]
    assert [(k["id"], k["name"], k["scopes"]) for k in listed] == [
        (key.split("_")[1], "first", ["admin"])]


def test_sqs_keys_are_made_listed_and_revoked(local_sqew: Sqew) -> None:
    local_sqew.run("queue", "add", "--name", "jobs")
    out = local_sqew.run("keys", "create", "--sqs", "--queue", "jobs",
                         "--scope", "produce,consume", "--name", "worker")
    assert out.returncode == 0, out.stderr
    env = dict(line.split("=", 1) for line in out.stdout.splitlines())
    key_id, secret = env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    assert re.fullmatch(r"SQEW[A-Z2-7]{16}", key_id) and len(secret) == 40
    assert out.stderr.startswith(f"created SQS access key {key_id} 'worker'")
    assert "store this secret now" in out.stderr and secret not in out.stderr
    listed = json.loads(local_sqew.run("--json", "keys", "list").stdout)["keys"]
    assert [(k["id"], k["sqs"], k["queue"]) for k in listed] == [(key_id, True, "jobs")]
    table = local_sqew.run("keys", "list", env={"COLUMNS": "200"}).stdout
    assert key_id in table and "(SQS)" in table and secret not in table
    assert local_sqew.run("keys", "revoke", "--id", key_id).returncode == 0
    assert json.loads(local_sqew.run("--json", "keys", "list").stdout)["keys"] == []
