"""User data never drives the terminal: control characters print escaped.

A consumer's nack ``error``, attributes, payloads and key names may hold escape sequences
(``ESC [2J`` clears a screen; ``CSI`` as the one-character C1 code; a newline forges a line;
a right-to-left override reorders what follows). Tables and plain lines show them as escapes
(``\\x1b``, ``\\n``); ``--json`` stays the exact JSON of the API, from which the original text
decodes unchanged.
"""

from __future__ import annotations

import json

import pytest
from cli_support import Sqew

EVIL = "boom\x1b[2J\x1b]0;title\x07\nforged line\r\x9b31m\u202eevil\u2028end\x7f"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e", "\u2028", "\x7f")
"""What must never reach the terminal raw."""


def clean(*outputs: str) -> None:
    for text in outputs:
        for char in RAW:
            assert char not in text, (repr(char), text)


@pytest.fixture(params=["local", "http"])
def runner(request: pytest.FixtureRequest) -> Sqew:
    sqew: Sqew = request.getfixturevalue(f"{request.param}_sqew")
    return sqew


def test_messages_errors_and_attributes_print_escaped(runner: Sqew) -> None:
    q = runner.name("evil")
    with runner.arrange(q, max_attempts=1) as client:
        client.enqueue(q, {"text": EVIL}, attributes={"note": EVIL})
    polled = runner.json("message", "poll", "--queue", q)
    (handle,) = runner.handles(polled)
    nacked = runner.ok("message", "nack", "--queue", q, "--ids", handle, "--error", EVIL)
    msg_id = handle.split(":")[0]
    outputs = [
        nacked,
        runner.ok("dlq", "list", "--queue", q),
        runner.ok("queue", "peek", "--name", f"{q}.dlq"),
        runner.ok("message", "peek", "--queue", f"{q}.dlq", "--id", msg_id),
    ]
    clean(*(r.stdout + r.stderr for r in outputs))
    listed, peeked = outputs[1].stdout, outputs[3].stdout
    assert "boom\\x1b[2J" in listed, listed  # the start of the error, escaped (then cut)
    assert "boom\\x1b[2J\\x1b]0;title\\x07\\nforged line\\r\\x9b31m\\u202eevil" in peeked, peeked
    assert "\\u2028end\\x7f" in peeked, peeked
    # --json is the API's JSON: the exact text, as the API returns it.
    (dead,) = runner.json("dlq", "list", "--queue", q)["messages"]
    assert dead["last_error"] == EVIL
    assert dead["attributes"] == {"note": EVIL}
    assert dead["payload"] == {"text": EVIL}


def test_key_names_and_error_lines_print_escaped(local_sqew: Sqew) -> None:
    name = "key\x9b2J\u202eevil"
    created = local_sqew.run("keys", "create", "--name", name, "--scope", "admin")
    assert created.returncode == 0, str(created)
    listed = local_sqew.ok("keys", "list")
    clean(created.stderr, listed.stdout)
    assert "key\\x9b2J\\u202eevil" in created.stderr, created.stderr
    assert "key\\x9b2J" in listed.stdout, listed.stdout
    assert json.loads(local_sqew.ok("--json", "keys", "list").stdout)["keys"][0]["name"] == name
    failed = local_sqew.fails("queue", "show", "--name", "no\x1b[2Jsuch", code="QueueNotFound")
    clean(failed.stderr)
    assert "no\\x1b[2Jsuch" in failed.stderr, failed.stderr
