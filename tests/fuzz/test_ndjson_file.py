"""``sqew message enqueue --file`` on malformed NDJSON: each bad line is named, no good line lost.

docs/cli.md ("Bulk enqueue: --file"): blank lines are skipped; a line that is not UTF-8, not
JSON, or not a valid message is reported with its line number and skipped; every good line is
enqueued. Generated files mix good lines (a marker and a JSON value: unicode, integers beyond
int64, nesting, CRLF endings, a BOM at the start of the file) with bad ones: random bytes,
invalid UTF-8, truncated lines, NUL bytes, a BOM in the middle of the file, nesting deeper
than the limit, numbers beyond the float range, lines over the queue's ``max_payload_bytes``,
and with ``--envelope`` numbers beyond int64 in integer fields. The run's summary must name
exactly the bad lines, and the queue must then hold exactly the good lines' payloads, in order.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from fuzz_support import fuzz_settings, run_cli
from hypothesis import given
from hypothesis import strategies as st

import sqew

MAX_PAYLOAD = 2048
BOM = b"\xef\xbb\xbf"
_queues = itertools.count(1)

SCALARS = st.one_of(
    st.none(), st.booleans(), st.text(max_size=20),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


@st.composite
def good(draw: st.DrawFn, n: int, envelope: bool) -> tuple[bytes, Any]:
    """A line that must be enqueued, and the payload it must be stored as."""
    payload = {"n": n, "v": draw(VALUES)}
    body = {"payload": payload} if envelope else payload
    text = json.dumps(body, ensure_ascii=draw(st.booleans())).encode()
    text = draw(st.sampled_from([b"", b" ", b"\t"])) + text + draw(
        st.sampled_from([b"", b"\r", b"  ", b" \r"]))
    return text, payload


def bad(draw: st.DrawFn, n: int, envelope: bool) -> bytes:
    """A line that must be reported as failed."""
    sample = json.dumps({"payload": {"n": n}} if envelope else {"n": n}).encode()
    kind = draw(st.sampled_from([
        "random", "utf8", "truncated", "nul", "bom", "deep", "float", "huge",
        *(["int64", "unknown-field"] if envelope else []),
    ]))
    if kind == "random":  # junk that no JSON reader takes (`#` starts no JSON value)
        junk = draw(st.binary(max_size=40)).replace(b"\n", b"").replace(b"\r", b"")
        return b"#" + junk
    if kind == "utf8":
        cut = draw(st.integers(1, len(sample) - 1))
        invalid = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"]))
        return sample[:cut] + invalid + sample[cut:]
    if kind == "truncated":
        return sample[:draw(st.integers(1, len(sample) - 1))]
    if kind == "nul":
        return b"\x00" + sample
    if kind == "bom":  # in the middle of the file (on line 1 it is the file's own BOM)
        return BOM + sample if n > 1 else b"\x00" + sample
    if kind == "deep":
        depth = draw(st.integers(66, 500))
        inner = b"[" * depth + b"1" + b"]" * depth
        return (b'{"payload":' + inner + b"}") if envelope else inner
    if kind == "float":
        return sample.replace(b"}", b', "f": 1e400}', 1)
    if kind == "huge":
        filler = "x" * draw(st.integers(MAX_PAYLOAD + 1, 200_000))
        body: dict[str, Any] = {"n": n, "v": filler}
        return json.dumps({"payload": body} if envelope else body).encode()
    if kind == "int64":
        field = draw(st.sampled_from(["priority", "delay_ms", "ttl_ms"]))
        number = draw(st.sampled_from([2**63, -(2**63) - 1, 10**30, -(10**40)]))
        return json.dumps({"payload": {"n": n}, field: number}).encode()
    return json.dumps({"payload": {"n": n}, "nope": 1}).encode()


@st.composite
def files(draw: st.DrawFn) -> tuple[bool, bytes, list[Any], set[int]]:
    """``(envelope, the file, the payloads to be stored in order, the bad lines' numbers)``."""
    envelope = draw(st.booleans())
    lines: list[bytes] = []
    payloads: list[Any] = []
    failed: set[int] = set()
    for number in range(1, draw(st.integers(1, 25)) + 1):
        kind = draw(st.sampled_from(["good", "good", "blank", "bad"]))
        if kind == "good":
            line, payload = draw(good(number, envelope))
            if len(json.dumps(payload).encode()) > MAX_PAYLOAD:
                payload = {"n": number}
                line = json.dumps({"payload": payload} if envelope else payload).encode()
            lines.append(line)
            payloads.append(payload)
        elif kind == "blank":
            lines.append(draw(st.sampled_from([b"", b"  ", b"\t", b"\r", b" \x0c "])))
        else:
            lines.append(bad(draw, number, envelope))
            failed.add(number)
    data = b"\n".join(lines) + draw(st.sampled_from([b"", b"\n", b"\r\n"]))
    if draw(st.booleans()):
        data = BOM + data  # a BOM at the start of a file is not part of its first line
    return envelope, data, payloads, failed


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ndjson-fuzz") / "sqew.db"



@fuzz_settings(examples=20)
@given(case=files())
def test_bad_lines_are_named_and_good_lines_kept(
    case: tuple[bool, bytes, list[Any], set[int]], database: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    envelope, data, payloads, failed = case
    queue = f"q{next(_queues)}"
    with sqew.Client(str(database)) as client:
        client.create_queue(queue, max_payload_bytes=MAX_PAYLOAD)
    path = tmp_path_factory.mktemp("file") / "in.ndjson"
    path.write_bytes(data)
    argv = ["--db", str(database), "--json", "message", "enqueue", "--queue", queue,
            "--file", str(path), *(["--envelope"] if envelope else [])]
    status, stdout, stderr = run_cli(argv)
    shown = f"{data[:3000]!r}\n-> {status}\nstdout: {stdout[:3000]}\nstderr: {stderr[:2000]}"
    assert "Traceback" not in stdout + stderr and "InternalError" not in stderr, shown
    assert status == (1 if failed else 0), shown
    summary = json.loads(stdout)
    assert {f["line"] for f in summary["failed"]} == failed, shown
    assert all(f["error"]["code"] in ("ValidationError", "PayloadTooLarge")
               for f in summary["failed"]), shown
    assert summary["enqueued"] == len(payloads), shown
    with sqew.Client(str(database)) as client:
        stored = [m.payload for m in client.peek(queue, limit=100)]
    assert stored == payloads, shown
