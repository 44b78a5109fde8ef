"""No secret leaks: API keys and HMAC secrets appear nowhere they should not.

One session over a real server, with everything that could talk turned up (access log, debug
level, SQL statement tracing): mint keys, use them, sign enqueues, fail on purpose (a wrong key,
a revoked key, a wrong HMAC secret). Then every CLI output, the server's log and the database
files are searched. A key may appear only in the one output that minted it; no output or log
holds an HMAC secret (the database must: the server computes HMACs with it); the database holds
no key, only argon2id hashes.
"""

from __future__ import annotations

import re
from pathlib import Path

from cli_support import Result, Server, clean_env, run_sqew

KEY = re.compile(r"sqew_[0-9a-f]{16}_[A-Za-z0-9_-]{43}")
HMAC_SECRET = "hmac-secret-never-shown-0123456789"
WRONG_SECRET = "wrong-secret-never-shown-9876543210"
FAKE_KEY = "sqew_0123456789abcdef_" + "F" * 43


def test_no_output_log_or_database_file_holds_a_secret(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    env = clean_env()
    results: list[Result] = []

    def sqew(*args: str) -> Result:
        result = run_sqew(args, cwd=tmp_path, env=env)
        results.append(result)
        return result

    minted = sqew("--db", str(db), "--json", "keys", "create", "--name", "root", "--scope", "admin")
    assert minted.returncode == 0, str(minted)
    admin_key = minted.json()["key"]
    server = Server(db, tmp_path, access_log=True, log_level="debug", trace_sql="true")
    try:
        remote = ("--url", server.url, "--api-key", admin_key)
        assert sqew(*remote, "queue", "add", "--name", "signed", "--hmac-secret",
                    HMAC_SECRET).returncode == 0
        made = sqew(*remote, "--json", "keys", "create", "--queue", "signed", "--scope",
                    "produce,consume")
        assert made.returncode == 0, str(made)
        bound_key, bound_id = made.json()["key"], made.json()["id"]
        for args in (("--json", "queue", "list"), ("--json", "queue", "show", "--name", "signed"),
                     ("queue", "show", "--name", "signed"), ("--json", "keys", "list"),
                     ("keys", "list")):
            assert sqew(*remote, *args).returncode == 0
        producer = ("--url", server.url, "--api-key", bound_key)
        signed = sqew(*producer, "--hmac-secret", HMAC_SECRET, "message", "enqueue", "--queue",
                      "signed", "--payload", '{"n": 1}')
        assert signed.returncode == 0, str(signed)
        wrong = sqew(*producer, "--hmac-secret", WRONG_SECRET, "message", "enqueue", "--queue",
                     "signed", "--payload", '{"n": 2}')
        assert wrong.returncode == 1 and "InvalidSignature" in wrong.stderr, str(wrong)
        polled = sqew(*producer, "--json", "message", "poll", "--queue", "signed")
        assert polled.returncode == 0 and "signature" in polled.stdout, str(polled)
        assert sqew("--url", server.url, "--api-key", FAKE_KEY, "queue", "list").returncode == 1
        assert sqew(*remote, "keys", "revoke", "--id", bound_id).returncode == 0
        assert sqew(*producer, "queue", "list").returncode in (0, 1)  # revoked: refused soon
    finally:
        server.stop()

    log = server.log_text()
    assert "sqew serving on" in log and server.requests("POST", "/queues/{q}/messages", "signed")
    for secret in (admin_key, bound_key, FAKE_KEY, HMAC_SECRET, WRONG_SECRET):
        assert secret not in log, f"the server log holds {secret[:12]}…"
    for result in results:
        shown = result.stdout + result.stderr
        for secret in (HMAC_SECRET, WRONG_SECRET, FAKE_KEY):
            assert secret not in shown, str(result)
        allowed = {admin_key} if result is minted else {bound_key} if result is made else set()
        assert set(KEY.findall(shown)) <= allowed, str(result)
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*") if p.is_file()
                      and not p.name.endswith(".log"))
    for key in (admin_key, bound_key):
        assert key.encode() not in stored and key[len("sqew_") + 17:].encode() not in stored
    assert stored.count(b"$argon2id$") >= 1
