"""The REST batch endpoints on malformed bodies: a 4xx error envelope, nothing half-done.

Generated bodies — random bytes, invalid UTF-8, truncated JSON, NUL bytes, a BOM, CRLF,
nesting deeper than ``max_json_depth``, integers beyond int64, junk batches — are sent to
``POST /queues/{q}/messages`` (a batch of enqueues), ``/ack``, ``/nack`` and
``/extend-lease`` of a live server on 127.0.0.1. Every answer is below 500 and, when refused,
the error envelope of docs/rest.md; a refused batch enqueued nothing (a batch is
all-or-nothing), an accepted one exactly its messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from fuzz_support import broken, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from targets import ServerThread, server_settings

import sqew

ENDPOINTS = ["messages", "ack", "nack", "extend-lease"]
BOM = b"\xef\xbb\xbf"

JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.text(max_size=10),
              st.integers(min_value=-(2**70), max_value=2**70),
              st.sampled_from([2**63, -(2**63) - 1, 10**30])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(
                                ["payload", "priority", "delay_ms", "ttl_ms", "id", "token",
                                 "ms", "error", "attributes", "x"]), inner, max_size=4)),
    max_leaves=10)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """A body a client might send by mistake (or on purpose)."""
    batch_key = draw(st.sampled_from(["messages", "acks", "nacks", "extends"]))
    items = draw(st.lists(JSONISH, max_size=5))
    text = json.dumps({batch_key: items}).encode()
    kind = draw(st.sampled_from(["json", "random", "utf8", "truncated", "nul", "bom", "crlf",
                                 "deep"]))
    if kind in ("random", "utf8", "truncated", "nul"):
        return broken(draw, text, kind)
    if kind == "bom":
        return BOM + text
    if kind == "crlf":
        return text.replace(b",", b",\r\n") + b"\r\n"
    if kind == "deep":
        depth = draw(st.integers(60, 3000))
        return (b'{"messages": [{"payload": ' + b"[" * depth + b"]" * depth + b"}]}")
    return text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    db = tmp_path_factory.mktemp("http-fuzz") / "sqew.db"
    with sqew.Client(str(db)) as client:
        client.create_queue("jobs")
        client.enqueue("jobs", {"seed": 1})
    thread = ServerThread(server_settings(db))
    yield thread
    thread.stop()


@fuzz_settings(examples=30)
@given(endpoint=st.sampled_from(ENDPOINTS), body=bodies(),
       content_type=st.sampled_from(["application/json", "text/plain", ""]))
def test_malformed_batches_get_a_clear_refusal(
    endpoint: str, body: bytes, content_type: str, server: ServerThread,
) -> None:
    thread = server
    with sqew.Client(thread.url) as client:
        before = client.stats("jobs").enqueued_total
    headers = {"Content-Type": content_type} if content_type else {}
    answer = httpx.post(f"{thread.url}/queues/jobs/{endpoint}", content=body, headers=headers,
                        timeout=30)
    shown = f"POST {endpoint} {body[:500]!r} -> {answer.status_code} {answer.text[:500]}"
    assert answer.status_code < 500, shown
    with sqew.Client(thread.url) as client:
        after = client.stats("jobs").enqueued_total
    if answer.status_code >= 400:
        error = answer.json()["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str), shown
        assert "Traceback" not in error["message"], shown
        assert after == before, shown
    elif endpoint == "messages" and answer.status_code == 201:
        created = answer.json()
        count = len(created["messages"]) if "messages" in created else 1
        new = sum(not m["duplicate"] for m in created.get("messages", [created]))
        assert count >= new and after == before + new, shown
